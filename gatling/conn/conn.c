/*
 * The connection state machine: see conn.h for the states, in processing
 * order, and the deadline each waits under.  conn_event() runs the state
 * functions until the state stops changing (the lighttpd pattern, run());
 * each state function does one step and moves on with conn_enter(), which
 * also sets the deadline the new state waits under.  Here: the driver, the
 * connection's life (conn_new, its free), and the answering states HANDLE,
 * DISPATCH (WAIT: a job off the loop), WRITE, STREAM and H2.  The rest is
 * in the parts conn_int.h lists, which never call back up into this file.
 * What is HTTP/1.1 about it (framing, keep-alive, the response's bytes) is
 * h1.c's.
 */
#include "conn.h"
#include "conn_int.h"
#include "gio_os.h"
#include "h1/h1.h"
#include "h2/h2.h"
#include "route/router.h"
#include "site/jobs.h"
#include "site/peerlimits.h"
#include "tls/tls.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void run(conn_t *c, unsigned events);
static void finish_request(conn_t *c);
static void handle_body(conn_t *c);

/* The loop's call (c->w.on). */
static void on_watch(watch_t *w, unsigned events)
{
    conn_event((conn_t *)((char *)w - offsetof(conn_t, w)), events);
}

conn_t *conn_new(conn_set_t *set, site_t *site, int fd, const struct sockaddr *peer,
                 socklen_t plen, unsigned how)
{
    int tls = (how & CONN_NEW_TLS) != 0;
    conn_t *c = calloc(1, sizeof *c);
    if (!c || gio_add(site->loop, fd, &c->w) < 0) {
        free(c);
        close(fd);
        return NULL;
    }
    watch_init(&c->w, on_watch);
    c->fd = fd;
    c->site = site;
    c->set = set;
    if (plen <= sizeof c->peer)
        memcpy(&c->peer, peer, plen);
    gio_batch_init(&c->out);
    gio_want(site->loop, fd, GIO_READ);
    c->tls = (uint8_t)tls;
    c->counted = !(how & CONN_NEW_PROXY);
    if (!tls && c->counted) /* every read is conn_read's; OpenSSL reads HTTPS sockets itself */
        gio_recv_mode(site->loop, fd);
    if (how & CONN_NEW_PROXY) { /* the header is peeked at: not yet (conn_st_proxy) */
        conn_enter(c, CONN_PROXY);
    } else if (c->tls) { /* the SSL object comes with the first byte of a ClientHello */
        conn_enter(c, CONN_HANDSHAKE);
    } else {
        conn_enter(c, CONN_IDLE);
        /* nothing sent yet: the head's time runs from the accept */
        conn_deadline(c, conn_head_ms(c));
    }
    c->next = set->list;
    if (c->next)
        c->next->prev = c;
    set->list = c;
    site->nconns++;
    site->ntls += c->tls;
    return c;
}

static void conn_free(conn_t *c)
{
    conn_unpoke(c);
    if (c->blk && c->blk->h1.ex.job) /* the job runs on: it must not come back to us */
        c->blk->h1.ex.job->ex = NULL;
    if (c->counted)
        limits_conn_close(c->site->limits, &c->peer.sa);
    if (c->ssl) /* not after a fatal error: tls.c made it quiet then */
        tls_close_notify(c->ssl);
    gio_close_sole(c->site->loop, c->fd); /* accept4'ed close-on-exec, never dup'ed */
    gio_batch_free(&c->out);
    h2_free(c->h2); /* after the batch that points into its streams */
    if (c->blk)
        conn_end_exchange(&c->blk->h1.ex);
    conn_block_put(c->set, c->blk);
    if (c->prev)
        c->prev->next = c->next;
    else
        c->set->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->site->nconns--;
    c->site->ntls -= c->tls;
    tls_free(c->ssl);
    free(c);
}

/* HTTP/2: how many frame bytes are queued at once (the bound on a
   connection's output; no input is read while they are queued). */
#define CONN_H2_OUT (256 * 1024)

/*
 * H2: send what is queued; when the batch is empty, let the codec queue
 * more; read only then (a client that does not read its answers cannot make
 * us hold more than CONN_H2_OUT), and hand what came to the codec.  At most
 * CONN_SEND_BUDGET bytes go out per event, as for WRITE: past it the
 * connection waits for the next round of the loop (its socket is still
 * writable, so that round comes at once) and the other clients go first.
 */
static void st_h2(conn_t *c)
{
    char buf[16384];
    int progress = 0;
    uint64_t spent = 0;
    for (;;) {
        if (!gio_batch_done(&c->out)) {
            unsigned want = GIO_WRITE;
            uint64_t budget = CONN_SEND_BUDGET - spent;
            long r = conn_send(c, budget, &want);
            if (r == GIO_ERR) {
                c->state = CONN_CLOSE;
                return;
            }
            progress |= r > 0;
            spent += r > 0 ? (uint64_t)r : 0;
            if (spent >= CONN_SEND_BUDGET) { /* the budget is spent: more next round */
                c->site->stats.h2_yields++;
                conn_h2_wait(c, progress, want); /* the socket is writable still (or TLS's want) */
                return;
            }
            if (!gio_batch_done(&c->out)) {
                conn_h2_wait(c, progress, want);
                return;
            }
        }
        long q = h2_fill(c->h2, CONN_H2_OUT);
        if (q < 0) {
            c->state = CONN_CLOSE;
            return;
        }
        if (q > 0)
            continue;
        if (h2_done(c->h2)) { /* GOAWAY sent, the streams done */
            conn_enter(c, CONN_LINGER);
            return;
        }
        if (!h2_want_read(c->h2))
            break;
        long n = conn_read(c, buf, sizeof buf);
        if (n == GIO_AGAIN)
            break;
        if (n <= 0) {
            c->state = CONN_CLOSE;
            return;
        }
        progress = 1;
        if (c->h2_goaway_due) { /* the drain's first GOAWAY, ahead of the answers to these */
            c->h2_goaway_due = 0;
            h2_goaway(c->h2);
        }
        h2_recv(c->h2, (const uint8_t *)buf, (size_t)n); /* an error queues GOAWAY */
    }
    conn_h2_wait(c, progress, 0);
}

/*
 * HANDLE, a request that came in early data (the handshake not complete):
 * one safe to replay (codec_early_safe) is answered now, before the
 * client's Finished (0.5-RTT); any other is held, nothing of it read on
 * nor dispatched, until the handshake completes (its early data read into
 * the block behind it), then answered as any request (no longer early: a
 * replay cannot complete a handshake).  0: go on; 1: wait (held, or ended).
 */
static int early_request(conn_t *c)
{
    exchange_t *ex = &c->blk->h1.ex;
    status_counters_t *st = &c->site->stats;
    if (!c->early_hold) {
        if (!c->early)
            return 0;
        ex->early_data = 1;
        if (codec_early_safe(ex)) {
            st->early_requests++;
            return 0;
        }
        c->early_hold = 1;
        st->early_held++;
    }
    int r = conn_early_finish(c);
    if (r == GIO_AGAIN) {
        conn_want_input(c); /* under the head's deadline (-s) still */
        return 1;
    }
    c->early_hold = 0;
    ex->early_data = 0;
    if (r < 0) {
        c->state = CONN_CLOSE;
        return 1;
    }
    return 0;
}

/* HANDLE: the codec decides keep-alive and framing; read the body or respond. */
static void st_handle(conn_t *c)
{
    if (c->early_hold) { /* held for the handshake (early_request): it came */
        if (early_request(c) == 0)
            handle_body(c);
        return;
    }
    c->requests++;
    if (limits_request(c->site->limits, &c->peer.sa, gio_now(c->site->loop)) != LIMIT_OK) {
        /* -A: the original's tarpit, or with -T 0 its drop */
        c->site->stats.rate_limited++;
        if (c->site->cfg->timeout)
            conn_enter(c, CONN_TARPIT);
        else
            c->state = CONN_CLOSE;
        return;
    }
    c->unread_input = 0;
    c->out.bytes_sent = 0;
    h1_t *h = &c->blk->h1;
    int st = h1_request(h, &c->blk->req, c->set->draining, c->requests);
    if (st) {
        conn_fail(c, st);
        return;
    }
    if (early_request(c) == 0)
        handle_body(c);
}

/* HANDLE's second half: read the body (or let a producer take it), or respond. */
static void handle_body(conn_t *c)
{
    h1_t *h = &c->blk->h1;
    if (h->body != BODY_NONE) {
        int streams = router_streams(&h->ex); /* a producer takes it: read it as it takes it */
        if (!streams && h1_body_too_large(h)) {
            conn_fail(c, 413);
            return;
        }
        size_t n;
        const char *cont = h1_continue(&c->blk->req, c->inlen > c->reqlen, &n);
        if (cont)
            conn_send_small(c, cont, n); /* tiny, on an idle socket */
        c->blk->moved = 0;
        if (streams)
            c->state = CONN_DISPATCH;
        else
            conn_enter(c, CONN_BODY);
        return;
    }
    c->state = CONN_DISPATCH;
}

static void job_back(exchange_t *ex, int cancelled);

/* DISPATCH: the handler answers, or hands work to a thread and we WAIT. */
static void st_dispatch(conn_t *c)
{
    exchange_t *ex = &c->blk->h1.ex;
    if (router_dispatch(ex) < 0) {
        site_error(c->site, "malloc()", ENOMEM, &c->peer.sa, "a response: client shed");
        c->state = CONN_CLOSE;
        return;
    }
    if (!ex->job) {
        if (ex->producer) {
            conn_enter(c, CONN_STREAM);
            return;
        }
        if (c->blk->h1.body != BODY_NONE) { /* a body meant for a producer: not read */
            c->blk->h1.keepalive = 0;
            c->unread_input = 1;
        }
        conn_enter(c, CONN_WRITE);
        return;
    }
    if (codec_job_send(ex, job_back) == 0) {
        conn_enter(c, CONN_WAIT);
        return;
    }
    site_error(c->site, "jobs_submit()", EAGAIN, &c->peer.sa, "worker threads' queue full: 503");
    if (ex_error(ex, 503, "Retry-After", "1") < 0)
        c->state = CONN_CLOSE;
    else
        conn_enter(c, CONN_WRITE);
}

/* The connection's job is back (codec_job_send): dispatch again; cancelled:
   shutting down. */
static void job_back(exchange_t *ex, int cancelled)
{
    conn_t *c = ex->conn;
    c->state = cancelled ? CONN_CLOSE : CONN_DISPATCH;
    run(c, 0);
}

/* STREAM: what to wait for, and the -B window while the client is waited
   for (bytes queued for it, or its request body); none while only the
   producer is. */
static void stream_wait(conn_t *c, unsigned send_want)
{
    h1_t *h = &c->blk->h1;
    int out = !gio_batch_done(&c->out);
    int body = h->body != BODY_NONE && !h->input_held;
    int in = !h->input_held && !(h->tunnel && h->input_done) && c->inlen < CONN_IN_CAP;
    unsigned want = (out ? send_want : 0) |
                    (in ? (c->ssl && c->tls_want ? c->tls_want : GIO_READ) : 0);
    gio_want(c->site->loop, c->fd, want);
    int busy = out || body;
    if (busy && !c->stream_busy) {
        c->blk->window_at = conn_moved(c);
        conn_deadline(c, conn_window_ms(c));
    } else if (!busy && c->stream_busy) {
        conn_deadline(c, 0);
    }
    c->stream_busy = (uint8_t)busy;
}

/* STREAM: a producer answers (exchange.h).  Its body goes out as it comes;
   it hears when what is queued fell below EX_STREAM_LOW; the exchange ends
   when its body is complete and sent. */
static void st_stream(conn_t *c, unsigned events)
{
    h1_t *h = &c->blk->h1;
    unsigned want = GIO_WRITE;
    if (h->redispatch) { /* a local redirect, before any of a response: route it again */
        h->redispatch = 0;
        c->state = CONN_DISPATCH;
        return;
    }
    /* output first when the socket said writable: on uring that is a send's
       completion, and its bytes must count before an end of input read
       next is logged (the client that got the whole body and closed) */
    if (events & GIO_ERROR || ((events & GIO_WRITE) && conn_stream_send(c, &want) < 0) ||
        conn_stream_input(c, events) < 0 || conn_stream_send(c, &want) < 0) {
        if (c->state != CONN_CLOSE)
            conn_log_request(c), c->state = CONN_CLOSE;
        return;
    }
    if (gio_batch_done(&c->out) && h->ended) {
        if (h->body != BODY_NONE || h->tunnel) { /* a body the producer did not want */
            h->keepalive = 0;
            c->unread_input = 1;
        }
        finish_request(c);
        return;
    }
    stream_wait(c, want);
}

/* The response is out: log it, forget the request, go on or close. */
static void finish_request(conn_t *c)
{
    conn_log_request(c);
    status_count(&c->site->stats, gio_wallclock(c->site->loop), STATS_HTTP1,
                 c->blk->h1.ex.status, c->out.bytes_sent,
                 gio_now_us(c->site->loop) - c->blk->h1.ex.started_us);
    conn_end_exchange(&c->blk->h1.ex);
    memmove(c->blk->in, c->blk->in + c->reqlen, c->inlen - c->reqlen);
    c->inlen -= c->reqlen;
    c->reqlen = 0;
    memset(&c->blk->prog, 0, sizeof c->blk->prog); /* the next head starts at in[0] */
    /* Shutting down, but this response promised keep-alive: the client may
       already be sending its next request, and a close now would meet it
       with a reset.  Idle for the drain's grace instead; a request that
       comes is answered with "Connection: close" (keeps_alive). */
    if (!c->blk->h1.keepalive) { /* answered early: the handshake ends before the close */
        if (c->unread_input || c->inlen || c->early)
            conn_enter(c, CONN_LINGER);
        else
            c->state = CONN_CLOSE;
        return;
    }
    if (c->inlen) { /* a pipelined request is already here */
        conn_new_exchange(c);
        conn_enter(c, CONN_HEAD);
        return;
    }
    conn_block_put(c->set, c->blk); /* idle: an idle connection holds no block */
    c->blk = NULL;
    gio_batch_free(&c->out);
    conn_enter(c, CONN_IDLE);
}

/* WRITE: push the batch. */
static void st_write(conn_t *c)
{
    unsigned want = GIO_WRITE;
    long r = conn_send(c, CONN_SEND_BUDGET, &want);
    if (r == GIO_ERR) {
        /* a client that went away is no error of ours; anything else is */
        if (errno != EPIPE && errno != ECONNRESET && errno != ENOTCONN && errno != ETIMEDOUT &&
            errno != EPROTO)
            site_error(c->site, "sendfile()/sendmsg()", errno, &c->peer.sa, NULL);
        conn_log_request(c); /* the client went away: log what it got */
        c->state = CONN_CLOSE;
        return;
    }
    if (gio_batch_done(&c->out)) {
        finish_request(c);
        return;
    }
    gio_want(c->site->loop, c->fd, want);
}

/* Run the state functions until the state stops changing. */
static void run(conn_t *c, unsigned events)
{
    conn_state_t prev;
    do {
        prev = c->state;
        switch (c->state) {
        case CONN_IDLE: conn_st_idle(c, events); break;
        case CONN_HEAD: conn_st_head(c); break;
        case CONN_HANDLE: st_handle(c); break;
        case CONN_BODY: conn_st_body(c); break;
        case CONN_DISPATCH: st_dispatch(c); break;
        case CONN_WRITE: st_write(c); break;
        case CONN_LINGER: conn_st_linger(c); break;
        case CONN_HANDSHAKE: conn_st_handshake(c); break;
        case CONN_H2: st_h2(c); break;
        case CONN_PROXY: conn_st_proxy(c); break;
        case CONN_STREAM: st_stream(c, events); break;
        case CONN_WAIT: /* only a job's end moves it on */
        case CONN_TARPIT:
        case CONN_CLOSE: break;
        }
        events = 0; /* readiness was news once: later states in this round start fresh */
    } while (c->state != prev && c->state != CONN_CLOSE);
    if (c->state == CONN_CLOSE)
        conn_free(c);
}

void conn_event(conn_t *c, unsigned events)
{
    if (c->state == CONN_HANDSHAKE && c->tls_want == CONN_TLS_PAUSED) { /* conn_open.c */
        if (events & (GIO_ERROR | GIO_HANGUP))
            conn_free(c);
        else
            run(c, 0); /* its look again; the TLS layer bounds the wait (-s) */
        return;
    }
    if (!events) {
        if (!(c->state == CONN_H2 ? conn_h2_timed_out(c) : conn_timed_out(c)))
            conn_free(c);
        return;
    }
    if (c->state == CONN_WAIT && !(events & (GIO_ERROR | GIO_HANGUP)))
        return;
    if (c->state == CONN_WAIT) { /* the client went while its job runs */
        conn_free(c);
        return;
    }
    run(c, events);
}

/* The drain's quiet period is over: the first GOAWAY to each HTTP/2
   connection whose client has sent nothing since, sent now (the poked
   connections run after the timers). */
static void on_goaway_quiet(gio_loop_t *l, void *arg)
{
    conn_set_t *set = arg;
    (void)l;
    for (conn_t *c = set->list; c; c = c->next)
        if (c->state == CONN_H2 && c->h2_goaway_due) {
            c->h2_goaway_due = 0;
            h2_goaway(c->h2);
            conn_poke(c);
        }
}

/*
 * An HTTP/2 connection's first GOAWAY (2^31-1: the streams on their way are
 * answered, h2.h's h2_goaway) goes out ahead of the answers to what its
 * client sends next (st_h2), not at once: a client that reads answers and
 * the GOAWAY in one read may start streams for the answers and then, once
 * it has read the GOAWAY, not send them (nghttp2 fails them), and the
 * answers of this very round of the loop may still be unread (poll(2)
 * reports the new process's "I serve" after every connection ready with
 * it).  What the client sends next was sent after it read them.  A client
 * quiet for CONN_H2_GOAWAY_QUIET_MS gets it then.
 */
void conn_set_drain(conn_set_t *set)
{
    gio_loop_t *loop = NULL;
    set->draining = 1;
    for (conn_t *c = set->list, *next; c; c = next) {
        next = c->next; /* c may be freed */
        if (c->state == CONN_TARPIT)
            conn_free(c);
        else if (c->state == CONN_IDLE || c->state == CONN_HANDSHAKE ||
                 c->state == CONN_PROXY) /* a request may be on its way */
            conn_deadline(c, conn_capped_ms(c, CONN_DRAIN_GRACE_MS));
        else if (c->state == CONN_WAIT || c->state == CONN_STREAM) /* answered, then closed */
            c->blk->h1.keepalive = 0;
        else if (c->state == CONN_H2) { /* GOAWAY soon; the streams in flight finish */
            c->h2_goaway_due = 1;
            loop = c->site->loop;
        }
    }
    if (loop && gio_timer_set(loop, &set->goaway, gio_now(loop) + CONN_H2_GOAWAY_QUIET_MS,
                              on_goaway_quiet, set) < 0)
        on_goaway_quiet(loop, set); /* no room for the timer: at once */
}

void conn_set_free(conn_set_t *set)
{
    while (set->nspare > 0)
        free(set->spare[--set->nspare]);
}

int conn_set_run_poked(conn_set_t *set)
{
    for (int round = 0; round < 2 && set->poked; round++) {
        conn_t *list = set->poked; /* a run may wake others (or itself): the next round's */
        set->poked = NULL;
        while (list) {
            conn_t *c = list;
            list = c->poke_next;
            c->poked = 0;
            run(c, 0);
        }
    }
    return set->poked != NULL;
}
