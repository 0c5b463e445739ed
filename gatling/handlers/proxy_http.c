/* Proxying to an HTTP/1.1 backend: the request head, the response.  See proxy.h. */
#include "http/cachectl.h"
#include "http/hbuf.h"
#include "http/head.h"
#include "proxy_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* An HTTP-date's seconds (0: not one, or not after 1970), by the one parser. */
static int64_t resp_date(http_str_t v, int64_t now)
{
    int64_t t = cc_http_date(v.p, v.n, now);
    return t > 0 ? t : 0;
}

static int puts_(px_req_t *pr, const char *s)
{
    return px_out(pr, s, strlen(s));
}

/* fields_ours's encoder: "Name: value" lines. */
static int emit_line(void *arg, const char *name, const char *value)
{
    px_req_t *pr = arg;
    return puts_(pr, name) | puts_(pr, ": ") | puts_(pr, value) | puts_(pr, "\r\n");
}

/* The client's Cookie fields as one (HTTP/2 sends a field per cookie). */
static int cookies(px_req_t *pr)
{
    const http_request_t *req = pr->ex->req;
    int r = 0, any = 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        if (!fields_name_is(req->headers[i].name, "Cookie"))
            continue;
        r |= puts_(pr, any ? "; " : "Cookie: ");
        r |= px_out(pr, req->headers[i].value.p, req->headers[i].value.n);
        any = 1;
    }
    return any ? r | puts_(pr, "\r\n") : r;
}

static int px_http_request(px_req_t *pr, const px_target_t *tg)
{
    const path_t *p = &tg->p;
    exchange_t *ex = pr->ex;
    const http_request_t *req = ex->req;
    const char *t = req->target.p;
    size_t tn = req->target.n;
    if (p->authority.p) { /* absolute-form: the backend gets origin-form */
        const char *q = p->authority.p + p->authority.n;
        tn = (size_t)(t + tn - q), t = q;
    }
    const http_str_t *up = http_header(req, "Upgrade");
    pr->upgrade = ex->upgradable && up && http_list_has(*up, "websocket");
    int r = px_out(pr, req->method.p, req->method.n) | puts_(pr, " ");
    r |= tn && *t == '/' ? px_out(pr, t, tn) : puts_(pr, "/");
    r |= puts_(pr, " HTTP/1.1\r\n");
    for (size_t i = 0; i < req->nheaders; i++) {
        const http_header_t *h = &req->headers[i];
        if (fields_hop_by_hop(req->headers, req->nheaders, h->name, 0) ||
            fields_name_is(h->name, "Cookie"))
            continue;
        r |= px_out(pr, h->name.p, h->name.n) | puts_(pr, ": ");
        r |= px_out(pr, h->value.p, h->value.n) | puts_(pr, "\r\n");
    }
    r |= cookies(pr);
    if (ex->req_len > 0) {
        char n[24];
        snprintf(n, sizeof n, "%lld", (long long)ex->req_len);
        r |= puts_(pr, "Content-Length: ") | puts_(pr, n) | puts_(pr, "\r\n");
    } else if (ex->req_len < 0) {
        r |= puts_(pr, "Transfer-Encoding: chunked\r\n");
    }
    if (pr->upgrade)
        r |= puts_(pr, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
    r |= fields_ours(pr->ex, FIELDS_IDENTITY, emit_line, pr) | puts_(pr, "\r\n");
    return r ? -1 : 0;
}

static int px_http_body(px_req_t *pr, const char *p, size_t n, int last)
{
    if (pr->ex->req_len >= 0) /* Content-Length: as it is */
        return px_out(pr, p, n);
    int r = 0;
    if (n) {
        char size[24];
        snprintf(size, sizeof size, "%zx\r\n", n);
        r |= puts_(pr, size) | px_out(pr, p, n) | puts_(pr, "\r\n");
    }
    return last ? r | puts_(pr, "0\r\n\r\n") : r;
}

/* Response body bytes (p writable: a chunked body is decoded in place),
   the last use of this read's buffer (px_body_last: p may be given away). */
static void body(px_req_t *pr, char *p, size_t n)
{
    if (pr->state != RS_BODY || !n)
        return;
    if (pr->framing == FR_LEN) {
        size_t k = n < pr->left ? n : (size_t)pr->left;
        if (px_body_last(pr, p, k) < 0)
            return;
        if (!(pr->left -= k))
            px_done(pr, k == n);
    } else if (pr->framing == FR_CHUNKED) {
        size_t used, out;
        int r = http_chunked_decode(&pr->ch, p, n, &used, &out);
        if (r == HTTP_MALFORMED) {
            px_fail(pr, "malformed chunked body from the backend");
        } else if (px_body_last(pr, p, out) == 0 && r == HTTP_CHUNKED_DONE) {
            px_done(pr, used == n);
        }
    } else if (pr->framing == FR_CLOSE) {
        px_body_last(pr, p, n);
    }
}

/* The response's framing (RFC 9112 6.3): FR_*, or -1 (a bad Content-Length). */
static int framing(px_req_t *pr, const http_response_t *resp)
{
    int te = 0, cl = 0;
    uint64_t len = 0;
    for (size_t i = 0; i < resp->nheaders; i++) {
        const http_header_t *h = &resp->headers[i];
        if (fields_name_is(h->name, "Transfer-Encoding")) {
            te = 1 + (h->value.n >= 7 && !strncasecmp(h->value.p + h->value.n - 7, "chunked", 7));
        } else if (fields_name_is(h->name, "Content-Length")) {
            uint64_t v = 0;
            if (!h->value.n || h->value.n > 18)
                return -1;
            for (size_t k = 0; k < h->value.n; k++) {
                if (h->value.p[k] < '0' || h->value.p[k] > '9')
                    return -1;
                v = v * 10 + (uint64_t)(h->value.p[k] - '0');
            }
            if (cl && v != len)
                return -1;
            cl = 1, len = v;
        }
    }
    pr->left = len;
    if (!head_has_body(0, resp->status)) /* a length here is not a body's */
        return pr->left = 0, FR_NONE;
    if (pr->head_only) /* the length is the client's to see, no body follows */
        return cl && !te ? FR_LEN : FR_NONE;
    if (te)
        return te == 2 ? FR_CHUNKED : FR_CLOSE;
    return cl ? FR_LEN : FR_CLOSE;
}

/* The final response head: fields, framing, ex_head.  0, or -1 (over). */
static int response_head(px_req_t *pr, const http_response_t *resp)
{
    const char *ctype = NULL;
    int tunnel = resp->status == 101;
    int fr = tunnel ? FR_CLOSE : framing(pr, resp);
    if (fr < 0) {
        px_fail(pr, "bad Content-Length from the backend");
        return -1;
    }
    for (size_t i = 0; i < resp->nheaders; i++) {
        const http_header_t *h = &resp->headers[i];
        if (fields_name_is(h->name, "Content-Type") && !ctype)
            ctype = px_keep(pr, h->value.p, h->value.n);
        if (fields_name_is(h->name, "Date") && h->value.n < 64) /* for the response cache's ages */
            pr->ex->resp_date = resp_date(h->value, gio_wallclock(pr->ex->site->loop));
        if (h->name.n >= 48 || fields_hop_by_hop(resp->headers, resp->nheaders, h->name, 1))
            continue;
        if (px_field(pr, h->name.p, h->name.n, h->value.p, h->value.n) < 0) {
            px_fail(pr, "too many or too large header fields from the backend");
            return -1;
        }
    }
    int close = resp->version == 10 ||
                fields_named_by_connection(resp->headers, resp->nheaders, (http_str_t){"close", 5});
    pr->keepalive = !close && fr != FR_CLOSE;
    pr->framing = fr == FR_LEN && !pr->left ? FR_NONE : fr;
    if (tunnel) /* the codec adds Connection: upgrade */
        ex_field(pr->ex, "Upgrade", "websocket");
    uint64_t len = fr == FR_LEN ? pr->left : fr == FR_NONE && !pr->head_only ? 0 : EX_LEN_STREAM;
    if (px_head(pr, resp->status, ctype, len) < 0)
        return -1;
    if (pr->head_only && pr->framing == FR_LEN) /* the length was for the client only */
        pr->framing = FR_NONE;
    pr->state = tunnel ? RS_TUNNEL : RS_BODY;
    if (pr->framing == FR_NONE)
        px_done(pr, 1);
    return 0;
}

/* Hold resp, a final head that came alone (no byte after it yet), until
   the first byte of its body?  When its body is short and of known length
   and the request may still go elsewhere (px_may_retry): an application
   that writes its head and its body apart (gunicorn does) and dies between
   the two has then sent the client nothing, and the request goes to
   another backend instead of a response cut after its head.  The head is
   parsed again when the next bytes come; a body that never comes is the
   backend's failure before its head. */
static int hold_head(px_req_t *pr, const http_response_t *resp)
{
    if (resp->status < 200 || pr->head_only || !px_may_retry(pr))
        return 0;
    return framing(pr, resp) == FR_LEN && pr->left > 0 && pr->left <= PROXY_READ;
}

/* Head bytes from in[0..inlen) (a 1xx skipped); the body after them, then
   rest[0..nrest) that did not fit in the head buffer. */
static void head_bytes(px_req_t *pr, char *rest, size_t nrest)
{
    for (;;) {
        http_response_t resp;
        long used = http_parse_response(pr->in, pr->inlen, &resp);
        if (used == HTTP_INCOMPLETE && !nrest && pr->inlen < PROXY_HEAD_MAX)
            return;
        if (used < 0) {
            px_fail(pr, used == HTTP_INCOMPLETE ? "response head too large"
                                                : "malformed response head from the backend");
            return;
        }
        if (resp.status < 200 && !(resp.status == 101 && pr->upgrade)) {
            /* 100 Continue, 103 Early Hints: the final answer follows */
            memmove(pr->in, pr->in + used, pr->inlen - (size_t)used);
            pr->inlen -= (size_t)used;
            size_t k = nrest < PROXY_HEAD_MAX - pr->inlen ? nrest : PROXY_HEAD_MAX - pr->inlen;
            memcpy(pr->in + pr->inlen, rest, k);
            pr->inlen += k, rest += k, nrest -= k;
            continue;
        }
        if ((size_t)used == pr->inlen && !nrest && hold_head(pr, &resp))
            return;
        if (response_head(pr, &resp) < 0 || pr->ended)
            return;
        if (pr->state == RS_TUNNEL) {
            if (px_body(pr, pr->in + used, pr->inlen - (size_t)used) == 0)
                px_body(pr, rest, nrest);
            return;
        }
        body(pr, pr->in + used, pr->inlen - (size_t)used);
        if (pr->state == RS_BODY && !pr->ended)
            body(pr, rest, nrest);
        return;
    }
}

static void px_http_read(px_req_t *pr, char *buf, size_t n)
{
    if (pr->state != RS_HEAD) {
        body(pr, buf, n);
        return;
    }
    if (!pr->inlen && n <= PROXY_HEAD_MAX) { /* the whole head in one read: no copy */
        http_response_t resp;
        long used = http_parse_response(buf, n, &resp);
        if (used > 0 && (resp.status >= 200 || (resp.status == 101 && pr->upgrade)) &&
            !((size_t)used == n && hold_head(pr, &resp))) {
            if (response_head(pr, &resp) < 0 || pr->ended)
                return;
            if (pr->state == RS_TUNNEL)
                px_body(pr, buf + used, n - (size_t)used);
            else
                body(pr, buf + used, n - (size_t)used);
            return;
        }
    }
    if (!pr->in && !(pr->in = malloc(PROXY_HEAD_MAX))) {
        px_fail(pr, "out of memory");
        return;
    }
    size_t k = n < PROXY_HEAD_MAX - pr->inlen ? n : PROXY_HEAD_MAX - pr->inlen;
    memcpy(pr->in + pr->inlen, buf, k);
    pr->inlen += k;
    head_bytes(pr, buf + k, n - k);
}

static void px_http_eof(px_req_t *pr)
{
    if (pr->state == RS_BODY && pr->framing == FR_CLOSE)
        px_done(pr, 0);
    else
        px_fail(pr, pr->state != RS_HEAD ? "the backend closed in the middle of the body"
                    : pr->inlen ? "the backend closed before its response was whole"
                                : "the backend closed before its response head");
}

const px_ops_t px_http_ops = {px_http_request, px_http_body, px_http_read, px_http_eof, NULL,
                               NULL};
