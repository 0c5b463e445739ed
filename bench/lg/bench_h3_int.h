/*
 * bench_h3_int — what bench_h3.c (a worker's HTTP/3 connections) and
 * bench_h3_cb.c (what ngtcp2 and nghttp3 call back, and the requests'
 * fields) share: the run's, a connection's and a request's structs, and
 * bench_h3_cb.c's tables and functions.  bench_h3.c uses them; bench_h3_cb.c
 * never calls bench_h3.c.  Only with HAVE_H3.
 */
#ifndef BENCH_H3_INT_H
#define BENCH_H3_INT_H

#include "bench_common.h"

#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <stdint.h>

#include "gio.h"
#include "gio_udp.h"

#define H3B_RX_CAP 2048    /* one datagram received */
#define H3B_RX_BATCH 32    /* datagrams per recvmmsg */
#define H3B_TX_BATCH 32    /* packets per sendmmsg (and per write round) */
#define H3B_PKT 1452       /* room for one packet we send */
#define H3B_SCID_LEN 16
#define H3B_STREAM_WINDOW (8u << 20) /* receive windows: flow control never paces a run */
#define H3B_CONN_WINDOW (64u << 20)
#define H3B_FIELDS 40 /* request fields at most */
#define H3B_SHAKING 256 /* handshakes under way at most (a server caps them: gatling at 1024) */
/* TLS 1.3 with QUIC's mandatory suite alone (RFC 9001 5.3), so that every server measured
   does the same AES-128-GCM work per packet */
#define H3B_PRIORITY                                                                            \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:%DISABLE_TLS13_COMPAT_MODE"

enum { S_FREE, S_HANDSHAKE, S_OPEN };

/* One request's fields for nghttp3, made from the HTTP/1.1 text of a bench_req_t. */
typedef struct h3req {
    nghttp3_nv nv[H3B_FIELDS];
    size_t n;
    char *mem; /* the names and values (a copy of the request, cut) */
} h3req_t;

typedef struct h3run h3run_t;

/* A request in flight: the stream's user data. */
typedef struct h3slot {
    struct h3conn *c;
    int64_t t;      /* issue time, ns */
    uint64_t body;  /* DATA payload received */
    unsigned status;
    int64_t sid;
    struct h3slot *next_free;
} h3slot_t;

typedef struct h3conn {
    h3run_t *r;
    int fd;
    uint8_t state;
    uint8_t bound;  /* nghttp3's control and QPACK streams are open */
    uint8_t closing; /* no new request: the server's GOAWAY, or a run that stops */
    int64_t t0;     /* when the first Initial left, ns */
    int64_t heard;  /* when the server's first datagram came, ns; 0: none yet */
    int64_t progress; /* ns of the last completed response (or first request in flight) */
    ngtcp2_conn *q;
    nghttp3_conn *h3;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    struct sockaddr_storage local, remote;
    socklen_t locallen;
    unsigned inflight;
    h3slot_t *slots, *free;
    int fail_kind; /* set by a callback: the connection fails as this LG_E_* kind */
} h3conn_t;

struct h3run {
    const bench_cfg_t *cfg;
    bench_stats_t *st, *all;
    gio_loop_t *loop;
    h3conn_t *c;
    unsigned n, depth;
    unsigned shaking;  /* connections in HANDSHAKE */
    unsigned next_slot; /* slots [next_slot, n) have not had their first connection yet */
    h3req_t *req;
    size_t next_req;
    uint64_t limit, started;
    int64_t now, timeout_ns, stop_at;
    int64_t interval_ns; /* -R: between due times in this worker; 0: closed loop */
    int64_t next_due;    /* -R: when the next request falls due, ns */
    unsigned next_conn;  /* -R: where the search for a free stream slot starts */
    int ramping, stopping, aborting;
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
    char host[256]; /* the URL's host: SNI (a name) and the name verified */
    int host_is_ip;
    gio_dgram_t dg[H3B_RX_BATCH];
    uint8_t rx[H3B_RX_BATCH][H3B_RX_CAP];
    gio_dgram_t td[H3B_TX_BATCH];
    uint8_t tx[H3B_TX_BATCH][H3B_PKT];
};

/* bench_h3_cb.c's: the callbacks' tables, a request's fields from its
   HTTP/1.1 text (0, or -1 if it does not fit), and the ngtcp2 connection
   of a crypto reference. */
int h3b_req_make(h3req_t *q, const char *text);
extern const ngtcp2_callbacks h3b_quic_cb;
extern const nghttp3_callbacks h3b_h3_cb;
ngtcp2_conn *h3b_get_conn(ngtcp2_crypto_conn_ref *ref);

#endif
