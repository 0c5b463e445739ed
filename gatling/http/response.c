/* Response heads and error pages: see response.h. */
#include "response.h"
#include "hbuf.h"

#include <errno.h>
#include "site/site.h"
#include "conn/conn.h"

#include <string.h>

const char *resp_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 421: return "Misdirected Request";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

/* The status line and the fields every response carries, then extra. */
static void put_head(hbuf_t *b, conn_t *c, int status, const char *ctype, uint64_t len,
                     time_t mtime, const char *extra)
{
    hb_puts(b, "HTTP/1.1 ");
    hb_num(b, (uint64_t)status);
    hb_puts(b, " ");
    hb_puts(b, resp_reason(status));
    hb_puts(b, "\r\nServer: gatling/" GATLING_VERSION "\r\nDate: ");
    hb_puts(b, site_date(c->site));
    if (ctype) {
        hb_puts(b, "\r\nContent-Type: ");
        hb_puts(b, ctype);
    }
    if (status != 304 && status != 204) {
        hb_puts(b, "\r\nContent-Length: ");
        hb_num(b, len);
    }
    if (mtime >= 0) {
        hb_puts(b, "\r\nLast-Modified: ");
        hb_date(b, mtime);
    }
    if (c->ssl && c->site->cfg->hsts >= 0) { /* -x */
        hb_puts(b, "\r\nStrict-Transport-Security: max-age=");
        hb_num(b, (uint64_t)c->site->cfg->hsts);
    }
    if (!c->keepalive)
        hb_puts(b, "\r\nConnection: close");
    else if (c->http10)
        hb_puts(b, "\r\nConnection: keep-alive");
    hb_puts(b, "\r\n");
    if (extra)
        hb_puts(b, extra);
    hb_puts(b, "\r\n");
}

/* The small HTML page of an error response. */
static void put_page(hbuf_t *b, int status)
{
    for (int i = 0; i < 2; i++) {
        hb_puts(b, i ? "</title></head>\n<body><h1>" : "<!DOCTYPE html>\n<html><head><title>");
        hb_num(b, (uint64_t)status);
        hb_puts(b, " ");
        hb_puts(b, resp_reason(status));
    }
    hb_puts(b, "</h1></body></html>\n");
}

#define PAGE_MAX 256 /* put_page's longest page is ~130 bytes */

/* The head and page of an error response, in the head buffer; 0 if it fit. */
static int build_error(conn_t *c, int status, const char *extra, size_t *head_len,
                       size_t *page_len)
{
    char page[PAGE_MAX];
    hbuf_t pb = hb_init(page, sizeof page);
    put_page(&pb, status);
    hbuf_t b = hb_init(conn_head_buf(c), CONN_HEAD_CAP);
    put_head(&b, c, status, "text/html; charset=utf-8", hb_len(&pb), -1, extra);
    *head_len = hb_len(&b);
    if (!c->head_only) /* the page goes right after the head, in the same buffer */
        hb_put(&b, page, hb_len(&pb));
    *page_len = hb_len(&b) - *head_len;
    return b.over || pb.over ? -1 : 0;
}

/* Queue an error response; a head that does not fit becomes a bare 500. */
static int queue_error(conn_t *c, int status, const char *extra)
{
    size_t head_len, page_len;
    if (build_error(c, status, extra, &head_len, &page_len) < 0) {
        /* never sent truncated; the stream after a 500 of ours is not to be trusted */
        status = 500;
        c->keepalive = 0;
        c->site->stats.head_overflows++;
        site_error(c->site, "response head", ENOBUFS, &c->peer.sa, "too large: 500 instead");
        if (build_error(c, 500, NULL, &head_len, &page_len) < 0)
            return -1; /* cannot happen: CONN_HEAD_CAP holds a bare 500 */
    }
    c->status = (uint16_t)status;
    c->body_len = c->head_only ? 0 : page_len;
    c->head_len = (uint32_t)head_len;
    return gio_batch_add_buf(&c->out, conn_head_buf(c), head_len + page_len, 0);
}

int resp_head(conn_t *c, int status, const char *ctype, uint64_t len, time_t mtime,
              const char *extra)
{
    hbuf_t b = hb_init(conn_head_buf(c), CONN_HEAD_CAP);
    put_head(&b, c, status, ctype, len, mtime, extra);
    if (b.over)
        return queue_error(c, 500, NULL) < 0 ? -1 : RESP_REPLACED;
    c->status = (uint16_t)status;
    c->body_len = len;
    c->head_len = (uint32_t)hb_len(&b);
    return gio_batch_add_buf(&c->out, b.start, hb_len(&b), 0);
}

int resp_error(conn_t *c, int status, const char *extra)
{
    return queue_error(c, status, extra);
}
