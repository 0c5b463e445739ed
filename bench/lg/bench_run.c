/*
 * bench_run — one worker process of bench: N connections on one gio loop.
 *
 * Each connection slot is a small state machine:
 *
 *   FREE --connect()--> CONNECTING --writable, SO_ERROR 0--> OPEN
 *     ^                      |       \                         |
 *     |                      |        +--> HANDSHAKE (https) --+
 *     +------- failure / timeout / close / server close -------+
 *
 * With an https:// URL a connection passes through HANDSHAKE: the TLS
 * handshake, timed on its own (the "handshake" histogram: full, or resumed
 * with --resume), under the connect timeout.  Requests and responses then go
 * through OpenSSL (lg_tls.h) instead of write and read.
 *
 * An OPEN connection keeps up to `depth` requests in flight.  Requests are
 * written as soon as they are issued (the write is optimistic: write
 * interest is only asked for when the socket buffer is full), and the
 * connection keeps read interest for its whole life, so a keep-alive
 * request-response round costs one read and one write and no epoll_ctl.
 * All connections share one read buffer: the response parser (lg_http.h)
 * keeps its whole state per connection and needs no bytes kept back.
 *
 * With -k the worker first opens all its connections and waits until every
 * worker has (the ramp), so that the measured load is requests on
 * established connections, not a mix with a connection storm the server's
 * accept queue may not absorb; -d and the rates count from the end of it.
 *
 * With --h2 an OPEN connection carries a libnghttp2 client session
 * (lg_h2.h): the preface and SETTINGS leave as soon as the connection is
 * ready (during the ramp with -k), requests are HEADERS frames on up to
 * `depth` (--streams) concurrent streams, and what is read is fed to the
 * session, after which the streams that ended are taken one by one: a
 * response (its latency from its issue or due time, as with HTTP/1.1) or a
 * loss (rst, goaway, parse), and the freed slots are refilled at once.
 * Over TLS the server must pick h2 by ALPN, and on h2c it must not answer
 * the preface with HTTP/1.x: otherwise the connection fails as `noh2`.
 * Streams refused by a GOAWAY with NO_ERROR (above its last stream id: the
 * server did not process them, RFC 9113 8.7) are sent again, first in
 * line, on a connection with room, still timed from their first issue (or
 * due) time: a server that closes connections gracefully after N requests
 * costs latency, not errors.
 *
 * Accounting: every request issued is, at the end, either answered (a
 * complete response, any status) or lost (reset, timeout, early close,
 * garbage, a reset stream, a GOAWAY, cut off).  requests == responses +
 * lost always holds.
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "bench_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gio.h"
#include "gio_batch.h"
#include "lg_ftp.h"
#include "lg_http.h"
#include "lg_tls.h"

#define RBUF_SIZE 65536
#define NOT_HTTP_LIMIT 10 /* parse errors without one good response: not an HTTP server */
#define TICK_NS 1000000000LL

enum { C_FREE, C_CONNECTING, C_HANDSHAKE, C_OPEN };

/* ftp://: what a control connection holds beside the HTTP fields it shares. */
typedef struct bftp {
    int dfd;          /* the data connection of the download in progress; -1: none */
    uint8_t phase;    /* LG_FTP_GREET .. LG_FTP_RETR: what the session waits for */
    uint8_t final;    /* the download's closing reply is in (226, or a failure) */
    uint8_t data_eof; /* the data connection has ended (or never began) */
    uint16_t status;  /* the closing reply's code */
    uint64_t body;    /* bytes read on the data connection */
    const char *retr; /* the RETR command of the download (a bench_req_t's) */
    size_t retrlen;
    const lg_addr_t *src; /* -b: the control connection's address; the data one binds it too */
    lg_ftp_reply_t reply;
} bftp_t;

typedef struct bconn {
    int fd;
    uint8_t state;
    uint8_t closing; /* issue nothing more; close once the in-flight requests are answered */
    uint8_t parked;  /* -R: on the idle stack, waiting for a request to fall due */
    uint32_t ring;   /* slot of the oldest in-flight request in sent[] */
    uint32_t inflight;
    uint32_t reqs;    /* requests issued on this connection */
    int64_t t0;       /* when connect() was called (HANDSHAKE: when it began), ns */
    SSL *ssl;         /* https: the TLS session */
    int64_t deadline; /* gio_now() ms when the pending connect/response times out; 0: none */
    int64_t *sent;    /* issue times of the in-flight requests, `depth` slots (HTTP/1.1) */
    lg_h2_t *h2;      /* --h2: the session, while OPEN */
    bftp_t *ftp;      /* ftp://: the session (one per slot, for the whole run) */
    uint8_t goaway;   /* --h2: a goaway error is counted for this connection */
    lg_resp_t resp;
    gio_batch_t out;
} bconn_t;

typedef struct brun {
    const bench_cfg_t *cfg;
    bench_stats_t *st;
    bench_stats_t *all; /* every worker's results: the ramp waits for all of them */
    gio_loop_t *loop;
    bconn_t *c;
    unsigned n;
    unsigned *pend; /* FIFO of slots waiting for their connect() */
    unsigned phead, npend;
    unsigned connecting;
    unsigned handshaking; /* https: connected, handshake not done: no request yet */
    unsigned depth;
    uint64_t limit; /* requests (connects with --connect-only) this worker may start; 0: no limit */
    uint64_t started;
    size_t next_req, next_src;
    int64_t now; /* ns, refreshed for each event */
    int64_t timeout_ms;
    int64_t interval_ns; /* -R: between due times in this worker; 0: closed loop */
    int64_t next_due;    /* -R: when the next request falls due, ns */
    int64_t stop_at;     /* -d: when the run stops, ns; 0: no duration */
    unsigned *idle;      /* -R: stack of open connections with nothing to send */
    unsigned nidle;
    int64_t *retry; /* --h2: ring of the issue times of requests to send again */
    unsigned nretry, rhead, rcap;
    bftp_t *ftps;   /* ftp://: one per slot */
    int no_epsv;    /* ftp://: the server refused EPSV once: PASV from then on */
    unsigned nopen; /* connections OPEN */
    int ramping;    /* connecting only, no requests yet */
    int stopping;   /* start nothing new; finish what is in flight */
    int aborting;   /* drop everything now */
    char *rbuf;
    SSL_CTX *tls;  /* https: the client context */
    char sni[256]; /* https: the name to ask for, if any */
    int have_sni;
} brun_t;

static void conn_start(brun_t *r, bconn_t *c);
static void conn_next(brun_t *r, bconn_t *c);

static int more_work(const brun_t *r)
{
    return !r->stopping && !r->aborting && (!r->limit || r->started < r->limit);
}

/* Is there a request to send: new work, or one a GOAWAY refused (even while stopping)? */
static int any_work(const brun_t *r)
{
    return more_work(r) || (r->nretry && !r->aborting);
}

static void set_fatal(brun_t *r, int why, int e)
{
    bench_stats_fatal(r->st, why, e);
    r->aborting = 1;
}

/* ftp://: close the data connection, if one is open. */
static void ftp_data_close(brun_t *r, bftp_t *f)
{
    if (f->dfd >= 0)
        gio_close_sole(r->loop, f->dfd); /* our own socket, never shared */
    f->dfd = -1;
}

/* ftp://: nothing of a download yet. */
static void ftp_clear(bftp_t *f)
{
    f->final = f->data_eof = 0;
    f->status = 0;
    f->body = 0;
}

/* ftp://: the slot's session is over (its control connection closes). */
static void ftp_reset(brun_t *r, bftp_t *f)
{
    ftp_data_close(r, f);
    f->phase = LG_FTP_GREET;
    ftp_clear(f);
    lg_ftp_reply_start(&f->reply);
}

/*
 * Connections being set up, for the cap on them (cfg->max_connecting).  An
 * FTP login counts too: the server speaks first, so a connection that a full
 * accept queue dropped under SYN cookies (the client saw the handshake end,
 * the server kept nothing) waits for a greeting that never comes; with
 * fewer set-ups at a time than the server's listen backlog (vsftpd's is 32)
 * its queue cannot overflow from us.
 */
static unsigned connecting(const brun_t *r)
{
    return r->connecting + (r->ftps ? r->handshaking : 0);
}

static void pend_push(brun_t *r, bconn_t *c)
{
    r->pend[(r->phead + r->npend++) % r->n] = (unsigned)(c - r->c);
}

static void conn_close(brun_t *r, bconn_t *c)
{
    if (c->state == C_FREE)
        return;
    if (c->state == C_CONNECTING)
        r->connecting--;
    else
        r->nopen--;
    if (c->state == C_HANDSHAKE)
        r->handshaking--;
    lg_tls_free(c->ssl);
    c->ssl = NULL;
    lg_h2_free(c->h2);
    c->h2 = NULL;
    c->goaway = 0;
    if (c->ftp)
        ftp_reset(r, c->ftp);
    gio_close_sole(r->loop, c->fd); /* our own socket, never shared */
    r->st->open--;
    gio_batch_reset(&c->out);
    c->fd = -1;
    c->deadline = 0;
    c->state = C_FREE;
    c->closing = 0;
    c->inflight = 0;
    c->ring = 0;
    c->reqs = 0;
}

/* Count an error, lose what is in flight, close, and open a fresh connection. */
static void conn_fail(brun_t *r, bconn_t *c, int kind)
{
    bench_stats_t *st = r->st;
    st->err[kind]++;
    st->lost += c->inflight;
    conn_close(r, c);
    if ((kind == LG_E_REFUSED || kind == LG_E_CONNECT || kind == LG_E_CTIMEOUT) && !st->connects)
        set_fatal(r, BENCH_UNREACHABLE,
                  kind == LG_E_REFUSED    ? ECONNREFUSED
                  : kind == LG_E_CTIMEOUT ? ETIMEDOUT
                                          : 0);
    if (kind == LG_E_PARSE && !st->responses && st->err[LG_E_PARSE] >= NOT_HTTP_LIMIT)
        set_fatal(r, BENCH_NOT_HTTP, 0);
    if (kind == LG_E_NOH2 && !st->responses) /* a server's ALPN list does not change */
        set_fatal(r, BENCH_NOT_H2, 0);
    conn_next(r, c);
}

/* Arm (something is awaited) or clear the timeout of c; 0 also means "none". */
static void arm(brun_t *r, bconn_t *c, int on)
{
    c->deadline = on ? gio_now(r->loop) + r->timeout_ms : 0;
    gio_set_deadline(r->loop, c->fd, c->deadline);
}

static void set_deadline(brun_t *r, bconn_t *c)
{
    arm(r, c, c->inflight != 0);
}

/*
 * Write what is queued (HTTP/2: and what the session has to send, batch
 * after batch, until the socket is full); -1 if the connection failed (and
 * was replaced).
 */
static int conn_flush(brun_t *r, bconn_t *c)
{
    int why;
    if (bench_flush(r->loop, c->h2, c->ssl, c->fd, &c->out, &why) < 0) {
        conn_fail(r, c, why);
        return -1;
    }
    return 0;
}

/* How many more requests c may have in flight now. */
static unsigned conn_room(const brun_t *r, const bconn_t *c)
{
    if (c->h2)
        return lg_h2_room(c->h2);
    return c->inflight < r->depth ? r->depth - c->inflight : 0;
}

/*
 * ftp://: a download begins with EPSV (PASV once the server refused EPSV);
 * its RETR goes when the data connection is made.
 */
static int ftp_put(bconn_t *c, const bench_req_t *q, int no_epsv)
{
    bftp_t *f = c->ftp;
    f->phase = no_epsv ? LG_FTP_PASV : LG_FTP_EPSV;
    f->retr = q->ka;
    f->retrlen = q->kalen;
    ftp_clear(f);
    return gio_batch_add_buf(&c->out, no_epsv ? "PASV\r\n" : "EPSV\r\n", 6, 0);
}

/* Put request q in c's output (HTTP/1.1, FTP) or session (HTTP/2), issued at t. */
static int conn_put(brun_t *r, bconn_t *c, const bench_req_t *q, int last, int64_t t)
{
    if (c->h2) {
        if (lg_h2_submit(c->h2, q->h2, t) < 0) { /* stream ids used up: a new connection */
            c->closing = 1;
            return 1;
        }
        return 0;
    }
    if (c->ftp ? ftp_put(c, q, r->no_epsv) < 0
               : gio_batch_add_buf(&c->out, last ? q->close : q->ka, last ? q->closelen : q->kalen,
                                   0) < 0) {
        set_fatal(r, BENCH_SYSERR, ENOMEM);
        return -1;
    }
    c->sent[(c->ring + c->inflight) % r->depth] = t;
    return 0;
}

/*
 * Open loop (-R): is a request due?  Only those due before the end of -d: a wakeup that came
 * late (a loaded host) must not issue the ones that fell due after it.
 */
static int due(const brun_t *r)
{
    return !r->interval_ns || (r->next_due <= r->now && (!r->stop_at || r->next_due < r->stop_at));
}

/*
 * Fill the pipeline window with requests; returns how many were issued, -1
 * on failure.  Open loop: only requests that are due, each timed from its
 * due time, so that a server that stalls is charged for the requests it kept
 * us from sending (coordinated omission).
 */
static int conn_issue(brun_t *r, bconn_t *c)
{
    const bench_cfg_t *cfg = r->cfg;
    uint32_t was = c->inflight;
    int added = 0;
    while (conn_room(r, c) && !c->closing && (r->nretry || (more_work(r) && due(r)))) {
        const bench_req_t *q = &cfg->req[cfg->nreq == 1 ? 0 : r->next_req++ % cfg->nreq];
        int last = !cfg->keepalive || (cfg->per_conn && c->reqs + 1 >= cfg->per_conn);
        int retry = r->nretry > 0;
        int64_t t = retry ? r->retry[r->rhead] : r->interval_ns ? r->next_due : r->now;
        int k = conn_put(r, c, q, last, t);
        if (k < 0)
            return -1;
        if (k > 0)
            break;
        c->inflight++;
        c->reqs++;
        r->st->requests++;
        added++;
        if (last)
            c->closing = 1;
        if (retry) { /* counted in `started` when it was first issued */
            r->rhead = (r->rhead + 1) % r->rcap;
            r->nretry--;
        } else {
            r->started++;
            r->next_due += r->interval_ns;
        }
    }
    if (!added)
        return 0;
    if (!was)
        set_deadline(r, c);
    return conn_flush(r, c) < 0 ? -1 : added;
}

/*
 * c has nothing more to send now: with -R, work left and room for a request
 * (HTTP/2: a free stream slot) it waits on the idle stack for the next due
 * request (1); with requests in flight it waits for them (1); otherwise it
 * is closed (0).
 */
static int park(brun_t *r, bconn_t *c)
{
    if (r->interval_ns && more_work(r) && c->state == C_OPEN && !c->closing && conn_room(r, c)) {
        if (!c->parked) {
            c->parked = 1;
            r->idle[r->nidle++] = (unsigned)(c - r->c);
        }
        return 1;
    }
    if (c->inflight)
        return 1;
    conn_close(r, c);
    return 0;
}

/* -R: hand the requests that are due to connections with room for them. */
static void issue_due(brun_t *r)
{
    while (r->nidle && due(r) && more_work(r) && !r->ramping) {
        bconn_t *c = &r->c[r->idle[--r->nidle]];
        c->parked = 0;
        if (c->state == C_OPEN && conn_room(r, c) && !c->closing && conn_issue(r, c) >= 0 &&
            c->state == C_OPEN && conn_room(r, c))
            park(r, c); /* slots left over: it waits for the next due request */
    }
}

static void conn_ready(brun_t *r, bconn_t *c);

/* HANDSHAKE: drive OpenSSL; on success the connection is ready for requests. */
static void conn_handshake(brun_t *r, bconn_t *c)
{
    unsigned want = GIO_READ;
    int k = gio_tls_handshake(c->ssl, &want);
    if (k == GIO_AGAIN) {
        gio_want(r->loop, c->fd, want);
        return;
    }
    if (k < 0) {
        if (!r->st->hs.count && r->st->err[LG_E_TLS] + 1 >= NOT_HTTP_LIMIT)
            set_fatal(r, BENCH_NOT_TLS, EPROTO); /* before conn_fail reconnects */
        conn_fail(r, c, LG_E_TLS);
        return;
    }
    r->handshaking--;
    /* on loopback the server's whole flight may be there already when the
       ClientHello's write returns: the handshake then ends inside the call
       that began it, and r->now is from before it */
    r->now = lg_now_ns();
    lg_hist_add(&r->st->hs, (uint64_t)(r->now - c->t0) / 1000);
    r->st->resumed += lg_tls_resumed(c->ssl);
    if (r->cfg->h2 && !lg_tls_alpn_h2(c->ssl)) { /* the server has no HTTP/2 (or not here) */
        c->state = C_OPEN;
        conn_fail(r, c, LG_E_NOH2);
        return;
    }
    conn_ready(r, c);
}

/* ftp://: the control connection is up: the login (HANDSHAKE) begins with waiting for the 220. */
static void ftp_login_begin(brun_t *r, bconn_t *c)
{
    c->state = C_HANDSHAKE;
    r->handshaking++;
    c->t0 = r->now;
    c->ftp->phase = LG_FTP_GREET;
    gio_want(r->loop, c->fd, GIO_READ);
    arm(r, c, 1);
}

static void conn_established(brun_t *r, bconn_t *c)
{
    bench_stats_t *st = r->st;
    if (c->state == C_CONNECTING)
        r->connecting--;
    lg_hist_add(&st->conn, (uint64_t)(r->now - c->t0) / 1000);
    st->connects++;
    r->nopen++;
    if (c->ftp) {
        ftp_login_begin(r, c);
        return;
    }
    if (r->tls) { /* --connect-only: the handshake is part of connecting */
        c->state = C_HANDSHAKE;
        r->handshaking++;
        c->t0 = r->now;
        if (!(c->ssl = lg_tls_new(r->tls, c->fd, r->have_sni ? r->sni : NULL))) {
            set_fatal(r, BENCH_SYSERR, ENOMEM);
            return;
        }
        arm(r, c, 1);
        conn_handshake(r, c);
        return;
    }
    conn_ready(r, c);
}

static void conn_ready(brun_t *r, bconn_t *c)
{
    c->state = C_OPEN;
    if (r->cfg->connect_only) {
        conn_close(r, c);
        conn_next(r, c);
        return;
    }
    lg_resp_start(&c->resp, r->cfg->head);
    gio_want(r->loop, c->fd, GIO_READ);
    arm(r, c, 0);
    if (r->cfg->h2) { /* the preface and SETTINGS go now, during the ramp too */
        if (!(c->h2 = lg_h2_new(r->depth))) {
            set_fatal(r, BENCH_SYSERR, ENOMEM);
            return;
        }
        if (conn_flush(r, c) < 0)
            return;
    }
    if (r->ramping)
        return; /* requests start when every connection is open */
    int k = conn_issue(r, c);
    if (k == 0)
        park(r, c); /* nothing left to ask (or, with -R, nothing due yet) */
}

static void conn_start(brun_t *r, bconn_t *c)
{
    const bench_cfg_t *cfg = r->cfg;
    if (connecting(r) >= cfg->max_connecting) {
        pend_push(r, c);
        return;
    }
    const lg_addr_t *src = cfg->nsrcs ? &cfg->srcs[r->next_src++ % cfg->nsrcs] : NULL;
    int now;
    r->now = lg_now_ns();
    c->t0 = r->now;
    r->st->attempts++;
    if (cfg->connect_only)
        r->started++;
    int fd = lg_connect(&cfg->url.addr, src, &now);
    if (fd < 0) {
        int e = -fd;
        if (e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS) {
            set_fatal(r, BENCH_SYSERR, e);
            return;
        }
        r->st->err[lg_err_connect(e)]++;
        if (!r->st->connects)
            set_fatal(r, BENCH_UNREACHABLE, e);
        else
            pend_push(r, c); /* retried after the next wait, not in a tight loop */
        return;
    }
    if (gio_add(r->loop, fd, c) < 0) {
        close(fd);
        set_fatal(r, BENCH_SYSERR, errno);
        return;
    }
    c->fd = fd;
    if (c->ftp)
        c->ftp->src = src;
    r->st->open++;
    c->state = C_CONNECTING;
    r->connecting++;
    /* even a connect that completed at once (now == 1) waits for the writable
       report: no recursion through conn_established() -> conn_next() */
    (void)now;
    gio_want(r->loop, fd, GIO_WRITE);
    arm(r, c, 1);
}

/*
 * Slot c is free: reconnect it if there is work left.  Connects in progress
 * will each issue at least one request, so they count against -n already:
 * no connection is made just to be closed unused.
 */
static void conn_next(brun_t *r, bconn_t *c)
{
    unsigned coming = r->connecting + r->handshaking + r->npend;
    if ((more_work(r) && (!r->limit || r->cfg->connect_only || r->started + coming < r->limit)) ||
        (r->nretry > coming && !r->aborting))
        conn_start(r, c);
}

/* A complete response to the request issued (or due) at t. */
static void count_response(brun_t *r, int64_t t, unsigned status, uint64_t body)
{
    bench_stats_t *st = r->st;
    lg_hist_add(&st->lat, (uint64_t)(r->now - t) / 1000);
    st->responses++;
    st->body += body;
    unsigned cls = status / 100;
    st->status[cls <= 5 ? cls : 0]++;
    if (status >= 400)
        st->err[LG_E_STATUS]++;
}

static void response_done(brun_t *r, bconn_t *c)
{
    int64_t t = c->sent[c->ring];
    c->ring = (c->ring + 1) % r->depth;
    c->inflight--;
    count_response(r, t, c->resp.status, c->resp.body);
    if (!lg_resp_keepalive(&c->resp))
        c->closing = 1;
    lg_resp_start(&c->resp, r->cfg->head);
}

/*
 * HTTP/2: requests lost on c with one kind.  A GOAWAY is one error however
 * many streams it refused (as a reset connection is one error however many
 * requests were in flight on it); each reset stream is one.
 */
static void h2_lost(brun_t *r, bconn_t *c, int kind, uint64_t n)
{
    r->st->lost += n;
    if (kind != LG_E_GOAWAY)
        r->st->err[kind] += n;
    else if (!c->goaway)
        r->st->err[kind]++;
    c->goaway |= kind == LG_E_GOAWAY;
}

/* HTTP/2: a request a graceful GOAWAY refused goes out again, timed from t. */
static void h2_retry(brun_t *r, int64_t t)
{
    r->st->requests--; /* issued again later: counted then */
    r->st->retried++;
    r->retry[(r->rhead + r->nretry++) % r->rcap] = t;
}

/* HTTP/2: take the streams that ended; 1 if a response was among them. */
static int h2_ended(brun_t *r, bconn_t *c)
{
    lg_h2_end_t e;
    uint32_t code = 1;
    int done = 0, graceful = lg_h2_goaway(c->h2, &code) && code == 0;
    while (lg_h2_next(c->h2, &e)) {
        c->inflight--;
        if (e.kind < 0) {
            count_response(r, e.t, e.status, e.body);
            done = 1;
        } else if (e.kind == LG_E_GOAWAY && graceful) {
            h2_retry(r, e.t);
        } else {
            h2_lost(r, c, e.kind, 1);
        }
    }
    if (lg_h2_goaway(c->h2, &code)) {
        c->closing = 1; /* no new stream; those in flight below its last id finish */
        if (code != 0)  /* NO_ERROR is a graceful close, like an idle keep-alive one */
            h2_lost(r, c, LG_E_GOAWAY, 0);
    }
    return done;
}

/* HTTP/2: feed n bytes read from c to its session; -1 if the connection was closed. */
static int conn_feed_h2(brun_t *r, bconn_t *c, const char *p, size_t n)
{
    int kind = lg_h2_feed(c->h2, p, n);
    int done = h2_ended(r, c);
    if (kind || (c->inflight && lg_h2_over(c->h2))) {
        conn_fail(r, c, kind ? kind : LG_E_PARSE);
        return -1;
    }
    if ((c->closing && !c->inflight) || lg_h2_over(c->h2)) {
        conn_close(r, c);
        conn_next(r, c);
        return -1;
    }
    if ((done && c->inflight) || (!c->inflight && c->deadline))
        set_deadline(r, c); /* re-armed for the rest, or cleared: nothing is awaited */
    if (!r->ramping) {
        int k = conn_issue(r, c); /* refill the free stream slots */
        if (k < 0)
            return -1;
        if (k == 0 && !park(r, c))
            return -1;
    }
    return conn_flush(r, c); /* SETTINGS and PING acks, WINDOW_UPDATEs */
}

/* ---- ftp:// (lg_ftp.h): login, then per download EPSV, data connect, RETR, 226 ---- */

#define FTP_CMD(s) s, sizeof s - 1

/* Send an FTP command and wait for its reply in `phase`; -1 if the connection failed. */
static int ftp_send(brun_t *r, bconn_t *c, const char *cmd, size_t len, int phase)
{
    if (gio_batch_add_buf(&c->out, cmd, len, 0) < 0) {
        set_fatal(r, BENCH_SYSERR, ENOMEM);
        return -1;
    }
    c->ftp->phase = (uint8_t)phase;
    return conn_flush(r, c);
}

/* TYPE I is accepted: the login is over (timed as the handshake) and downloads may begin. */
static int ftp_ready(brun_t *r, bconn_t *c)
{
    c->ftp->phase = LG_FTP_IDLE;
    r->handshaking--;
    lg_hist_add(&r->st->hs, (uint64_t)(r->now - c->t0) / 1000);
    conn_ready(r, c);
    return c->state == C_OPEN ? 0 : -1; /* conn_ready may have closed it, or failed it */
}

/* Write QUIT and close: the last download of this control connection is done. */
static void ftp_quit(brun_t *r, bconn_t *c)
{
    ssize_t w = write(c->fd, "QUIT\r\n", 6); /* a courtesy: nothing waits for its 221 */
    (void)w;
    conn_close(r, c);
    conn_next(r, c);
}

/*
 * The download is over (its closing reply and the end of its data are both
 * in, or it failed with a 4xx/5xx reply): count it, timed from RETR (or from
 * EPSV if it failed before), then the next one or the end of the session.
 * -1 if the connection was closed.
 */
static int ftp_done(brun_t *r, bconn_t *c)
{
    bftp_t *f = c->ftp;
    ftp_data_close(r, f);
    f->phase = LG_FTP_IDLE;
    int64_t t = c->sent[c->ring];
    c->ring = (c->ring + 1) % r->depth;
    c->inflight--;
    count_response(r, t, f->status, f->body);
    arm(r, c, 0);
    if (c->closing) {
        ftp_quit(r, c);
        return -1;
    }
    int k = conn_issue(r, c);
    if (k < 0)
        return -1;
    if (k == 0) /* the count is reached or we are stopping */
        return park(r, c) ? 0 : -1;
    return 0;
}

/*
 * A 4xx/5xx reply.  In the login it fails the connection (status); a 5xx
 * before any login succeeded ends the run (anonymous downloads are not
 * offered here).  In a download it is the download's outcome, counted like
 * an HTTP 4xx/5xx response: answered, and a status error.
 */
static int ftp_refused(brun_t *r, bconn_t *c, unsigned code)
{
    bftp_t *f = c->ftp;
    if (f->phase <= LG_FTP_TYPE) {
        if (!r->st->hs.count && code >= 500)
            set_fatal(r, BENCH_FTP_LOGIN, (int)code);
        conn_fail(r, c, LG_E_STATUS);
        return -1;
    }
    f->final = f->data_eof = 1;
    f->status = (uint16_t)code;
    return ftp_done(r, c);
}

/* 229 or 227: connect to the port it names, on the control connection's address. */
static int ftp_data_connect(brun_t *r, bconn_t *c, int port)
{
    bftp_t *f = c->ftp;
    if (port <= 0) { /* a 229/227 without a port in it */
        conn_fail(r, c, LG_E_PARSE);
        return -1;
    }
    lg_addr_t a = r->cfg->url.addr;
    lg_addr_set_port(&a, (unsigned)port);
    int now, fd = lg_connect(&a, f->src, &now);
    if (fd < 0) {
        conn_fail(r, c, lg_err_connect(-fd)); /* the download is lost */
        return -1;
    }
    if (gio_add(r->loop, fd, c) < 0) {
        close(fd);
        set_fatal(r, BENCH_SYSERR, errno);
        return -1;
    }
    (void)now; /* completed at once or not, the writable report says */
    f->dfd = fd;
    f->phase = LG_FTP_DATA;
    gio_want(r->loop, fd, GIO_WRITE);
    return 0;
}

/* A complete reply on the control connection; -1 if the connection was closed. */
static int ftp_reply(brun_t *r, bconn_t *c)
{
    bftp_t *f = c->ftp;
    unsigned code = f->reply.code;
    switch (lg_ftp_next(f->phase, code)) {
    case LG_FTP_A_WAIT: return 0;
    case LG_FTP_A_USER: return ftp_send(r, c, FTP_CMD("USER anonymous\r\n"), LG_FTP_USER);
    case LG_FTP_A_PASS: return ftp_send(r, c, FTP_CMD("PASS bench@\r\n"), LG_FTP_PASS);
    case LG_FTP_A_TYPE: return ftp_send(r, c, FTP_CMD("TYPE I\r\n"), LG_FTP_TYPE);
    case LG_FTP_A_READY: return ftp_ready(r, c);
    case LG_FTP_A_PASV:
        r->no_epsv = 1; /* the same server for the whole run: ask once */
        return ftp_send(r, c, FTP_CMD("PASV\r\n"), LG_FTP_PASV);
    case LG_FTP_A_CONNECT:
        return ftp_data_connect(r, c,
                                f->phase == LG_FTP_EPSV
                                    ? lg_ftp_epsv_port(f->reply.text, f->reply.tlen)
                                    : lg_ftp_pasv_port(f->reply.text, f->reply.tlen));
    case LG_FTP_A_DONE:
        f->final = 1;
        f->status = (uint16_t)code;
        return f->data_eof ? ftp_done(r, c) : 0;
    case LG_FTP_A_REFUSED: return ftp_refused(r, c, code);
    case LG_FTP_A_CLOSING: /* an idle session timed out: as an idle keep-alive close */
        conn_close(r, c);
        conn_next(r, c);
        return -1;
    }
    conn_fail(r, c, LG_E_PARSE);
    return -1;
}

/* Parse n bytes read from c's control connection; -1 if the connection was closed. */
static int ftp_feed(brun_t *r, bconn_t *c, const char *p, size_t n)
{
    bftp_t *f = c->ftp;
    size_t off = 0;
    while (off < n) {
        size_t used;
        int k = lg_ftp_reply_parse(&f->reply, p + off, n - off, &used);
        if (k == LG_FTP_BAD) {
            conn_fail(r, c, LG_E_PARSE);
            return -1;
        }
        off += used;
        if (k == LG_FTP_MORE)
            break;
        if (ftp_reply(r, c) < 0)
            return -1;
        lg_ftp_reply_start(&f->reply);
    }
    return 0;
}

/* Read the data connection to its end; the download is done when the 226 is in too. */
static void ftp_data_read(brun_t *r, bconn_t *c)
{
    bftp_t *f = c->ftp;
    for (;;) {
        ssize_t k = read(f->dfd, r->rbuf, RBUF_SIZE);
        if (k > 0) {
            r->st->bytes += (uint64_t)k;
            f->body += (uint64_t)k;
            if (k < RBUF_SIZE)
                return;
        } else if (k == 0) {
            ftp_data_close(r, f);
            f->data_eof = 1;
            if (f->final)
                ftp_done(r, c);
            return;
        } else if (errno == EAGAIN || errno == EINTR) {
            return;
        } else {
            conn_fail(r, c, lg_err_io(errno));
            return;
        }
    }
}

/* An event on c's data connection: its connect completed (send RETR), or data to read. */
static void ftp_data_event(brun_t *r, bconn_t *c, unsigned ev)
{
    bftp_t *f = c->ftp;
    if (f->phase == LG_FTP_DATA) {
        int e = lg_connect_result(f->dfd);
        if (e) {
            conn_fail(r, c, lg_err_connect(e));
            return;
        }
        gio_want(r->loop, f->dfd, GIO_READ);
        c->sent[c->ring] = r->now; /* the latency counts from RETR */
        arm(r, c, 1);
        ftp_send(r, c, f->retr, f->retrlen, LG_FTP_RETR);
        return;
    }
    if (ev & (GIO_READ | GIO_ERROR | GIO_HANGUP))
        ftp_data_read(r, c);
}

/* Parse n bytes read from c; -1 if the connection was closed. */
static int conn_feed(brun_t *r, bconn_t *c, const char *p, size_t n)
{
    if (c->h2)
        return conn_feed_h2(r, c, p, n);
    if (c->ftp)
        return ftp_feed(r, c, p, n);
    size_t off = 0;
    int done = 0;
    while (off < n) {
        size_t used;
        if (!c->inflight) { /* bytes nobody asked for */
            conn_fail(r, c, LG_E_PARSE);
            return -1;
        }
        int k = lg_resp_parse(&c->resp, p + off, n - off, &used);
        if (k == LG_HTTP_BAD) {
            conn_fail(r, c, LG_E_PARSE);
            return -1;
        }
        off += used;
        if (k == LG_HTTP_MORE)
            break;
        response_done(r, c);
        done = 1;
    }
    if (!done)
        return 0;
    if (c->inflight) {
        set_deadline(r, c);
        return conn_issue(r, c) < 0 ? -1 : 0; /* refill the pipeline */
    }
    if (c->closing) {
        conn_close(r, c);
        conn_next(r, c);
        return -1;
    }
    int k = conn_issue(r, c);
    if (k < 0)
        return -1;
    if (k == 0) /* the count is reached or we are stopping (-R: nothing due) */
        return park(r, c) ? 0 : -1;
    return 0;
}

static void conn_eof(brun_t *r, bconn_t *c)
{
    if (c->ftp && (c->inflight || c->state == C_HANDSHAKE)) { /* in a login or a download */
        conn_fail(r, c, c->ftp->body || lg_ftp_reply_begun(&c->ftp->reply) ? LG_E_SHORT : LG_E_EOF);
        return;
    }
    if (c->h2 && c->inflight) {
        uint32_t code;
        if (lg_h2_goaway(c->h2, &code)) { /* the streams its GOAWAY did not answer */
            h2_lost(r, c, LG_E_GOAWAY, c->inflight);
            c->inflight = 0;
        } else {
            conn_fail(r, c, lg_h2_begun(c->h2) ? LG_E_SHORT : LG_E_EOF);
            return;
        }
    }
    if (c->inflight) {
        int k = lg_resp_eof(&c->resp);
        if (k == LG_HTTP_DONE)
            response_done(r, c); /* a body delimited by the close */
        if (c->inflight) {
            conn_fail(r, c, k == LG_HTTP_BAD ? LG_E_SHORT : LG_E_EOF);
            return;
        }
    }
    conn_close(r, c); /* an idle keep-alive connection closed by the server: not an error */
    conn_next(r, c);
}

/* https: read what OpenSSL has (it may hold decrypted records after the
   socket is drained); -1 if the connection was closed. */
static int conn_read_tls(brun_t *r, bconn_t *c)
{
    for (;;) {
        unsigned want = GIO_READ;
        long k = gio_tls_read(c->ssl, r->rbuf, RBUF_SIZE, &want);
        if (k > 0) {
            r->st->bytes += (uint64_t)k;
            if (conn_feed(r, c, r->rbuf, (size_t)k) < 0)
                return -1;
        } else if (k == GIO_EOF) {
            conn_eof(r, c);
            return -1;
        } else if (k == GIO_AGAIN) {
            if (want == GIO_WRITE)
                gio_want(r->loop, c->fd, GIO_READ | GIO_WRITE);
            return 0;
        } else {
            conn_fail(r, c, errno == EPROTO ? LG_E_TLS : lg_err_io(errno));
            return -1;
        }
    }
}

/* Read everything there is; -1 if the connection was closed. */
static int conn_read(brun_t *r, bconn_t *c)
{
    if (c->ssl)
        return conn_read_tls(r, c);
    for (;;) {
        ssize_t k = read(c->fd, r->rbuf, RBUF_SIZE);
        if (k > 0) {
            r->st->bytes += (uint64_t)k;
            if (conn_feed(r, c, r->rbuf, (size_t)k) < 0)
                return -1;
            if (k < RBUF_SIZE)
                return 0;
        } else if (k == 0) {
            conn_eof(r, c);
            return -1;
        } else if (errno == EAGAIN || errno == EINTR) {
            return 0;
        } else {
            conn_fail(r, c, lg_err_io(errno));
            return -1;
        }
    }
}

static void on_event(brun_t *r, bconn_t *c, int fd, unsigned ev)
{
    r->now = lg_now_ns();
    if (fd != c->fd) { /* an FTP data connection (its cookie is its control connection's) */
        if (c->ftp && fd == c->ftp->dfd)
            ftp_data_event(r, c, ev);
        return;
    }
    if (c->state == C_CONNECTING) {
        int e = lg_connect_result(c->fd);
        if (e)
            conn_fail(r, c, lg_err_connect(e));
        else
            conn_established(r, c);
        return;
    }
    if (c->state == C_HANDSHAKE && !c->ftp) { /* an FTP login reads replies like OPEN */
        conn_handshake(r, c);
        return;
    }
    if ((ev & (GIO_READ | GIO_ERROR | GIO_HANGUP)) && conn_read(r, c) < 0)
        return;
    if (ev & GIO_WRITE)
        conn_flush(r, c);
}

static void on_timeout(brun_t *r, bconn_t *c, int fd)
{
    r->now = lg_now_ns();
    if (fd != c->fd) /* only control connections have deadlines: a stale expiry */
        return;
    /* an expiry gio collected before this round's events re-armed or cleared
       the deadline is stale: put the current deadline back and go on */
    if (!c->deadline || gio_now(r->loop) < c->deadline) {
        gio_set_deadline(r->loop, c->fd, c->deadline);
        return;
    }
    c->deadline = 0;
    if (c->state == C_CONNECTING || c->state == C_HANDSHAKE) {
        conn_fail(r, c, LG_E_CTIMEOUT);
    } else if (c->inflight) {
        conn_fail(r, c, LG_E_TIMEOUT);
    } else {
        conn_close(r, c);
        conn_next(r, c);
    }
}

static void start_pending(brun_t *r)
{
    unsigned k = r->npend; /* slots pushed back by this pass wait for the next one */
    while (k-- && r->npend && connecting(r) < r->cfg->max_connecting && any_work(r)) {
        unsigned i = r->pend[r->phead];
        r->phead = (r->phead + 1) % r->n;
        r->npend--;
        conn_start(r, &r->c[i]);
    }
}

/* Start nothing new; close idle connections; in-flight ones finish. */
static void run_stop(brun_t *r)
{
    r->stopping = 1;
    r->npend = 0;
    for (unsigned i = 0; i < r->n; i++)
        if (r->c[i].state == C_OPEN && !r->c[i].inflight)
            conn_close(r, &r->c[i]);
}

/* Cut everything off; what is in flight is lost, and so is what waits to be sent again. */
static void run_abort(brun_t *r)
{
    if (r->nretry) {
        r->st->requests += r->nretry;
        r->st->lost += r->nretry;
        r->st->err[LG_E_GOAWAY]++;
        r->nretry = 0;
    }
    for (unsigned i = 0; i < r->n; i++) {
        bconn_t *c = &r->c[i];
        if (c->state == C_FREE)
            continue;
        if (c->inflight) {
            r->st->err[LG_E_ABORT]++;
            r->st->lost += c->inflight;
        }
        conn_close(r, c);
    }
}

static void progress(const brun_t *r, int64_t *last_ns, uint64_t *last_resp)
{
    const bench_stats_t *st = r->st;
    if (r->now - *last_ns < TICK_NS)
        return;
    uint64_t errs = 0;
    for (int k = 0; k < LG_E_NUM; k++)
        errs += st->err[k];
    uint64_t cur = r->cfg->connect_only ? st->connects : st->responses;
    double rate = (double)(cur - *last_resp) * 1e9 / (double)(r->now - *last_ns);
    lg_progress("bench: %5.1fs  %10.0f %s/s  %8d open  %llu errors",
                (double)(r->now - st->start_ns) / 1e9, rate, r->cfg->connect_only ? "conn" : "req",
                st->open, (unsigned long long)errs);
    *last_ns = r->now;
    *last_resp = cur;
}

/* Is every worker done ramping (or finished without)? */
static int all_ramped(const brun_t *r)
{
    for (unsigned i = 0; i < r->cfg->procs; i++)
        if (!__atomic_load_n(&r->all[i].ramped, __ATOMIC_ACQUIRE) &&
            !__atomic_load_n(&r->all[i].finished, __ATOMIC_ACQUIRE))
            return 0;
    return 1;
}

/*
 * Ramp: this worker is ready when no connect is in progress or waiting (all
 * its connections are open, or -n needs no more), or after one timeout (-t)
 * of trying; requests start when all workers are ready.
 * Returns 1 when the ramp just ended: the measurement starts now.
 */
static int ramp_check(brun_t *r, int64_t t0)
{
    bench_stats_t *st = r->st;
    if (!st->ramped && ((!r->connecting && !r->npend && !(r->ftps && r->handshaking)) ||
                        r->stopping || r->aborting || r->now - t0 >= r->timeout_ms * 1000000))
        __atomic_store_n(&st->ramped, 1, __ATOMIC_RELEASE);
    if (!st->ramped || !all_ramped(r))
        return 0;
    r->ramping = 0;
    st->ramp_ns = r->now - t0;
    st->start_ns = r->next_due = r->now;
    r->stop_at = r->cfg->duration ? r->now + (int64_t)(r->cfg->duration * 1e9) : 0;
    for (unsigned i = 0; i < r->n && !r->aborting; i++) {
        bconn_t *c = &r->c[i];
        if (c->state == C_OPEN && !c->inflight && conn_issue(r, c) == 0)
            park(r, c);
    }
    return 1;
}

static int run_setup(brun_t *r, const bench_cfg_t *cfg, unsigned index, bench_stats_t *st)
{
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->all = st;
    r->st = st = &st[index];
    r->ramping = cfg->keepalive && !cfg->connect_only;
    r->n = cfg->conns / cfg->procs + (index < cfg->conns % cfg->procs);
    r->limit = cfg->nreqs ? cfg->nreqs / cfg->procs + (index < cfg->nreqs % cfg->procs) : 0;
    r->depth = !cfg->keepalive || cfg->connect_only ? 1 : cfg->h2 ? cfg->streams : cfg->depth;
    r->timeout_ms = (int64_t)(cfg->timeout * 1000);
    if (r->timeout_ms < 1)
        r->timeout_ms = 1;
    r->next_src = index; /* workers start at different addresses */
    r->next_req = index;
    r->c = calloc(r->n, sizeof *r->c);
    r->pend = calloc(r->n, sizeof *r->pend);
    r->idle = calloc(r->n, sizeof *r->idle);
    if (cfg->rate > 0) {
        r->interval_ns = (int64_t)(1e9 * cfg->procs / cfg->rate);
        if (r->interval_ns < 1)
            r->interval_ns = 1;
    }
    int64_t *sent = calloc((size_t)r->n * r->depth, sizeof *sent);
    if (cfg->h2) /* every request in flight at once could be refused */
        r->retry = calloc(r->rcap = r->n * r->depth, sizeof *r->retry);
    if (cfg->url.ftp)
        r->ftps = calloc(r->n, sizeof *r->ftps);
    r->rbuf = malloc(RBUF_SIZE);
    r->loop = gio_loop_new();
    if (!r->c || !r->pend || !r->idle || !sent || !r->rbuf || !r->loop || (cfg->h2 && !r->retry) ||
        (cfg->url.ftp && !r->ftps)) {
        st->fatal = BENCH_SYSERR;
        st->fatal_errno = errno ? errno : ENOMEM;
        free(sent);
        return -1;
    }
    for (unsigned i = 0; i < r->n; i++) {
        r->c[i].fd = -1;
        r->c[i].sent = sent + (size_t)i * r->depth;
        gio_batch_init(&r->c[i].out);
        if (r->ftps) {
            r->c[i].ftp = &r->ftps[i];
            r->ftps[i].dfd = -1;
        }
    }
    if (cfg->url.tls) { /* one context per worker process, made after the fork */
        char err[256];
        if (!(r->tls = lg_tls_ctx(cfg->resume, cfg->h2, err, sizeof err))) {
            fprintf(stderr, "bench: %s\n", err);
            st->fatal = BENCH_SYSERR;
            st->fatal_errno = ENOMEM;
            return -1;
        }
        r->have_sni = lg_tls_sni(cfg->url.host, r->sni, sizeof r->sni) != NULL;
    }
    return 0;
}

static void run_free(brun_t *r)
{
    if (r->c) {
        for (unsigned i = 0; i < r->n; i++)
            gio_batch_free(&r->c[i].out);
        free(r->c[0].sent);
    }
    free(r->c);
    free(r->pend);
    free(r->idle);
    free(r->retry);
    free(r->ftps);
    free(r->rbuf);
    gio_loop_free(r->loop);
    lg_tls_ctx_free(r->tls);
}

int bench_run(const bench_cfg_t *cfg, unsigned index, bench_stats_t *all)
{
    brun_t r;
    bench_stats_t *st = &all[index];
    if (run_setup(&r, cfg, index, all) < 0) {
        run_free(&r);
        st->finished = 1;
        return st->fatal;
    }
    int64_t t0 = r.now = st->start_ns = r.next_due = lg_now_ns();
    int64_t dur = (int64_t)(cfg->duration * 1e9);
    r.stop_at = dur ? t0 + dur : 0;
    int64_t cap_at = t0 + (int64_t)(cfg->hardcap * 1e9);
    int64_t last_ns = t0;
    uint64_t last_resp = 0;
    int signals = 0;

    for (unsigned i = 0; i < r.n && !r.aborting; i++)
        conn_next(&r, &r.c[i]);
    while (!r.aborting) {
        int wait = 100, nap = 0;
        if (r.interval_ns && r.nidle && !r.ramping) { /* wake for the next due request */
            int64_t ms = (r.next_due - lg_now_ns()) / 1000000;
            wait = ms < 0 ? 0 : ms < 100 ? (int)ms : 100;
            nap = ms == 0;
        }
        int n = gio_wait(r.loop, wait);
        if (n < 0 && errno != EINTR) {
            set_fatal(&r, BENCH_SYSERR, errno);
            break;
        }
        if (n == 0 && nap)
            bench_nap_until(r.next_due);
        int fd;
        unsigned ev;
        while ((fd = gio_next(r.loop, &ev)) >= 0 && !r.aborting)
            on_event(&r, gio_cookie(r.loop, fd), fd, ev);
        while ((fd = gio_next_timeout(r.loop)) >= 0 && !r.aborting)
            on_timeout(&r, gio_cookie(r.loop, fd), fd);
        start_pending(&r);
        r.now = lg_now_ns();
        issue_due(&r);
        if (r.ramping && ramp_check(&r, t0)) /* it moved r.stop_at to the end of the ramp */
            last_ns = r.now;
        if (lg_signals != signals) {
            if (signals || r.stopping)
                r.aborting = 1; /* a second signal: stop waiting for the stragglers */
            signals = lg_signals;
        }
        /* -d counts from the end of the ramp, however long the ramp took (at most -t) */
        if (!r.stopping && (signals || (r.stop_at && !r.ramping && r.now >= r.stop_at))) {
            bench_stats_window(r.st, r.now);
            run_stop(&r);
        } else if (!r.stopping && r.limit && r.started >= r.limit) {
            run_stop(&r);
        }
        if (r.now >= cap_at)
            r.aborting = 1;
        if (!st->open && !r.npend && (r.stopping || !any_work(&r)))
            break;
        if (cfg->progress)
            progress(&r, &last_ns, &last_resp);
    }
    if (cfg->progress)
        lg_progress_clear();
    run_abort(&r);
    r.now = st->end_ns = lg_now_ns();
    if (!st->win_ns)
        bench_stats_window(r.st, r.now);
    st->finished = 1;
    run_free(&r);
    return st->fatal;
}
