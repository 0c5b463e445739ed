/*
 * Proxying to an HTTP/2 backend by prior knowledge (h2c/, proxy_int.h) or
 * over TLS (h2/: ALPN h2, the certificate verified, proxy_tls.c):
 * libnghttp2's client session on a non-blocking socket of the loop, fed
 * with mem_recv and drained with mem_send (through the TLS session, its
 * handshake stepped from the loop within -Q, for h2/).  A backend has a few such
 * connections (m->h2), each carrying up to the pool's streams= requests at
 * once (fewer if the backend's SETTINGS_MAX_CONCURRENT_STREAMS says so):
 * a request of any client protocol is a stream on one of them.  Flow
 * control both ways: the request body goes as DATA only as the stream's
 * window lets it (input() held to PROXY_OUT_MAX as for HTTP/1.1), and a
 * response's DATA is acknowledged to the backend (nghttp2_session_consume,
 * no automatic WINDOW_UPDATE) only once the client's side took it: a slow
 * client holds a stream window beyond EX_STREAM_LOW (ex->tight) at most.
 * A stream the backend refused (REFUSED_STREAM, or past a GOAWAY's last
 * id) never reached the application: it goes again on another connection.
 * gRPC: te: trailers passed, the response's trailers sent to the client
 * (ex_body_trailers), grpc-timeout the request's deadline.
 *
 * A request's stream, and who may point at the request (pr) in each state.
 * pr (and its px_h2s_t) is freed only by px_req_free, after h2b_release
 * has taken it off its connection (h2b_detach); nghttp2 holds pr twice, as
 * the stream's user data and as the request body's data source
 * (h2b_body_read), and both must be dead before pr is:
 *   unattached   s->c NULL: before h2b_attach, after h2b_detach.  Nothing
 *                in nghttp2 knows pr.
 *   queued       submitted (s->sid set), its HEADERS still in nghttp2's
 *                queue: the connection connecting or in its TLS handshake,
 *                or past the backend's MAX_CONCURRENT_STREAMS.  No stream
 *                exists yet (nghttp2_session_find_stream is NULL); the
 *                queued HEADERS item holds pr as user data and data
 *                source.  Detached: the user data is cleared and
 *                RST_STREAM cancels the queued item (nghttp2 then drops it
 *                unsent, without reading the body).  Refused (the
 *                backend's GOAWAY came first): no stream opened, so no
 *                on_close but on_frame_not_send, which sends it elsewhere.
 *   open         HEADERS went: the stream exists, its DATA item reads pr.
 *                Detached: user data cleared, RST_STREAM queued, which
 *                marks the stream closing at once, so that its DATA is
 *                never read again (RST goes before DATA, and the stream
 *                closes when it is sent).
 *   closed       on_close (the backend ended or reset it, or our RST went):
 *                h2b_closed detaches pr first, then answers or fails it.
 *   connection   h2b_conn_close detaches every request before
 *   closed       nghttp2_session_del: nothing calls back after it.
 * Every call into nghttp2 that may call back (mem_send, mem_recv) runs
 * with c->depth raised, and each callback that may end pr raises
 * pr->depth, so a request ended meanwhile (p_end) is freed by whoever
 * lowers pr->depth last, after nghttp2 has let go of it.
 *
 * A failure the client caused (its reset, an empty or stalled body, its
 * grpc-timeout) is never counted against the backend: px_fail and
 * px_timed_out are called only for what the backend did or did not do.
 */
#include "proxy_int.h"
#include "gio_tls.h"
#include "http/hbuf.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define H2B_WBUF (64 * 1024)          /* frame bytes gathered for one send() */
#define H2B_STREAM_WINDOW (64 * 1024) /* a stream's (above: 128 KiB per idle client) */
#define H2B_CONN_WINDOW (32 << 20)    /* the connection's */
#define H2B_TRAILERS 16               /* trailer fields passed on */
#define H2B_EXTRA 6                   /* request fields of our own: pseudo, te, content-length */

typedef struct px_h2conn {
    watch_t w; /* first: the loop's cookie */
    int fd;
    proxy_t *px;
    px_member_t *m;
    nghttp2_session *ng;
    struct px_h2conn *next; /* m's connections */
    px_req_t *reqs;         /* the requests on it (h2s->next) */
    unsigned streams;
    uint8_t connecting;
    uint8_t handshaking; /* h2/: the TLS handshake is under way */
    uint8_t goaway; /* no new stream: the backend said GOAWAY, or it failed */
    unsigned swant, rwant; /* h2/: what a send, a read that could not go on wait for */
    SSL *ssl;          /* h2/: the TLS session; NULL for h2c/ */
    unsigned depth; /* calls of ours on the stack */
    char *wb;       /* bytes for the backend: [woff, wlen) still to write */
    size_t wlen, woff;
} px_h2conn_t;

/* A request's stream: its header list (in this block), where it is. */
typedef struct px_h2s {
    px_h2conn_t *c; /* NULL: not on a connection */
    px_req_t *next; /* c's requests */
    int32_t sid;
    int status;       /* the response's :status, 0 before it */
    uint8_t headed;   /* the final head went to the client */
    uint8_t deferred; /* the body source waits for bytes (resume_data) */
    uint8_t unblock;  /* input() may go on (ex_input_ready, after the send) */
    uint8_t ntrail;
    uint8_t toobig;   /* its head was over PROXY_FIELDS_MAX or EX_FIELDS_MAX: we reset it */
    uint64_t clen;    /* the response's content-length, UINT64_MAX: none */
    const char *ctype; /* ... its content-type (px_keep), or NULL */
    size_t held;      /* DATA received and not yet acknowledged (the client is slow) */
    int64_t grpc_end; /* grpc-timeout's end (gio_now), 0: none */
    gio_timer_t timer;
    ex_field_t trail[H2B_TRAILERS];
    size_t nnv;
    nghttp2_nv nv[];
} px_h2s_t;

static void h2b_conn_on(watch_t *w, unsigned events);
static void h2b_pump(px_h2conn_t *c);
static void h2b_arm(px_req_t *pr);

/* ---- the request ---- */

/* Append name: value to s's list, both copied to *at (name lowered). */
static void h2b_nv_add(px_h2s_t *s, char **at, const char *n, size_t nl, const char *v, size_t vl)
{
    char *q = *at;
    for (size_t i = 0; i < nl; i++)
        q[i] = (char)tolower((unsigned char)n[i]);
    memcpy(q + nl, v, vl);
    s->nv[s->nnv++] = (nghttp2_nv){(uint8_t *)q, (uint8_t *)q + nl, nl, vl,
                                   NGHTTP2_NV_FLAG_NONE};
    *at = q + nl + vl;
}

/* grpc-timeout's value (digits and a unit, H M S m u n) in ms, or -1. */
static int64_t h2b_grpc_timeout(const http_str_t *v)
{
    int64_t x = 0;
    size_t i = 0;
    for (; i < v->n && i < 8 && v->p[i] >= '0' && v->p[i] <= '9'; i++)
        x = x * 10 + (v->p[i] - '0');
    if (!i || i + 1 != v->n)
        return -1;
    switch (v->p[i]) {
    case 'H': return x * 3600000;
    case 'M': return x * 60000;
    case 'S': return x * 1000;
    case 'm': return x;
    case 'u': return (x + 999) / 1000;
    case 'n': return (x + 999999) / 1000000;
    }
    return -1;
}

/* The request's pseudo-header fields and the forwarding ones. */
static void h2b_pseudo(px_req_t *pr, px_h2s_t *s, char **at, const px_target_t *tg)
{
    const http_request_t *req = pr->ex->req;
    const char *t = req->target.p;
    size_t tn = req->target.n;
    if (tg->p.authority.p) { /* absolute-form: the backend gets origin-form */
        const char *q = tg->p.authority.p + tg->p.authority.n;
        tn = (size_t)(t + tn - q), t = q;
    }
    const http_str_t *host = http_header(req, "Host");
    h2b_nv_add(s, at, ":method", 7, req->method.p, req->method.n);
    if (pr->rule->kind == PX_H2)
        h2b_nv_add(s, at, ":scheme", 7, "https", 5);
    else
        h2b_nv_add(s, at, ":scheme", 7, "http", 4);
    h2b_nv_add(s, at, ":authority", 10, host ? host->p : "localhost", host ? host->n : 9);
    if (tn && *t == '/')
        h2b_nv_add(s, at, ":path", 5, t, tn);
    else
        h2b_nv_add(s, at, ":path", 5, "/", 1);
}

/* fields_ours's encoder: a field into s's list at at, or (s NULL)
   counted, n fields of bytes. */
typedef struct {
    px_h2s_t *s;
    char *at;
    size_t n, bytes;
} h2b_ours_t;

static int h2b_emit(void *arg, const char *name, const char *value)
{
    h2b_ours_t *o = arg;
    size_t nl = strlen(name), vl = strlen(value);
    if (o->s)
        h2b_nv_add(o->s, &o->at, name, nl, value, vl);
    else
        o->n++, o->bytes += nl + vl;
    return 0;
}

/* te (gRPC's, or the client's trailers), content-length. */
static void h2b_framing(px_req_t *pr, px_h2s_t *s, char **at)
{
    exchange_t *ex = pr->ex;
    const http_str_t *te = http_header(ex->req, "TE");
    if (pr->grpc || (te && http_list_has(*te, "trailers")))
        h2b_nv_add(s, at, "te", 2, "trailers", 8);
    if (ex->req_len > 0) {
        char n[24];
        int k = snprintf(n, sizeof n, "%lld", (long long)ex->req_len);
        h2b_nv_add(s, at, "content-length", 14, n, (size_t)k);
    }
}

/* Is the client's field h one the backend gets?  fields_hop_by_hop's policy,
   and what HTTP/2 says otherwise (Host as :authority, no pseudo-fields). */
static int h2b_passed(const http_request_t *req, const http_header_t *h)
{
    return h->name.n && h->name.p[0] != ':' && !fields_name_is(h->name, "Host") &&
           !fields_hop_by_hop(req->headers, req->nheaders, h->name, 0);
}

static int h2b_request(px_req_t *pr, const px_target_t *tg)
{
    const http_request_t *req = pr->ex->req;
    h2b_ours_t o = {NULL, NULL, 0, 0};
    if (fields_ours(pr->ex, FIELDS_IDENTITY, h2b_emit, &o) < 0)
        return -1;
    size_t bytes = 512 + req->method.n + req->target.n + o.bytes;
    for (size_t i = 0; i < req->nheaders; i++)
        bytes += req->headers[i].name.n + req->headers[i].value.n;
    size_t nmax = req->nheaders + H2B_EXTRA + o.n;
    px_h2s_t *s = calloc(1, sizeof *s + nmax * sizeof(nghttp2_nv) + bytes);
    if (!s)
        return -1;
    char *at = (char *)(s->nv + nmax);
    pr->h2s = s;
    pr->ex->tight = 1; /* its DATA arrives unasked, up to the window: stop at the low mark */
    h2b_pseudo(pr, s, &at, tg);
    for (size_t i = 0; i < req->nheaders; i++) {
        const http_header_t *h = &req->headers[i];
        if (h2b_passed(req, h))
            h2b_nv_add(s, &at, h->name.p, h->name.n, h->value.p, h->value.n);
    }
    o = (h2b_ours_t){s, at, 0, 0};
    fields_ours(pr->ex, FIELDS_IDENTITY, h2b_emit, &o); /* the same fields as counted: they fit */
    at = o.at;
    h2b_framing(pr, s, &at);
    const http_str_t *gt = pr->grpc ? http_header(req, "grpc-timeout") : NULL;
    int64_t ms = gt ? h2b_grpc_timeout(gt) : -1;
    if (ms >= 0)
        s->grpc_end = gio_now(pr->px->site->loop) + ms;
    return 0;
}

static int h2b_body(px_req_t *pr, const char *p, size_t n, int last)
{
    if (px_out(pr, p, n) < 0)
        return -1;
    px_h2s_t *s = pr->h2s;
    if (last)
        pr->body_in = 1; /* (p_input says so too, after this call: the source reads it now) */
    if (s->c)
        h2b_arm(pr); /* -Q is silence both ways, as for HTTP/1.1 (px_set_deadline) */
    if (s->c && s->deferred) {
        s->deferred = 0;
        nghttp2_session_resume_data(s->c->ng, s->sid);
    }
    if (s->c && !s->c->depth)
        h2b_pump(s->c);
    return 0;
}

/* nghttp2 asks for request body bytes: what out holds; deferred while the
   client has not sent more, the end once all is in. */
static ssize_t h2b_body_read(nghttp2_session *ng, int32_t sid, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)ng, (void)sid, (void)user;
    px_req_t *pr = src->ptr;
    px_h2s_t *s = pr->h2s;
    size_t n = pr->outlen - pr->outoff;
    n = n < len ? n : len;
    if (n)
        memcpy(buf, pr->out + pr->outoff, n);
    pr->outoff += n;
    if (pr->outoff == pr->outlen && pr->body_in)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    else if (!n)
        return s->deferred = 1, NGHTTP2_ERR_DEFERRED;
    if (pr->blocked && pr->outlen - pr->outoff < PROXY_OUT_MAX / 2)
        s->unblock = 1;
    return (ssize_t)n;
}

/* ---- connections ---- */

static void h2b_timer_on(gio_loop_t *l, void *arg);

/* pr's silence limit (-Q from now), or its grpc-timeout if sooner. */
static void h2b_arm(px_req_t *pr)
{
    px_h2s_t *s = pr->h2s;
    gio_loop_t *l = pr->px->site->loop;
    int64_t at = gio_now(l) + pr->px->site->cfg->dyn_timeout * 1000LL;
    if (s->grpc_end && s->grpc_end < at)
        at = s->grpc_end;
    gio_timer_set(l, &s->timer, at, h2b_timer_on, pr);
}

/* pr off its connection: its stream reset unless complete. */
static void h2b_detach(px_req_t *pr, uint32_t code)
{
    px_h2s_t *s = pr->h2s;
    px_h2conn_t *c = s ? s->c : NULL;
    if (!c)
        return;
    gio_timer_stop(pr->px->site->loop, &s->timer);
    for (px_req_t **pp = &c->reqs; *pp; pp = &(*pp)->h2s->next)
        if (*pp == pr) {
            *pp = s->next;
            break;
        }
    s->c = NULL, s->next = NULL;
    c->streams--;
    if (s->sid > 0) {
        nghttp2_session_set_stream_user_data(c->ng, s->sid, NULL);
        /* Not yet opened (its HEADERS queued: the connection still opening,
           or past MAX_CONCURRENT_STREAMS): RST_STREAM cancels the queued
           HEADERS, whose data source is pr.  Open: RST_STREAM marks it
           closing, so its DATA is never read again.  Closed, it would have
           detached pr (on_close). */
        if (code != (uint32_t)-1 && (!nghttp2_session_find_stream(c->ng, s->sid) ||
                                     nghttp2_session_get_stream_local_close(c->ng, s->sid) == 0 ||
                                     nghttp2_session_get_stream_remote_close(c->ng, s->sid) == 0))
            nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->sid, code);
        nghttp2_session_consume_connection(c->ng, s->held);
    }
    s->sid = 0, s->held = 0, s->deferred = 0;
    if (!c->depth)
        h2b_pump(c);
}

/* Close c: its requests fail (why), its descriptor goes. */
static void h2b_conn_close(px_h2conn_t *c, const char *why, int err)
{
    proxy_t *px = c->px;
    c->goaway = 1;
    c->depth++;
    while (c->reqs) {
        px_req_t *pr = c->reqs;
        h2b_detach(pr, (uint32_t)-1);
        pr->depth++;
        if (c->connecting || c->handshaking || err == ECONNREFUSED)
            pr->conn_failed = 1; /* nothing reached the backend */
        if (err)
            px_fail_errno(pr, c->connecting ? "connect() to" : "recv() from", err);
        else
            px_fail(pr, why);
        if (!--pr->depth && pr->ended)
            px_req_free(pr);
    }
    for (px_h2conn_t **pp = &c->m->h2; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    nghttp2_session_del(c->ng);
    if (c->ssl && !c->handshaking && !c->connecting)
        gio_tls_shutdown(c->ssl);
    SSL_free(c->ssl);
    gio_close(px->site->loop, c->fd);
    free(c->wb);
    free(c);
}

void px_h2_close(proxy_t *px, px_member_t *m, int all)
{
    (void)px;
    for (px_h2conn_t *c = m->h2, *next; c; c = next) {
        next = c->next;
        if (all || !c->streams)
            h2b_conn_close(c, "the backend is gone from its pool", 0);
    }
}

/* Send wb[woff, wlen): bytes taken (> 0), GIO_AGAIN, or GIO_ERR (errno). */
static long h2b_write(px_h2conn_t *c)
{
    if (c->ssl)
        return px_tls_send(c->ssl, c->wb + c->woff, c->wlen - c->woff, &c->swant);
    ssize_t w = send(c->fd, c->wb + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
    if (w < 0 && (errno == EAGAIN || errno == EINTR))
        return GIO_AGAIN;
    if (w <= 0)
        return w < 0 ? GIO_ERR : (errno = EPIPE, GIO_ERR);
    return (long)w;
}

/* nghttp2's next frames for the backend (mem_send).  A frame that cannot go
   (a request after the backend's GOAWAY) closes its stream in there:
   on_close must not send again from inside it, hence the depth. */
static ssize_t h2b_frames(px_h2conn_t *c, const uint8_t **d)
{
    c->depth++;
    ssize_t n = nghttp2_session_mem_send(c->ng, d);
    c->depth--;
    return n;
}

/* Write what nghttp2 has for the backend, until EAGAIN.  0, or an errno. */
static int h2b_send(px_h2conn_t *c)
{
    c->swant = 0;
    while (!c->connecting && !c->handshaking) {
        if (c->woff == c->wlen) {
            c->woff = c->wlen = 0;
            const uint8_t *d;
            ssize_t n;
            while (c->wlen < H2B_WBUF / 2 && (n = h2b_frames(c, &d)) > 0) {
                char *q = c->wlen + (size_t)n > H2B_WBUF ? NULL : c->wb + c->wlen;
                if (!q) { /* a large frame: sent from a buffer of its size */
                    char *big = realloc(c->wb, c->wlen + (size_t)n);
                    if (!big)
                        return ENOMEM;
                    c->wb = big, q = c->wb + c->wlen;
                }
                memcpy(q, d, (size_t)n);
                c->wlen += (size_t)n;
            }
            if (!c->wlen)
                return 0;
        }
        long w = h2b_write(c);
        if (w == GIO_AGAIN)
            return 0;
        if (w < 0)
            return errno;
        c->woff += (size_t)w;
    }
    return 0;
}

/* Write what nghttp2 has for the backend; the requests whose body it took
   below half of PROXY_OUT_MAX read their client again (and what that
   gives is written too); then what c waits for.  A failure marks c, closed
   at its event's end. */
static void h2b_pump(px_h2conn_t *c)
{
    int err = h2b_send(c);
    for (px_req_t *pr = err ? NULL : c->reqs; pr;)
        if (pr->h2s->unblock && !pr->ended) {
            pr->h2s->unblock = 0;
            pr->blocked = 0;
            c->depth++;
            ex_input_ready(pr->ex); /* input() may come back at once: the list may change */
            c->depth--;
            err = h2b_send(c);
            pr = err ? NULL : c->reqs;
        } else {
            pr = pr->h2s->next;
        }
    unsigned want = GIO_READ | (c->connecting || c->woff < c->wlen ? GIO_WRITE : 0) | c->swant |
                    c->rwant;
    /* a failed send: closed at its event's end, and outside an event (a
       client's body, a detach) the socket's next readiness is that event */
    gio_want(c->px->site->loop, c->fd, err ? GIO_READ | GIO_WRITE : want);
    if (err)
        c->goaway = 2;
}

/* A new connection to m: the client preface and our SETTINGS queued.  NULL with errno. */
static px_h2conn_t *h2b_conn_open(proxy_t *px, px_member_t *m);

/* A connection of m with room for one more stream (not avoid), or a new one. */
static px_h2conn_t *h2b_conn_for(proxy_t *px, px_member_t *m, const px_h2conn_t *avoid)
{
    for (px_h2conn_t *c = m->h2; c; c = c->next) {
        uint32_t peer =
            nghttp2_session_get_remote_settings(c->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
        unsigned cap = (unsigned)m->pool->o.streams;
        cap = peer < cap ? peer : cap;
        if (c != avoid && !c->goaway && c->streams < cap)
            return c;
    }
    return h2b_conn_open(px, m);
}

/* pr as a new stream on c. 0, or -1 with errno. */
static int h2b_stream_on(px_req_t *pr, px_h2conn_t *c)
{
    px_h2s_t *s = pr->h2s;
    nghttp2_data_provider dp = {.source.ptr = pr, .read_callback = h2b_body_read};
    pr->outoff = 0;
    s->status = 0, s->ntrail = 0, s->held = 0, s->deferred = 0, s->unblock = 0, s->toobig = 0;
    s->headed = 0, s->ctype = NULL;
    int32_t sid = nghttp2_submit_request(c->ng, NULL, s->nv, s->nnv,
                                         pr->has_body ? &dp : NULL, pr);
    if (sid < 0) {
        errno = ENOMEM;
        return -1;
    }
    s->sid = sid, s->c = c;
    s->next = c->reqs, c->reqs = pr;
    c->streams++;
    h2b_arm(pr);
    if (!c->depth)
        h2b_pump(c);
    return 0;
}

static int h2b_attach(px_req_t *pr, px_member_t *m)
{
    px_h2conn_t *c = h2b_conn_for(pr->px, m, NULL);
    if (!c)
        return -1;
    if (c->streams)
        px_count(pr->px, m, BACKEND_REUSES);
    return h2b_stream_on(pr, c);
}

static void h2b_release(px_req_t *pr)
{
    px_h2s_t *s = pr->h2s;
    if (s)
        h2b_detach(pr, pr->state == RS_DONE ? NGHTTP2_NO_ERROR : NGHTTP2_CANCEL);
}

/* ---- the response ---- */

static px_req_t *h2b_req_of(nghttp2_session *ng, int32_t sid)
{
    px_req_t *pr = nghttp2_session_get_stream_user_data(ng, sid);
    return pr && !pr->ended && pr->h2s && pr->h2s->sid == sid ? pr : NULL;
}

/* The response's fields the client gets from us, not from the backend. */
static int h2b_ours(const uint8_t *n, size_t nl)
{
    static const char *const own[] = {"date", "server", "content-type", "content-length",
                                      "connection", "keep-alive", "transfer-encoding"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strlen(own[i]) == nl && !memcmp(own[i], n, nl))
            return 1;
    return 0;
}

static int h2b_on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *n, size_t nl,
                     const uint8_t *v, size_t vl, uint8_t flags, void *user)
{
    (void)flags, (void)user;
    px_req_t *pr = f->hd.type == NGHTTP2_HEADERS ? h2b_req_of(ng, f->hd.stream_id) : NULL;
    if (!pr)
        return 0;
    px_h2s_t *s = pr->h2s;
    if (nl == 7 && !memcmp(n, ":status", 7)) {
        s->status = vl == 3 ? atoi((const char *)v) : 0;
        if (s->status >= 200)
            s->clen = UINT64_MAX;
        return 0;
    }
    if (pr->grpc && nl == 11 && !memcmp(n, "grpc-status", 11) && (s->headed || s->status >= 200))
        px_grpc_status(pr, (const char *)v, vl);
    if (s->headed) { /* the trailer section */
        char *kn = px_keep(pr, (const char *)n, nl), *kv = px_keep(pr, (const char *)v, vl);
        if (kn && kv && s->ntrail < H2B_TRAILERS)
            s->trail[s->ntrail++] = (ex_field_t){kn, kv};
        return 0;
    }
    if (s->status < 200 || n[0] == ':')
        return 0;
    if (nl == 14 && !memcmp(n, "content-length", 14)) {
        s->clen = 0;
        for (size_t i = 0; i < vl && i < 18; i++)
            s->clen = s->clen * 10 + (uint64_t)(v[i] - '0');
    }
    if (nl == 12 && !memcmp(n, "content-type", 12) && !s->ctype) {
        s->ctype = px_keep(pr, (const char *)v, vl);
        return 0;
    }
    if (nl >= 48 || h2b_ours(n, nl))
        return 0;
    if (px_field(pr, (const char *)n, nl, (const char *)v, vl) < 0) {
        s->toobig = 1;
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset: on_close fails it */
    }
    return 0;
}

/* The final head (end: the stream ended with it). */
static void h2b_head(px_req_t *pr, int end)
{
    px_h2s_t *s = pr->h2s;
    uint64_t len = end ? 0 : s->clen;
    s->headed = 1;
    if (px_head(pr, s->status, s->ctype, len == UINT64_MAX ? EX_LEN_STREAM : len) < 0)
        return;
    pr->state = RS_BODY;
    if (end || pr->head_only || !len)
        px_done(pr, 1);
}

static int h2b_on_frame(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    px_h2conn_t *c = user;
    if (f->hd.type == NGHTTP2_GOAWAY)
        c->goaway = 1; /* the streams past its last id close as refused */
    px_req_t *pr = f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA
                       ? h2b_req_of(ng, f->hd.stream_id) : NULL;
    if (!pr)
        return 0;
    px_h2s_t *s = pr->h2s;
    int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    pr->depth++;
    pr->got_byte = 1;
    h2b_arm(pr);
    if (f->hd.type == NGHTTP2_HEADERS && !s->headed && s->status >= 200)
        h2b_head(pr, end);
    else if (end && s->headed && !pr->ended && pr->state == RS_BODY)
        px_done_trailers(pr, s->trail, s->ntrail);
    if (!--pr->depth && pr->ended)
        px_req_free(pr);
    return 0;
}

static int h2b_on_data(nghttp2_session *ng, uint8_t flags, int32_t sid, const uint8_t *p, size_t n,
                   void *user)
{
    (void)flags, (void)user;
    px_req_t *pr = h2b_req_of(ng, sid);
    if (!pr || pr->state != RS_BODY) {
        nghttp2_session_consume(ng, sid, n);
        return 0;
    }
    pr->depth++;
    if (px_body(pr, (const char *)p, n) == 0 && !pr->ended && pr->h2s->c) {
        if (pr->paused)
            pr->h2s->held += n; /* acknowledged when the client took its part */
        else
            nghttp2_session_consume(ng, sid, n);
    } else {
        nghttp2_session_consume_connection(ng, n);
    }
    if (!--pr->depth && pr->ended)
        px_req_free(pr);
    return 0;
}

/* pr's stream on c closed (code), or its HEADERS could not go (refused). */
static void h2b_closed(px_h2conn_t *c, px_req_t *pr, uint32_t code)
{
    pr->depth++;
    h2b_detach(pr, (uint32_t)-1);
    if (code == NGHTTP2_REFUSED_STREAM && !pr->head_sent && pr->keep_out && !pr->retried) {
        pr->retried = 1; /* it never reached the application: another connection */
        px_count(pr->px, pr->m, BACKEND_RETRIES);
        px_h2conn_t *other = h2b_conn_for(pr->px, pr->m, c);
        if (!other || h2b_stream_on(pr, other) < 0)
            px_fail(pr, "the backend refused the stream");
    } else if (pr->state != RS_DONE) {
        pr->conn_failed = code == NGHTTP2_REFUSED_STREAM;
        px_fail(pr, pr->h2s->toobig ? "too many or too large header fields from the backend"
                    : code == NGHTTP2_NO_ERROR ? "the backend ended the stream early"
                                               : "the backend reset the stream");
    }
    if (!--pr->depth && pr->ended)
        px_req_free(pr);
}

static int h2b_on_close(nghttp2_session *ng, int32_t sid, uint32_t code, void *user)
{
    px_req_t *pr = h2b_req_of(ng, sid);
    if (pr)
        h2b_closed(user, pr, code);
    return 0;
}

/* A request's HEADERS that nghttp2 could not send (the backend's GOAWAY came
   first, or the session is closing): its stream never opened, so no
   on_close tells us; it goes again elsewhere as a refused one.  (A HEADERS
   we cancelled, ERR_STREAM_CLOSING, belongs to no request any more.) */
static int h2b_on_not_sent(nghttp2_session *ng, const nghttp2_frame *f, int err, void *user)
{
    (void)ng;
    px_h2conn_t *c = user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST ||
        err == NGHTTP2_ERR_STREAM_CLOSING)
        return 0;
    for (px_req_t *pr = c->reqs; pr; pr = pr->h2s->next)
        if (pr->h2s->sid == f->hd.stream_id && !pr->ended) {
            h2b_closed(c, pr, NGHTTP2_REFUSED_STREAM);
            break;
        }
    return 0;
}

int px_h2_past_deadline(const px_req_t *pr, int64_t slack)
{
    const px_h2s_t *s = pr->h2s;
    return s && s->grpc_end && gio_now(pr->px->site->loop) + slack >= s->grpc_end;
}

void px_h2_drained(px_req_t *pr)
{
    px_h2s_t *s = pr->h2s;
    if (!s || !s->c || !s->held)
        return;
    nghttp2_session_consume(s->c->ng, s->sid, s->held);
    s->held = 0;
    if (!s->c->depth)
        h2b_pump(s->c);
}

/* ---- a connection's life ---- */

static px_h2conn_t *h2b_conn_open(proxy_t *px, px_member_t *m)
{
    const px_mdef_t *d = &m->d;
    int fd = socket(d->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return NULL;
    if (d->addr.ss_family != AF_UNIX)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    px_h2conn_t *c = calloc(1, sizeof *c);
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    int err = !c || !(c->wb = malloc(H2B_WBUF)) || nghttp2_session_callbacks_new(&cb) ||
              nghttp2_option_new(&opt) ? ENOMEM : 0;
    if (!err) {
        nghttp2_session_callbacks_set_on_header_callback(cb, h2b_on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2b_on_frame);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2b_on_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2b_on_close);
        nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, h2b_on_not_sent);
        nghttp2_option_set_no_auto_window_update(opt, 1);
        nghttp2_option_set_peer_max_concurrent_streams(opt, 100);
        if (nghttp2_session_client_new2(&c->ng, cb, c, opt))
            err = ENOMEM;
    }
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    nghttp2_settings_entry set[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                    {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2B_STREAM_WINDOW}};
    if (!err && (nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, set, 2) ||
                 nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0,
                                                       H2B_CONN_WINDOW)))
        err = ENOMEM;
    int now = 0;
    if (!err && m->pool->kind == PX_H2 && !(c->ssl = px_tls_new(px->tls, m, fd)))
        err = errno;
    if (!err && !(now = connect(fd, (struct sockaddr *)&d->addr, d->alen) == 0) &&
        errno != EINPROGRESS)
        err = errno;
    else if (!err && gio_add(px->site->loop, fd, c) < 0)
        err = errno;
    if (err) {
        if (c)
            nghttp2_session_del(c->ng), free(c->wb), SSL_free(c->ssl);
        free(c);
        close(fd);
        errno = err;
        return NULL;
    }
    watch_init(&c->w, h2b_conn_on);
    c->fd = fd, c->px = px, c->m = m, c->connecting = !now;
    c->next = m->h2, m->h2 = c;
    gio_want(px->site->loop, fd, GIO_WRITE);
    if (c->ssl) { /* the connect and the handshake: within -Q */
        c->handshaking = 1;
        gio_set_deadline(px->site->loop, fd,
                         gio_now(px->site->loop) + px->site->cfg->dyn_timeout * 1000LL);
    }
    px_count(px, m, BACKEND_CONNECTS);
    return c;
}

/* What the backend sent, into the session: 0, or an errno (0 with goaway
   set on the session's own failure). */
static int h2b_conn_read(px_h2conn_t *c)
{
    char buf[16384];
    for (int round = 0; round < 16; round++) {
        unsigned want = 0;
        long n = c->ssl ? gio_tls_read(c->ssl, buf, sizeof buf, &want)
                        : gio_read(c->fd, buf, sizeof buf);
        c->rwant = n == GIO_AGAIN && want == GIO_WRITE ? GIO_WRITE : 0; /* h2b_pump asks */
        if (n == GIO_AGAIN)
            return 0;
        if (n == GIO_EOF)
            return ECONNRESET;
        if (n < 0)
            return errno;
        if (nghttp2_session_mem_recv(c->ng, (const uint8_t *)buf, (size_t)n) < 0) {
            c->goaway = 2;
            return 0;
        }
    }
    return 0;
}

/* h2/: a step of the TLS handshake; when it is done, what nghttp2 queued
   goes.  0, or -1 when it failed (c closed, its requests failed: why). */
static int h2b_handshake(px_h2conn_t *c)
{
    char why[300];
    unsigned want = 0;
    int r = px_tls_handshake(c->ssl, &want, why, sizeof why);
    if (r == GIO_ERR) {
        c->depth--;
        h2b_conn_close(c, why, 0);
        return -1;
    }
    if (r == GIO_AGAIN) {
        c->swant = want;
        return 0;
    }
    c->handshaking = 0, c->swant = 0;
    return 0;
}

static void h2b_conn_on(watch_t *w, unsigned events)
{
    px_h2conn_t *c = (px_h2conn_t *)w;
    int err = 0;
    if (!events && c->ssl && (c->connecting || c->handshaking)) {
        h2b_conn_close(c, "the backend did not complete its TLS handshake in time (-Q)", 0);
        return;
    }
    if (!events) { /* idle past its time */
        if (!c->streams)
            h2b_conn_close(c, "idle", 0);
        return;
    }
    c->depth++;
    if (c->connecting && (events & (GIO_WRITE | GIO_ERROR | GIO_HANGUP))) {
        socklen_t len = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (!err)
            c->connecting = 0;
    }
    if (!err && !c->connecting && c->handshaking && h2b_handshake(c) < 0)
        return;
    if (!err && !c->connecting && !c->handshaking &&
        ((events & (GIO_READ | GIO_HANGUP | GIO_ERROR)) || c->rwant))
        err = h2b_conn_read(c);
    if (!err)
        h2b_pump(c);
    c->depth--;
    gio_loop_t *l = c->px->site->loop;
    if (err || c->goaway == 2)
        h2b_conn_close(c, "the backend's HTTP/2 session failed", err);
    else if (!nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng))
        h2b_conn_close(c, "the backend ended its HTTP/2 session", 0);
    else if (!c->streams && c->goaway)
        h2b_conn_close(c, "", 0);
    else if (!c->handshaking && !(c->ssl && c->connecting)) /* else -Q's, from the open */
        gio_set_deadline(l, c->fd, c->streams ? 0 : gio_now(l) + PROXY_IDLE_MS);
}

/* A stream's -Q or grpc-timeout passed. */
static void h2b_timer_on(gio_loop_t *l, void *arg)
{
    px_req_t *pr = arg;
    px_h2s_t *s = pr->h2s;
    int64_t now = gio_now(l);
    if (pr->paused && (!s->grpc_end || now < s->grpc_end)) { /* the client's pace, not ours */
        h2b_arm(pr);
        return;
    }
    int deadline = s->grpc_end && now >= s->grpc_end;
    /* the backend has all the client sent and waits for the rest: the
       client's silence, not the backend's (it is not counted against it) */
    int client = !deadline && !pr->body_in && pr->outoff == pr->outlen;
    pr->depth++;
    if (!deadline && !client)
        px_timed_out(pr);
    px_release(pr, 0);
    const char *why = deadline ? NULL /* a gRPC call's own: the client's business */
                      : client ? "the client's request body stalled (-Q)"
                               : "the backend did not answer in time (-Q)";
    if (why) /* (a gRPC call's too: it was logged nowhere) */
        site_error(pr->px->site, "proxy", ETIMEDOUT, pr->ex->peer, why);
    if (pr->grpc) {
        px_grpc_fail(pr, deadline || client ? 4 : 14,
                     deadline ? "Deadline Exceeded (grpc-timeout)"
                     : client ? "the client sent nothing more in time (-Q)"
                              : "the backend did not answer in time");
    } else {
        pr->state = RS_DONE;
        if (pr->head_sent) {
            ex_body_abort(pr->ex);
        } else {
            pr->head_sent = 1;
            ex_error(pr->ex, client ? 408 : 504, NULL, NULL);
        }
    }
    if (!--pr->depth && pr->ended)
        px_req_free(pr);
}

const px_ops_t px_h2_ops = {h2b_request, h2b_body, NULL, NULL, h2b_attach, h2b_release};
