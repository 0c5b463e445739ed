/*
 * The connection state machine: see conn.h.  conn_event() runs the state
 * functions until the state stops changing (the lighttpd pattern); each
 * state function does one step and moves on with enter(), which also sets
 * the deadline the new state waits under.  What is HTTP/1.1 about it
 * (framing, keep-alive, the response's bytes) is h1.c's.
 */
#include "conn.h"
#include "gio_os.h"
#include "h1.h"
#include "h2.h"
#include "handlers/router.h"
#include "proxyproto.h"
#include "site/encoding.h"
#include "site/fcache.h"
#include "site/jobs.h"
#include "site/peerlimits.h"
#include "tls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes one connection may send per event: fairness between clients. */
#define CONN_SEND_BUDGET (1 << 20)
/* How long a closing connection may take to drain what the client sent. */
#define CONN_LINGER_MS 2000
/* The -B rate is checked over windows of this length (or -T, if shorter). */
#define CONN_RATE_WINDOW_MS 10000
#define CONN_DRAIN_GRACE_MS 1000 /* shutting down: how long an idle connection may still send */

const char *conn_state_name(conn_state_t st)
{
    static const char *const names[] = {"idle",     "head",      "handle", "body",
                                        "dispatch", "wait",      "write",  "linger",
                                        "tarpit",   "handshake", "h2",     "proxy",
                                        "stream",   "close"};
    return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "?";
}

static int64_t idle_ms(const conn_t *c)
{
    return (int64_t)c->site->cfg->timeout * 1000;
}

/* A deadline of `secs`, but never longer than a non-zero -T. */
static int64_t capped_ms(const conn_t *c, int64_t ms)
{
    int64_t t = idle_ms(c);
    return t > 0 && t < ms ? t : ms;
}

static int64_t head_ms(const conn_t *c)
{
    return capped_ms(c, (int64_t)c->site->cfg->head_timeout * 1000);
}

static int64_t window_ms(const conn_t *c)
{
    return capped_ms(c, CONN_RATE_WINDOW_MS);
}

static void set_deadline(conn_t *c, int64_t ms)
{
    gio_loop_t *l = c->site->loop;
    gio_set_deadline(l, c->fd, ms > 0 ? gio_now(l) + ms : 0);
}

/* What a BODY or WRITE rate window measures: for a response, the bytes the
   client acknowledged, not the ones the kernel took into its send buffer. */
static uint64_t moved(const conn_t *c)
{
    if (c->state != CONN_WRITE && c->state != CONN_H2 && c->state != CONN_STREAM)
        return c->blk->moved;
    /* HTTP/2, STREAM: request bodies read count as well as responses sent */
    uint64_t in = c->state == CONN_H2       ? h2_body_bytes(c->h2)
                  : c->state == CONN_STREAM ? c->blk->moved
                                            : 0;
    if (!c->out.bytes_sent) /* a response just begun: nothing to ask the kernel */
        return in;
    uint64_t q = gio_unacked(c->fd);
    return in + (c->out.bytes_sent > q ? c->out.bytes_sent - q : 0);
}

/* Read from the client: through TLS on HTTPS.  GIO_AGAIN: call want_input. */
static long conn_read(conn_t *c, void *buf, size_t len)
{
    if (!c->ssl) /* a plain connection is in gio_recv_mode (uring: no read syscall) */
        return gio_recv(c->site->loop, c->fd, buf, len);
    unsigned want = GIO_READ;
    long r = gio_tls_read(c->ssl, buf, len, &want);
    c->tls_want = r == GIO_AGAIN ? (uint8_t)want : 0;
    c->tls_drained = r == GIO_AGAIN;
    return r;
}

/* After GIO_AGAIN from conn_read: wait for what the read needs (with TLS,
   that can be the socket turning writable). */
static void want_input(conn_t *c)
{
    gio_want(c->site->loop, c->fd, c->ssl && c->tls_want ? c->tls_want : GIO_READ);
}

/* A tiny message on an idle socket, best effort (100 Continue, 408, 503). */
static void send_small(conn_t *c, const char *msg, size_t len)
{
    if (c->ssl)
        tls_send_small(c->ssl, msg, len);
    else
        (void)!send(c->fd, msg, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* What the codec says, best effort, on a socket given up on (408, 503). */
static void late(conn_t *c, int status)
{
    size_t n;
    const char *msg = h1_late(status, &n);
    send_small(c, msg, n);
}

/* Go to state st, with the deadline st waits under. */
static void enter(conn_t *c, conn_state_t st)
{
    c->state = st;
    switch (st) {
    case CONN_IDLE:
        set_deadline(c, c->set->draining ? capped_ms(c, CONN_DRAIN_GRACE_MS) : idle_ms(c));
        break;
    case CONN_HEAD:
    case CONN_PROXY:
    case CONN_HANDSHAKE: set_deadline(c, head_ms(c)); break;
    case CONN_BODY:
    case CONN_WRITE:
        c->blk->window_at = moved(c);
        set_deadline(c, window_ms(c));
        break;
    case CONN_LINGER:
        if (c->ssl)
            tls_close_notify(c->ssl);
        shutdown(c->fd, SHUT_WR);
        set_deadline(c, CONN_LINGER_MS);
        break;
    case CONN_TARPIT:
        gio_want(c->site->loop, c->fd, 0);
        set_deadline(c, idle_ms(c));
        break;
    case CONN_WAIT: /* the client may go meanwhile: a hang-up still ends it */
        gio_want(c->site->loop, c->fd, 0);
        set_deadline(c, head_ms(c));
        break;
    case CONN_STREAM: /* st_stream sets it while the client is waited for */
        c->blk->window_at = moved(c);
        c->stream_busy = 0;
        set_deadline(c, 0);
        break;
    case CONN_H2: /* st_h2 sets its own */
    case CONN_HANDLE:
    case CONN_DISPATCH:
    case CONN_CLOSE: break;
    }
}

/* Request blocks come from a small per-loop pool: no malloc per request. */
static conn_block_t *block_get(conn_set_t *set)
{
    return set->nspare > 0 ? set->spare[--set->nspare] : malloc(sizeof(conn_block_t));
}

static void block_put(conn_set_t *set, conn_block_t *b)
{
    if (b && set->nspare < CONN_SPARE_BLOCKS)
        set->spare[set->nspare++] = b;
    else
        free(b);
}

conn_t *conn_new(conn_set_t *set, site_t *site, int kind, int fd, const struct sockaddr *peer,
                 socklen_t plen, unsigned how)
{
    int tls = (how & CONN_NEW_TLS) != 0;
    conn_t *c = calloc(1, sizeof *c);
    if (!c || gio_add(site->loop, fd, c) < 0) {
        free(c);
        close(fd);
        return NULL;
    }
    c->kind = kind;
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
    if (how & CONN_NEW_PROXY) { /* the header is peeked at: not yet (st_proxy) */
        enter(c, CONN_PROXY);
    } else if (c->tls) { /* the SSL object comes with the first byte of a ClientHello */
        enter(c, CONN_HANDSHAKE);
    } else {
        enter(c, CONN_IDLE);
        set_deadline(c, head_ms(c)); /* nothing sent yet: the head's time runs from the accept */
    }
    c->next = set->list;
    if (c->next)
        c->next->prev = c;
    set->list = c;
    site->nconns++;
    site->ntls += c->tls;
    return c;
}

/* A producer woke the connection: it runs after the loop's events
   (conn_set_run_poked), not inside the producer's call. */
static void poke(void *conn)
{
    conn_t *c = conn;
    if (c->poked)
        return;
    c->poked = 1;
    c->poke_next = c->set->poked;
    c->set->poked = c;
}

static void unpoke(conn_t *c)
{
    for (conn_t **p = &c->set->poked; c->poked && *p; p = &(*p)->poke_next)
        if (*p == c) {
            *p = c->poke_next;
            c->poked = 0;
            return;
        }
}

/* What a codec is told of its connection. */
static h1_conn_t conn_facts(conn_t *c)
{
    return (h1_conn_t){.out = &c->out,
                       .ssl = c->ssl,
                       .site = c->site,
                       .peer = &c->peer.sa,
                       .local_port = c->local_port,
                       .secure = c->tls,
                       .conn = c,
                       .wake = poke};
}

/* A fresh exchange for the next request, with this connection's facts. */
static void new_exchange(conn_t *c)
{
    h1_conn_t f = conn_facts(c);
    h1_init(&c->blk->h1, &f);
}

/* The request's own state goes with it: its file, its gzip entry, what the
   exchange owns (after the batch that may point into them). */
static void end_exchange(exchange_t *ex)
{
    if (ex->file)
        fcache_release(ex->file);
    ex->file = NULL;
    enc_gzip_release(ex->gz);
    ex->gz = NULL;
    ex_end(ex);
}

static void conn_free(conn_t *c)
{
    unpoke(c);
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
        end_exchange(&c->blk->h1.ex);
    block_put(c->set, c->blk);
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

/* Log the request that just ended (also one cut short). */
static void log_request(conn_t *c)
{
    const h1_t *h = &c->blk->h1; /* a request is logged while its block is held */
    const exchange_t *ex = &h->ex;
    uint64_t sent = c->out.bytes_sent > h->head_len ? c->out.bytes_sent - h->head_len : 0;
    if (sent > ex->body_len)
        sent = ex->body_len;
    const char *vhost = NULL;
    if (c->site->cfg->log_vhost)
        vhost = c->reqlen ? ex->vhost : "";
    alog_request(&c->site->log, gio_wallclock(c->site->loop), vhost, &c->peer.sa,
                 c->reqlen ? &c->blk->req : NULL, ex->status, ex->head_only ? 0 : sent,
                 c->ssl != NULL);
}

/* Answer status on a stream that cannot be trusted any more, then close. */
static void fail(conn_t *c, int status)
{
    c->blk->h1.keepalive = 0;
    c->unread_input = 1;
    if (ex_error(&c->blk->h1.ex, status, NULL, NULL) < 0)
        c->state = CONN_CLOSE;
    else
        enter(c, CONN_WRITE);
}

/* HTTP/2: how many frame bytes are queued at once (the bound on a
   connection's output; no input is read while they are queued). */
#define CONN_H2_OUT (256 * 1024)

static void run(conn_t *c, unsigned events);

/* A stream's job is done, or its producer did something: its frames may
   be waiting (h2.c's wake). */
static void h2_wake(void *conn)
{
    poke(conn);
}

/* c->h2_busy: streams open or frames queued (a -B window runs); a request
   head incomplete (the -s deadline runs, before any other) */
#define CONN_H2_BUSY 1
#define CONN_H2_HEAD 2

/* The -s deadline of an incomplete head (h2_head_since): 0 if none. */
static int64_t h2_head_left(conn_t *c)
{
    int64_t since = h2_head_since(c->h2);
    if (!since)
        return 0;
    int64_t left = since + head_ms(c) - gio_now(c->site->loop);
    return left > 0 ? left : 1;
}

/*
 * After a pass of st_h2: the deadline, and what to wait for.  While a head
 * is incomplete its -s deadline is the connection's; a -B window that began
 * meanwhile keeps what had moved at its start, and is checked once the heads
 * are complete (each incomplete phase lasts at most -s).
 */
static void h2_wait(conn_t *c, int progress, unsigned send_want)
{
    int busy = h2_streams(c->h2) > h2_waiting(c->h2) || !gio_batch_done(&c->out);
    int64_t head = h2_head_left(c);
    uint8_t was = c->h2_busy;
    if (busy && !(was & CONN_H2_BUSY)) /* a -B window begins, as for WRITE */
        c->h2_window_at = moved(c);
    if (head)
        set_deadline(c, head);
    else if (busy && (!(was & CONN_H2_BUSY) || (was & CONN_H2_HEAD)))
        set_deadline(c, window_ms(c));
    else if (!busy && h2_streams(c->h2)) /* only producers awaited: theirs are the deadlines */
        set_deadline(c, 0);
    else if (!busy && (progress || was))
        set_deadline(c, idle_ms(c));
    c->h2_busy = (uint8_t)((busy ? CONN_H2_BUSY : 0) | (head ? CONN_H2_HEAD : 0));
    unsigned want = send_want;
    if (gio_batch_done(&c->out) && h2_want_read(c->h2))
        want |= c->ssl && c->tls_want ? c->tls_want : GIO_READ;
    gio_want(c->site->loop, c->fd, want);
}

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
            long r = c->ssl ? gio_tls_send(c->ssl, &c->out, budget, &want)
                            : gio_send(c->site->loop, c->fd, &c->out, budget);
            if (r == GIO_ERR) {
                c->state = CONN_CLOSE;
                return;
            }
            progress |= r > 0;
            spent += r > 0 ? (uint64_t)r : 0;
            if (spent >= CONN_SEND_BUDGET) { /* the budget is spent: more next round */
                c->site->stats.h2_yields++;
                h2_wait(c, progress, want); /* the socket is writable still (or TLS's want) */
                return;
            }
            if (!gio_batch_done(&c->out)) {
                h2_wait(c, progress, want);
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
            enter(c, CONN_LINGER);
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
        h2_recv(c->h2, (const uint8_t *)buf, (size_t)n); /* an error queues GOAWAY */
    }
    h2_wait(c, progress, 0);
}

/* A deadline passed in H2: a head's -s, idle, or the end of a -B window.
   1: go on. */
/* A GOAWAY before a deadline's close, best effort (RFC 9113 6.8), as a 408
   goes before HTTP/1.1's. */
static void h2_bye(conn_t *c)
{
    char bye[32];
    size_t n = h2_expire(c->h2, bye, sizeof bye);
    if (n)
        send_small(c, bye, n);
}

static int h2_timed_out(conn_t *c)
{
    status_counters_t *st = &c->site->stats;
    int64_t since = h2_head_since(c->h2);
    if (since && gio_now(c->site->loop) - since >= head_ms(c)) {
        st->timeout_head++; /* slowloris over HTTP/2: GOAWAY and closed, as a 408 would be */
        h2_bye(c);
        return 0;
    }
    if (since) { /* a head began since this deadline was set: its deadline now */
        set_deadline(c, h2_head_left(c));
        c->h2_busy |= CONN_H2_HEAD;
        return 1;
    }
    if (!(c->h2_busy & CONN_H2_BUSY)) {
        if (!c->set->draining) {
            st->timeout_idle++;
            h2_bye(c);
        }
        return 0;
    }
    uint64_t need = (uint64_t)c->site->cfg->min_rate * (uint64_t)window_ms(c) / 1000;
    uint64_t now = moved(c);
    if (now - c->h2_window_at >= (need ? need : 1)) {
        c->h2_window_at = now;
        set_deadline(c, window_ms(c));
        c->h2_busy &= (uint8_t)~CONN_H2_HEAD;
        return 1;
    }
    /* reset, as WRITE does: a zero window, a slow reader or a slow body holds no more */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    if (h2_bodies(c->h2) && gio_batch_done(&c->out))
        st->timeout_body++;
    else
        st->timeout_drain++;
    return 0;
}

/* The connection speaks HTTP/2 from here on; what was read goes to the codec. */
static void start_h2(conn_t *c)
{
    h1_conn_t f = conn_facts(c);
    if (!(c->h2 = h2_new(&f, h2_wake))) {
        site_error(c->site, "h2_new()", ENOMEM, &c->peer.sa,
                   "an HTTP/2 session: client shed");
        c->state = CONN_CLOSE;
        return;
    }
    c->site->stats.h2_conns++;
    if (c->blk) {
        h2_recv(c->h2, (const uint8_t *)c->blk->in, c->inlen);
        block_put(c->set, c->blk);
        c->blk = NULL;
        c->inlen = 0;
    }
    c->state = CONN_H2;
    c->h2_busy = CONN_H2_HEAD; /* no request yet: -s from here (st_h2's h2_wait sets it) */
    set_deadline(c, head_ms(c));
}

/* IDLE: between requests (or before the first).  Read only once the loop
   reports data: reading a socket just emptied would only find EAGAIN. */
static void st_idle(conn_t *c, unsigned events)
{
    /* TLS may hold records already read from the socket, which the kernel
       cannot report; once a read came back empty, what is left is at most
       part of a record, and the kernel reports the rest */
    if ((events & (GIO_READ | GIO_WRITE | GIO_ERROR | GIO_HANGUP)) ||
        (c->ssl && !c->tls_drained && tls_pending(c->ssl)))
        enter(c, CONN_HEAD);
    else
        gio_want(c->site->loop, c->fd, GIO_READ);
}

/* HEAD: parse what is buffered; read more while the head is incomplete. */
static void st_head(conn_t *c)
{
    if (!c->blk) {
        if (!(c->blk = block_get(c->set))) {
            site_error(c->site, "malloc()", ENOMEM, &c->peer.sa, "a request block: client shed");
            c->state = CONN_CLOSE;
            return;
        }
        memset(&c->blk->prog, 0, sizeof c->blk->prog);
        new_exchange(c);
    }
    for (;;) {
        int status = 0;
        int pre = !c->requests && !c->ssl && c->inlen && !c->site->cfg->h2_off
                      ? h2_preface(c->blk->in, c->inlen)
                      : -1;
        if (pre == 1) { /* h2c by prior knowledge (RFC 9113 3.3) */
            start_h2(c);
            return;
        }
        long n = pre == 0 ? HTTP_INCOMPLETE
                 : c->inlen ? http_parse_request_more(c->blk->in, c->inlen, &c->blk->req, &status,
                                                    &c->blk->prog)
                          : HTTP_INCOMPLETE;
        if (n > 0) {
            c->reqlen = (uint32_t)n;
            c->state = CONN_HANDLE;
            return;
        }
        if (n == HTTP_MALFORMED) {
            c->reqlen = 0; /* nothing trustworthy to log from it */
            c->blk->req.line.p = NULL;
            fail(c, status);
            return;
        }
        long r = conn_read(c, c->blk->in + c->inlen, CONN_IN_CAP - c->inlen);
        if (r == GIO_AGAIN) {
            if (!c->inlen) { /* a spurious wake-up: idle again, holding no block */
                block_put(c->set, c->blk);
                c->blk = NULL;
                c->state = CONN_IDLE;
            }
            want_input(c);
            return;
        }
        if (r <= 0) { /* EOF or error; a half-sent request is simply dropped */
            c->state = CONN_CLOSE;
            return;
        }
        c->inlen += (uint32_t)r;
    }
}

/* HANDLE: the codec decides keep-alive and framing; read the body or respond. */
static void st_handle(conn_t *c)
{
    c->requests++;
    if (limits_request(c->site->limits, &c->peer.sa, gio_now(c->site->loop)) != LIMIT_OK) {
        /* -A: the original's tarpit, or with -T 0 its drop */
        c->site->stats.rate_limited++;
        if (c->site->cfg->timeout)
            enter(c, CONN_TARPIT);
        else
            c->state = CONN_CLOSE;
        return;
    }
    c->unread_input = 0;
    c->out.bytes_sent = 0;
    h1_t *h = &c->blk->h1;
    int st = h1_request(h, &c->blk->req, c->set->draining, c->requests);
    if (st) {
        fail(c, st);
        return;
    }
    if (h->body != BODY_NONE) {
        int streams = router_streams(&h->ex); /* a producer takes it: read it as it takes it */
        if (!streams && h1_body_too_large(h)) {
            fail(c, 413);
            return;
        }
        size_t n;
        const char *cont = h1_continue(&c->blk->req, c->inlen > c->reqlen, &n);
        if (cont)
            send_small(c, cont, n); /* tiny, on an idle socket */
        c->blk->moved = 0;
        if (streams)
            c->state = CONN_DISPATCH;
        else
            enter(c, CONN_BODY);
        return;
    }
    c->state = CONN_DISPATCH;
}

static void job_done(job_t *j);

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
            enter(c, CONN_STREAM);
            return;
        }
        if (c->blk->h1.body != BODY_NONE) { /* a body meant for a producer: not read */
            c->blk->h1.keepalive = 0;
            c->unread_input = 1;
        }
        enter(c, CONN_WRITE);
        return;
    }
    ex_job_t *xj = ex->job;
    xj->ex = ex;
    xj->job.done = job_done;
    if (jobs_submit(c->site->jobs, &xj->job) == 0) {
        enter(c, CONN_WAIT);
        return;
    }
    site_error(c->site, "jobs_submit()", EAGAIN, &c->peer.sa, "worker threads' queue full: 503");
    ex->job = NULL; /* the pool's queue is full: shed this request, not the loop */
    xj->job.cancelled = 1;
    xj->finish(xj, NULL);
    free(xj);
    c->site->stats.busy++;
    if (ex_error(ex, 503, "Retry-After", "1") < 0)
        c->state = CONN_CLOSE;
    else
        enter(c, CONN_WRITE);
}

/* A job for an exchange is done (on the loop thread): dispatch it again. */
static void job_done(job_t *j)
{
    ex_job_t *xj = (ex_job_t *)j;
    exchange_t *ex = xj->ex;
    conn_t *c = ex ? ex->conn : NULL;
    if (c) {
        ex->job = NULL;
        ex->nfields = 0; /* the answer starts afresh */
        ex->fields_over = 0;
        c->state = j->cancelled ? CONN_CLOSE : CONN_DISPATCH; /* cancelled: shutting down */
    }
    xj->finish(xj, j->cancelled ? NULL : ex);
    free(xj);
    if (c)
        run(c, 0);
}

/* Drop the body bytes at in[reqlen..inlen); 1 when the body ended, or -status. */
static int drop_body(conn_t *c)
{
    h1_t *h = &c->blk->h1;
    char *p = c->blk->in + c->reqlen;
    size_t have = c->inlen - c->reqlen, used;
    int done = 0;
    if (h->body == BODY_LENGTH) {
        used = have < h->body_left ? have : (size_t)h->body_left;
        h->body_left -= used;
        done = !h->body_left;
    } else {
        int r = http_chunked_skip(&h->chunked, p, have, &used);
        if (r == HTTP_MALFORMED)
            return -400;
        if (h->chunked.total > H1_BODY_MAX)
            return -413;
        done = r == HTTP_CHUNKED_DONE;
    }
    memmove(p, p + used, have - used); /* what follows is the next request */
    c->inlen -= (uint32_t)used;
    c->blk->moved += used;
    return done;
}

/* BODY: read and drop the request body; then answer the request. */
static void st_body(conn_t *c)
{
    for (;;) {
        int r = drop_body(c);
        if (r < 0) {
            fail(c, -r);
            return;
        }
        if (r == 1) {
            c->blk->h1.body = BODY_NONE;
            c->state = CONN_DISPATCH;
            return;
        }
        long n = conn_read(c, c->blk->in + c->inlen, CONN_IN_CAP - c->inlen);
        if (n == GIO_AGAIN) {
            want_input(c);
            return;
        }
        if (n <= 0) {
            c->state = CONN_CLOSE;
            return;
        }
        c->inlen += (uint32_t)n;
    }
}

static void finish_request(conn_t *c);

/* STREAM: the request body, or a tunnel's bytes, to the producer as it
   takes them; once the body is read, a read only finds a client gone (or a
   pipelined request, kept).  0, or -1 when the connection ends.  Without a
   body to read, plain text reads only when the loop said readable (it
   says so again while it is): a GET's two reads that met EAGAIN, after
   the dispatch and when the producer's body came, were 1 in 3 of a
   proxied request's system calls.  TLS may hold a record the socket
   does not show. */
static int stream_input(conn_t *c, unsigned events)
{
    h1_t *h = &c->blk->h1;
    for (;;) {
        int body = h->body != BODY_NONE || (h->tunnel && !h->input_done);
        if (!body && !c->ssl && !(events & (GIO_READ | GIO_HANGUP | GIO_ERROR)))
            return 0;
        if (body) {
            uint32_t have = c->inlen - c->reqlen, before = have;
            int r = h1_feed(h, c->blk->in + c->reqlen, &have, 0);
            c->inlen -= before - have;
            c->blk->moved += before - have;
            if (r < 0) /* malformed chunked framing: no trusting the stream */
                break;
            if (h->input_held || r == 1)
                return 0;
        }
        if (c->inlen == CONN_IN_CAP) /* pipelined bytes fill the buffer: wait */
            return 0;
        long n = conn_read(c, c->blk->in + c->inlen, CONN_IN_CAP - c->inlen);
        if (n == GIO_AGAIN)
            return 0;
        if (n == 0 && h->tunnel) { /* the client is done sending: the producer hears it */
            uint32_t have = c->inlen - c->reqlen;
            h1_feed(h, c->blk->in + c->reqlen, &have, 1);
            return 0;
        }
        if (n <= 0) /* the client went: the producer is ended with the exchange */
            break;
        c->inlen += (uint32_t)n;
    }
    log_request(c);
    c->state = CONN_CLOSE;
    return -1;
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
        c->blk->window_at = moved(c);
        set_deadline(c, window_ms(c));
    } else if (!busy && c->stream_busy) {
        set_deadline(c, 0);
    }
    c->stream_busy = (uint8_t)busy;
}

/* STREAM: push what is queued; the producer hears when it fell below
   EX_STREAM_LOW.  -1: the client went away. */
static int stream_send(conn_t *c, unsigned *want)
{
    h1_t *h = &c->blk->h1;
    exchange_t *ex = &h->ex;
    if (gio_batch_done(&c->out))
        return 0;
    uint64_t before = c->out.bytes_left;
    long r = c->ssl ? gio_tls_send(c->ssl, &c->out, CONN_SEND_BUDGET, want)
                    : gio_send(c->site->loop, c->fd, &c->out, CONN_SEND_BUDGET);
    if (r == GIO_ERR)
        return -1;
    if (!h->ended && ex->producer && before >= EX_STREAM_LOW && c->out.bytes_left < EX_STREAM_LOW)
        ex->producer->drained(ex);
    return 0;
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
    if (events & GIO_ERROR || ((events & GIO_WRITE) && stream_send(c, &want) < 0) ||
        stream_input(c, events) < 0 || stream_send(c, &want) < 0) {
        if (c->state != CONN_CLOSE)
            log_request(c), c->state = CONN_CLOSE;
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
    log_request(c);
    status_count(&c->site->stats, gio_wallclock(c->site->loop), STATS_HTTP1, c->out.bytes_sent,
                 c->blk->h1.ex.started_us);
    end_exchange(&c->blk->h1.ex);
    memmove(c->blk->in, c->blk->in + c->reqlen, c->inlen - c->reqlen);
    c->inlen -= c->reqlen;
    c->reqlen = 0;
    memset(&c->blk->prog, 0, sizeof c->blk->prog); /* the next head starts at in[0] */
    /* Shutting down, but this response promised keep-alive: the client may
       already be sending its next request, and a close now would meet it
       with a reset.  Idle for the drain's grace instead; a request that
       comes is answered with "Connection: close" (keeps_alive). */
    if (!c->blk->h1.keepalive) {
        if (c->unread_input || c->inlen)
            enter(c, CONN_LINGER);
        else
            c->state = CONN_CLOSE;
        return;
    }
    if (c->inlen) { /* a pipelined request is already here */
        new_exchange(c);
        enter(c, CONN_HEAD);
        return;
    }
    block_put(c->set, c->blk); /* idle: an idle connection holds no block */
    c->blk = NULL;
    gio_batch_free(&c->out);
    enter(c, CONN_IDLE);
}

/* WRITE: push the batch. */
static void st_write(conn_t *c)
{
    unsigned want = GIO_WRITE;
    long r = c->ssl ? gio_tls_send(c->ssl, &c->out, CONN_SEND_BUDGET, &want)
                    : gio_send(c->site->loop, c->fd, &c->out, CONN_SEND_BUDGET);
    if (r == GIO_ERR) {
        /* a client that went away is no error of ours; anything else is */
        if (errno != EPIPE && errno != ECONNRESET && errno != ENOTCONN && errno != ETIMEDOUT &&
            errno != EPROTO)
            site_error(c->site, "sendfile()/sendmsg()", errno, &c->peer.sa, NULL);
        log_request(c); /* the client went away: log what it got */
        c->state = CONN_CLOSE;
        return;
    }
    if (gio_batch_done(&c->out)) {
        finish_request(c);
        return;
    }
    gio_want(c->site->loop, c->fd, want);
}

/* LINGER: read and drop until the client closes or the deadline passes, so
   that closing with unread data does not turn into a RST that destroys the
   response still in flight. */
static void st_linger(conn_t *c)
{
    char junk[4096];
    long r;
    while ((r = conn_read(c, junk, sizeof junk)) > 0)
        ;
    if (r == GIO_AGAIN)
        want_input(c);
    else
        c->state = CONN_CLOSE;
}

/*
 * A deadline passed.  BODY and WRITE check the rate of the window that
 * ended and go on if it was enough; every other state closes.  Each kind is
 * counted.  Returns 1 if the connection goes on.
 */
static int timed_out(conn_t *c)
{
    status_counters_t *st = &c->site->stats;
    switch (c->state) {
    case CONN_BODY:
    case CONN_WRITE:
    case CONN_STREAM: {
        uint64_t need = (uint64_t)c->site->cfg->min_rate * (uint64_t)window_ms(c) / 1000;
        if (moved(c) - c->blk->window_at >= (need ? need : 1)) {
            c->blk->window_at = moved(c); /* a new window */
            set_deadline(c, window_ms(c));
            return 1;
        }
        if (c->state != CONN_BODY && !gio_batch_done(&c->out)) {
            /* reset, not close: a close would still let the kernel trickle
               out the megabytes in the send queue that the client is slow
               to take, which is what a slow-read attacker wants */
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            st->timeout_drain++;
            log_request(c);
        } else {
            st->timeout_body++;
        }
        return 0;
    }
    case CONN_WAIT: /* the worker threads are too far behind: say so, best effort */
        late(c, 503);
        st->busy++;
        return 0;
    case CONN_HEAD:
        late(c, 408);
        st->timeout_head++;
        return 0;
    case CONN_HANDSHAKE: st->timeout_handshake++; return 0;
    case CONN_PROXY: /* a PROXY header that did not come whole in time */
        if (!c->set->draining)
            st->proxy_timeout++;
        return 0;
    case CONN_H2: /* idle past -T, or streams answered slower than -B */
        return h2_timed_out(c);
    case CONN_IDLE:           /* a connection that never sent a request ran out of head time */
        if (c->set->draining) /* the grace of a shutdown is over */
            return 0;
        if (c->requests)
            st->timeout_idle++;
        else
            st->timeout_head++;
        return 0;
    default: return 0;
    }
}

/* HANDSHAKE: first make sure it is TLS at all (a plain-HTTP client on the
   HTTPS port, a scanner: closed at once, counted), then let OpenSSL work. */
static void st_handshake(conn_t *c)
{
    status_counters_t *st = &c->site->stats;
    if (!c->ssl) { /* nothing looked at yet: a silent connection costs no SSL object */
        int h = tls_looks_like_hello(c->fd);
        if (h < 0) {
            gio_want(c->site->loop, c->fd, GIO_READ);
            return;
        }
        if (h == 0) {
            st->tls_not_tls++;
            c->state = CONN_CLOSE;
            return;
        }
        if (!tls_store_count(c->site->cfg->tls)) { /* -C DIR waits for its first */
            st->tls_no_cert++;
            tls_refuse(c->fd);
            c->state = CONN_CLOSE;
            return;
        }
        if (!(c->ssl = tls_new(c->site->cfg->tls, c->fd))) {
            site_error(c->site, "SSL_new()", ENOMEM, &c->peer.sa, "a TLS session: client shed");
            c->state = CONN_CLOSE;
            return;
        }
    }
    unsigned want = GIO_READ;
    int r = gio_tls_handshake(c->ssl, &want);
    if (r == GIO_AGAIN) {
        c->tls_want = (uint8_t)want;
        gio_want(c->site->loop, c->fd, want);
        return;
    }
    c->tls_want = 0;
    if (r < 0) {
        st->tls_failed++;
        c->state = CONN_CLOSE;
        return;
    }
    st->tls_handshakes++;
    if (tls_resumed(c->ssl))
        st->tls_resumed++;
    if (gio_tls_ktls_send(c->ssl))
        st->tls_ktls++;
    if (tls_alpn_h2(c->ssl) && !c->site->cfg->h2_off) {
        start_h2(c);
        return;
    }
    enter(c, CONN_HEAD); /* the request may have come with the handshake's last flight */
}

/*
 * The client the PROXY header named is the connection's peer from here on
 * (h.local: the proxy's own connection keeps its address); it is counted
 * against -K now.  0, or -1 when the connection is to end.
 */
static int proxy_peer(conn_t *c, const proxy_hdr_t *h)
{
    status_counters_t *st = &c->site->stats;
    if (!h->local && h->srclen <= sizeof c->peer)
        memcpy(&c->peer, &h->src, h->srclen);
    int lim = limits_conn_open(c->site->limits, &c->peer.sa, gio_now(c->site->loop));
    if (lim == LIMIT_OFFENDER) { /* as at accept (server.c): closed without a word */
        st->refused_offender++;
        return -1;
    }
    if (lim != LIMIT_OK) {
        if (lim == LIMIT_CONNS)
            st->refused_addr++;
        else
            st->refused_cap++;
        if (c->tls) /* no 503 over HTTPS: see h1_refuse */
            return -1;
        late(c, 503);
        enter(c, CONN_LINGER); /* the request is unread: drain it, so that the 503 stays */
        return 1;
    }
    c->counted = 1;
    if (h->local)
        st->proxy_local++;
    else
        st->proxy_headers++;
    return 0;
}

/*
 * PROXY: peek at what came, and take off the socket only what is certainly
 * header (proxy_parse's promise), into the request block: the request
 * behind the header stays in the socket for HEAD (or, on HTTPS, for
 * OpenSSL), whatever the client's segments.  A malformed header, or one
 * that ends before it is whole, closes the connection, counted; a slow one
 * meets the head deadline (timed_out).
 */
static void st_proxy(conn_t *c)
{
    status_counters_t *st = &c->site->stats;
    if (!c->blk) {
        if (!(c->blk = block_get(c->set))) {
            site_error(c->site, "malloc()", ENOMEM, &c->peer.sa, "a request block: client shed");
            c->state = CONN_CLOSE;
            return;
        }
        new_exchange(c); /* an empty one: conn_free ends whatever a block holds */
    }
    _Static_assert(PROXY_MAX <= CONN_IN_CAP, "the request block holds a PROXY header");
    char *buf = c->blk->in;
    ssize_t r = recv(c->fd, buf + c->inlen, PROXY_MAX - c->inlen, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        gio_want(c->site->loop, c->fd, GIO_READ);
        return;
    }
    proxy_hdr_t h;
    long n = r > 0 ? proxy_parse(buf, c->inlen + (size_t)r, &h) : PROXY_MALFORMED;
    /* what to take: all that was peeked while incomplete, else the header's rest */
    size_t take = n == PROXY_INCOMPLETE ? (size_t)r : n > 0 ? (size_t)n - c->inlen : 0;
    if (n == PROXY_MALFORMED || recv(c->fd, buf + c->inlen, take, MSG_DONTWAIT) != (ssize_t)take) {
        if (r > 0 || c->inlen) /* malformed, or cut short by the client's close; a */
            st->proxy_malformed++; /* connection closed before its first byte is not counted */
        c->state = CONN_CLOSE;
        return;
    }
    c->inlen += (uint32_t)take;
    if (n == PROXY_INCOMPLETE) {
        gio_want(c->site->loop, c->fd, GIO_READ);
        return;
    }
    block_put(c->set, c->blk); /* HEAD takes a fresh one, its parse state new */
    c->blk = NULL;
    c->inlen = 0;
    int p = proxy_peer(c, &h);
    if (p)
        c->state = p < 0 ? CONN_CLOSE : c->state;
    else if (c->tls) /* the -s that runs from the accept goes on */
        c->state = CONN_HANDSHAKE;
    else {
        gio_recv_mode(c->site->loop, c->fd);
        c->state = CONN_HEAD; /* the request may have come with the header */
    }
}

/* Run the state functions until the state stops changing. */
static void run(conn_t *c, unsigned events)
{
    conn_state_t prev;
    do {
        prev = c->state;
        switch (c->state) {
        case CONN_IDLE: st_idle(c, events); break;
        case CONN_HEAD: st_head(c); break;
        case CONN_HANDLE: st_handle(c); break;
        case CONN_BODY: st_body(c); break;
        case CONN_DISPATCH: st_dispatch(c); break;
        case CONN_WRITE: st_write(c); break;
        case CONN_LINGER: st_linger(c); break;
        case CONN_HANDSHAKE: st_handshake(c); break;
        case CONN_H2: st_h2(c); break;
        case CONN_PROXY: st_proxy(c); break;
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
    if (!events) {
        if (!timed_out(c))
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

void conn_set_drain(conn_set_t *set)
{
    set->draining = 1;
    for (conn_t *c = set->list, *next; c; c = next) {
        next = c->next; /* c may be freed */
        if (c->state == CONN_TARPIT)
            conn_free(c);
        else if (c->state == CONN_IDLE || c->state == CONN_HANDSHAKE ||
                 c->state == CONN_PROXY) /* a request may be on its way */
            set_deadline(c, capped_ms(c, CONN_DRAIN_GRACE_MS));
        else if (c->state == CONN_WAIT || c->state == CONN_STREAM) /* answered, then closed */
            c->blk->h1.keepalive = 0;
        else if (c->state == CONN_H2) { /* GOAWAY; the streams in flight finish */
            h2_goaway(c->h2);
            gio_want(c->site->loop, c->fd, GIO_READ | GIO_WRITE);
        }
    }
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
