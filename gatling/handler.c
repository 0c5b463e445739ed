/* Request checks and dispatch: see handler.h. */
#include "handler.h"
#include "owfat.h"
#include "response.h"

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
            return coding; /* 400 or 501: the connection closes after either */
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

int handler_dispatch(conn_t *c, const http_request_t *req)
{
    size_t hosts = http_header_count(req, "Host");
    if (hosts > 1 || (req->version == 11 && hosts == 0)) /* RFC 9112 3.2 */
        return resp_error(c, 400, NULL);
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
