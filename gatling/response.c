/* Response heads and error pages: see response.h. */
#include "response.h"
#include "owfat.h"
#include "server.h"

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
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

static char *put(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

int resp_head(conn_t *c, int status, const char *ctype, uint64_t len, time_t mtime,
              const char *extra)
{
    char *h = conn_head_buf(c), *p = h;
    p = put(p, "HTTP/1.1 ");
    p += fmt_ulong(p, (unsigned long)status);
    *p++ = ' ';
    p = put(p, resp_reason(status));
    p = put(p, "\r\nServer: gatling/" GATLING_VERSION "\r\nDate: ");
    p = put(p, server_date(c->srv));
    if (ctype) {
        p = put(p, "\r\nContent-Type: ");
        p = put(p, ctype);
    }
    if (status != 304 && status != 204) {
        p = put(p, "\r\nContent-Length: ");
        p += fmt_ulonglong(p, len);
    }
    if (mtime >= 0) {
        p = put(p, "\r\nLast-Modified: ");
        p += fmt_httpdate(p, mtime);
    }
    if (!c->keepalive)
        p = put(p, "\r\nConnection: close");
    else if (c->http10)
        p = put(p, "\r\nConnection: keep-alive");
    p = put(p, "\r\n");
    if (extra)
        p = put(p, extra);
    p = put(p, "\r\n");
    c->status = (uint16_t)status;
    c->body_len = len;
    c->head_len = (uint32_t)(p - h);
    return gio_batch_add_buf(&c->out, h, p - h, 0);
}

int resp_error(conn_t *c, int status, const char *extra)
{
    char page[256], *p = page;
    const char *r = resp_reason(status);
    p = put(p, "<!DOCTYPE html>\n<html><head><title>");
    p += fmt_ulong(p, (unsigned long)status);
    *p++ = ' ';
    p = put(p, r);
    p = put(p, "</title></head>\n<body><h1>");
    p += fmt_ulong(p, (unsigned long)status);
    *p++ = ' ';
    p = put(p, r);
    p = put(p, "</h1></body></html>\n");
    size_t n = p - page;
    /* after a broken request the stream cannot be trusted: close it */
    if (status == 400 || status == 408 || status == 413 || status == 414 || status == 431 ||
        status == 501 || status == 505)
        c->keepalive = 0;
    if (resp_head(c, status, "text/html; charset=utf-8", n, -1, extra) < 0)
        return -1;
    if (c->head_only)
        return 0;
    /* the page goes right after the head, in the same buffer */
    char *body = conn_head_buf(c) + c->head_len;
    memcpy(body, page, n);
    return gio_batch_add_buf(&c->out, body, n, 0);
}
