/*
 * Reading: from the socket, or through TLS on HTTPS (conn_read), and the
 * states that read: IDLE (until the loop reports data), HEAD (the request
 * head, or the h2c preface), BODY (a request body read and dropped), LINGER
 * (unread input drained before the close), and STREAM's input (a request
 * body or a tunnel's bytes, to the producer as it takes them).
 */
#include "conn_int.h"
#include "gio_os.h"
#include "h1/h1.h"
#include "h2/h2.h"
#include "tls/tls.h"

#include <errno.h>
#include <string.h>

void conn_tls_ready(conn_t *c)
{
    status_counters_t *st = &c->site->stats;
    st->tls_handshakes++;
    if (tls_resumed(c->ssl))
        st->tls_resumed++;
    if (gio_tls_ktls_send(c->ssl))
        st->tls_ktls++;
}

void conn_early_count(conn_t *c)
{
    status_counters_t *st = &c->site->stats;
    switch (tls_early_take(c->ssl)) {
    case TLS_EARLY_ACCEPTED: st->early_accepted++; break;
    case TLS_EARLY_REPLAYED: st->early_replayed++; break;
    case TLS_EARLY_REFUSED: st->early_refused++; break;
    default: break;
    }
}

/*
 * Early data while it lasts (the handshake waits for the client's
 * EndOfEarlyData and Finished): SSL_read_early_data; at its end the
 * handshake is completed, and reads go on with SSL_read.
 */
static long read_early(conn_t *c, void *buf, size_t len, unsigned *want)
{
    long r = gio_tls_read_early(c->ssl, buf, len, want);
    if (r != 0)
        return r;
    int h = gio_tls_handshake(c->ssl, want);
    if (h != 1)
        return h;
    c->early = 0;
    conn_tls_ready(c);
    return gio_tls_read(c->ssl, buf, len, want);
}

/* All of a first flight's early data fits in the request block, with room
   for a read past it: a held request's block never fills during it. */
_Static_assert(TLS_EARLY_MAX < CONN_IN_CAP, "early data fits in a request block");

int conn_early_finish(conn_t *c)
{
    while (c->early) {
        long r = conn_read(c, c->blk->in + c->inlen, CONN_IN_CAP - c->inlen);
        if (r > 0)
            c->inlen += (uint32_t)r;
        else if (r == GIO_AGAIN)
            return c->early ? GIO_AGAIN : 1;
        else if (r < 0 || c->early)
            return GIO_ERR;
    }
    return 1;
}

/* Read from the client: through TLS on HTTPS.  GIO_AGAIN: call conn_want_input. */
long conn_read(conn_t *c, void *buf, size_t len)
{
    if (!c->ssl) /* a plain connection is in gio_recv_mode (uring: no read syscall) */
        return gio_recv(c->site->loop, c->fd, buf, len);
    unsigned want = GIO_READ;
    long r = c->early ? read_early(c, buf, len, &want) : gio_tls_read(c->ssl, buf, len, &want);
    c->tls_want = r == GIO_AGAIN ? (uint8_t)want : 0;
    c->tls_drained = r == GIO_AGAIN;
    return r;
}

/* After GIO_AGAIN from conn_read: wait for what the read needs (with TLS,
   that can be the socket turning writable). */
void conn_want_input(conn_t *c)
{
    gio_want(c->site->loop, c->fd, c->ssl && c->tls_want ? c->tls_want : GIO_READ);
}

/* Answer status on a stream that cannot be trusted any more, then close. */
void conn_fail(conn_t *c, int status)
{
    c->blk->h1.keepalive = 0;
    c->unread_input = 1;
    if (ex_error(&c->blk->h1.ex, status, NULL, NULL) < 0)
        c->state = CONN_CLOSE;
    else
        conn_enter(c, CONN_WRITE);
}

/* A stream's job is done, or its producer did something: its frames may
   be waiting (h2.c's wake). */
static void conn_h2_wake(void *conn)
{
    conn_poke(conn);
}

/* The connection speaks HTTP/2 from here on; what was read goes to the codec. */
void conn_start_h2(conn_t *c)
{
    codec_conn_t f = conn_facts(c);
    if (!(c->h2 = h2_new(&f, conn_h2_wake))) {
        site_error(c->site, "h2_new()", ENOMEM, &c->peer.sa,
                   "an HTTP/2 session: client shed");
        c->state = CONN_CLOSE;
        return;
    }
    c->site->stats.h2_conns++;
    if (c->set->draining) /* begun during a drain: its first GOAWAY now, before any answer */
        h2_goaway(c->h2);
    if (c->blk) {
        h2_recv(c->h2, (const uint8_t *)c->blk->in, c->inlen);
        conn_block_put(c->set, c->blk);
        c->blk = NULL;
        c->inlen = 0;
    }
    c->state = CONN_H2;
    c->h2_busy = CONN_H2_HEAD; /* no request yet: -s from here (conn_h2_wait sets it) */
    conn_deadline(c, conn_head_ms(c));
}

/* IDLE: between requests (or before the first).  Read only once the loop
   reports data: reading a socket just emptied would only find EAGAIN. */
void conn_st_idle(conn_t *c, unsigned events)
{
    /* TLS may hold records already read from the socket, which the kernel
       cannot report; once a read came back empty, what is left is at most
       part of a record, and the kernel reports the rest */
    if ((events & (GIO_READ | GIO_WRITE | GIO_ERROR | GIO_HANGUP)) ||
        (c->ssl && !c->tls_drained && tls_pending(c->ssl)))
        conn_enter(c, CONN_HEAD);
    else
        gio_want(c->site->loop, c->fd, GIO_READ);
}

/* HEAD: parse what is buffered; read more while the head is incomplete. */
void conn_st_head(conn_t *c)
{
    if (!c->blk) {
        if (!(c->blk = conn_block_get(c->set))) {
            site_error(c->site, "malloc()", ENOMEM, &c->peer.sa, "a request block: client shed");
            c->state = CONN_CLOSE;
            return;
        }
        memset(&c->blk->prog, 0, sizeof c->blk->prog);
        conn_new_exchange(c);
    }
    for (;;) {
        int status = 0;
        int pre = !c->requests && !c->ssl && c->inlen && !c->site->cfg->h2_off
                      ? h2_preface(c->blk->in, c->inlen)
                      : -1;
        if (pre == 1) { /* h2c by prior knowledge (RFC 9113 3.3) */
            conn_start_h2(c);
            return;
        }
        long n = pre == 0 ? HTTP_INCOMPLETE
                 : c->inlen ? http_parse_request_more(c->blk->in, c->inlen, &c->blk->req, &status,
                                                    &c->blk->prog)
                          : HTTP_INCOMPLETE;
        if (n > 0 && (status = http_request_authority(&c->blk->req)) != 0)
            n = HTTP_MALFORMED; /* an absolute-form target whose authority is not one */
        if (n > 0) {
            c->reqlen = (uint32_t)n;
            c->state = CONN_HANDLE;
            return;
        }
        if (n == HTTP_MALFORMED) {
            c->reqlen = 0; /* nothing trustworthy to log from it */
            c->blk->req.line.p = NULL;
            conn_fail(c, status);
            return;
        }
        long r = conn_read(c, c->blk->in + c->inlen, CONN_IN_CAP - c->inlen);
        if (r == GIO_AGAIN) {
            if (!c->inlen) { /* a spurious wake-up: idle again, holding no block */
                conn_block_put(c->set, c->blk);
                c->blk = NULL;
                c->state = CONN_IDLE;
            }
            conn_want_input(c);
            return;
        }
        if (r <= 0) { /* EOF or error; a half-sent request is simply dropped */
            c->state = CONN_CLOSE;
            return;
        }
        c->inlen += (uint32_t)r;
    }
}

/* BODY: read and drop the request body; then answer the request. */
void conn_st_body(conn_t *c)
{
    for (;;) {
        uint32_t have = c->inlen - c->reqlen, before = have;
        int r = h1_drop(&c->blk->h1, c->blk->in + c->reqlen, &have);
        c->inlen -= before - have; /* what follows the body, the next request, stays */
        c->blk->moved += before - have;
        if (r < 0) {
            conn_fail(c, -r);
            return;
        }
        if (r == 1) { /* h1_feed has set the body to BODY_NONE */
            c->state = CONN_DISPATCH;
            return;
        }
        long n = conn_read(c, c->blk->in + c->inlen, CONN_IN_CAP - c->inlen);
        if (n == GIO_AGAIN) {
            conn_want_input(c);
            return;
        }
        if (n <= 0) {
            c->state = CONN_CLOSE;
            return;
        }
        c->inlen += (uint32_t)n;
    }
}

/* STREAM: the request body, or a tunnel's bytes, to the producer as it
   takes them; once the body is read, a read only finds a client gone (or a
   pipelined request, kept).  0, or -1 when the connection ends.  Without a
   body to read, plain text reads only when the loop said readable (it
   says so again while it is): a GET's two reads that met EAGAIN, after
   the dispatch and when the producer's body came, were 1 in 3 of a
   proxied request's system calls.  TLS may hold a record the socket
   does not show. */
int conn_stream_input(conn_t *c, unsigned events)
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
    conn_log_request(c);
    c->state = CONN_CLOSE;
    return -1;
}

/* LINGER: read and drop until the client closes or the deadline passes, so
   that closing with unread data does not turn into a RST that destroys the
   response still in flight. */
void conn_st_linger(conn_t *c)
{
    char junk[4096];
    long r;
    if (c->early && c->blk) { /* answered early (0.5-RTT): the client's Finished first */
        int unread = c->unread_input || c->inlen;
        int e = conn_early_finish(c);
        if (e == GIO_AGAIN) {
            conn_want_input(c);
            return;
        }
        if (e < 0 || !unread) { /* then a close_notify (conn_free), and nothing unread */
            c->state = CONN_CLOSE;
            return;
        }
    }
    while ((r = conn_read(c, junk, sizeof junk)) > 0)
        ;
    if (r == GIO_AGAIN)
        conn_want_input(c);
    else
        c->state = CONN_CLOSE;
}
