/*
 * The connection's state H2 and its deadlines: after each pass of st_h2
 * (conn.c) the deadline it waits under and what it waits for, and what a
 * passed one does: a request head's -s (slowloris over HTTP/2), the idle
 * -T, the -B windows of busy streams, each with a GOAWAY before the close,
 * as a 408 goes before HTTP/1.1's; and a shutdown's bounded wait for the
 * answer to its first GOAWAY's PING (h2.h's h2_goaway).  The codec says what is under way in one
 * report (h2/h2.h's h2_report_t); the connection keeps the clock.
 */
#include "conn_int.h"
#include "gio_os.h"
#include "h2/h2.h"

#include <sys/socket.h>

/* What a -B window measures over HTTP/2: request body bytes read and
   response bytes the client acknowledged. */
static uint64_t h2_moved(const conn_t *c, const h2_report_t *r)
{
    return r->body_bytes + conn_acked(c);
}

/* The -s deadline of an incomplete head (r->head_since): 0 if none. */
static int64_t h2_head_left(conn_t *c, const h2_report_t *r)
{
    int64_t since = r->head_since;
    if (!since)
        return 0;
    int64_t left = since + conn_head_ms(c) - gio_now(c->site->loop);
    return left > 0 ? left : 1;
}

/*
 * After a pass of st_h2: the deadline, and what to wait for.  While a head
 * is incomplete its -s deadline is the connection's; a -B window that began
 * meanwhile keeps what had moved at its start, and is checked once the heads
 * are complete (each incomplete phase lasts at most -s).
 */
void conn_h2_wait(conn_t *c, int progress, unsigned send_want)
{
    h2_report_t r;
    h2_report(c->h2, &r);
    int busy = r.streams > r.waiting || !gio_batch_done(&c->out);
    int64_t head = h2_head_left(c, &r);
    int64_t bye = conn_capped_ms(c, CONN_DRAIN_GRACE_MS);
    if (r.goaway_wait && !busy && !r.streams && head > bye)
        head = bye; /* the first GOAWAY's PING unanswered: a head waits no longer */
    uint8_t was = c->h2_busy;
    if (busy && !(was & CONN_H2_BUSY)) /* a -B window begins, as for WRITE */
        c->h2_window_at = h2_moved(c, &r);
    if (head)
        conn_deadline(c, head);
    else if (busy && (!(was & CONN_H2_BUSY) || (was & CONN_H2_HEAD)))
        conn_deadline(c, conn_window_ms(c));
    else if (!busy && r.streams) /* only producers awaited: theirs are the deadlines */
        conn_deadline(c, 0);
    else if (!busy && r.goaway_wait) /* the client's answer to the first GOAWAY's PING */
        conn_deadline(c, bye);
    else if (!busy && (progress || was))
        conn_deadline(c, conn_idle_ms(c));
    c->h2_busy = (uint8_t)((busy ? CONN_H2_BUSY : 0) | (head ? CONN_H2_HEAD : 0));
    unsigned want = send_want;
    if (gio_batch_done(&c->out) && r.want_read)
        want |= c->ssl && c->tls_want ? c->tls_want : GIO_READ;
    gio_want(c->site->loop, c->fd, want);
}

/* A GOAWAY before a deadline's close, best effort (RFC 9113 6.8), as a 408
   goes before HTTP/1.1's. */
static void h2_bye(conn_t *c)
{
    char bye[32];
    size_t n = h2_expire(c->h2, bye, sizeof bye);
    if (n)
        conn_send_small(c, bye, n);
}

/* A deadline passed in H2: a head's -s, idle past -T, or the end of a -B
   window (streams answered slower than -B).  1: go on. */
int conn_h2_timed_out(conn_t *c)
{
    status_counters_t *st = &c->site->stats;
    h2_report_t r;
    h2_report(c->h2, &r);
    int64_t since = r.head_since;
    if (!(c->h2_busy & CONN_H2_BUSY) && !r.streams && r.goaway_wait) { /* PING unanswered */
        h2_bye(c); /* the second GOAWAY, with the last stream answered */
        return 0;
    }
    if (since && gio_now(c->site->loop) - since >= conn_head_ms(c)) {
        st->timeout_head++; /* slowloris over HTTP/2: GOAWAY and closed, as a 408 would be */
        h2_bye(c);
        return 0;
    }
    if (since) { /* a head began since this deadline was set: its deadline now */
        conn_deadline(c, h2_head_left(c, &r));
        c->h2_busy |= CONN_H2_HEAD;
        return 1;
    }
    if (!(c->h2_busy & CONN_H2_BUSY)) {
        if (!c->set->draining) {
            st->timeout_idle++;
            h2_bye(c);
        } else if (c->h2_goaway_due) { /* idle out before the drain's GOAWAY was said */
            h2_bye(c);
        }
        return 0;
    }
    uint64_t need = (uint64_t)c->site->cfg->min_rate * (uint64_t)conn_window_ms(c) / 1000;
    uint64_t now = h2_moved(c, &r);
    if (now - c->h2_window_at >= (need ? need : 1)) {
        c->h2_window_at = now;
        conn_deadline(c, conn_window_ms(c));
        c->h2_busy &= (uint8_t)~CONN_H2_HEAD;
        return 1;
    }
    /* reset, as WRITE does: a zero window, a slow reader or a slow body holds no more */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    if (r.bodies && gio_batch_done(&c->out))
        st->timeout_body++;
    else
        st->timeout_drain++;
    return 0;
}
