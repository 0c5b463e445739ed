/*
 * quic_send.c — what HTTP/3's endpoint sends (quic_int.h).  A connection's
 * packets (write_one: an owed response end, nghttp3's stream data, ngtcp2's
 * own frames) are written in place into the endpoint's send queue, packets
 * of one path and ECN as one GSO train; the trains of a batch's connections
 * leave together (quic_txq_flush: few sendmmsg calls), a bulk sender's at
 * once (QUIC_TXQ_EAGER).  quic.c decides when: after a batch of datagrams,
 * timers, or wake-ups (flush_touched), and closes a connection whose write
 * failed.  An endpoint without a socket (quic_open_loose) hands each train
 * to its out hook instead.
 */
#ifdef HAVE_H3
#include "quic_int.h"

#include <errno.h>
#include <nghttp3/nghttp3.h>
#include <string.h>

/* queued bytes sent at once, not with the batch: held back, a download's 1 MiB
   costs 7-14% more CPU on loopback (bench --h3 -c 10, 1m.bin) */
#define QUIC_TXQ_EAGER (16 * QUIC_PKT_MAX)

/* gio_udp_send, or to the harness's hook on an endpoint without a socket. */
static long ep_send(quic_ep_t *e, const gio_dgram_t *d, int flags)
{
    if (e->out) {
        e->out(e->out_arg, d);
        return 1;
    }
    return gio_udp_send(e->fd, d, 1, flags);
}

/* The packets of a queued train (for the count of those lost). */
static size_t train_pkts(const gio_dgram_t *d)
{
    return d->segsize ? (d->len + d->segsize - 1) / d->segsize : 1;
}

/* Send the queued trains: sendmmsg in rounds of GIO_UDP_BATCH; what the socket
   does not take is lost (QUIC sends it again), counted: a train it refused,
   or all that is left when its buffer is full. */
void quic_txq_flush(quic_ep_t *e)
{
    unsigned i = 0;
    while (i < e->ntxq) {
        unsigned n = e->ntxq - i < GIO_UDP_BATCH ? e->ntxq - i : GIO_UDP_BATCH;
        long r;
        if (e->out) {
            for (unsigned k = 0; k < n; k++)
                e->out(e->out_arg, &e->txd[i + k]);
            r = (long)n;
        } else {
            r = gio_udp_send(e->fd, &e->txd[i], n, e->gso ? GIO_UDP_GSO : 0);
            if (r == GIO_ERR && errno == EIO && e->gso) { /* the device cannot segment */
                e->gso = 0;
                continue;
            }
        }
        if (r == GIO_AGAIN) {
            for (; i < e->ntxq; i++)
                e->site->stats.h3_send_lost += train_pkts(&e->txd[i]);
            break;
        }
        if (r < 0) { /* this one was refused (errno): the rest is tried */
            e->site->stats.h3_send_lost += train_pkts(&e->txd[i]);
            r = 1;
        }
        i += (unsigned)r;
    }
    e->ntxq = 0;
    e->txq_used = 0;
}

/* Room in the queue for a whole quic_conn_write (QUIC_TRAIN packets, as many
   trains at most): where its packets go. */
static uint8_t *txq_reserve(quic_ep_t *e)
{
    if (e->ntxq + QUIC_TRAIN > QUIC_TXQ_DG || QUIC_TXQ - e->txq_used < QUIC_TRAIN * QUIC_PKT_MAX)
        quic_txq_flush(e);
    return e->txq + e->txq_used;
}

/* The train of len bytes at the queue's end (at, within what txq_reserve
   left room for), segments of seg bytes (the last may be shorter), to the
   path's peer: queued, sent at quic_txq_flush. */
static void txq_add(quic_ep_t *e, const ngtcp2_path *path, uint8_t ecn, uint8_t *at, size_t len,
                    size_t seg)
{
    gio_dgram_t *d = &e->txd[e->ntxq++];
    *d = (gio_dgram_t){.buf = at, .len = len, .ecn = ecn};
    memcpy(&d->peer, path->remote.addr, path->remote.addrlen);
    d->peerlen = path->remote.addrlen;
    memcpy(&d->local, path->local.addr, path->local.addrlen);
    d->segsize = seg < len ? (uint16_t)seg : 0;
    e->txq_used += len;
}

/* One packet of len (<= QUIC_PKT_MAX) bytes at p to the path's peer, queued. */
void quic_send_packet(quic_ep_t *e, const ngtcp2_path *path, const uint8_t *p, size_t len)
{
    uint8_t *at = txq_reserve(e);
    memcpy(at, p, len);
    txq_add(e, path, 0, at, len, 0);
}

/* A datagram to addr from the local address it came to (stateless answers). */
void quic_send_to(quic_ep_t *e, const gio_dgram_t *in, const uint8_t *p, size_t len)
{
    gio_dgram_t d = *in;
    d.buf = (void *)(uintptr_t)p;
    d.len = len;
    d.segsize = 0;
    d.ecn = 0;
    if (ep_send(e, &d, 0) != 1)
        e->site->stats.h3_send_lost++;
}

/* One packet: stream data nghttp3 has, or what ngtcp2 has of its own; a
   response's end that nghttp3 0.8 would lose goes first (h3.h's h3_fin_owed).
   Bytes written (0: nothing to send now), or -1 (the connection closes). */
static ngtcp2_ssize write_one(quic_conn_t *c, ngtcp2_path *path, ngtcp2_pkt_info *pi,
                              uint8_t *buf, size_t cap, ngtcp2_tstamp ts)
{
    for (;;) {
        int64_t sid = c->h3 ? h3_owed_fin(c->h3) : -1;
        int owed = sid >= 0, fin = owed;
        nghttp3_vec vec[16];
        nghttp3_ssize nv = 0;
        size_t bytes = 0;
        nghttp3_conn *ng = c->h3 ? h3_ng(c->h3) : NULL;
        if (!owed && ng && ngtcp2_conn_get_max_data_left(c->q)) {
            nv = nghttp3_conn_writev_stream(ng, &sid, &fin, vec, 16);
            if (nv < 0) {
                ngtcp2_connection_close_error_set_application_error(
                    &c->err, nghttp3_err_infer_quic_app_error_code((int)nv), NULL, 0);
                return -1;
            }
            for (nghttp3_ssize i = 0; i < nv; i++)
                bytes += vec[i].len;
        }
        ngtcp2_ssize ndata = -1;
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(c->q, path, pi, buf, cap, &ndata, flags, sid,
                                                   (const ngtcp2_vec *)vec, (size_t)nv, ts);
        if (owed && (ndata >= 0 || n == NGTCP2_ERR_STREAM_SHUT_WR ||
                     n == NGTCP2_ERR_STREAM_NOT_FOUND || n == NGTCP2_ERR_STREAM_DATA_BLOCKED)) {
            h3_fin_gone(c->h3, sid); /* taken, or not for us to try again */
            if (n == NGTCP2_ERR_STREAM_NOT_FOUND)
                continue;
        } else if (fin && !bytes && ndata < 0 && n >= 0) {
            h3_fin_owed(c->h3, sid); /* an end alone, not taken: nghttp3 may drop it */
        }
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
            nghttp3_conn_block_stream(ng, sid);
            continue;
        }
        if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
            nghttp3_conn_shutdown_stream_write(ng, sid);
            continue;
        }
        if (ndata >= 0 && nghttp3_conn_add_write_offset(ng, sid, (size_t)ndata) != 0)
            return -1;
        if (n == NGTCP2_ERR_WRITE_MORE)
            continue;
        if (n < 0) {
            ngtcp2_connection_close_error_set_transport_error_liberr(&c->err, (int)n, NULL, 0);
            return -1;
        }
        return n;
    }
}

/* Send what the connection has, at most its send quantum (pacing brings the
   rest): packets of one path and ECN go out as GSO trains of equal segments,
   a shorter one ending a train. */
int quic_conn_write(quic_conn_t *c)
{
    quic_ep_t *e = c->ep;
    if (c->closing || c->draining)
        return 0;
    ngtcp2_tstamp ts = now_ts(e);
    size_t mtu = ngtcp2_conn_get_max_tx_udp_payload_size(c->q);
    mtu = mtu > QUIC_PKT_MAX ? QUIC_PKT_MAX : mtu;
    size_t max = ngtcp2_conn_get_send_quantum(c->q) / mtu;
    max = max < 1 ? 1 : max > QUIC_TRAIN ? QUIC_TRAIN : max;
    ngtcp2_path_storage ps, first;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_path_storage_zero(&first);
    ngtcp2_pkt_info pi = {0};
    uint8_t ecn = 0;
    size_t off = 0, seg = 0, k = 0, total = 0;
    uint8_t *tx = txq_reserve(e); /* room for max packets: trains queue in place */
    for (;;) {
        ngtcp2_ssize n = write_one(c, &ps.path, &pi, tx + off, mtu, ts);
        if (n < 0)
            return -1;
        if (n > 0 && k > 0 && (!ngtcp2_path_eq(&first.path, &ps.path) || pi.ecn != ecn ||
                               (size_t)n > seg)) { /* this one cannot join the train */
            txq_add(e, &first.path, ecn, tx, off, seg);
            tx += off, off = 0, k = 0; /* it starts the next one, where it is */
        }
        if (n > 0) {
            if (k++ == 0) {
                ngtcp2_path_copy(&first.path, &ps.path);
                ecn = (uint8_t)pi.ecn, seg = (size_t)n;
            }
            off += (size_t)n;
            total++;
        }
        int last = n == 0 || total >= max;
        if ((last || (size_t)n < seg) && off) {
            txq_add(e, &first.path, ecn, tx, off, seg);
            tx += off, off = 0, k = 0;
        }
        if (last)
            break;
    }
    ngtcp2_conn_update_pkt_tx_time(c->q, ts);
    if (e->txq_used >= QUIC_TXQ_EAGER) /* a bulk sender's train goes at once */
        quic_txq_flush(e);
    return 0;
}
#endif
