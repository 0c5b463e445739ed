/*
 * Active health checks of a pool's backends (proxy_int.h, --pool's check=):
 * from the loop, every interval, a connection of its own to the backend and
 * one request for the check path in the pool's protocol (GET for HTTP; for
 * FastCGI and SCGI, a request whose SCRIPT_NAME is the path, as php-fpm's
 * ping.path wants; HTTP/2 by libnghttp2's client session, GET of the path
 * or, check=grpc, grpc.health.v1.Health/Check, SERVING being 200; over
 * TLS for h2/, its certificate verified as a request's), its
 * answer's status read and judged against expect=,
 * the verdict given to proxy_pool.c.  No answer within timeout= fails.
 */
#include "proxy_int.h"
#include "http/response.h"
#include "gio_tls.h"
#include "http/hbuf.h"
#include "http/http_parse.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK_OUT 1024 /* the request: a path of at most 255 bytes, twice, and little else */
#define CHECK_IN 2048  /* the answer: enough for a status line or a CGI head */
#define CHECK_ID 1     /* FastCGI's request id */

typedef struct px_check {
    watch_t w; /* first: the loop's cookie */
    int fd;
    proxy_t *px;
    px_member_t *m;
    uint8_t connecting;
    uint8_t handshaking; /* h2/: the TLS handshake is under way */
    SSL *ssl;            /* h2/: the TLS session, or NULL */
    char out[CHECK_OUT];
    size_t outlen, outoff;
    char in[CHECK_IN]; /* HTTP: the bytes; FastCGI: STDOUT's bytes; HTTP/2: DATA */
    size_t inlen;
    fcgi_parser_t fp;
    nghttp2_session *ng; /* HTTP/2 (h2c/): the check's session, one stream */
    int chk_st;       /* ... its :status */
    int grpc_status;     /* ... check=grpc: its grpc-status, -1 none yet */
    uint8_t chk_over;     /* ... the stream ended (1) or was reset (2) */
} px_check_t;

/* ---- HTTP/2: a GET of the path, or grpc.health.v1.Health/Check ---- */

static int chk_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *n, size_t nl,
                      const uint8_t *v, size_t vl, uint8_t flags, void *user)
{
    (void)ng, (void)f, (void)flags;
    px_check_t *k = user;
    if (nl == 7 && !memcmp(n, ":status", 7) && vl == 3)
        k->chk_st = atoi((const char *)v);
    if (nl == 11 && !memcmp(n, "grpc-status", 11) && vl && vl < 3)
        k->grpc_status = atoi((const char *)v);
    return 0;
}

static int chk_data(nghttp2_session *ng, uint8_t flags, int32_t sid, const uint8_t *p, size_t n,
                    void *user)
{
    (void)ng, (void)flags, (void)sid;
    px_check_t *k = user;
    size_t room = sizeof k->in - k->inlen, c = n < room ? n : room;
    memcpy(k->in + k->inlen, p, c);
    k->inlen += c;
    return 0;
}

static int chk_close(nghttp2_session *ng, int32_t sid, uint32_t code, void *user)
{
    (void)ng, (void)sid;
    px_check_t *k = user;
    k->chk_over = code == NGHTTP2_NO_ERROR ? 1 : 2;
    return 0;
}

/* The empty HealthCheckRequest (all services), as a gRPC message. */
static ssize_t chk_body(nghttp2_session *ng, int32_t sid, uint8_t *buf, size_t len,
                        uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)ng, (void)sid, (void)src, (void)user;
    if (len < 5)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    memset(buf, 0, 5);
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return 5;
}

/* The session, the preface and the request into k->out.  0, or -1. */
static int chk_request(px_check_t *k)
{
    const char *path = k->m->pool->o.check;
    int grpc = !strcmp(path, "grpc");
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb))
        return -1;
    nghttp2_session_callbacks_set_on_header_callback(cb, chk_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, chk_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, chk_close);
    int r = nghttp2_session_client_new(&k->ng, cb, k);
    nghttp2_session_callbacks_del(cb);
    if (r)
        return -1;
#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}
    const char *scheme = k->ssl ? "https" : "http";
    const nghttp2_nv nv[] = {NV(":method", grpc ? "POST" : "GET"), NV(":scheme", scheme),
                             NV(":authority", "localhost"),
                             NV(":path", grpc ? "/grpc.health.v1.Health/Check" : path),
                             NV("user-agent", "gatling-check"),
                             NV("content-type", "application/grpc"), NV("te", "trailers")};
#undef NV
    nghttp2_data_provider dp = {.read_callback = chk_body};
    k->grpc_status = -1;
    if (nghttp2_submit_settings(k->ng, NGHTTP2_FLAG_NONE, NULL, 0) ||
        nghttp2_submit_request(k->ng, NULL, nv, grpc ? 7 : 5, grpc ? &dp : NULL, NULL) < 0)
        return -1;
    const uint8_t *d;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(k->ng, &d)) > 0) {
        if ((size_t)n > sizeof k->out - k->outlen)
            return -1;
        memcpy(k->out + k->outlen, d, (size_t)n);
        k->outlen += (size_t)n;
    }
    return n < 0 ? -1 : 0;
}

/* The answer's verdict as a status: check=grpc's SERVING 200, else 503. */
static int chk_verdict(px_check_t *k, int eof)
{
    static const char serving[] = {0, 0, 0, 0, 2, 8, 1}; /* HealthCheckResponse{status: 1} */
    if (!k->chk_over)
        return eof ? -1 : 0;
    if (k->chk_over == 2 || !k->chk_st)
        return -1;
    if (strcmp(k->m->pool->o.check, "grpc"))
        return k->chk_st;
    return k->chk_st == 200 && k->grpc_status == 0 && k->inlen == sizeof serving &&
                   !memcmp(k->in, serving, sizeof serving)
               ? 200 : 503;
}

/* The check's answer st in words, for the health log. */
static void check_why(const px_check_t *k, int st, char *why, size_t n)
{
    int code = k->grpc_status;
    if (strcmp(k->m->pool->o.check, "grpc") || k->chk_st != 200)
        snprintf(why, n, "the check answered %d", k->chk_st ? k->chk_st : st);
    else if (code == 12)
        snprintf(why, n, "the backend has no gRPC health service: grpc.health.v1.Health/Check "
                         "answered grpc-status 12 (UNIMPLEMENTED)");
    else if (code > 0)
        snprintf(why, n, "grpc.health.v1.Health/Check answered grpc-status %d (%s)", code,
                 resp_grpc_code(code));
    else if (st != 200)
        snprintf(why, n, "grpc.health.v1.Health/Check answered, but not SERVING");
    else
        snprintf(why, n, "grpc.health.v1.Health/Check answered SERVING");
}

/* FastCGI: BEGIN_REQUEST, one PARAMS record, the empty PARAMS and STDIN. */
static size_t fcgi_request(unsigned char *out, size_t cap, const char *path)
{
    const char *env[][2] = {{"GATEWAY_INTERFACE", "CGI/1.1"}, {"REQUEST_METHOD", "GET"},
                            {"SCRIPT_NAME", path},            {"SCRIPT_FILENAME", path},
                            {"REQUEST_URI", path},            {"DOCUMENT_URI", path},
                            {"QUERY_STRING", ""},             {"SERVER_PROTOCOL", "HTTP/1.1"},
                            {"SERVER_SOFTWARE", "gatling"}};
    size_t n = FCGI_HEADER_LEN, need = 16 + 3 * FCGI_HEADER_LEN;
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        need += fcgi_pair_size(strlen(env[i][0]), strlen(env[i][1]));
    if (need > cap) /* 9 short pairs and a path of at most 255 bytes: never */
        return 0;
    fcgi_begin(out, CHECK_ID, 0);
    n = 16 + FCGI_HEADER_LEN;
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        n += fcgi_pair(out + n, env[i][0], strlen(env[i][0]), env[i][1], strlen(env[i][1]));
    fcgi_header(out + 16, FCGI_PARAMS, CHECK_ID, (unsigned)(n - 16 - FCGI_HEADER_LEN), 0);
    fcgi_header(out + n, FCGI_PARAMS, CHECK_ID, 0, 0);
    fcgi_header(out + n + FCGI_HEADER_LEN, FCGI_STDIN, CHECK_ID, 0, 0);
    return n + 2 * FCGI_HEADER_LEN;
}

/* SCGI: the netstring of the headers, CONTENT_LENGTH first, then no body. */
static size_t scgi_request(char *out, size_t cap, const char *path)
{
    char h[CHECK_OUT - 16];
    hbuf_t b = hb_init(h, sizeof h);
    const char *env[][2] = {{"CONTENT_LENGTH", "0"}, {"SCGI", "1"},
                            {"REQUEST_METHOD", "GET"}, {"SCRIPT_NAME", path},
                            {"REQUEST_URI", path},     {"QUERY_STRING", ""},
                            {"SERVER_PROTOCOL", "HTTP/1.1"}};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
        hb_put(&b, env[i][0], strlen(env[i][0]) + 1);
        hb_put(&b, env[i][1], strlen(env[i][1]) + 1);
    }
    if (!hb_str(&b))
        return 0;
    int n = snprintf(out, cap, "%zu:", hb_len(&b));
    if (n < 0 || (size_t)n + hb_len(&b) + 1 > cap)
        return 0;
    memcpy(out + n, h, hb_len(&b));
    out[(size_t)n + hb_len(&b)] = ',';
    return (size_t)n + hb_len(&b) + 1;
}

/* The request for m's pool, into k->out. */
static int request(px_check_t *k)
{
    const px_pool_t *p = k->m->pool;
    if (PX_IS_H2(p->kind))
        return chk_request(k);
    if (p->kind == PX_FCGI)
        k->outlen = fcgi_request((unsigned char *)k->out, sizeof k->out, p->o.check);
    else if (p->kind == PX_SCGI)
        k->outlen = scgi_request(k->out, sizeof k->out, p->o.check);
    else {
        int n = snprintf(k->out, sizeof k->out,
                         "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: gatling-check\r\n"
                         "Connection: close\r\n\r\n",
                         p->o.check, "localhost");
        k->outlen = n > 0 && (size_t)n < sizeof k->out ? (size_t)n : 0;
    }
    return k->outlen ? 0 : -1;
}

/* The check is over: closed, freed, its verdict given. */
static void verdict(px_check_t *k, int ok, const char *why)
{
    px_member_t *m = k->m;
    proxy_t *px = k->px;
    m->check = NULL;
    gio_close(px->site->loop, k->fd);
    nghttp2_session_del(k->ng);
    SSL_free(k->ssl);
    free(k);
    px_check_result(px, m, ok, gio_now(px->site->loop), why);
}

/* The status in what came so far: > 0, 0 (more to come), -1 (malformed). */
static int status_of(px_check_t *k, int eof)
{
    if (PX_IS_H2(k->m->pool->kind))
        return chk_verdict(k, eof);
    if (k->m->pool->kind == PX_HTTP) {
        http_response_t resp;
        long used = http_parse_response(k->in, k->inlen, &resp);
        if (used == HTTP_INCOMPLETE)
            return eof || k->inlen == sizeof k->in ? -1 : 0;
        return used < 0 ? -1 : resp.status;
    }
    cgi_head_t h;
    memset(&h, 0, sizeof h);
    long used = cgi_head_parse(k->in, k->inlen, &h);
    if (used == CGI_INCOMPLETE)
        return eof || k->inlen == sizeof k->in ? -1 : 0;
    return used < 0 ? -1 : h.status ? h.status : h.location.p ? 302 : 200;
}

/* Bytes from the backend: FastCGI's STDOUT content, or the bytes. */
static int take(px_check_t *k, const char *p, size_t n, int *end)
{
    if (PX_IS_H2(k->m->pool->kind)) { /* its SETTINGS ACK and PING answers are not sent */
        return nghttp2_session_mem_recv(k->ng, (const uint8_t *)p, n) < 0 ? -1 : 0;
    }
    if (k->m->pool->kind != PX_FCGI) {
        size_t room = sizeof k->in - k->inlen, c = n < room ? n : room;
        memcpy(k->in + k->inlen, p, c);
        k->inlen += c;
        return 0;
    }
    for (size_t off = 0; off < n;) {
        fcgi_piece_t pc;
        long used = fcgi_next(&k->fp, p + off, n - off, &pc);
        if (used < 0)
            return -1;
        off += (size_t)used;
        if (pc.type == FCGI_STDOUT) {
            size_t room = sizeof k->in - k->inlen, c = pc.n < room ? pc.n : room;
            memcpy(k->in + k->inlen, pc.p, c);
            k->inlen += c;
        }
        if (pc.type == FCGI_END_REQUEST)
            *end = 1;
    }
    return 0;
}

/* Connected (or not), the handshake stepped (h2/), the request written: 0,
   1 while the handshake goes on, or -1 after the verdict. */
static int send_out(px_check_t *k)
{
    if (k->connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            verdict(k, 0, strerror(err));
            return -1;
        }
        k->connecting = 0;
    }
    if (k->handshaking) {
        char why[300];
        unsigned want;
        int r = px_tls_handshake(k->ssl, &want, why, sizeof why);
        if (r == GIO_ERR) {
            verdict(k, 0, why);
            return -1;
        }
        if (r == GIO_AGAIN)
            return 1;
        k->handshaking = 0;
    }
    while (k->outoff < k->outlen) {
        unsigned want;
        long n = k->ssl ? px_tls_send(k->ssl, k->out + k->outoff, k->outlen - k->outoff, &want)
                        : send(k->fd, k->out + k->outoff, k->outlen - k->outoff, MSG_NOSIGNAL);
        if ((k->ssl && n == GIO_AGAIN) || (!k->ssl && n < 0 && (errno == EAGAIN || errno == EINTR)))
            break;
        if (n <= 0) {
            verdict(k, 0, "send() failed");
            return -1;
        }
        k->outoff += (size_t)n;
    }
    return 0;
}

static void on_check(watch_t *w, unsigned events)
{
    px_check_t *k = (px_check_t *)w;
    const px_popts_t *o = &k->m->pool->o;
    char why[160];
    int end = 0, st;
    if (!events) {
        verdict(k, 0, "no answer in time (timeout=)");
        return;
    }
    int sent = send_out(k);
    if (sent < 0)
        return;
    if (sent > 0) { /* h2/: the handshake goes on */
        gio_want(k->px->site->loop, k->fd, GIO_READ | GIO_WRITE);
        return;
    }
    for (;;) {
        char buf[4096];
        unsigned want;
        long n = k->ssl ? gio_tls_read(k->ssl, buf, sizeof buf, &want)
                        : gio_read(k->fd, buf, sizeof buf);
        if (n == GIO_AGAIN)
            break;
        if (n <= 0 || take(k, buf, (size_t)n, &end) < 0) { /* the end, an error, garbage */
            end = 1;
            break;
        }
    }
    if ((st = status_of(k, end)) < 0) {
        verdict(k, 0, "no valid answer");
    } else if (st > 0) {
        check_why(k, st, why, sizeof why);
        verdict(k, st >= o->expect_lo && st <= o->expect_hi, why);
    } else {
        gio_want(k->px->site->loop, k->fd, k->outoff < k->outlen ? GIO_WRITE | GIO_READ : GIO_READ);
    }
}

void px_check_start(proxy_t *px, px_member_t *m)
{
    gio_loop_t *l = px->site->loop;
    if (m->check)
        return;
    px_check_t *k = calloc(1, sizeof *k);
    int fd = socket(m->d.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (!k || fd < 0) { /* no memory, no descriptor: no verdict on the backend */
        free(k);
        if (fd >= 0)
            close(fd);
        return;
    }
    k->fd = fd, k->px = px, k->m = m;
    watch_init(&k->w, on_check);
    if (m->pool->kind == PX_H2)
        k->handshaking = (k->ssl = px_tls_new(px->tls, m, fd)) != NULL;
    if ((m->pool->kind == PX_H2 && !k->ssl) || request(k) < 0 || gio_add(l, fd, k) < 0) {
        close(fd);
        nghttp2_session_del(k->ng);
        SSL_free(k->ssl);
        free(k);
        return;
    }
    m->check = k;
    if (connect(fd, (struct sockaddr *)&m->d.addr, m->d.alen) < 0 && errno != EINPROGRESS) {
        char why[96];
        snprintf(why, sizeof why, "connect(): %s", strerror(errno));
        verdict(k, 0, why);
        return;
    }
    k->connecting = 1; /* SO_ERROR says at the first event; 0 when it connected at once */
    gio_set_deadline(l, fd, gio_now(l) + m->pool->o.check_timeout * 1000LL);
    gio_want(l, fd, GIO_WRITE | GIO_READ);
}

void px_check_stop(proxy_t *px, px_member_t *m)
{
    px_check_t *k = m->check;
    if (!k)
        return;
    m->check = NULL;
    gio_close(px->site->loop, k->fd);
    nghttp2_session_del(k->ng);
    SSL_free(k->ssl);
    free(k);
}
