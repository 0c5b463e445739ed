/*
 * Deadlines: the one each state waits under (conn_enter: IDLE's keep-alive
 * -T, or the drain's grace when shutting down; HEAD's, PROXY's and
 * HANDSHAKE's -s; the -B windows of BODY, WRITE and STREAM; LINGER's
 * drain; WAIT's and TARPIT's), what a -B window measures (conn_moved), and
 * what a passed deadline does (conn_timed_out), counted by its kind:
 * head, idle, body, drain, handshake, busy, PROXY, and a connection that
 * never sent a byte (idle_closed: not a timeout).  H2's are conn_h2.c's.
 */
#include "conn_int.h"
#include "gio_os.h"
#include "tls/tls.h"

#include <sys/socket.h>

/* How long a closing connection may take to drain what the client sent. */
#define CONN_LINGER_MS 2000
/* The -B rate is checked over windows of this length (or -T, if shorter). */
#define CONN_RATE_WINDOW_MS 10000

/* -T, the keep-alive idle timeout (0: none). */
int64_t conn_idle_ms(const conn_t *c)
{
    return (int64_t)c->site->cfg->timeout * 1000;
}

/* A deadline of `secs`, but never longer than a non-zero -T. */
int64_t conn_capped_ms(const conn_t *c, int64_t ms)
{
    int64_t t = conn_idle_ms(c);
    return t > 0 && t < ms ? t : ms;
}

/* -s, the request head's (and the handshake's, the PROXY header's). */
int64_t conn_head_ms(const conn_t *c)
{
    return conn_capped_ms(c, (int64_t)c->site->cfg->head_timeout * 1000);
}

/* The length of a -B rate window. */
int64_t conn_window_ms(const conn_t *c)
{
    return conn_capped_ms(c, CONN_RATE_WINDOW_MS);
}

/* The connection's deadline, ms from now (0: none). */
void conn_deadline(conn_t *c, int64_t ms)
{
    gio_loop_t *l = c->site->loop;
    gio_set_deadline(l, c->fd, ms > 0 ? gio_now(l) + ms : 0);
}

uint64_t conn_acked(const conn_t *c)
{
    if (!c->out.bytes_sent) /* a response just begun: nothing to ask the kernel */
        return 0;
    uint64_t q = gio_unacked(c->fd);
    return c->out.bytes_sent > q ? c->out.bytes_sent - q : 0;
}

/* What a BODY or WRITE rate window measures: for a response, the bytes the
   client acknowledged, not the ones the kernel took into its send buffer. */
uint64_t conn_moved(const conn_t *c)
{
    if (c->state != CONN_WRITE && c->state != CONN_STREAM)
        return c->blk->moved;
    /* STREAM: request bodies read count as well as responses sent */
    return (c->state == CONN_STREAM ? c->blk->moved : 0) + conn_acked(c);
}

/* Go to state st, with the deadline st waits under. */
void conn_enter(conn_t *c, conn_state_t st)
{
    c->state = st;
    switch (st) {
    case CONN_IDLE:
        conn_deadline(c, c->set->draining ? conn_capped_ms(c, CONN_DRAIN_GRACE_MS)
                                          : conn_idle_ms(c));
        break;
    case CONN_HEAD:
    case CONN_PROXY:
    case CONN_HANDSHAKE: conn_deadline(c, conn_head_ms(c)); break;
    case CONN_BODY:
    case CONN_WRITE:
        c->blk->window_at = conn_moved(c);
        conn_deadline(c, conn_window_ms(c));
        break;
    case CONN_LINGER:
        if (c->ssl)
            tls_close_notify(c->ssl);
        shutdown(c->fd, SHUT_WR);
        conn_deadline(c, CONN_LINGER_MS);
        break;
    case CONN_TARPIT:
        gio_want(c->site->loop, c->fd, 0);
        conn_deadline(c, conn_idle_ms(c));
        break;
    case CONN_WAIT: /* the client may go meanwhile: a hang-up still ends it */
        gio_want(c->site->loop, c->fd, 0);
        conn_deadline(c, conn_head_ms(c));
        break;
    case CONN_STREAM: /* conn.c's st_stream sets it while the client is waited for */
        c->blk->window_at = conn_moved(c);
        c->stream_busy = 0;
        conn_deadline(c, 0);
        break;
    case CONN_H2: /* conn.c's st_h2 sets its own */
    case CONN_HANDLE:
    case CONN_DISPATCH:
    case CONN_CLOSE: break;
    }
}

/*
 * A deadline passed.  BODY and WRITE check the rate of the window that
 * ended and go on if it was enough; every other state closes.  Each kind is
 * counted.  Returns 1 if the connection goes on.
 */
int conn_timed_out(conn_t *c)
{
    status_counters_t *st = &c->site->stats;
    switch (c->state) {
    case CONN_BODY:
    case CONN_WRITE:
    case CONN_STREAM: {
        uint64_t need = (uint64_t)c->site->cfg->min_rate * (uint64_t)conn_window_ms(c) / 1000;
        if (conn_moved(c) - c->blk->window_at >= (need ? need : 1)) {
            c->blk->window_at = conn_moved(c); /* a new window */
            conn_deadline(c, conn_window_ms(c));
            return 1;
        }
        if (c->state != CONN_BODY && !gio_batch_done(&c->out)) {
            /* reset, not close: a close would still let the kernel trickle
               out the megabytes in the send queue that the client is slow
               to take, which is what a slow-read attacker wants */
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            st->timeout_drain++;
            conn_log_request(c);
        } else {
            st->timeout_body++;
        }
        return 0;
    }
    case CONN_WAIT: /* the worker threads are too far behind: say so, best effort */
        conn_late(c, 503);
        st->busy++;
        return 0;
    case CONN_HEAD:
        conn_late(c, 408);
        st->timeout_head++;
        return 0;
    case CONN_HANDSHAKE: /* no SSL object yet: not one byte came (conn_st_handshake) */
        if (c->ssl)
            st->timeout_handshake++;
        else if (!c->set->draining)
            st->idle_closed++;
        return 0;
    case CONN_HANDLE: /* a request held for the handshake (early data), which did not end */
        st->timeout_handshake += c->early_hold;
        return 0;
    case CONN_PROXY: /* a PROXY header that did not come whole in time */
        if (!c->set->draining)
            st->proxy_timeout++;
        return 0;
    case CONN_IDLE:           /* keep-alive idle (-T), or no byte ever came before -s */
        if (c->set->draining) /* the grace of a shutdown is over */
            return 0;
        /* a first byte moves IDLE to HEAD (and a read that finds none back,
           conn_st_head): one IDLE without a request sent no byte of one
           (over TLS, none after the handshake), a spare a browser or bench
           opened, not a slow client (its head timed out in HEAD, 408) */
        if (c->requests)
            st->timeout_idle++;
        else
            st->idle_closed++;
        return 0;
    default: return 0; /* H2's: conn_h2_timed_out (conn_h2.c) */
    }
}
