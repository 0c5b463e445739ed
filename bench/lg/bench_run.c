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
 *
 * This file is the loop's events (reading, parsing, issuing); the slots'
 * and the run's plumbing (opening, writing, closing, failing, timeouts,
 * FTP's commands, set-up and teardown) is bench_conn.c's (bench_run_int.h).
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "bench_run.h"
#include "bench_run_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    while (brun_conn_room(r, c) && !c->closing &&
           (r->nretry || (brun_more_work(r) && brun_due(r)))) {
        const bench_req_t *q = &cfg->req[cfg->nreq == 1 ? 0 : r->next_req++ % cfg->nreq];
        int last = !cfg->keepalive || (cfg->per_conn && c->reqs + 1 >= cfg->per_conn);
        int retry = r->nretry > 0;
        int64_t t = retry ? r->retry[r->rhead] : r->interval_ns ? r->next_due : r->now;
        int k = brun_conn_put(r, c, q, last, t);
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
        brun_set_deadline(r, c);
    return brun_conn_flush(r, c) < 0 ? -1 : added;
}

/* -R: hand the requests that are due to connections with room for them. */
static void issue_due(brun_t *r)
{
    while (r->nidle && brun_due(r) && brun_more_work(r) && !r->ramping) {
        bconn_t *c = &r->c[r->idle[--r->nidle]];
        c->parked = 0;
        if (c->state == C_OPEN && brun_conn_room(r, c) && !c->closing && conn_issue(r, c) >= 0 &&
            c->state == C_OPEN && brun_conn_room(r, c))
            brun_park(r, c); /* slots left over: it waits for the next due request */
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
            brun_set_fatal(r, BENCH_NOT_TLS, EPROTO); /* before conn_fail reconnects */
        brun_conn_fail(r, c, LG_E_TLS);
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
        brun_conn_fail(r, c, LG_E_NOH2);
        return;
    }
    conn_ready(r, c);
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
        brun_ftp_login_begin(r, c);
        return;
    }
    if (r->tls) { /* --connect-only: the handshake is part of connecting */
        c->state = C_HANDSHAKE;
        r->handshaking++;
        c->t0 = r->now;
        if (!(c->ssl = lg_tls_new(r->tls, c->fd, r->have_sni ? r->sni : NULL))) {
            brun_set_fatal(r, BENCH_SYSERR, ENOMEM);
            return;
        }
        brun_arm(r, c, 1);
        conn_handshake(r, c);
        return;
    }
    conn_ready(r, c);
}

static void conn_ready(brun_t *r, bconn_t *c)
{
    c->state = C_OPEN;
    if (r->cfg->connect_only) {
        brun_conn_close(r, c);
        brun_conn_next(r, c);
        return;
    }
    lg_resp_start(&c->resp, r->cfg->head);
    gio_want(r->loop, c->fd, GIO_READ);
    brun_arm(r, c, 0);
    if (r->cfg->h2) { /* the preface and SETTINGS go now, during the ramp too */
        if (!(c->h2 = lg_h2_new(r->depth))) {
            brun_set_fatal(r, BENCH_SYSERR, ENOMEM);
            return;
        }
        if (brun_conn_flush(r, c) < 0)
            return;
    }
    if (r->ramping)
        return; /* requests start when every connection is open */
    int k = conn_issue(r, c);
    if (k == 0)
        brun_park(r, c); /* nothing left to ask (or, with -R, nothing due yet) */
}

/* HTTP/2: feed n bytes read from c to its session; -1 if the connection was closed. */
static int conn_feed_h2(brun_t *r, bconn_t *c, const char *p, size_t n)
{
    int kind = lg_h2_feed(c->h2, p, n);
    int done = brun_h2_ended(r, c);
    if (kind || (c->inflight && lg_h2_over(c->h2))) {
        brun_conn_fail(r, c, kind ? kind : LG_E_PARSE);
        return -1;
    }
    if ((c->closing && !c->inflight) || lg_h2_over(c->h2)) {
        brun_conn_close(r, c);
        brun_conn_next(r, c);
        return -1;
    }
    if ((done && c->inflight) || (!c->inflight && c->deadline))
        brun_set_deadline(r, c); /* re-armed for the rest, or cleared: nothing is awaited */
    if (!r->ramping) {
        int k = conn_issue(r, c); /* refill the free stream slots */
        if (k < 0)
            return -1;
        if (k == 0 && !brun_park(r, c))
            return -1;
    }
    return brun_conn_flush(r, c); /* SETTINGS and PING acks, WINDOW_UPDATEs */
}

/* ---- ftp:// (lg_ftp.h): login, then per download EPSV, data connect, RETR, 226 ---- */

#define FTP_CMD(s) s, sizeof s - 1

/* TYPE I is accepted: the login is over (timed as the handshake) and downloads may begin. */
static int ftp_ready(brun_t *r, bconn_t *c)
{
    c->ftp->phase = LG_FTP_IDLE;
    r->handshaking--;
    lg_hist_add(&r->st->hs, (uint64_t)(r->now - c->t0) / 1000);
    conn_ready(r, c);
    return c->state == C_OPEN ? 0 : -1; /* conn_ready may have closed it, or failed it */
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
    brun_ftp_data_close(r, f);
    f->phase = LG_FTP_IDLE;
    int64_t t = c->sent[c->ring];
    c->ring = (c->ring + 1) % r->depth;
    c->inflight--;
    brun_count_response(r, t, f->status, f->body);
    brun_arm(r, c, 0);
    if (c->closing) {
        brun_ftp_quit(r, c);
        return -1;
    }
    int k = conn_issue(r, c);
    if (k < 0)
        return -1;
    if (k == 0) /* the count is reached or we are stopping */
        return brun_park(r, c) ? 0 : -1;
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
            brun_set_fatal(r, BENCH_FTP_LOGIN, (int)code);
        brun_conn_fail(r, c, LG_E_STATUS);
        return -1;
    }
    f->final = f->data_eof = 1;
    f->status = (uint16_t)code;
    return ftp_done(r, c);
}

/* A complete reply on the control connection; -1 if the connection was closed. */
static int ftp_reply(brun_t *r, bconn_t *c)
{
    bftp_t *f = c->ftp;
    unsigned code = f->reply.code;
    switch (lg_ftp_next(f->phase, code)) {
    case LG_FTP_A_WAIT: return 0;
    case LG_FTP_A_USER: return brun_ftp_send(r, c, FTP_CMD("USER anonymous\r\n"), LG_FTP_USER);
    case LG_FTP_A_PASS: return brun_ftp_send(r, c, FTP_CMD("PASS bench@\r\n"), LG_FTP_PASS);
    case LG_FTP_A_TYPE: return brun_ftp_send(r, c, FTP_CMD("TYPE I\r\n"), LG_FTP_TYPE);
    case LG_FTP_A_READY: return ftp_ready(r, c);
    case LG_FTP_A_PASV:
        r->no_epsv = 1; /* the same server for the whole run: ask once */
        return brun_ftp_send(r, c, FTP_CMD("PASV\r\n"), LG_FTP_PASV);
    case LG_FTP_A_CONNECT:
        return brun_ftp_data_connect(r, c,
                                f->phase == LG_FTP_EPSV
                                    ? lg_ftp_epsv_port(f->reply.text, f->reply.tlen)
                                    : lg_ftp_pasv_port(f->reply.text, f->reply.tlen));
    case LG_FTP_A_DONE:
        f->final = 1;
        f->status = (uint16_t)code;
        return f->data_eof ? ftp_done(r, c) : 0;
    case LG_FTP_A_REFUSED: return ftp_refused(r, c, code);
    case LG_FTP_A_CLOSING: /* an idle session timed out: as an idle keep-alive close */
        brun_conn_close(r, c);
        brun_conn_next(r, c);
        return -1;
    }
    brun_conn_fail(r, c, LG_E_PARSE);
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
            brun_conn_fail(r, c, LG_E_PARSE);
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
            brun_ftp_data_close(r, f);
            f->data_eof = 1;
            if (f->final)
                ftp_done(r, c);
            return;
        } else if (errno == EAGAIN || errno == EINTR) {
            return;
        } else {
            brun_conn_fail(r, c, lg_err_io(errno));
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
            brun_conn_fail(r, c, lg_err_connect(e));
            return;
        }
        gio_want(r->loop, f->dfd, GIO_READ);
        c->sent[c->ring] = r->now; /* the latency counts from RETR */
        brun_arm(r, c, 1);
        brun_ftp_send(r, c, f->retr, f->retrlen, LG_FTP_RETR);
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
            brun_conn_fail(r, c, LG_E_PARSE);
            return -1;
        }
        int k = lg_resp_parse(&c->resp, p + off, n - off, &used);
        if (k == LG_HTTP_BAD) {
            brun_conn_fail(r, c, LG_E_PARSE);
            return -1;
        }
        off += used;
        if (k == LG_HTTP_MORE)
            break;
        brun_response_done(r, c);
        done = 1;
    }
    if (!done)
        return 0;
    if (c->inflight) {
        brun_set_deadline(r, c);
        return conn_issue(r, c) < 0 ? -1 : 0; /* refill the pipeline */
    }
    if (c->closing) {
        brun_conn_close(r, c);
        brun_conn_next(r, c);
        return -1;
    }
    int k = conn_issue(r, c);
    if (k < 0)
        return -1;
    if (k == 0) /* the count is reached or we are stopping (-R: nothing due) */
        return brun_park(r, c) ? 0 : -1;
    return 0;
}

static void conn_eof(brun_t *r, bconn_t *c)
{
    if (c->ftp && (c->inflight || c->state == C_HANDSHAKE)) { /* in a login or a download */
        brun_conn_fail(r, c,
                       c->ftp->body || lg_ftp_reply_begun(&c->ftp->reply) ? LG_E_SHORT : LG_E_EOF);
        return;
    }
    if (c->h2 && c->inflight) {
        uint32_t code;
        if (lg_h2_goaway(c->h2, &code)) { /* the streams its GOAWAY did not answer */
            brun_h2_lost(r, c, LG_E_GOAWAY, c->inflight);
            c->inflight = 0;
        } else {
            brun_conn_fail(r, c, lg_h2_begun(c->h2) ? LG_E_SHORT : LG_E_EOF);
            return;
        }
    }
    if (c->inflight) {
        int k = lg_resp_eof(&c->resp);
        if (k == LG_HTTP_DONE)
            brun_response_done(r, c); /* a body delimited by the close */
        if (c->inflight) {
            brun_conn_fail(r, c, k == LG_HTTP_BAD ? LG_E_SHORT : LG_E_EOF);
            return;
        }
    }
    brun_conn_close(r, c); /* an idle keep-alive connection closed by the server: not an error */
    brun_conn_next(r, c);
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
            brun_conn_fail(r, c, errno == EPROTO ? LG_E_TLS : lg_err_io(errno));
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
            brun_conn_fail(r, c, lg_err_io(errno));
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
            brun_conn_fail(r, c, lg_err_connect(e));
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
        brun_conn_flush(r, c);
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
    if (!st->ramped || !brun_all_ramped(r))
        return 0;
    r->ramping = 0;
    st->ramp_ns = r->now - t0;
    st->start_ns = r->next_due = r->now;
    r->stop_at = r->cfg->duration ? r->now + (int64_t)(r->cfg->duration * 1e9) : 0;
    for (unsigned i = 0; i < r->n && !r->aborting; i++) {
        bconn_t *c = &r->c[i];
        if (c->state == C_OPEN && !c->inflight && conn_issue(r, c) == 0)
            brun_park(r, c);
    }
    return 1;
}

int bench_run(const bench_cfg_t *cfg, unsigned index, bench_stats_t *all)
{
    brun_t r;
    bench_stats_t *st = &all[index];
    if (brun_run_setup(&r, cfg, index, all) < 0) {
        brun_run_free(&r);
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
        brun_conn_next(&r, &r.c[i]);
    while (!r.aborting) {
        int wait = 100, nap = 0;
        if (r.interval_ns && r.nidle && !r.ramping) { /* wake for the next due request */
            int64_t ms = (r.next_due - lg_now_ns()) / 1000000;
            wait = ms < 0 ? 0 : ms < 100 ? (int)ms : 100;
            nap = ms == 0;
        }
        int n = gio_wait(r.loop, wait);
        if (n < 0 && errno != EINTR) {
            brun_set_fatal(&r, BENCH_SYSERR, errno);
            break;
        }
        if (n == 0 && nap)
            bench_nap_until(r.next_due);
        int fd;
        unsigned ev;
        while ((fd = gio_next(r.loop, &ev)) >= 0 && !r.aborting)
            on_event(&r, gio_cookie(r.loop, fd), fd, ev);
        while ((fd = gio_next_timeout(r.loop)) >= 0 && !r.aborting)
            brun_on_timeout(&r, gio_cookie(r.loop, fd), fd);
        brun_start_pending(&r);
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
            brun_run_stop(&r);
        } else if (!r.stopping && r.limit && r.started >= r.limit) {
            brun_run_stop(&r);
        }
        if (r.now >= cap_at)
            r.aborting = 1;
        if (!st->open && !r.npend && (r.stopping || !brun_any_work(&r)))
            break;
        if (cfg->progress)
            brun_progress(&r, &last_ns, &last_resp);
    }
    if (cfg->progress)
        lg_progress_clear();
    brun_run_abort(&r);
    r.now = st->end_ns = lg_now_ns();
    if (!st->win_ns)
        bench_stats_window(r.st, r.now);
    st->finished = 1;
    brun_run_free(&r);
    return st->fatal;
}
