/*
 * status — /server-status (gatling -S): open connections, requests and bytes
 * in total and per second, as HTML or (with ?json) JSON.  Only loopback
 * clients get it; with -W each worker reports its own numbers.
 */
#ifndef GATLING_STATUS_H
#define GATLING_STATUS_H

#include <stdint.h>
#include <sys/socket.h>

struct conn;

typedef struct status_counters {
    uint64_t requests, bytes;           /* since start */
    uint64_t last_requests, last_bytes; /* at the start of the last full second */
    uint64_t rps, bps;                  /* over the last full second */
    int64_t second;                     /* wall-clock second being counted */
    int64_t started;
    /* what the defences did, since start (gatling.8 lists them) */
    uint64_t refused_cap;      /* -N: over the connection cap, 503 (HTTPS: closed) */
    uint64_t refused_addr;     /* -K: over the per-address cap, 503 (HTTPS: closed) */
    uint64_t refused_fds;      /* accept failed: out of descriptors or memory */
    uint64_t rate_limited;     /* -A: over the requests per minute, tarpitted or dropped */
    uint64_t auth_throttled;   /* failed logins: 429 without hashing */
    uint64_t auth_remembered;  /* a recent failed credential: 401 without hashing */
    uint64_t busy;             /* the worker pool's queue was full: 503 */
    uint64_t timeout_head;     /* request head not complete in time (slowloris) */
    uint64_t timeout_body;     /* request body too slow */
    uint64_t timeout_drain;    /* response drained too slowly (slow read) */
    uint64_t timeout_idle;     /* keep-alive idle */
    uint64_t max_requests;     /* -R: keep-alive connections closed at the cap */
    uint64_t head_overflows;   /* a response head did not fit: 500 */
    uint64_t tls_handshakes;   /* HTTPS: handshakes completed */
    uint64_t tls_resumed;      /* ... of which resumed a session (ticket or cache) */
    uint64_t tls_failed;       /* ... failed (protocol error, no common cipher, ...) */
    uint64_t tls_not_tls;      /* bytes on the HTTPS port that were no TLS handshake */
    uint64_t timeout_handshake;/* HTTPS: handshake not done in time (-s) */
    uint64_t tls_misdirected;  /* Host answered by another certificate: 421 */
    uint64_t tls_ktls;         /* handshakes after which the kernel encrypts (kTLS) */
} status_counters_t;

/* Count a finished request of `bytes` bytes at wall-clock second now. */
void status_count(status_counters_t *st, int64_t now, uint64_t bytes);

/* Is the peer a loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104)? */
int status_is_loopback(const struct sockaddr *sa);

/* Queue the status page (json: the JSON form).  0, or -1 on ENOMEM. */
int status_serve(struct conn *c, int json);

#endif
