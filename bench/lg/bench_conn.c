/*
 * bench_conn — one bench worker's connection slots and its run (see
 * bench_run.c for the state machine): opening a slot (connect, -b's source,
 * the cap on set-ups, the pending FIFO), writing what is queued, closing
 * and failing it, its timeouts, the FTP session's commands and data
 * connection, counting a response or a loss; the run's set-up, progress
 * line, stop, abort and teardown.  Called by bench_run.c only.
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "bench_run_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int brun_more_work(const brun_t *r)
{
    return !r->stopping && !r->aborting && (!r->limit || r->started < r->limit);
}

/* Is there a request to send: new work, or one a GOAWAY refused (even while stopping)? */
int brun_any_work(const brun_t *r)
{
    return brun_more_work(r) || (r->nretry && !r->aborting);
}

void brun_set_fatal(brun_t *r, int why, int e)
{
    bench_stats_fatal(r->st, why, e);
    r->aborting = 1;
}

/* ftp://: close the data connection, if one is open. */
void brun_ftp_data_close(brun_t *r, bftp_t *f)
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
    brun_ftp_data_close(r, f);
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
unsigned brun_connecting(const brun_t *r)
{
    return r->connecting + (r->ftps ? r->handshaking : 0);
}

static void pend_push(brun_t *r, bconn_t *c)
{
    r->pend[(r->phead + r->npend++) % r->n] = (unsigned)(c - r->c);
}

void brun_conn_close(brun_t *r, bconn_t *c)
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
void brun_conn_fail(brun_t *r, bconn_t *c, int kind)
{
    bench_stats_t *st = r->st;
    st->err[kind]++;
    st->lost += c->inflight;
    brun_conn_close(r, c);
    if ((kind == LG_E_REFUSED || kind == LG_E_CONNECT || kind == LG_E_CTIMEOUT) && !st->connects)
        brun_set_fatal(r, BENCH_UNREACHABLE,
                  kind == LG_E_REFUSED    ? ECONNREFUSED
                  : kind == LG_E_CTIMEOUT ? ETIMEDOUT
                                          : 0);
    if (kind == LG_E_PARSE && !st->responses && st->err[LG_E_PARSE] >= NOT_HTTP_LIMIT)
        brun_set_fatal(r, BENCH_NOT_HTTP, 0);
    if (kind == LG_E_NOH2 && !st->responses) /* a server's ALPN list does not change */
        brun_set_fatal(r, BENCH_NOT_H2, 0);
    brun_conn_next(r, c);
}

/* Arm (something is awaited) or clear the timeout of c; 0 also means "none". */
void brun_arm(brun_t *r, bconn_t *c, int on)
{
    c->deadline = on ? gio_now(r->loop) + r->timeout_ms : 0;
    gio_set_deadline(r->loop, c->fd, c->deadline);
}

void brun_set_deadline(brun_t *r, bconn_t *c)
{
    brun_arm(r, c, c->inflight != 0);
}

/*
 * Write what is queued (HTTP/2: and what the session has to send, batch
 * after batch, until the socket is full); -1 if the connection failed (and
 * was replaced).
 */
int brun_conn_flush(brun_t *r, bconn_t *c)
{
    int why;
    if (bench_flush(r->loop, c->h2, c->ssl, c->fd, &c->out, &why) < 0) {
        brun_conn_fail(r, c, why);
        return -1;
    }
    return 0;
}

/* How many more requests c may have in flight now. */
unsigned brun_conn_room(const brun_t *r, const bconn_t *c)
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
int brun_conn_put(brun_t *r, bconn_t *c, const bench_req_t *q, int last, int64_t t)
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
        brun_set_fatal(r, BENCH_SYSERR, ENOMEM);
        return -1;
    }
    c->sent[(c->ring + c->inflight) % r->depth] = t;
    return 0;
}

/*
 * Open loop (-R): is a request due?  Only those due before the end of -d: a wakeup that came
 * late (a loaded host) must not issue the ones that fell due after it.
 */
int brun_due(const brun_t *r)
{
    return !r->interval_ns || (r->next_due <= r->now && (!r->stop_at || r->next_due < r->stop_at));
}

/*
 * c has nothing more to send now: with -R, work left and room for a request
 * (HTTP/2: a free stream slot) it waits on the idle stack for the next due
 * request (1); with requests in flight it waits for them (1); otherwise it
 * is closed (0).
 */
int brun_park(brun_t *r, bconn_t *c)
{
    if (r->interval_ns && brun_more_work(r) && c->state == C_OPEN && !c->closing &&
        brun_conn_room(r, c)) {
        if (!c->parked) {
            c->parked = 1;
            r->idle[r->nidle++] = (unsigned)(c - r->c);
        }
        return 1;
    }
    if (c->inflight)
        return 1;
    brun_conn_close(r, c);
    return 0;
}

/* ftp://: the control connection is up: the login (HANDSHAKE) begins with waiting for the 220. */
void brun_ftp_login_begin(brun_t *r, bconn_t *c)
{
    c->state = C_HANDSHAKE;
    r->handshaking++;
    c->t0 = r->now;
    c->ftp->phase = LG_FTP_GREET;
    gio_want(r->loop, c->fd, GIO_READ);
    brun_arm(r, c, 1);
}

void brun_conn_start(brun_t *r, bconn_t *c)
{
    const bench_cfg_t *cfg = r->cfg;
    if (brun_connecting(r) >= cfg->max_connecting) {
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
            brun_set_fatal(r, BENCH_SYSERR, e);
            return;
        }
        r->st->err[lg_err_connect(e)]++;
        if (!r->st->connects)
            brun_set_fatal(r, BENCH_UNREACHABLE, e);
        else
            pend_push(r, c); /* retried after the next wait, not in a tight loop */
        return;
    }
    if (gio_add(r->loop, fd, c) < 0) {
        close(fd);
        brun_set_fatal(r, BENCH_SYSERR, errno);
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
    brun_arm(r, c, 1);
}

/*
 * Slot c is free: reconnect it if there is work left.  Connects in progress
 * will each issue at least one request, so they count against -n already:
 * no connection is made just to be closed unused.
 */
void brun_conn_next(brun_t *r, bconn_t *c)
{
    unsigned coming = r->connecting + r->handshaking + r->npend;
    if ((brun_more_work(r) &&
         (!r->limit || r->cfg->connect_only || r->started + coming < r->limit)) ||
        (r->nretry > coming && !r->aborting))
        brun_conn_start(r, c);
}

/* A complete response to the request issued (or due) at t. */
void brun_count_response(brun_t *r, int64_t t, unsigned status, uint64_t body)
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

void brun_response_done(brun_t *r, bconn_t *c)
{
    int64_t t = c->sent[c->ring];
    c->ring = (c->ring + 1) % r->depth;
    c->inflight--;
    brun_count_response(r, t, c->resp.status, c->resp.body);
    if (!lg_resp_keepalive(&c->resp))
        c->closing = 1;
    lg_resp_start(&c->resp, r->cfg->head);
}

/*
 * HTTP/2: requests lost on c with one kind.  A GOAWAY is one error however
 * many streams it refused (as a reset connection is one error however many
 * requests were in flight on it); each reset stream is one.
 */
void brun_h2_lost(brun_t *r, bconn_t *c, int kind, uint64_t n)
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
int brun_h2_ended(brun_t *r, bconn_t *c)
{
    lg_h2_end_t e;
    uint32_t code = 1;
    int done = 0, graceful = lg_h2_goaway(c->h2, &code) && code == 0;
    while (lg_h2_next(c->h2, &e)) {
        c->inflight--;
        if (e.kind < 0) {
            brun_count_response(r, e.t, e.status, e.body);
            done = 1;
        } else if (e.kind == LG_E_GOAWAY && graceful) {
            h2_retry(r, e.t);
        } else {
            brun_h2_lost(r, c, e.kind, 1);
        }
    }
    if (lg_h2_goaway(c->h2, &code)) {
        c->closing = 1; /* no new stream; those in flight below its last id finish */
        if (code != 0)  /* NO_ERROR is a graceful close, like an idle keep-alive one */
            brun_h2_lost(r, c, LG_E_GOAWAY, 0);
    }
    return done;
}

/* Send an FTP command and wait for its reply in `phase`; -1 if the connection failed. */
int brun_ftp_send(brun_t *r, bconn_t *c, const char *cmd, size_t len, int phase)
{
    if (gio_batch_add_buf(&c->out, cmd, len, 0) < 0) {
        brun_set_fatal(r, BENCH_SYSERR, ENOMEM);
        return -1;
    }
    c->ftp->phase = (uint8_t)phase;
    return brun_conn_flush(r, c);
}

/* Write QUIT and close: the last download of this control connection is done. */
void brun_ftp_quit(brun_t *r, bconn_t *c)
{
    ssize_t w = write(c->fd, "QUIT\r\n", 6); /* a courtesy: nothing waits for its 221 */
    (void)w;
    brun_conn_close(r, c);
    brun_conn_next(r, c);
}

/* 229 or 227: connect to the port it names, on the control connection's address. */
int brun_ftp_data_connect(brun_t *r, bconn_t *c, int port)
{
    bftp_t *f = c->ftp;
    if (port <= 0) { /* a 229/227 without a port in it */
        brun_conn_fail(r, c, LG_E_PARSE);
        return -1;
    }
    lg_addr_t a = r->cfg->url.addr;
    lg_addr_set_port(&a, (unsigned)port);
    int now, fd = lg_connect(&a, f->src, &now);
    if (fd < 0) {
        brun_conn_fail(r, c, lg_err_connect(-fd)); /* the download is lost */
        return -1;
    }
    if (gio_add(r->loop, fd, c) < 0) {
        close(fd);
        brun_set_fatal(r, BENCH_SYSERR, errno);
        return -1;
    }
    (void)now; /* completed at once or not, the writable report says */
    f->dfd = fd;
    f->phase = LG_FTP_DATA;
    gio_want(r->loop, fd, GIO_WRITE);
    return 0;
}

void brun_on_timeout(brun_t *r, bconn_t *c, int fd)
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
        brun_conn_fail(r, c, LG_E_CTIMEOUT);
    } else if (c->inflight) {
        brun_conn_fail(r, c, LG_E_TIMEOUT);
    } else {
        brun_conn_close(r, c);
        brun_conn_next(r, c);
    }
}

void brun_start_pending(brun_t *r)
{
    unsigned k = r->npend; /* slots pushed back by this pass wait for the next one */
    while (k-- && r->npend && brun_connecting(r) < r->cfg->max_connecting && brun_any_work(r)) {
        unsigned i = r->pend[r->phead];
        r->phead = (r->phead + 1) % r->n;
        r->npend--;
        brun_conn_start(r, &r->c[i]);
    }
}

/* Start nothing new; close idle connections; in-flight ones finish. */
void brun_run_stop(brun_t *r)
{
    r->stopping = 1;
    r->st->unsent += bench_unsent(r->next_due, r->interval_ns, r->now, r->stop_at, r->limit,
                                  r->started);
    r->npend = 0;
    for (unsigned i = 0; i < r->n; i++)
        if (r->c[i].state == C_OPEN && !r->c[i].inflight)
            brun_conn_close(r, &r->c[i]);
}

/* Cut everything off; what is in flight is lost, and so is what waits to be sent again. */
void brun_run_abort(brun_t *r)
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
        brun_conn_close(r, c);
    }
}

void brun_progress(const brun_t *r, int64_t *last_ns, uint64_t *last_resp)
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
int brun_all_ramped(const brun_t *r)
{
    for (unsigned i = 0; i < r->cfg->procs; i++)
        if (!__atomic_load_n(&r->all[i].ramped, __ATOMIC_ACQUIRE) &&
            !__atomic_load_n(&r->all[i].finished, __ATOMIC_ACQUIRE))
            return 0;
    return 1;
}

int brun_run_setup(brun_t *r, const bench_cfg_t *cfg, unsigned index, bench_stats_t *st)
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

void brun_run_free(brun_t *r)
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
