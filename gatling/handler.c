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

static size_t count_headers(const http_request_t *req, const char *name)
{
    size_t k = 0, n = strlen(name);
    for (size_t i = 0; i < req->nheaders; i++)
        k += req->headers[i].name.n == n && case_equalb(req->headers[i].name.p, n, name);
    return k;
}

/*
 * Request bodies (RFC 9112 6): static resources take none, but a body must be
 * read to keep the connection in step, so it is read and dropped before the
 * response (connection.c's BODY state), up to CONN_BODY_MAX.  Both framings
 * at once is how request smuggling starts: 400, as is any transfer coding
 * other than a final "chunked".
 */
int handler_framing(conn_t *c, const http_request_t *req)
{
    const http_str_t *te = http_header(req, "Transfer-Encoding");
    const http_str_t *cl = http_header(req, "Content-Length");
    c->body = BODY_NONE;
    if (te && cl)
        return 400;
    if (te) {
        if (count_headers(req, "Transfer-Encoding") > 1 || te->n < 7 ||
            !case_equalb(te->p + te->n - 7, 7, "chunked") || req->version < 11)
            return 400;
        c->body = BODY_CHUNKED;
        memset(&c->chunked, 0, sizeof c->chunked);
        return 0;
    }
    if (cl) {
        unsigned long long len = 0;
        size_t k = cl->n ? scan_ulonglong(cl->p, &len) : 0;
        if (k == 0 || k != cl->n || k > 18 || count_headers(req, "Content-Length") > 1)
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
    size_t hosts = count_headers(req, "Host");
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
