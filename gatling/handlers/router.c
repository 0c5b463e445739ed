/* Request checks and dispatch: see handler.h. */
#include "router.h"
#include "http/owfat.h"
#include "http/hbuf.h"
#include "http/response.h"
#include "conn/tls.h"

#include <string.h>

#define ALLOW "Allow: GET, HEAD, OPTIONS\r\n"

static int method_is(const http_request_t *req, const char *m)
{
    size_t n = strlen(m);
    return req->method.n == n && !memcmp(req->method.p, m, n);
}

/*
 * Request bodies (RFC 9112 6): static resources take none, but a body must be
 * read to keep the connection in step, so it is read and dropped before the
 * response (conn.c's BODY state), up to CONN_BODY_MAX.  Both framings at
 * once is how request smuggling starts: 400; so is a Transfer-Encoding list
 * that does not end in exactly one "chunked"; an unknown coding is 501
 * (http_transfer_coding).
 */
int handler_framing(conn_t *c, const http_request_t *req)
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

/* The name of a Host value, without its port ("[::1]" keeps the brackets). */
static size_t host_name_len(const http_str_t *h)
{
    if (h->n && h->p[0] == '[') {
        const char *e = memchr(h->p, ']', h->n);
        return e ? (size_t)(e - h->p) + 1 : 0;
    }
    const char *colon = memchr(h->p, ':', h->n);
    return colon ? (size_t)(colon - h->p) : h->n;
}

/* Safe to put in a Location header: a name, an IPv4 or a bracketed IPv6. */
static int host_chars_ok(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == '[' || ch == ']' || ch == ':'))
            return 0;
    }
    return n > 0 && n <= 255;
}

/* -X: plain HTTP is answered with the same URL on HTTPS. */
static int redirect_https(conn_t *c, const http_request_t *req, const http_str_t *host)
{
    char loc[HTTP_MAX_TARGET + 320]; /* "Location: https://" + 255 + ":65535" + target */
    hbuf_t b = hb_init(loc, sizeof loc);
    size_t n = host ? host_name_len(host) : 0;
    if (!host_chars_ok(host ? host->p : "", n))
        return resp_error(c, 400, NULL); /* nowhere to send it */
    int port = c->site->cfg->tls_port;
    hb_puts(&b, "Location: https://");
    hb_put(&b, host->p, n);
    if (port != 443) {
        hb_puts(&b, ":");
        hb_num(&b, (uint64_t)port);
    }
    if (req->target.n && req->target.p[0] == '/')
        hb_put(&b, req->target.p, req->target.n); /* the parser let no space or CTL in */
    else
        hb_puts(&b, "/");
    hb_puts(&b, "\r\n");
    hb_str(&b);
    if (b.over)
        return resp_error(c, 414, NULL);
    return resp_error(c, 301, loc);
}

int handler_dispatch(conn_t *c, const http_request_t *req)
{
    size_t hosts = http_header_count(req, "Host");
    if (hosts > 1 || (req->version == 11 && hosts == 0)) /* RFC 9112 3.2 */
        return resp_error(c, 400, NULL);
    const config_t *cfg = c->site->cfg;
    const http_str_t *host = http_header(req, "Host");
    if (c->ssl && host) { /* RFC 9110 7.4: a Host another certificate answers for */
        size_t n = host_name_len(host);
        if (n && tls_misdirected(cfg->tls, c->ssl, host->p, n)) {
            c->site->stats.tls_misdirected++;
            return resp_error(c, 421, NULL);
        }
    }
    if (!c->ssl && cfg->https_redirect && cfg->tls && !cfg->tls_skipped)
        return redirect_https(c, req, host);
    if (method_is(req, "GET") || method_is(req, "HEAD"))
        return static_serve(c, req);
    if (method_is(req, "OPTIONS"))
        return resp_head(c, 200, NULL, 0, -1, ALLOW) < 0 ? -1 : 0;
    static const char *const known[] = {"POST", "PUT", "DELETE", "PATCH", "TRACE", "CONNECT"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (method_is(req, known[i]))
            return resp_error(c, 405, ALLOW);
    return resp_error(c, 501, NULL);
}
