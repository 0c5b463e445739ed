/*
 * httpbench_run — one worker of httpbench on one gio loop.
 *
 * The worker does one thing at a time, as the original httpbench did, so
 * that each measured latency is the server's and not our own queueing: the
 * operation in progress is an idle connect, a sample connect or a sample
 * request.  Meanwhile every idle connection already open stays registered
 * for reading, so a server that drops idle connections is seen at once and
 * counted (the original could not notice).  When the operation completes,
 * advance() picks the next: before every -i'th idle connection (counted
 * over all processes) a sample of -s requests, otherwise the next idle
 * connection.
 *
 * https:// URLs: every connect is followed by a TLS handshake (OP_HANDSHAKE,
 * timed in its own histogram; --resume offers the last session), so an idle
 * connection is an idle TLS connection on the server; the client keeps no
 * TLS state for it (what the server sends on it, a session ticket or the
 * close_notify of a timeout, only shows whether it is still there).
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "httpbench_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gio.h"
#include "gio_batch.h"
#include "lg_http.h"
#include "lg_tls.h"

#define RBUF_SIZE 65536
#define GIVE_UP 100 /* consecutive failed connects before giving up */
#define MB 1000000  /* the original's "megabyte" for tput lines */

enum { OP_NONE, OP_IDLE_CONNECT, OP_SAMPLE_CONNECT, OP_SAMPLE_REQ, OP_HANDSHAKE };

typedef struct hb {
    const hb_cfg_t *cfg;
    hb_stats_t *st;
    gio_loop_t *loop;
    char tag_idle, tag_op, tag_ctl; /* their addresses are the gio cookies */
    int op;                         /* what is in progress */
    int fd;           /* its descriptor (the sample connection between requests), or -1 */
    int64_t t0;       /* when it began, ns */
    int64_t deadline; /* gio_now() ms; 0: none */
    lg_resp_t resp;
    gio_batch_t out;
    uint64_t next, last; /* global number of the next idle connection; the end */
    uint64_t limit;      /* sample requests this worker may make; 0: no limit */
    uint64_t src;        /* round robin over the source addresses */
    int sampled;         /* the sample due before `next` is taken */
    int in_sample;
    unsigned k, ok; /* requests of the sample begun, answered */
    uint64_t sum_conn, nconn, sum_req, min_req, max_req;
    unsigned fails; /* consecutive failed connects */
    int started;    /* -P: the parent said go */
    int opened_all; /* every idle connection is open (or we stopped) */
    int stop;
    int64_t hold_until; /* ns; with ctl < 0 */
    int64_t last_progress;
    char *rbuf;
    SSL_CTX *tls; /* https */
    SSL *ssl;     /* the TLS session of fd */
    int hs_for;   /* OP_HANDSHAKE: the connect it completes */
    int64_t t_hs; /* when the handshake began, ns */
    char sni[256];
    int have_sni;
} hb_t;

static void fatal(hb_t *h, int why, int e)
{
    if (!h->st->fatal) {
        h->st->fatal = why;
        h->st->fatal_errno = e;
    }
    h->stop = 1;
}

static void arm(hb_t *h, int on)
{
    h->deadline = on ? gio_now(h->loop) + (int64_t)(h->cfg->timeout * 1000) : 0;
    gio_set_deadline(h->loop, h->fd, h->deadline);
}

static void op_close(hb_t *h)
{
    lg_tls_free(h->ssl);
    h->ssl = NULL;
    if (h->fd >= 0)
        gio_close(h->loop, h->fd);
    gio_batch_reset(&h->out);
    h->fd = -1;
    h->deadline = 0;
    h->op = OP_NONE;
}

static void print_clat(hb_t *h, uint64_t us)
{
    if (h->cfg->json)
        printf("{\"type\":\"clat\",\"conns\":%llu,\"us\":%llu}\n", (unsigned long long)h->next + 1,
               (unsigned long long)us);
    else
        printf("clat %llu\n", (unsigned long long)us);
}

/* Start a connect for op; on an immediate failure the op stays OP_NONE. */
static void op_connect(hb_t *h, int op)
{
    const hb_cfg_t *cfg = h->cfg;
    const lg_addr_t *src = cfg->nsrcs ? &cfg->srcs[h->src++ % cfg->nsrcs] : NULL;
    int now;
    h->t0 = lg_now_ns();
    int fd = lg_connect(&cfg->url.addr, src, &now);
    if (fd < 0) {
        int e = -fd;
        if (e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS)
            fatal(h, HB_SYSERR, e);
        h->st->err[lg_err_connect(e)]++;
        if (++h->fails >= GIVE_UP)
            fatal(h, HB_GAVE_UP, e);
        if (op == OP_SAMPLE_CONNECT)
            h->k++; /* this request of the sample failed */
        return;
    }
    if (gio_add(h->loop, fd, &h->tag_op) < 0) {
        close(fd);
        fatal(h, HB_SYSERR, errno);
        return;
    }
    h->fd = fd;
    h->op = op;
    gio_want(h->loop, fd, GIO_WRITE); /* also when now == 1: one completion path */
    arm(h, 1);
}

static void send_request(hb_t *h)
{
    lg_resp_start(&h->resp, 0);
    if (gio_batch_add_buf(&h->out, h->cfg->req, h->cfg->reqlen, 0) < 0) {
        fatal(h, HB_SYSERR, ENOMEM);
        return;
    }
    h->op = OP_SAMPLE_REQ;
    h->t0 = lg_now_ns();
    h->st->requests++;
    arm(h, 1);
    unsigned want = GIO_WRITE;
    long k = h->ssl ? gio_tls_send(h->ssl, &h->out, 0, &want) : gio_batch_send(&h->out, h->fd, 0);
    if (k == GIO_ERR) {
        int kind = lg_err_io(errno);
        h->st->err[kind]++;
        op_close(h);
        h->k++;
        return;
    }
    gio_want(h->loop, h->fd, gio_batch_done(&h->out) ? GIO_READ : GIO_READ | want);
}

static void connect_failed(hb_t *h, int kind)
{
    int op = h->op;
    h->st->err[kind]++;
    op_close(h);
    if (++h->fails >= GIVE_UP)
        fatal(h, HB_GAVE_UP, 0);
    if (op == OP_SAMPLE_CONNECT)
        h->k++;
    /* an idle connect is retried for the same number by advance() */
}

static void ready(hb_t *h, uint64_t us);

/* OP_HANDSHAKE: drive OpenSSL; then the connect is complete. */
static void handshake(hb_t *h)
{
    unsigned want = GIO_READ;
    int k = gio_tls_handshake(h->ssl, &want);
    if (k == GIO_AGAIN) {
        gio_want(h->loop, h->fd, want);
        return;
    }
    h->op = h->hs_for;
    if (k < 0) {
        connect_failed(h, LG_E_TLS);
        return;
    }
    lg_hist_add(&h->st->hs, (uint64_t)(lg_now_ns() - h->t_hs) / 1000);
    h->st->resumed += lg_tls_resumed(h->ssl);
    ready(h, (uint64_t)(h->t_hs - h->t0) / 1000);
}

static void connected(hb_t *h)
{
    uint64_t us = (uint64_t)(lg_now_ns() - h->t0) / 1000;
    if (h->tls) { /* the TCP connect took us; now the handshake */
        h->t_hs = lg_now_ns();
        if (!(h->ssl = lg_tls_new(h->tls, h->fd, h->have_sni ? h->sni : NULL))) {
            fatal(h, HB_SYSERR, ENOMEM);
            return;
        }
        h->hs_for = h->op;
        h->op = OP_HANDSHAKE;
        handshake(h);
        return;
    }
    ready(h, us);
}

/* The connect (and handshake) of the op in progress is done; us: the connect. */
static void ready(hb_t *h, uint64_t us)
{
    h->fails = 0;
    if (h->op == OP_SAMPLE_CONNECT) {
        lg_hist_add(&h->st->sconn, us);
        h->sum_conn += us;
        h->nconn++;
        send_request(h);
        return;
    }
    lg_hist_add(&h->st->clat, us);
    h->st->opened++;
    print_clat(h, us);
    lg_tls_free(h->ssl); /* the server holds its side; we only watch the socket */
    h->ssl = NULL;
    gio_set_cookie(h->loop, h->fd, &h->tag_idle);
    gio_want(h->loop, h->fd, GIO_READ); /* to see the server drop it */
    gio_set_deadline(h->loop, h->fd, 0);
    h->fd = -1;
    h->deadline = 0;
    h->op = OP_NONE;
    h->next++;
    h->sampled = 0;
}

static void request_failed(hb_t *h, int kind)
{
    h->st->err[kind]++;
    op_close(h);
    h->k++;
    if (kind == LG_E_PARSE && !h->st->responses)
        fatal(h, HB_NOT_HTTP, 0);
}

static void request_done(hb_t *h)
{
    uint64_t us = (uint64_t)(lg_now_ns() - h->t0) / 1000;
    lg_hist_add(&h->st->rlat, us);
    h->st->responses++;
    if (h->resp.status >= 400)
        h->st->err[LG_E_STATUS]++;
    h->sum_req += us;
    if (!h->ok || us < h->min_req)
        h->min_req = us;
    if (us > h->max_req)
        h->max_req = us;
    h->ok++;
    h->k++;
    h->deadline = 0;
    gio_set_deadline(h->loop, h->fd, 0);
    if (!h->cfg->keepalive || !lg_resp_keepalive(&h->resp))
        op_close(h);
    else
        h->op = OP_NONE; /* the connection waits for the next request of the sample */
}

static void read_response(hb_t *h)
{
    for (;;) {
        ssize_t n;
        if (h->ssl) {
            unsigned want = GIO_READ;
            long k = gio_tls_read(h->ssl, h->rbuf, RBUF_SIZE, &want);
            if (k == GIO_AGAIN) {
                if (want == GIO_WRITE)
                    gio_want(h->loop, h->fd, GIO_READ | GIO_WRITE);
                return;
            }
            if (k == GIO_ERR && errno == EPROTO) {
                request_failed(h, LG_E_TLS);
                return;
            }
            n = k == GIO_ERR ? -1 : k;
        } else {
            n = read(h->fd, h->rbuf, RBUF_SIZE);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        }
        if (n < 0) {
            request_failed(h, lg_err_io(errno));
            return;
        }
        if (n == 0) {
            int k = lg_resp_eof(&h->resp);
            if (k == LG_HTTP_DONE)
                request_done(h);
            else
                request_failed(h, k == LG_HTTP_BAD ? LG_E_SHORT : LG_E_EOF);
            return;
        }
        size_t used;
        int k = lg_resp_parse(&h->resp, h->rbuf, (size_t)n, &used);
        if (k == LG_HTTP_BAD || (k == LG_HTTP_DONE && used < (size_t)n)) {
            request_failed(h, LG_E_PARSE); /* garbage, or bytes after the response */
            return;
        }
        if (k == LG_HTTP_DONE) {
            request_done(h);
            return;
        }
    }
}

static void begin_sample(hb_t *h)
{
    h->in_sample = 1;
    h->k = h->ok = 0;
    h->sum_conn = h->nconn = h->sum_req = h->min_req = h->max_req = 0;
}

static void end_sample(hb_t *h)
{
    op_close(h); /* the keep-alive connection of the sample */
    h->in_sample = 0;
    h->sampled = 1;
    h->st->samples++;
    uint64_t c = h->nconn ? h->sum_conn / h->nconn : 0;
    uint64_t r = h->ok ? h->sum_req / h->ok : 0;
    if (h->cfg->json) {
        printf("{\"type\":\"sample\",\"conns\":%llu,\"connect_us\":%llu,\"request_us\":%llu,"
               "\"min_us\":%llu,\"max_us\":%llu,\"ok\":%u,\"failed\":%u}\n",
               (unsigned long long)h->next, (unsigned long long)c, (unsigned long long)r,
               (unsigned long long)h->min_req, (unsigned long long)h->max_req, h->ok, h->k - h->ok);
    } else if (h->ok) {
        printf("sample %llu %llu\n", (unsigned long long)c, (unsigned long long)r);
    }
    if (!h->ok)
        fprintf(stderr, "httpbench: sample at %llu connections: all %u requests failed\n",
                (unsigned long long)h->next, h->k);
}

/* Nothing in progress: start the next operation, or note that all are open. */
static void advance(hb_t *h)
{
    const hb_cfg_t *cfg = h->cfg;
    while (!h->stop) {
        if (h->in_sample) {
            if (h->k < cfg->sample && (!h->limit || h->st->requests < h->limit)) {
                if (h->fd >= 0)
                    send_request(h);
                else
                    op_connect(h, OP_SAMPLE_CONNECT);
                return;
            }
            end_sample(h);
            continue;
        }
        if (h->next >= h->last)
            break;
        if (h->next % cfg->interval == 0 && !h->sampled &&
            (!h->limit || h->st->requests < h->limit)) {
            begin_sample(h);
            continue;
        }
        op_connect(h, OP_IDLE_CONNECT);
        return;
    }
    h->opened_all = 1;
}

static void on_op(hb_t *h, unsigned ev)
{
    if (h->op == OP_HANDSHAKE) {
        handshake(h);
        return;
    }
    if (h->op == OP_IDLE_CONNECT || h->op == OP_SAMPLE_CONNECT) {
        int e = lg_connect_result(h->fd);
        if (e)
            connect_failed(h, lg_err_connect(e));
        else
            connected(h);
        return;
    }
    if (h->op != OP_SAMPLE_REQ) { /* the kept-alive sample connection between requests */
        char c;
        unsigned want;
        if (h->ssl ? gio_tls_read(h->ssl, &c, 1, &want) != GIO_AGAIN /* a ticket is no data */
                   : read(h->fd, &c, 1) != -1 || (errno != EAGAIN && errno != EINTR))
            op_close(h); /* closed (or garbage): the next request reconnects */
        return;
    }
    if (ev & (GIO_READ | GIO_ERROR | GIO_HANGUP))
        read_response(h);
    if (h->op == OP_SAMPLE_REQ && (ev & GIO_WRITE)) {
        unsigned want;
        if ((h->ssl ? gio_tls_send(h->ssl, &h->out, 0, &want)
                    : gio_batch_send(&h->out, h->fd, 0)) == GIO_ERR)
            request_failed(h, lg_err_io(errno));
        else if (gio_batch_done(&h->out))
            gio_want(h->loop, h->fd, GIO_READ);
    }
}

static void on_idle(hb_t *h, int fd)
{
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0 && h->tls)
        return; /* a session ticket, or an alert before the close: the close tells */
    if (n > 0)
        h->st->err[LG_E_PARSE]++; /* the server sent something nobody asked for */
    h->st->dropped++;
    gio_close(h->loop, fd);
}

static void on_ctl(hb_t *h, int fd)
{
    char c;
    ssize_t n = read(fd, &c, 1);
    if (n > 0) {
        h->started = 1;
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        gio_del(h->loop, fd);
        h->stop = 1; /* the parent is done with us */
    }
}

static void on_timeout(hb_t *h, int fd)
{
    if (gio_cookie(h->loop, fd) != &h->tag_op)
        return;
    if (!h->deadline || gio_now(h->loop) < h->deadline) { /* stale expiry */
        gio_set_deadline(h->loop, fd, h->deadline);
        return;
    }
    if (h->op == OP_SAMPLE_REQ)
        request_failed(h, LG_E_TIMEOUT);
    else if (h->op == OP_HANDSHAKE)
        h->op = h->hs_for, connect_failed(h, LG_E_CTIMEOUT);
    else if (h->op != OP_NONE)
        connect_failed(h, LG_E_CTIMEOUT);
}

static void progress(hb_t *h)
{
    int64_t now = lg_now_ns();
    if (now - h->last_progress < 250000000)
        return;
    h->last_progress = now;
    uint64_t errs = 0;
    for (int k = 0; k < LG_E_NUM; k++)
        errs += h->st->err[k];
    lg_progress("httpbench: %llu/%llu connections  %llu samples  %llu dropped  %llu errors",
                (unsigned long long)h->next, (unsigned long long)h->cfg->conns,
                (unsigned long long)h->st->samples, (unsigned long long)h->st->dropped,
                (unsigned long long)errs);
}

/* All open (or stopped): tell the parent, or start the hold time. */
static void opened_all(hb_t *h, int done)
{
    if (h->cfg->progress)
        lg_progress_clear();
    fflush(stdout);
    if (done >= 0) {
        char c = 1;
        if (write(done, &c, 1) != 1)
            h->stop = 1;
    }
    h->hold_until = lg_now_ns() + (int64_t)(h->cfg->hold * 1e9);
}

static void hb_loop(hb_t *h, int ctl, int done, int64_t cap_at)
{
    int signals = lg_signals, reported = 0;
    while (!h->stop) {
        int busy = h->started && h->op == OP_NONE && !h->opened_all;
        if (gio_wait(h->loop, busy ? 0 : 100) < 0 && errno != EINTR) {
            fatal(h, HB_SYSERR, errno);
            break;
        }
        int fd;
        unsigned ev;
        while ((fd = gio_next(h->loop, &ev)) >= 0) {
            void *who = gio_cookie(h->loop, fd);
            if (who == &h->tag_op)
                on_op(h, ev);
            else if (who == &h->tag_idle)
                on_idle(h, fd);
            else if (who == &h->tag_ctl)
                on_ctl(h, fd);
        }
        while ((fd = gio_next_timeout(h->loop)) >= 0)
            on_timeout(h, fd);
        if (lg_signals != signals)
            h->stop = 1;
        int64_t now = lg_now_ns();
        if (now >= cap_at) {
            h->st->timed_out = 1;
            h->stop = 1;
        }
        if (h->started && h->op == OP_NONE && !h->opened_all)
            advance(h);
        if (h->opened_all && !reported) {
            reported = 1;
            opened_all(h, done);
        }
        if (reported && ctl < 0 && now >= h->hold_until)
            break;
        if (h->cfg->progress && h->started && !reported)
            progress(h);
    }
    if (!reported)
        opened_all(h, done);
}

static void hb_close_all(hb_t *h, long maxfd)
{
    op_close(h);
    for (int fd = 0; fd < maxfd; fd++)
        if (gio_cookie(h->loop, fd) == &h->tag_idle)
            gio_close(h->loop, fd);
}

int hb_run(const hb_cfg_t *cfg, uint64_t first, uint64_t last, int ctl, int done, hb_stats_t *st)
{
    hb_t h;
    memset(&h, 0, sizeof h);
    h.cfg = cfg;
    h.st = st;
    h.fd = -1;
    h.next = first;
    h.last = last;
    h.src = first;
    h.started = ctl < 0;
    if (cfg->nreqs) { /* this worker's share of -n, by its share of the connections */
        h.limit = (uint64_t)((double)cfg->nreqs * (double)(last - first) / (double)cfg->conns);
        if (!h.limit)
            h.limit = 1;
    }
    h.rbuf = malloc(RBUF_SIZE);
    h.loop = gio_loop_new();
    gio_batch_init(&h.out);
    st->start_ns = lg_now_ns();
    char err[256];
    if (cfg->url.tls) {
        h.have_sni = lg_tls_sni(cfg->url.host, h.sni, sizeof h.sni) != NULL;
        if (!(h.tls = lg_tls_ctx(cfg->resume, 0, err, sizeof err)))
            fprintf(stderr, "httpbench: %s\n", err);
    }
    if (!h.rbuf || !h.loop || (cfg->url.tls && !h.tls)) {
        fatal(&h, HB_SYSERR, errno ? errno : ENOMEM);
    } else if (ctl >= 0 && (gio_nonblock(ctl) < 0 || gio_add(h.loop, ctl, &h.tag_ctl) < 0)) {
        fatal(&h, HB_SYSERR, errno);
    } else {
        if (ctl >= 0)
            gio_want(h.loop, ctl, GIO_READ);
        hb_loop(&h, ctl, done, st->start_ns + (int64_t)(cfg->duration * 1e9));
    }
    st->end_ns = lg_now_ns();
    if (h.loop) {
        hb_close_all(&h, lg_nofile_raise());
        gio_loop_free(h.loop);
    }
    gio_batch_free(&h.out);
    free(h.rbuf);
    lg_tls_ctx_free(h.tls);
    st->finished = 1;
    return st->fatal;
}

/* ---- throughput mode and the probe ---- */

typedef struct fetch {
    int64_t t_mb; /* when the current megabyte began */
    uint64_t next_mb;
    uint64_t mb;
} fetch_t;

static void tput_lines(const hb_cfg_t *cfg, fetch_t *f, const lg_resp_t *r, int quiet)
{
    if (!(r->flags & LG_RESP_IN_BODY))
        return;
    int64_t now = lg_now_ns();
    if (!f->t_mb) { /* the clock starts with the body, as the original's did */
        f->t_mb = now;
        f->next_mb = MB;
    }
    while (r->body >= f->next_mb) {
        uint64_t us = (uint64_t)(now - f->t_mb) / 1000;
        uint64_t kbps = 1000000000ULL / (us ? us : 1); /* 10^6 bytes in us: kB/s */
        f->mb++;
        if (!quiet && cfg->json)
            printf("{\"type\":\"tput\",\"mb\":%llu,\"kBps\":%llu}\n", (unsigned long long)f->mb,
                   (unsigned long long)kbps);
        else if (!quiet)
            printf("tput %llu\n", (unsigned long long)kbps);
        f->t_mb = now;
        f->next_mb += MB;
    }
}

/* Wait for fd to have `ev` (or an error) within the deadline; 1 ready, 0 timeout, -1 error. */
static int wait_for(gio_loop_t *l, int fd, unsigned ev, int64_t deadline_ns)
{
    gio_want(l, fd, ev);
    for (;;) {
        int64_t left = (deadline_ns - lg_now_ns()) / 1000000;
        if (left <= 0)
            return 0;
        if (gio_wait(l, left > 100 ? 100 : (int)left) < 0 && errno != EINTR)
            return -1;
        if (lg_signals)
            return -1;
        unsigned got;
        int r;
        while ((r = gio_next(l, &got)) >= 0)
            if (r == fd)
                return 1;
    }
}

static int fetch_fail(hb_stats_t *st, int kind, int why, int e)
{
    st->err[kind]++;
    st->fatal = why;
    st->fatal_errno = e;
    return why;
}

/* One read for fetch_body: plain, or through TLS (which may need to wait
   again with nothing for us: -1 with EAGAIN). */
static ssize_t fetch_read(SSL *ssl, int fd, char *buf, size_t len)
{
    if (!ssl)
        return read(fd, buf, len);
    unsigned want;
    long k = gio_tls_read(ssl, buf, len, &want);
    if (k == GIO_AGAIN)
        errno = EAGAIN;
    return k == GIO_AGAIN || k == GIO_ERR ? -1 : k;
}

/* Read the response to its end; HB_OK or the failure. */
static int fetch_body(const hb_cfg_t *cfg, gio_loop_t *l, int fd, SSL *ssl, int quiet,
                      hb_stats_t *st)
{
    char *buf = malloc(RBUF_SIZE);
    lg_resp_t r;
    fetch_t f = {0, 0, 0};
    int rc = HB_OK, fin = 0;
    lg_resp_start(&r, 0);
    while (!fin && buf) {
        int w = wait_for(l, fd, GIO_READ, lg_now_ns() + (int64_t)(cfg->timeout * 1e9));
        if (w <= 0) {
            rc = fetch_fail(st, LG_E_TIMEOUT, HB_UNREACHABLE, ETIMEDOUT);
            break;
        }
        ssize_t n = -1;
        while (!fin && (n = fetch_read(ssl, fd, buf, RBUF_SIZE)) != 0) {
            if (n < 0) {
                if (errno != EAGAIN && errno != EINTR)
                    rc = fetch_fail(st, lg_err_io(errno), HB_UNREACHABLE, errno), fin = 1;
                break;
            }
            size_t used;
            int k = lg_resp_parse(&r, buf, (size_t)n, &used);
            tput_lines(cfg, &f, &r, quiet);
            if (k == LG_HTTP_BAD)
                rc = fetch_fail(st, LG_E_PARSE, HB_NOT_HTTP, 0), fin = 1;
            else if (k == LG_HTTP_DONE)
                fin = 1;
        }
        if (!fin && n == 0) {
            int k = lg_resp_eof(&r);
            if (k == LG_HTTP_BAD || !lg_resp_begun(&r))
                rc = fetch_fail(st, k == LG_HTTP_BAD ? LG_E_SHORT : LG_E_EOF,
                                lg_resp_begun(&r) ? HB_UNREACHABLE : HB_NOT_HTTP, 0);
            tput_lines(cfg, &f, &r, quiet);
            fin = 1;
        }
    }
    if (!buf)
        rc = fetch_fail(st, LG_E_IO, HB_SYSERR, ENOMEM);
    if (rc == HB_OK) {
        st->responses++;
        st->bytes += r.body;
        if (r.status >= 400)
            st->err[LG_E_STATUS]++;
    }
    free(buf);
    return rc;
}

/* https: handshake, send the request, read the body. */
static int fetch_tls(const hb_cfg_t *cfg, gio_loop_t *l, int fd, int quiet, hb_stats_t *st)
{
    char err[256], sni[256];
    SSL_CTX *ctx = lg_tls_ctx(0, 0, err, sizeof err);
    SSL *ssl = ctx ? lg_tls_new(ctx, fd, lg_tls_sni(cfg->url.host, sni, sizeof sni)) : NULL;
    int rc = HB_OK;
    int64_t t0 = lg_now_ns(), deadline = t0 + (int64_t)(cfg->timeout * 1e9);
    if (!ssl) {
        rc = fetch_fail(st, LG_E_IO, HB_SYSERR, ENOMEM);
        goto out;
    }
    for (;;) {
        unsigned want = GIO_READ;
        int k = gio_tls_handshake(ssl, &want);
        if (k == 1)
            break;
        if (k != GIO_AGAIN || wait_for(l, fd, want, deadline) <= 0) {
            rc = fetch_fail(st, k == GIO_AGAIN ? LG_E_CTIMEOUT : LG_E_TLS, HB_UNREACHABLE,
                            k == GIO_AGAIN ? ETIMEDOUT : EPROTO);
            goto out;
        }
    }
    lg_hist_add(&st->hs, (uint64_t)(lg_now_ns() - t0) / 1000);
    gio_batch_t b;
    gio_batch_init(&b);
    gio_batch_add_buf(&b, cfg->req, cfg->reqlen, 0);
    while (!gio_batch_done(&b)) {
        unsigned want;
        long k = gio_tls_send(ssl, &b, 0, &want);
        if (k == GIO_ERR || (k == GIO_AGAIN && wait_for(l, fd, want, deadline) <= 0)) {
            rc = fetch_fail(st, LG_E_IO, HB_UNREACHABLE, errno);
            break;
        }
    }
    gio_batch_free(&b);
    if (rc == HB_OK)
        rc = fetch_body(cfg, l, fd, ssl, quiet, st);
out:
    lg_tls_free(ssl);
    lg_tls_ctx_free(ctx);
    return rc;
}

int hb_fetch(const hb_cfg_t *cfg, int quiet, hb_stats_t *st)
{
    gio_loop_t *l = gio_loop_new();
    int now, rc;
    if (!l)
        return fetch_fail(st, LG_E_IO, HB_SYSERR, errno);
    st->start_ns = lg_now_ns();
    int fd = lg_connect(&cfg->url.addr, cfg->nsrcs ? &cfg->srcs[0] : NULL, &now);
    if (fd < 0) {
        rc = fetch_fail(st, lg_err_connect(-fd), HB_UNREACHABLE, -fd);
    } else if (gio_add(l, fd, NULL) < 0) {
        rc = fetch_fail(st, LG_E_IO, HB_SYSERR, errno);
        close(fd);
        fd = -1;
    } else {
        int w = wait_for(l, fd, GIO_WRITE, st->start_ns + (int64_t)(cfg->timeout * 1e9));
        int e = w > 0 ? lg_connect_result(fd) : w == 0 ? ETIMEDOUT : EINTR;
        if (e) {
            rc = fetch_fail(st, lg_err_connect(e), HB_UNREACHABLE, e);
        } else {
            lg_hist_add(&st->clat, (uint64_t)(lg_now_ns() - st->start_ns) / 1000);
            st->requests++;
            if (cfg->url.tls)
                rc = fetch_tls(cfg, l, fd, quiet, st);
            /* a request of a few hundred bytes fits an empty socket buffer */
            else if (send(fd, cfg->req, cfg->reqlen, MSG_NOSIGNAL) != (ssize_t)cfg->reqlen)
                rc = fetch_fail(st, lg_err_io(errno), HB_UNREACHABLE, errno);
            else
                rc = fetch_body(cfg, l, fd, NULL, quiet, st);
        }
    }
    if (fd >= 0)
        gio_close(l, fd);
    gio_loop_free(l);
    st->end_ns = lg_now_ns();
    st->finished = 1;
    return rc;
}

void hb_stats_init(hb_stats_t *st)
{
    memset(st, 0, sizeof *st);
    lg_hist_init(&st->clat);
    lg_hist_init(&st->sconn);
    lg_hist_init(&st->rlat);
    lg_hist_init(&st->hs);
}

void hb_stats_merge(hb_stats_t *d, const hb_stats_t *s)
{
    d->opened += s->opened;
    d->dropped += s->dropped;
    d->samples += s->samples;
    d->requests += s->requests;
    d->responses += s->responses;
    d->bytes += s->bytes;
    for (int k = 0; k < LG_E_NUM; k++)
        d->err[k] += s->err[k];
    if (s->start_ns && (!d->start_ns || s->start_ns < d->start_ns))
        d->start_ns = s->start_ns;
    if (s->end_ns > d->end_ns)
        d->end_ns = s->end_ns;
    if (!d->fatal && s->fatal) {
        d->fatal = s->fatal;
        d->fatal_errno = s->fatal_errno;
    }
    d->timed_out |= s->timed_out;
    lg_hist_merge(&d->clat, &s->clat);
    lg_hist_merge(&d->sconn, &s->sconn);
    lg_hist_merge(&d->rlat, &s->rlat);
    lg_hist_merge(&d->hs, &s->hs);
    d->resumed += s->resumed;
}
