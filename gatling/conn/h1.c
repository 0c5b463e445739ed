/* The HTTP/1.1 codec: see h1.h. */
#include "h1.h"
#include "http/hbuf.h"
#include "http/owfat.h"
#include "http/response.h"
#include "tls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static conn_t *conn_of(exchange_t *ex)
{
    return ex->conn;
}

/* The status line and the fields every response carries, then the
   exchange's own. */
static void put_head(hbuf_t *b, conn_t *c, int status, const char *ctype, uint64_t len,
                     time_t mtime)
{
    const exchange_t *ex = &c->blk->ex;
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
    if (ex->secure && c->site->cfg->hsts >= 0) { /* -x */
        hb_puts(b, "\r\nStrict-Transport-Security: max-age=");
        hb_num(b, (uint64_t)c->site->cfg->hsts);
    }
    if (!c->keepalive)
        hb_puts(b, "\r\nConnection: close");
    else if (c->http10)
        hb_puts(b, "\r\nConnection: keep-alive");
    hb_puts(b, "\r\n");
    for (unsigned i = 0; i < ex->nfields; i++) {
        hb_puts(b, ex->fields[i].name);
        hb_puts(b, ": ");
        hb_puts(b, ex->fields[i].value);
        hb_puts(b, "\r\n");
    }
    if (ex->fields_over)
        b->over = 1;
    hb_puts(b, "\r\n");
}

/* The head and page of an error response, in the head buffer; 0 if it fit. */
static int build_error(conn_t *c, int status, size_t *head_len, size_t *page_len)
{
    char page[RESP_PAGE_MAX];
    hbuf_t pb = hb_init(page, sizeof page);
    resp_page(&pb, status);
    hbuf_t b = hb_init(c->blk->head, CONN_HEAD_CAP);
    put_head(&b, c, status, "text/html; charset=utf-8", hb_len(&pb), -1);
    *head_len = hb_len(&b);
    if (!c->blk->ex.head_only) /* the page goes right after the head, in the same buffer */
        hb_put(&b, page, hb_len(&pb));
    *page_len = hb_len(&b) - *head_len;
    return b.over || pb.over ? -1 : 0;
}

/* Queue an error response; a head that does not fit becomes a bare 500. */
static int queue_error(conn_t *c, int status)
{
    exchange_t *ex = &c->blk->ex;
    size_t head_len, page_len;
    if (build_error(c, status, &head_len, &page_len) < 0) {
        /* never sent truncated; the stream after a 500 of ours is not to be trusted */
        status = 500;
        c->keepalive = 0;
        ex->nfields = 0;
        ex->fields_over = 0;
        c->site->stats.head_overflows++;
        site_error(c->site, "response head", ENOBUFS, &c->peer.sa, "too large: 500 instead");
        if (build_error(c, 500, &head_len, &page_len) < 0)
            return -1; /* cannot happen: CONN_HEAD_CAP holds a bare 500 */
    }
    ex->status = (uint16_t)status;
    ex->body_len = ex->head_only ? 0 : page_len;
    c->head_len = (uint32_t)head_len;
    return gio_batch_add_buf(&c->out, c->blk->head, head_len + page_len, 0);
}

static int codec_head(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    conn_t *c = conn_of(ex);
    hbuf_t b = hb_init(c->blk->head, CONN_HEAD_CAP);
    put_head(&b, c, status, ctype, len, mtime);
    if (b.over)
        return queue_error(c, 500) < 0 ? -1 : EX_REPLACED;
    ex->status = (uint16_t)status;
    ex->body_len = len;
    c->head_len = (uint32_t)hb_len(&b);
    return gio_batch_add_buf(&c->out, b.start, hb_len(&b), 0);
}

static int codec_error(exchange_t *ex, int status)
{
    return queue_error(conn_of(ex), status);
}

/* HEAD: the body is dropped here, once for every handler. */
static int codec_body_buf(exchange_t *ex, const void *p, size_t n, int flags)
{
    if (!ex->head_only &&
        gio_batch_add_buf(&conn_of(ex)->out, p, n, flags & EX_FREE ? GIO_BATCH_FREE : 0) == 0)
        return 0;
    if (flags & EX_FREE)
        free((void *)p);
    return ex->head_only ? 0 : -1;
}

static int codec_body_file(exchange_t *ex, int fd, uint64_t off, uint64_t len)
{
    if (ex->head_only)
        return 0;
    return gio_batch_add_file(&conn_of(ex)->out, fd, off, len, 0);
}

static int codec_misdirected(exchange_t *ex, const char *host, size_t n)
{
    conn_t *c = conn_of(ex);
    return c->ssl && tls_misdirected(c->site->cfg->tls, c->ssl, host, n);
}

static const ex_codec_t h1_codec = {
    .head = codec_head,
    .error = codec_error,
    .body_buf = codec_body_buf,
    .body_file = codec_body_file,
    .misdirected = codec_misdirected,
};

void h1_exchange_init(conn_t *c)
{
    exchange_t *ex = &c->blk->ex;
    memset(ex, 0, offsetof(exchange_t, path));
    ex->vhost[0] = 0;
    ex->secure = c->tls;
    ex->local_port = c->local_port;
    ex->peer = &c->peer.sa;
    ex->site = c->site;
    ex->codec = &h1_codec;
    ex->conn = c;
}

/*
 * Request bodies (RFC 9112 6): static resources take none, but a body must be
 * read to keep the connection in step, so it is read and dropped before the
 * response (conn.c's BODY state), up to CONN_BODY_MAX.  Both framings at
 * once is how request smuggling starts: 400; so is a Transfer-Encoding list
 * that does not end in exactly one "chunked"; an unknown coding is 501
 * (http_transfer_coding).
 */
static int framing(conn_t *c, const http_request_t *req)
{
    const http_str_t *te = http_header(req, "Transfer-Encoding");
    const http_str_t *cl = http_header(req, "Content-Length");
    c->body = BODY_NONE;
    if (te && cl)
        return 400;
    if (te) {
        int coding = http_transfer_coding(req);
        if (coding != HTTP_TE_CHUNKED)
            return coding;     /* 400 or 501: the connection closes after either */
        if (req->version < 11) /* 9112 6.1: a TE in HTTP/1.0 cannot be trusted */
            return 400;
        c->body = BODY_CHUNKED;
        memset(&c->blk->chunked, 0, sizeof c->blk->chunked);
        return 0;
    }
    if (cl) {
        unsigned long long len = 0;
        size_t k = cl->n ? scan_ulonglong(cl->p, &len) : 0;
        if (k == 0 || k != cl->n || k > 18 || http_header_count(req, "Content-Length") > 1)
            return 400;
        if (len > CONN_BODY_MAX)
            return 413;
        if (len > 0)
            c->body = BODY_LENGTH, c->body_left = len;
    }
    return 0;
}

/* Does this request end the connection?  RFC 9112 9.3, and our caps. */
static int keeps_alive(conn_t *c, const http_request_t *req)
{
    const http_str_t *conn = http_header(req, "Connection");
    int ka = c->http10 ? conn && http_list_has(*conn, "keep-alive")
                       : !(conn && http_list_has(*conn, "close"));
    if (c->set->draining)
        return 0;
    unsigned max = (unsigned)c->site->cfg->max_requests;
    if (ka && max && c->requests >= max) {
        c->site->stats.max_requests++;
        return 0;
    }
    return ka;
}

/* Answer "100 Continue" if the client waits for it before sending the body. */
static void send_continue(conn_t *c, const http_request_t *req)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    const http_str_t *ex = http_header(req, "Expect");
    if (!ex || req->version < 11 || c->inlen > c->reqlen) /* the body is already coming */
        return;
    if (ex->n == 12 && case_equalb(ex->p, 12, "100-continue"))
        conn_send_small(c, cont, sizeof cont - 1); /* tiny, on an idle socket */
}

int h1_request(conn_t *c)
{
    const http_request_t *req = &c->blk->req;
    exchange_t *ex = &c->blk->ex;
    c->http10 = req->version == 10;
    c->keepalive = keeps_alive(c, req);
    ex->req = req;
    ex->http10 = c->http10;
    ex->head_only = req->method.n == 4 && !memcmp(req->method.p, "HEAD", 4);
    int st = framing(c, req);
    if (st == 0 && c->body != BODY_NONE)
        send_continue(c, req);
    return st;
}

int h1_error(conn_t *c, int status, const char *name, const char *value)
{
    return ex_error(&c->blk->ex, status, name, value);
}

void h1_late(conn_t *c, int status)
{
    /* RFC 9110 15.5.9; best effort, the socket is not waited for */
    static const char r408[] = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                               "Content-Length: 0\r\n\r\n";
    static const char r503[] = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\n"
                               "Connection: close\r\nContent-Length: 0\r\n\r\n";
    if (status == 408)
        conn_send_small(c, r408, sizeof r408 - 1);
    else
        conn_send_small(c, r503, sizeof r503 - 1);
}

/*
 * What the client already sent is read first (one read, it is in the
 * kernel's buffer by now or not at all), so that the close is a FIN and not
 * a RST that could destroy the answer in flight.
 */
void h1_refuse(int fd, int tls)
{
    static const char r503[] = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\n"
                               "Content-Type: text/plain\r\nContent-Length: 20\r\n"
                               "Connection: close\r\n\r\nserver overloaded.\r\n";
    char junk[2048];
    (void)!read(fd, junk, sizeof junk);
    if (tls) {
        /* no 503 on HTTPS: it would first cost the full handshake that the cap
           is there to spare; the client sees the close before a ServerHello */
        close(fd);
        return;
    }
    (void)!send(fd, r503, sizeof r503 - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    close(fd);
}
