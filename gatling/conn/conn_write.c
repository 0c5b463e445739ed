/*
 * Writing: the output batch sent under the per-event budget
 * (CONN_SEND_BUDGET), over TLS or not (conn_send); STREAM's sends, which
 * tell the producer when the queue fell low; small best-effort messages on
 * an idle socket (100 Continue, 408, 503, a GOAWAY).
 */
#include "conn_int.h"
#include "gio_os.h"
#include "h1/h1.h"
#include "tls/tls.h"

#include <sys/socket.h>

/* Send from the batch, at most budget bytes: through TLS on HTTPS (want:
   what TLS waits for then), else gio_send.  GIO_ERR, or the bytes sent. */
long conn_send(conn_t *c, uint64_t budget, unsigned *want)
{
    return c->ssl ? gio_tls_send(c->ssl, &c->out, budget, want)
                  : gio_send(c->site->loop, c->fd, &c->out, budget);
}

/* A tiny message on an idle socket, best effort (100 Continue, 408, 503). */
void conn_send_small(conn_t *c, const char *msg, size_t len)
{
    if (c->ssl)
        tls_send_small(c->ssl, msg, len);
    else
        (void)!send(c->fd, msg, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* What the codec says, best effort, on a socket given up on (408, 503). */
void conn_late(conn_t *c, int status)
{
    size_t n;
    const char *msg = h1_late(status, &n);
    conn_send_small(c, msg, n);
}

/* STREAM: push what is queued; the producer hears when it fell below
   EX_STREAM_LOW.  -1: the client went away. */
int conn_stream_send(conn_t *c, unsigned *want)
{
    h1_t *h = &c->blk->h1;
    exchange_t *ex = &h->ex;
    if (gio_batch_done(&c->out))
        return 0;
    uint64_t before = c->out.bytes_left;
    long r = conn_send(c, CONN_SEND_BUDGET, want);
    if (r == GIO_ERR)
        return -1;
    if (!h->ended && ex->producer && before >= EX_STREAM_LOW && c->out.bytes_left < EX_STREAM_LOW)
        ex->producer->drained(ex);
    return 0;
}
