/* The HTTP/1.1 codec: see h1.h. */
#include "h1.h"
#include "http/hbuf.h"
#include "http/head.h"
#include "http/owfat.h"
#include "http/response.h"
#include "tls/tls.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The exchange is the first member of its h1_t. */
static h1_t *h1_of(exchange_t *ex)
{
    return (h1_t *)ex;
}

/* Fields [from, t->n) as HTTP/1.1 writes them: a line each. */
static void put_fields(hbuf_t *b, const head_fields_t *t, unsigned from)
{
    for (unsigned i = from; i < t->n; i++) {
        hb_put(b, t->name[i], t->low[i].nlen);
        hb_puts(b, ": ");
        hb_put(b, t->low[i].value, t->low[i].vlen);
        hb_puts(b, "\r\n");
    }
}

/* head_start's fields of status in t: the status line (of t's first,
   :status), Server and Date. */
static void put_start_fields(hbuf_t *b, const head_fields_t *t, int status)
{
    hb_puts(b, "HTTP/1.1 ");
    hb_put(b, t->low[0].value, t->low[0].vlen);
    hb_puts(b, " ");
    hb_puts(b, resp_reason(status));
    hb_puts(b, "\r\n");
    put_fields(b, t, 1);
}

/* The status line, Server and Date (head_start's fields, made in t).  For
   a 200 with the site's date these are the same bytes all second long:
   copied from what the first 200 of the second made. */
static void put_start(hbuf_t *b, const head_t *hd, const exchange_t *ex, head_fields_t *t)
{
    static _Thread_local struct {
        const site_t *site;
        int64_t at; /* the site's date_at it was made in */
        size_t n;
        char s[128];
    } ok;
    const site_t *s = ex->site;
    if (hd->status != 200 || ex->date) { /* a stored response keeps its Date */
        head_start(hd, t);
        put_start_fields(b, t, hd->status);
        return;
    }
    t->n = 0; /* none of t's to write: ok's bytes are */
    if (ok.site != s || ok.at != s->date_at) { /* hd's date is the site's of date_at */
        hbuf_t m = hb_init(ok.s, sizeof ok.s);
        head_start(hd, t);
        put_start_fields(&m, t, hd->status);
        ok.site = m.over ? NULL : s;
        ok.at = s->date_at;
        ok.n = hb_len(&m);
        if (m.over) {
            put_start_fields(b, t, hd->status);
            return;
        }
    }
    hb_put(b, ok.s, ok.n);
}

/* The whole head: the fields every response carries (http/head.h's), this
   codec's framing and Connection among them, then the exchange's own. */
static void put_head(hbuf_t *b, const h1_t *h, int status, const char *ctype, uint64_t len,
                     time_t mtime)
{
    const exchange_t *ex = &h->ex;
    head_t hd;
    head_fields_t t;
    codec_head_facts(&hd, ex, status, ctype, len, mtime);
    hd.framing = h->chunked_out ? "chunked" : NULL;
    hd.connection = h->tunnel       ? "upgrade"
                    : !h->keepalive ? "close"
                    : h->http10     ? "keep-alive"
                                    : NULL;
    put_start(b, &hd, ex, &t);
    unsigned rest = t.n; /* past what put_start wrote */
    head_rest(&hd, &t);
    put_fields(b, &t, rest);
    if (ex->fields_over)
        b->over = 1;
    hb_puts(b, "\r\n");
}

/* The head and page of an error response, in the head buffer; 0 if it fit. */
static int build_error(h1_t *h, int status, size_t *head_len, size_t *page_len)
{
    char page[RESP_PAGE_MAX];
    hbuf_t pb = hb_init(page, sizeof page);
    resp_page(&pb, status);
    hbuf_t b = hb_init(h->head, H1_HEAD_CAP);
    put_head(&b, h, status, "text/html; charset=utf-8", hb_len(&pb), -1);
    *head_len = hb_len(&b);
    if (!h->ex.head_only) /* the page goes right after the head, in the same buffer */
        hb_put(&b, page, hb_len(&pb));
    *page_len = hb_len(&b) - *head_len;
    return b.over || pb.over ? -1 : 0;
}

/* The site's own page for status (codec_error_page), after its head: 1 if
   queued, 0 when there is none or its head does not fit, -1 on failure. */
static int queue_site_page(h1_t *h, int status)
{
    exchange_t *ex = &h->ex;
    size_t n = 0;
    char *page = codec_error_page(ex, status, &n);
    if (!page)
        return 0;
    hbuf_t b = hb_init(h->head, H1_HEAD_CAP);
    put_head(&b, h, status, "text/html; charset=utf-8", n, -1);
    if (b.over) {
        free(page);
        return 0;
    }
    ex->status = (uint16_t)status;
    ex->body_len = ex->head_only ? 0 : n;
    h->head_len = (uint32_t)hb_len(&b);
    if (gio_batch_add_buf(h->out, h->head, hb_len(&b), 0) < 0) {
        free(page);
        return -1;
    }
    if (ex->head_only) {
        free(page);
        return 1;
    }
    return gio_batch_add_buf(h->out, page, n, GIO_BATCH_FREE) < 0 ? -1 : 1;
}

/* Queue an error response; a head that does not fit becomes a bare 500. */
static int queue_error(h1_t *h, int status)
{
    exchange_t *ex = &h->ex;
    size_t head_len, page_len;
    int site = queue_site_page(h, status);
    if (site)
        return site < 0 ? -1 : 0;
    if (build_error(h, status, &head_len, &page_len) < 0) {
        /* never sent truncated; the stream after a 500 of ours is not to be trusted */
        status = 500;
        h->keepalive = 0;
        ex->nfields = 0;
        ex->fields_over = 0;
        ex->site->stats.head_overflows++;
        site_error(ex->site, "response head", ENOBUFS, ex->peer, "too large: 500 instead");
        if (build_error(h, 500, &head_len, &page_len) < 0)
            return -1; /* cannot happen: H1_HEAD_CAP holds a bare 500 */
    }
    ex->status = (uint16_t)status;
    ex->body_len = ex->head_only ? 0 : page_len;
    h->head_len = (uint32_t)head_len;
    return gio_batch_add_buf(h->out, h->head, head_len + page_len, 0);
}

/* A producer changed what the connection has to do: it runs soon (never
   from inside the producer's call, which the run could end). */
static void wake(h1_t *h)
{
    if (h->ex.producer)
        h->wake(h->ex.conn);
}

/* A streamed body's framing: chunked; to the close for HTTP/1.0; none for
   a bodiless status or HEAD; a 101 to an upgradable request makes the
   connection a tunnel.  0, or -1: a 101 there is no Upgrade for. */
static int stream_framing(h1_t *h, int status)
{
    if (status == 101) {
        if (!h->ex.upgradable)
            return -1;
        h->tunnel = 1;
        h->keepalive = 0;
    } else if (head_has_body(h->ex.head_only, status)) {
        if (h->http10)
            h->keepalive = 0;
        else
            h->chunked_out = 1;
    }
    return 0;
}

static int codec_head(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    h1_t *h = h1_of(ex);
    if (len == EX_LEN_STREAM && stream_framing(h, status) < 0)
        return queue_error(h, 502) < 0 ? -1 : EX_REPLACED;
    wake(h);
    hbuf_t b = hb_init(h->head, H1_HEAD_CAP);
    put_head(&b, h, status, ctype, len, mtime);
    if (b.over) { /* a bare 500 instead, its page but none of the fields */
        ex->nfields = 0;
        ex->fields_over = 0;
        return queue_error(h, 500) < 0 ? -1 : EX_REPLACED;
    }
    ex->status = (uint16_t)status;
    h->streamed = len == EX_LEN_STREAM;
    ex->body_len = h->streamed ? 0 : len; /* streamed: counted as it comes */
    h->head_len = (uint32_t)hb_len(&b);
    return gio_batch_add_buf(h->out, b.start, hb_len(&b), 0);
}

static int codec_error(exchange_t *ex, int status)
{
    h1_t *h = h1_of(ex);
    wake(h);
    if (ex->producer)
        h->ended = 1; /* an error page is a whole response */
    return queue_error(h, status);
}

/* A chunk (RFC 9112 7.1): its size line, the data by reference, CRLF. */
static int add_chunk(h1_t *h, const void *p, size_t n, int flags)
{
    char *line = malloc(FMT_XLONG + 2);
    if (!line)
        return -1;
    size_t k = fmt_xlong(line, n);
    memcpy(line + k, "\r\n", 2);
    if (gio_batch_add_buf(h->out, line, k + 2, GIO_BATCH_FREE) < 0) {
        free(line);
        return -1;
    }
    /* the size line is queued: a failure from here on leaves the framing
       broken, and the connection is closed (the caller's -1) */
    if (gio_batch_add_buf(h->out, p, n, flags & EX_FREE ? GIO_BATCH_FREE : 0) < 0)
        return -1;
    return gio_batch_add_buf(h->out, "\r\n", 2, 0);
}

/* HEAD: the body is dropped here, once for every handler. */
static int codec_body_buf(exchange_t *ex, const void *p, size_t n, int flags)
{
    h1_t *h = h1_of(ex);
    wake(h);
    if (h->streamed && !ex->head_only)
        ex->body_len += n;
    if (h->chunked_out && !ex->head_only && n) {
        if (add_chunk(h, p, n, flags) == 0)
            return 0;
        h->keepalive = 0;
        h->ended = 1;
        if (flags & EX_FREE)
            free((void *)p);
        return -1;
    }
    if (!ex->head_only &&
        gio_batch_add_buf(h1_of(ex)->out, p, n, flags & EX_FREE ? GIO_BATCH_FREE : 0) == 0)
        return 0;
    if (flags & EX_FREE)
        free((void *)p);
    return ex->head_only ? 0 : -1;
}

static int codec_body_file(exchange_t *ex, int fd, uint64_t off, uint64_t len)
{
    if (ex->head_only)
        return 0;
    return gio_batch_add_file(h1_of(ex)->out, fd, off, len, 0);
}

/* The last chunk, or (to the close, in a tunnel) nothing. */
static int codec_body_end(exchange_t *ex)
{
    h1_t *h = h1_of(ex);
    wake(h);
    h->ended = 1;
    if (!h->chunked_out || ex->head_only)
        return 0;
    return gio_batch_add_buf(h->out, "0\r\n\r\n", 5, 0);
}

/* The client must see the body cut: what is queued goes, then the close,
   with no last chunk. */
static void codec_body_abort(exchange_t *ex)
{
    h1_t *h = h1_of(ex);
    wake(h);
    h->ended = 1;
    h->keepalive = 0;
}

static uint64_t codec_queued(const exchange_t *ex)
{
    return ((const h1_t *)ex)->out->bytes_left;
}

static void codec_input_ready(exchange_t *ex)
{
    h1_t *h = h1_of(ex);
    h->input_held = 0;
    wake(h);
}

/* A local redirect (ex_redirect): the connection dispatches again when it
   runs next (conn.c, from STREAM: only a producer redirects). */
static void codec_redispatch(exchange_t *ex)
{
    h1_t *h = h1_of(ex);
    h->redispatch = 1;
    h->wake(ex->conn);
}

static const ex_codec_t h1_codec = {
    .head = codec_head,
    .error = codec_error,
    .body_buf = codec_body_buf,
    .body_file = codec_body_file,
    .body_end = codec_body_end,
    .body_abort = codec_body_abort,
    .queued = codec_queued,
    .input_ready = codec_input_ready,
    .redispatch = codec_redispatch,
};

void h1_init(h1_t *h, const codec_conn_t *f)
{
    codec_exchange_init(&h->ex, f, &h1_codec, f->conn);
    h->out = f->out;
    h->ssl = f->ssl;
    h->wake = f->wake;
    h->head_len = 0;
    h->keepalive = h->http10 = 0;
    h->body = BODY_NONE;
    h->streamed = h->chunked_out = h->tunnel = h->ended = h->input_held = h->input_done = 0;
    h->redispatch = 0;
}

/*
 * Request bodies (RFC 9112 6): static resources take none, but a body must be
 * read to keep the connection in step, so it is read and dropped before the
 * response (conn_read.c's BODY state), up to CODEC_BODY_MAX.  Both framings at
 * once is how request smuggling starts: 400; so is a Transfer-Encoding list
 * that does not end in exactly one "chunked"; an unknown coding is 501
 * (http_transfer_coding).
 */
static int framing(h1_t *h, const http_request_t *req)
{
    const http_str_t *te = http_header(req, "Transfer-Encoding");
    const http_str_t *cl = http_header(req, "Content-Length");
    h->body = BODY_NONE;
    if (te && cl)
        return 400;
    if (te) {
        int coding = http_transfer_coding(req);
        if (coding != HTTP_TE_CHUNKED)
            return coding;     /* 400 or 501: the connection closes after either */
        if (req->version < 11) /* 9112 6.1: a TE in HTTP/1.0 cannot be trusted */
            return 400;
        h->body = BODY_CHUNKED;
        h->ex.req_len = -1;
        memset(&h->chunked, 0, sizeof h->chunked);
        return 0;
    }
    if (cl) {
        unsigned long long len = 0;
        size_t k = cl->n ? scan_ulonglong(cl->p, &len) : 0;
        if (k == 0 || k != cl->n || k > 18 || http_header_count(req, "Content-Length") > 1)
            return 400;
        if (len > 0)
            h->body = BODY_LENGTH, h->body_left = len, h->ex.req_len = (int64_t)len;
    }
    return 0;
}

/* Does this request end the connection?  RFC 9112 9.3, and our caps. */
static int keeps_alive(h1_t *h, const http_request_t *req, int draining, uint32_t requests)
{
    const http_str_t *conn = http_header(req, "Connection");
    int ka = h->http10 ? conn && http_list_has(*conn, "keep-alive")
                       : !(conn && http_list_has(*conn, "close"));
    if (draining)
        return 0;
    site_t *s = h->ex.site;
    unsigned max = (unsigned)s->cfg->max_requests;
    if (ka && max && requests >= max) {
        s->stats.max_requests++;
        return 0;
    }
    return ka;
}

const char *h1_continue(const http_request_t *req, int body_coming, size_t *len)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    const http_str_t *ex = http_header(req, "Expect");
    if (!ex || req->version < 11 || body_coming)
        return NULL;
    if (ex->n != 12 || !case_equalb(ex->p, 12, "100-continue"))
        return NULL;
    *len = sizeof cont - 1;
    return cont;
}

int h1_body_too_large(const h1_t *h)
{
    return h->body == BODY_LENGTH && h->body_left > CODEC_BODY_MAX;
}

/* Offer p[0..n) (last: the body ends with it); the bytes taken. */
static size_t offer(h1_t *h, const char *p, size_t n, int last)
{
    exchange_t *ex = &h->ex;
    if (!ex->producer)
        return n; /* the producer has ended: what is left is dropped */
    h->input_held = 1; /* an ex_input_ready during the call clears it */
    size_t k = ex->producer->input(ex, p, n, last);
    if (k >= n) {
        k = n;
        h->input_held = 0;
        h->input_done = (uint8_t)(h->input_done | last);
    }
    return k;
}

/* Chunked: decode in[0..*have) span by span while the producer takes it. */
static int feed_chunked(h1_t *h, char *in, uint32_t *have, size_t *used)
{
    size_t at = 0, u, d, n;
    int r = HTTP_CHUNKED_MORE;
    while (at < *have && !h->input_held) {
        r = http_chunked_data(&h->chunked, in + at, *have - at, &u, &d, &n);
        if (r == HTTP_MALFORMED)
            return -400;
        size_t k = n ? offer(h, in + at + d, n, 0) : 0;
        if (k < n) { /* the rest of the span is offered again */
            http_chunked_unread(&h->chunked, n - k);
            u -= n - k;
        }
        at += u;
        if (r == HTTP_CHUNKED_DONE)
            break;
    }
    *used = at;
    return r == HTTP_CHUNKED_DONE;
}

int h1_feed(h1_t *h, char *in, uint32_t *have, int eof)
{
    size_t used = 0;
    int done;
    if (h->input_held)
        return 0;
    if (h->tunnel) {
        used = offer(h, in, *have, 0);
        done = 0;
    } else if (h->body == BODY_LENGTH) {
        size_t n = *have < h->body_left ? *have : (size_t)h->body_left;
        used = n ? offer(h, in, n, n == h->body_left) : 0;
        h->body_left -= used;
        done = !h->body_left;
    } else if (h->body == BODY_CHUNKED) {
        done = feed_chunked(h, in, have, &used);
        if (done < 0)
            return done;
    } else {
        done = 1;
    }
    memmove(in, in + used, *have - used); /* what follows: the next request */
    *have -= (uint32_t)used;
    if (done && h->body == BODY_CHUNKED && !h->input_held)
        offer(h, "", 0, 1);
    if (eof && h->tunnel && !*have && !h->input_held)
        offer(h, "", 0, 1);
    if (done)
        h->body = BODY_NONE;
    return done && !h->input_held;
}

int h1_drop(h1_t *h, char *in, uint32_t *have)
{
    int chunked = h->body == BODY_CHUNKED;
    int r = h1_feed(h, in, have, 0); /* no producer yet: offer() drops what it is given */
    return r >= 0 && chunked && h->chunked.total > CODEC_BODY_MAX ? -413 : r;
}

int h1_request(h1_t *h, const http_request_t *req, int draining, uint32_t requests)
{
    exchange_t *ex = &h->ex;
    h->http10 = req->version == 10;
    h->keepalive = keeps_alive(h, req, draining, requests);
    h->head_len = 0;
    ex->req = req;
    ex->http10 = h->http10;
    ex->head_only = req->method.n == 4 && !memcmp(req->method.p, "HEAD", 4);
    const http_str_t *up = http_header(req, "Upgrade"), *conn = http_header(req, "Connection");
    ex->upgradable = req->version >= 11 && up && conn && http_list_has(*conn, "upgrade");
    return framing(h, req);
}

const char *h1_late(int status, size_t *len)
{
    /* RFC 9110 15.5.9; best effort, the socket is not waited for */
    static const char r408[] = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                               "Content-Length: 0\r\n\r\n";
    static const char r503[] = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\n"
                               "Connection: close\r\nContent-Length: 0\r\n\r\n";
    *len = status == 408 ? sizeof r408 - 1 : sizeof r503 - 1;
    return status == 408 ? r408 : r503;
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
