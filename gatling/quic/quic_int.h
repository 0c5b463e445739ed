/*
 * quic_int — what HTTP/3's transport files share (not for anyone else): the
 * endpoint and connection structures and the send path's functions.  The
 * calls go one way:
 *   quic.c       the endpoint: datagrams in, connections, their timers and
 *                ngtcp2's callbacks, quic.h's functions
 *     -> quic_send.c  what goes out: a connection's packets (write_one,
 *                quic_conn_write) as GSO trains in the endpoint's send
 *                queue (txq), sent together by sendmmsg; stateless answers
 *     -> quic_callbacks.c  ngtcp2's callbacks, and a new connection's TLS
 *                session, path and transport parameters
 * All are built with HAVE_H3 only.
 */
#ifndef GATLING_QUIC_INT_H
#define GATLING_QUIC_INT_H

#ifdef HAVE_H3
#include "gio_udp.h"
#include "h3/h3.h"
#include "quic_cid.h"
#include "quic_cred.h"
#include "quic_retry.h"
#include "site/config.h"
#include "site/site.h"
#include "site/watch.h"

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <stddef.h>
#include <stdint.h>

/* as quic.h says (not included: its functions are quic.c's, and quic_send.c
   would point back at it) */
typedef struct quic_ep quic_ep_t;
typedef void (*quic_out_fn)(void *arg, const struct gio_dgram *d);

#define QUIC_RX_CAP 2048          /* a datagram received (we ask for at most QUIC_RX_MAX) */
#define QUIC_TRAIN 32             /* packets per GSO train */
#define QUIC_PKT_MAX 1500         /* room for one packet we send */
#define QUIC_TXQ_DG 128           /* trains queued for one sendmmsg round (flush_touched) */
#define QUIC_TXQ (2 * QUIC_TRAIN * QUIC_PKT_MAX) /* ... and their bytes (see txq_reserve) */

typedef struct quic_conn {
    quic_ep_t *ep;
    ngtcp2_conn *q;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    quic_cred_t *cred;
    h3_t *h3;
    codec_conn_t f;
    struct sockaddr_storage peer;
    socklen_t peerlen;
    ngtcp2_cid odcid;  /* the client's first Destination Connection ID, mapped too */
    gio_timer_t timer; /* the loop's: its next ngtcp2 expiry, or its closing period's end */
    int64_t heard;     /* gio_now() ms of the last packet it read */
    uint8_t closing;   /* CONNECTION_CLOSE sent: repeated to what still arrives */
    uint8_t draining;  /* the peer closed: silent until its timer */
    uint8_t limited;   /* counted in -K */
    uint8_t shaking;   /* counted in the endpoint's handshakes under way */
    uint8_t woken, touched;
    uint8_t *closebuf;
    uint32_t closing_rx; /* datagrams that came while closing */
    size_t closelen;
    ngtcp2_connection_close_error err;
    struct quic_conn *wnext, *tnext; /* woken list, touched-this-batch list */
    struct quic_conn *next, **prevp; /* every connection of the endpoint */
} quic_conn_t;

struct quic_ep {
    watch_t w; /* first: the loop's cookie */
    site_t *site;
    int fd, port, gso;
    int steer; /* our socket's index in the group, named by our CIDs (quic_steer.h) */
    size_t max_conns;
    struct sockaddr_storage bound;
    socklen_t boundlen;
    const config_t *cfg;
    const proc_t *proc; /* the certificate store (p->tls) */
    quic_cred_t *cred;
    gnutls_priority_t prio;
    gnutls_anti_replay_t replay; /* --early-data: 0-RTT's anti-replay (quic_early_setup) */
    int replay_said; /* the table's verdict on the ClientHello being read (1 + REPLAY_*; 0 none) */
    quic_cid_table_t *cids;
    quic_retry_t *retry; /* who gets a Retry first (--h3-retry) */
    h3_pool_t *pool;     /* stream memory its sessions share */
    quic_conn_t *woken, *touched, *all;
    uint8_t secret[32]; /* stateless reset tokens derive from it */
    int draining;
    size_t nconns, handshaking;
    quic_out_fn out; /* no socket (quic_open_loose): what is sent goes here */
    void *out_arg;
    gio_dgram_t dg[GIO_UDP_BATCH];
    uint8_t rx[GIO_UDP_BATCH][QUIC_RX_CAP];
    uint8_t tx[QUIC_RETRY_OUT_MAX]; /* a stateless answer (Retry) being made */
    /* what the connections of a batch send, gathered for few sendmmsg calls:
       ntxq trains, txq_used bytes of txq (quic_send.c) */
    gio_dgram_t txd[QUIC_TXQ_DG];
    unsigned ntxq;
    size_t txq_used;
    uint8_t txq[QUIC_TXQ];
};

/* --early-data: GnuTLS's anti-replay on the shared table (site/replay.h), its
   window 10 s.  0, or -1 (out of memory).  Nothing when it is off. */
int quic_early_setup(quic_ep_t *e);

/* ngtcp2's clock: the loop's, in nanoseconds (inline: every packet asks). */
static inline ngtcp2_tstamp now_ts(const quic_ep_t *e)
{
    return (ngtcp2_tstamp)gio_now_us(e->site->loop) * 1000;
}

/* ---- quic_send.c: what goes out ---- */

/* Send the queued trains: sendmmsg in rounds of GIO_UDP_BATCH; what the
   socket does not take is lost (QUIC sends it again), counted in
   h3_send_lost.  The queue is empty after. */
void quic_txq_flush(quic_ep_t *e);

/* One packet of len (<= QUIC_PKT_MAX) bytes at p to the path's peer, queued
   (a CONNECTION_CLOSE, or its repetition). */
void quic_send_packet(quic_ep_t *e, const ngtcp2_path *path, const uint8_t *p, size_t len);

/* A datagram to in's peer from the local address in came to, at once (the
   stateless answers: Retry, stateless reset, version negotiation); a loss
   is counted in h3_send_lost. */
void quic_send_to(quic_ep_t *e, const gio_dgram_t *in, const uint8_t *p, size_t len);

/* Queue what connection c has to send, at most its send quantum (pacing
   brings the rest), as GSO trains; a bulk sender's go at once
   (QUIC_TXQ_EAGER), the others' at the batch's quic_txq_flush.  0, or -1:
   the connection closes with c->err (the caller's start_closing). */
int quic_conn_write(quic_conn_t *c);

/* ---- quic_callbacks.c: ngtcp2's callbacks, a new connection's set-up ---- */

/* What ngtcp2 calls back into, for every connection (ngtcp2_conn_server_new). */
extern const ngtcp2_callbacks quic_callbacks;

/* The datagram's path, its local port filled in (packet info carries none). */
void quic_path_of(quic_ep_t *e, gio_dgram_t *d, ngtcp2_path *path);

/* c's TLS session (GnuTLS: the endpoint's credentials, h3 by ALPN).  0, or -1. */
int quic_tls_setup(quic_conn_t *c);

/* The connection's settings and parameters.  v: quic_retry_check's verdict; odcid:
   the client's first Destination Connection ID if a Retry token carried it. */
void quic_params(quic_ep_t *e, ngtcp2_settings *s, ngtcp2_transport_params *p,
                 const ngtcp2_pkt_hd *hd, int v, const ngtcp2_cid *odcid);

#endif
#endif
