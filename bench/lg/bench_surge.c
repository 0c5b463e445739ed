/*
 * bench_surge — bench --surge: a Slashdotting as a site sees it today.  Visitors
 * arrive open loop at a set rate (cfg->surge per second over all processes,
 * evenly spaced); each opens a new connection (TLS with ALPN h2 on https://,
 * prior knowledge on http://), fetches the page (cfg->req[0]), then all its
 * assets (cfg->req[1..]) at once on the same connection as a browser does
 * (--streams caps how many are in flight, the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS too), and leaves: the connection is closed
 * after the last byte of the last asset.
 *
 * A visitor's slot is a small state machine:
 *
 *   FREE --arrival, connect()--> CONNECTING --> HANDSHAKE (https) --> OPEN --> FREE
 *     ^                               |             ^                  |
 *     |                               +--> EARLY ---+                  |
 *     +--------------- failure, timeout, or the page loaded -----------+
 *
 * EARLY (--early-data): a returning visitor whose session allows early data
 * sends the preface, SETTINGS and the page's HEADERS with its ClientHello
 * (TLS 1.3 0-RTT); they stay in its output until the handshake says whether
 * the server took them, and go again after it if not.
 *
 * The page-load time runs from the visitor's arrival (its due time: connect()
 * is called then, unless every slot was busy or the generator was late, which
 * is counted as `late`) to the last byte of the last response, so a server
 * that falls behind is charged for the visitors it kept waiting (no
 * coordinated omission).  A share cfg->returning of the visitors (every
 * second one at 0.5) offers the last TLS session the server handed out; the
 * handshake counts as resumed only if OpenSSL says it was (SSL_session_reused).
 *
 * Each visitor ends once: a page load (every response below 400: its time goes
 * into the lat histogram), or one error of the first kind that ended it
 * (err[]: connect, TLS, h2, status, timeout kinds).  -t is the deadline of the
 * whole page load from arrival.  Arrivals stop at -d; those due before then
 * that never found a free slot (-c visitors in progress per run) are counted
 * as unstarted.  Visitors still in progress at the hard cap -T are cut off
 * (abort).  So every run ends by itself, with bounded counts and memory:
 * at most -c connections, one stream slot array per connection.
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "bench_surge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gio.h"
#include "gio_batch.h"
#include "lg_tls.h"

#define RBUF_SIZE 65536
#define NOT_TLS_LIMIT 10     /* TLS failures without one handshake: not an HTTPS server */
#define LATE_NS 1000000      /* a visitor started this much after its arrival is late */
#define TICK_NS 1000000000LL /* progress line */

enum { V_FREE, V_CONNECTING, V_EARLY, V_HANDSHAKE, V_OPEN };

typedef struct visitor {
    int fd;
    uint8_t state;
    uint8_t returning;  /* offers the kept TLS session */
    uint8_t bad_status; /* a response had status >= 400 */
    uint32_t early;     /* bytes sent as early data, still in out (0: none) */
    uint32_t next;      /* the next asset to ask for: 0 until the page is in */
    uint32_t left;      /* responses still to come: the page and every asset */
    uint32_t inflight;  /* streams submitted, not ended */
    int64_t t0;         /* arrival, ns */
    int64_t t1;         /* connect() or the handshake's start, ns */
    int64_t deadline;   /* gio_now() ms of t0 + -t */
    SSL *ssl;
    lg_h2_t *h2;
    gio_batch_t out;
} visitor_t;

typedef struct surge {
    const bench_cfg_t *cfg;
    bench_stats_t *st;
    gio_loop_t *loop;
    visitor_t *v;
    unsigned n;     /* slots: visitors in progress at most */
    unsigned *free; /* stack of free slots */
    unsigned nfree;
    unsigned slots; /* stream slots per session */
    int64_t now, interval_ns, next_due, stop_at, timeout_ns;
    size_t next_src;
    uint64_t seq; /* visitors started: which ones return */
    int stopping, aborting;
    char *rbuf;
    SSL_CTX *tls;
    char sni[256];
    int have_sni;
} surge_t;

static void set_fatal(surge_t *s, int why, int e)
{
    bench_stats_fatal(s->st, why, e);
    s->aborting = 1;
}

static void v_close(surge_t *s, visitor_t *v)
{
    if (v->state == V_FREE)
        return;
    lg_tls_free(v->ssl);
    v->ssl = NULL;
    lg_h2_free(v->h2);
    v->h2 = NULL;
    gio_close_sole(s->loop, v->fd); /* our own socket, never shared */
    gio_batch_reset(&v->out);
    v->fd = -1;
    v->state = V_FREE;
    s->st->open--;
    s->free[s->nfree++] = (unsigned)(v - s->v);
}

/* The visitor failed with `kind`: one error, the streams in flight lost. */
static void v_fail(surge_t *s, visitor_t *v, int kind)
{
    bench_stats_t *st = s->st;
    st->err[kind]++;
    st->lost += v->inflight;
    v->inflight = 0;
    if ((kind == LG_E_REFUSED || kind == LG_E_CONNECT || kind == LG_E_CTIMEOUT) &&
        !st->connects && v->state == V_CONNECTING)
        set_fatal(s, BENCH_UNREACHABLE,
                  kind == LG_E_REFUSED    ? ECONNREFUSED
                  : kind == LG_E_CTIMEOUT ? ETIMEDOUT
                                          : 0);
    if (kind == LG_E_TLS && !st->hs.count && st->err[LG_E_TLS] >= NOT_TLS_LIMIT)
        set_fatal(s, BENCH_NOT_TLS, EPROTO);
    if (kind == LG_E_NOH2 && !st->responses) /* a server's ALPN list does not change */
        set_fatal(s, BENCH_NOT_H2, 0);
    v_close(s, v);
}

/* The last response is in: the page load is done (or failed on a status). */
static void v_done(surge_t *s, visitor_t *v)
{
    if (v->bad_status) {
        s->st->err[LG_E_STATUS]++;
    } else {
        lg_hist_add(&s->st->lat, (uint64_t)(s->now - v->t0) / 1000);
        s->st->pages++;
    }
    v_close(s, v);
}

/* Write what the session has to send, until the socket is full; -1 if v failed. */
static int v_flush(surge_t *s, visitor_t *v)
{
    int why;
    if (bench_flush(s->loop, v->h2, v->ssl, v->fd, &v->out, &why) < 0) {
        v_fail(s, v, why);
        return -1;
    }
    return 0;
}

/* Submit request i (0: the page) on v's session; -1 if it cannot be. */
static int v_submit(surge_t *s, visitor_t *v, uint32_t i)
{
    if (lg_h2_submit(v->h2, s->cfg->req[i].h2, i) < 0)
        return -1;
    v->inflight++;
    s->st->requests++;
    return 0;
}

/* The page is in: ask for the assets, as many at once as the session has room for. */
static int v_assets(surge_t *s, visitor_t *v)
{
    while (v->next && v->next < s->cfg->nreq && lg_h2_room(v->h2)) {
        if (v_submit(s, v, v->next) < 0) {
            v_fail(s, v, LG_E_PARSE);
            return -1;
        }
        v->next++;
    }
    return 0;
}

/* The connection is ready for HTTP/2: the preface, SETTINGS and the page's HEADERS. */
static void v_ready(surge_t *s, visitor_t *v)
{
    v->state = V_OPEN;
    if (!(v->h2 = lg_h2_new(s->slots)) || v_submit(s, v, 0) < 0) {
        set_fatal(s, BENCH_SYSERR, ENOMEM);
        return;
    }
    v_flush(s, v);
}

/* A TLS step's outcome k: 0 when it is done, -1 when it waits for want (watched) or
   failed (the visitor with it). */
static int v_tls_step(surge_t *s, visitor_t *v, int k, unsigned want)
{
    if (k == GIO_AGAIN)
        gio_want(s->loop, v->fd, want);
    else if (k < 0)
        v_fail(s, v, LG_E_TLS);
    return k == GIO_AGAIN || k < 0 ? -1 : 0;
}

static void v_handshake(surge_t *s, visitor_t *v)
{
    v->state = V_HANDSHAKE;
    unsigned want = GIO_READ;
    if (v_tls_step(s, v, gio_tls_handshake(v->ssl, &want), want) < 0)
        return;
    s->now = lg_now_ns(); /* it may have ended inside the call that began it */
    lg_hist_add(&s->st->hs, (uint64_t)(s->now - v->t1) / 1000);
    s->st->resumed += lg_tls_resumed(v->ssl);
    if (!lg_tls_alpn_h2(v->ssl)) { /* the server has no HTTP/2 (or not here) */
        v_fail(s, v, LG_E_NOH2);
        return;
    }
    if (!v->h2) {
        v_ready(s, v);
        return;
    }
    if (lg_tls_early_accepted(v->ssl)) { /* the early bytes arrived: not again */
        gio_batch_consume(&v->out, v->early);
        s->st->early_accepted++;
    }
    v->early = 0;
    v->state = V_OPEN;
    v_flush(s, v);
}

/* EARLY: the session's early data, sent (again, after a full socket) from
   what out holds, then the handshake. */
static void v_early(surge_t *s, visitor_t *v)
{
    unsigned want = GIO_WRITE;
    long n = gio_batch_copy(&v->out, s->rbuf, RBUF_SIZE);
    int k = n == (long)v->early ? lg_tls_write_early(v->ssl, s->rbuf, (size_t)n, &want) : GIO_ERR;
    if (v_tls_step(s, v, k, want) == 0)
        v_handshake(s, v);
}

/* --early-data: a returning visitor whose session allows it puts the
   preface, SETTINGS and the page's HEADERS in early data; 0, or -1 when it
   does not (the handshake comes first, as for any visitor). */
static int v_early_begin(surge_t *s, visitor_t *v)
{
    if (!s->cfg->early || !v->returning || !lg_tls_early_ok(v->ssl))
        return -1;
    long n;
    if (!(v->h2 = lg_h2_new(s->slots)) || v_submit(s, v, 0) < 0 || lg_h2_fill(v->h2, &v->out) < 0 ||
        (n = gio_batch_copy(&v->out, s->rbuf, RBUF_SIZE)) <= 0 || n >= RBUF_SIZE) {
        set_fatal(s, BENCH_SYSERR, ENOMEM);
        return 0;
    }
    v->early = (uint32_t)n;
    v->state = V_EARLY;
    s->st->early_sent++;
    v_early(s, v);
    return 0;
}

static void v_connected(surge_t *s, visitor_t *v)
{
    int e = lg_connect_result(v->fd);
    if (e) {
        v_fail(s, v, lg_err_connect(e));
        return;
    }
    lg_hist_add(&s->st->conn, (uint64_t)(s->now - v->t1) / 1000);
    s->st->connects++;
    if (!s->tls) {
        v_ready(s, v);
        return;
    }
    int offered = 0;
    v->state = V_HANDSHAKE;
    v->t1 = s->now;
    v->ssl = lg_tls_open(s->tls, v->fd, s->have_sni ? s->sni : NULL, v->returning, &offered);
    if (!v->ssl) {
        set_fatal(s, BENCH_SYSERR, ENOMEM);
        return;
    }
    s->st->offered += (uint64_t)offered;
    if (offered && v_early_begin(s, v) == 0)
        return;
    v_handshake(s, v);
}

/* Take the streams that ended; -1 if the visitor is over (done or failed). */
static int v_ended(surge_t *s, visitor_t *v)
{
    bench_stats_t *st = s->st;
    lg_h2_end_t e;
    int lost = -1;
    while (lg_h2_next(v->h2, &e)) {
        v->inflight--;
        if (e.kind >= 0) {
            st->lost++;
            if (lost < 0)
                lost = e.kind;
            continue;
        }
        st->responses++;
        st->body += e.body;
        unsigned cls = e.status / 100;
        st->status[cls <= 5 ? cls : 0]++;
        v->bad_status |= e.status >= 400;
        v->left--;
        if (e.t == 0)
            v->next = 1; /* the page is in: its assets may go */
    }
    if (lost >= 0) {
        v_fail(s, v, lost);
        return -1;
    }
    if (!v->left) {
        v_done(s, v);
        return -1;
    }
    return 0;
}

/* Feed n bytes read from v to its session; -1 if the visitor is over. */
static int v_feed(surge_t *s, visitor_t *v, const char *p, size_t n)
{
    int kind = lg_h2_feed(v->h2, p, n);
    if (v_ended(s, v) < 0)
        return -1;
    uint32_t code;
    if (kind || lg_h2_over(v->h2) || lg_h2_goaway(v->h2, &code)) {
        v_fail(s, v, kind ? kind : lg_h2_over(v->h2) ? LG_E_PARSE : LG_E_GOAWAY);
        return -1;
    }
    if (v_assets(s, v) < 0)
        return -1;
    return v_flush(s, v);
}

static void v_eof(surge_t *s, visitor_t *v)
{
    uint32_t code;
    v_fail(s, v,
           lg_h2_goaway(v->h2, &code) ? LG_E_GOAWAY
           : lg_h2_begun(v->h2)       ? LG_E_SHORT
                                      : LG_E_EOF);
}

/* Read everything there is (TLS: what OpenSSL holds too); -1 if the visitor is over. */
static int v_read(surge_t *s, visitor_t *v)
{
    for (;;) {
        unsigned want = GIO_READ;
        long k = v->ssl ? gio_tls_read(v->ssl, s->rbuf, RBUF_SIZE, &want)
                        : read(v->fd, s->rbuf, RBUF_SIZE);
        if (!v->ssl && k == 0)
            k = GIO_EOF;
        else if (!v->ssl && k < 0 && (errno == EAGAIN || errno == EINTR))
            k = GIO_AGAIN;
        if (k > 0) {
            s->st->bytes += (uint64_t)k;
            if (v_feed(s, v, s->rbuf, (size_t)k) < 0)
                return -1;
        } else if (k == GIO_EOF) {
            v_eof(s, v);
            return -1;
        } else if (k == GIO_AGAIN) {
            if (v->ssl && want == GIO_WRITE)
                gio_want(s->loop, v->fd, GIO_READ | GIO_WRITE);
            return 0;
        } else {
            v_fail(s, v, v->ssl && errno == EPROTO ? LG_E_TLS : lg_err_io(errno));
            return -1;
        }
    }
}

static void on_event(surge_t *s, visitor_t *v, unsigned ev)
{
    s->now = lg_now_ns();
    if (v->state == V_CONNECTING) {
        v_connected(s, v);
        return;
    }
    if (v->state == V_HANDSHAKE) {
        v_handshake(s, v);
        return;
    }
    if (v->state == V_EARLY) {
        v_early(s, v);
        return;
    }
    if ((ev & (GIO_READ | GIO_ERROR | GIO_HANGUP)) && v_read(s, v) < 0)
        return;
    if (ev & GIO_WRITE)
        v_flush(s, v);
}

static void on_timeout(surge_t *s, visitor_t *v)
{
    s->now = lg_now_ns();
    if (v->state == V_FREE)
        return;
    if (gio_now(s->loop) < v->deadline) { /* a stale expiry: put the deadline back */
        gio_set_deadline(s->loop, v->fd, v->deadline);
        return;
    }
    v_fail(s, v, v->state == V_OPEN ? LG_E_TIMEOUT : LG_E_CTIMEOUT);
}

/* A visitor arrives (due at t0): take a free slot and connect. */
static void v_start(surge_t *s, int64_t t0)
{
    const bench_cfg_t *cfg = s->cfg;
    visitor_t *v = &s->v[s->free[--s->nfree]];
    const lg_addr_t *src = cfg->nsrcs ? &cfg->srcs[s->next_src++ % cfg->nsrcs] : NULL;
    bench_stats_t *st = s->st;
    uint64_t k = s->seq++;
    /* visitor k returns when floor((k+1) * share) steps: every second one at 0.5 */
    v->returning = (uint64_t)((double)(k + 1) * cfg->returning) >
                   (uint64_t)((double)k * cfg->returning);
    v->bad_status = 0;
    v->early = 0;
    v->next = v->inflight = 0;
    v->left = (uint32_t)cfg->nreq;
    v->t0 = t0;
    v->t1 = s->now = lg_now_ns();
    st->visitors++;
    st->returning += v->returning;
    if (s->now - t0 > LATE_NS)
        st->late++;
    if (s->now - t0 > st->late_max_ns)
        st->late_max_ns = s->now - t0;
    st->attempts++;
    int now, fd = lg_connect(&cfg->url.addr, src, &now);
    if (fd < 0) {
        int e = -fd;
        s->free[s->nfree++] = (unsigned)(v - s->v);
        if (e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS) {
            set_fatal(s, BENCH_SYSERR, e);
            return;
        }
        st->err[lg_err_connect(e)]++;
        if (!st->connects)
            set_fatal(s, BENCH_UNREACHABLE, e);
        return;
    }
    if (gio_add(s->loop, fd, v) < 0) {
        close(fd);
        s->free[s->nfree++] = (unsigned)(v - s->v);
        set_fatal(s, BENCH_SYSERR, errno);
        return;
    }
    (void)now; /* completed at once or not, the writable report says */
    v->fd = fd;
    v->state = V_CONNECTING;
    st->open++;
    gio_want(s->loop, fd, GIO_WRITE);
    int64_t left_ms = (t0 + s->timeout_ns - s->now) / 1000000;
    v->deadline = gio_now(s->loop) + (left_ms > 0 ? left_ms : 0);
    gio_set_deadline(s->loop, fd, v->deadline);
}

/* Start every visitor due by now, while a slot is free (the others wait, their clock running). */
static void arrivals(surge_t *s)
{
    while (!s->stopping && !s->aborting && s->nfree && s->next_due <= s->now &&
           s->next_due < s->stop_at) {
        v_start(s, s->next_due);
        s->next_due += s->interval_ns;
    }
}

/* -d is over (or a signal came): no more arrivals; those due that never started are counted. */
static void stop(surge_t *s)
{
    bench_stats_t *st = s->st;
    s->stopping = 1;
    st->unstarted += bench_due_before(s->next_due, s->interval_ns, s->now, s->stop_at);
    st->win_responses = st->responses;
    st->win_bytes = st->bytes;
    st->win_connects = st->connects;
    st->win_ns = s->now - st->start_ns;
    if (st->win_ns <= 0)
        st->win_ns = 1;
}

/* The hard cap (or a second signal): what is in progress is cut off. */
static void cut_off(surge_t *s)
{
    for (unsigned i = 0; i < s->n; i++) {
        visitor_t *v = &s->v[i];
        if (v->state == V_FREE)
            continue;
        s->st->err[LG_E_ABORT]++;
        s->st->lost += v->inflight;
        v->inflight = 0;
        v_close(s, v);
    }
}

static int surge_setup(surge_t *s, const bench_cfg_t *cfg, unsigned index, bench_stats_t *all)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->st = &all[index];
    s->n = cfg->conns / cfg->procs + (index < cfg->conns % cfg->procs);
    unsigned assets = (unsigned)cfg->nreq - 1;
    s->slots = assets < 1 ? 1 : assets < cfg->streams ? assets : cfg->streams;
    s->timeout_ns = (int64_t)(cfg->timeout * 1e9);
    s->interval_ns = (int64_t)(1e9 * cfg->procs / cfg->surge);
    if (s->interval_ns < 1)
        s->interval_ns = 1;
    s->next_src = index;
    s->v = calloc(s->n, sizeof *s->v);
    s->free = calloc(s->n, sizeof *s->free);
    s->rbuf = malloc(RBUF_SIZE);
    s->loop = gio_loop_new();
    if (!s->v || !s->free || !s->rbuf || !s->loop) {
        s->st->fatal = BENCH_SYSERR;
        s->st->fatal_errno = errno ? errno : ENOMEM;
        return -1;
    }
    for (unsigned i = 0; i < s->n; i++) {
        s->v[i].fd = -1;
        gio_batch_init(&s->v[i].out);
        s->free[s->nfree++] = s->n - 1 - i;
    }
    if (cfg->url.tls) { /* one context per worker process, made after the fork */
        char err[256];
        if (!(s->tls = lg_tls_ctx(cfg->returning > 0, 1, err, sizeof err)) ||
            (cfg->cafile && lg_tls_verify(s->tls, cfg->cafile, err, sizeof err) < 0)) {
            fprintf(stderr, "bench: %s\n", err);
            s->st->fatal = BENCH_SYSERR;
            s->st->fatal_errno = ENOMEM;
            return -1;
        }
        s->have_sni = lg_tls_sni(cfg->url.host, s->sni, sizeof s->sni) != NULL;
    }
    return 0;
}

static void surge_free(surge_t *s)
{
    if (s->v)
        for (unsigned i = 0; i < s->n; i++)
            gio_batch_free(&s->v[i].out);
    free(s->v);
    free(s->free);
    free(s->rbuf);
    gio_loop_free(s->loop);
    lg_tls_ctx_free(s->tls);
}

static void progress(const surge_t *s, int64_t *last_ns, uint64_t *last)
{
    const bench_stats_t *st = s->st;
    if (s->now - *last_ns < TICK_NS)
        return;
    lg_progress("bench: %5.1fs  %8.0f visitors/s  %6u in progress  %llu pages  %llu errors",
                (double)(s->now - st->start_ns) / 1e9,
                (double)(st->visitors - *last) * 1e9 / (double)(s->now - *last_ns),
                s->n - s->nfree, (unsigned long long)st->pages,
                (unsigned long long)lg_err_sum(st->err));
    *last_ns = s->now;
    *last = st->visitors;
}

/* How long gio_wait() may sleep: until the next arrival (nap: it is within the millisecond). */
static int wait_ms(const surge_t *s, int *nap)
{
    *nap = 0;
    if (s->stopping || !s->nfree)
        return 100; /* a slot frees on an event */
    int64_t ms = (s->next_due - lg_now_ns()) / 1000000;
    *nap = ms == 0;
    return ms < 0 ? 0 : ms < 100 ? (int)ms : 100;
}

static void surge_loop(surge_t *s, int64_t cap_at)
{
    bench_stats_t *st = s->st;
    int64_t last_ns = s->now;
    uint64_t last = 0;
    int signals = 0;
    while (!s->aborting) {
        int nap, n = gio_wait(s->loop, wait_ms(s, &nap));
        if (n < 0 && errno != EINTR) {
            set_fatal(s, BENCH_SYSERR, errno);
            break;
        }
        if (n == 0 && nap)
            bench_nap_until(s->next_due);
        int fd;
        unsigned ev;
        while ((fd = gio_next(s->loop, &ev)) >= 0 && !s->aborting)
            on_event(s, gio_cookie(s->loop, fd), ev);
        while ((fd = gio_next_timeout(s->loop)) >= 0 && !s->aborting)
            on_timeout(s, gio_cookie(s->loop, fd));
        s->now = lg_now_ns();
        arrivals(s);
        if (lg_signals != signals) {
            if (signals || s->stopping)
                s->aborting = 1; /* a second signal: stop waiting for the stragglers */
            signals = lg_signals;
        }
        if (!s->stopping && (signals || s->now >= s->stop_at))
            stop(s);
        if (s->now >= cap_at)
            s->aborting = 1;
        if (s->stopping && s->nfree == s->n)
            break;
        if (s->cfg->progress)
            progress(s, &last_ns, &last);
    }
    (void)st;
}

int bench_surge(const bench_cfg_t *cfg, unsigned index, bench_stats_t *all)
{
    surge_t s;
    bench_stats_t *st = &all[index];
    if (surge_setup(&s, cfg, index, all) < 0) {
        surge_free(&s);
        st->finished = 1;
        return st->fatal;
    }
    /* the workers' arrivals interleave: worker i starts i/procs of an interval later */
    int64_t t0 = s.now = st->start_ns = lg_now_ns();
    s.next_due = t0 + s.interval_ns * index / cfg->procs;
    s.stop_at = t0 + (int64_t)(cfg->duration * 1e9);
    surge_loop(&s, t0 + (int64_t)(cfg->hardcap * 1e9));
    if (cfg->progress)
        lg_progress_clear();
    s.now = lg_now_ns();
    if (!s.stopping)
        stop(&s);
    cut_off(&s);
    st->end_ns = s.now;
    st->finished = 1;
    surge_free(&s);
    return st->fatal;
}
