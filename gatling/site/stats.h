/*
 * stats — what one loop counts: requests and bytes in total and over the
 * last second, per protocol with a histogram of request durations, and what
 * each defence did.  handlers/status.c shows them as /server-status,
 * handlers/metrics.c as /metrics.  Only the loop's thread writes them, so
 * counting is a plain increment.
 *
 * With -W the workers publish them (and the gauges beside them) into a
 * table in shared memory the supervisor maps before it forks, each worker
 * its own slot under a sequence counter (a seqlock: the writer never waits,
 * a reader retries a copy that changed under it); /metrics, whichever worker
 * answers it, sums the slots.  The workers run as -u and can write all of
 * that table: the handle (its size, the slots' count) lives in each
 * process's private memory, and the root supervisor reads nothing from the
 * table but counters to add, never an index or a size.
 */
#ifndef GATLING_STATS_H
#define GATLING_STATS_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>

/* The protocols requests are counted by (/metrics' protocol label). */
enum { STATS_HTTP1, STATS_H2, STATS_FTP, STATS_H3, STATS_PROTOS };

/* The request duration histogram's upper bounds in microseconds, 0.5 ms to
   10 s; a last bucket holds what took longer. */
#define STATS_BOUNDS 14
extern const uint32_t stats_bounds_us[STATS_BOUNDS];

/* What is counted per backend (of a -P rule or a --pool). */
enum {
    BACKEND_CONNECTS,    /* backend connections opened */
    BACKEND_REUSES,      /* requests sent on a pooled backend connection */
    BACKEND_502,         /* backend failures: 502, or a response cut short */
    BACKEND_504,         /* backends silent past -Q: 504 (or cut short) */
    BACKEND_TUNNEL_IDLE, /* WebSocket tunnels closed idle (-Q's second value) */
    BACKEND_UNSIZED,     /* bodies without a length not read whole: 413, 503 */
    BACKEND_REQUESTS,    /* requests sent to it (each attempt) */
    BACKEND_RETRIES,     /* ... that failed there and went to another backend */
    BACKEND_DOWNS,       /* times it was taken out: failures in a row, or failed checks */
    BACKEND_CHECKS_FAILED, /* active checks that failed */
    BACKEND_KINDS
};

/* The floods an HTTP/2 connection is ended for (h2/h2.c), each counted. */
enum {
    H2_FLOOD_SETTINGS,     /* SETTINGS frames too fast (CVE-2019-9515) */
    H2_FLOOD_PING,         /* PING frames too fast (CVE-2019-9512) */
    H2_FLOOD_WINDOW,       /* WINDOW_UPDATEs of less than 1 KiB too fast (data dribble, 9511) */
    H2_FLOOD_EMPTY_DATA,   /* DATA frames with no data, not ending a stream (9518) */
    H2_FLOOD_OTHER,        /* PRIORITY, PRIORITY_UPDATE and unknown frames too fast (9513) */
    H2_FLOOD_RESET_SENT,   /* streams we had to reset ("MadeYouReset", CVE-2025-8671) */
    H2_FLOOD_RAPID_RESET,  /* streams the client reset too fast (CVE-2023-44487) */
    H2_FLOOD_CONTINUATION, /* over 8 CONTINUATIONs in a header block (CVE-2024-28182) */
    H2_FLOOD_KINDS
};

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
    uint64_t tls_no_cert;      /* handshakes refused: no certificate loaded yet (-C DIR) */
    uint64_t timeout_handshake;/* HTTPS: handshake not done in time (-s) */
    uint64_t tls_misdirected;  /* Host answered by another certificate: 421 */
    uint64_t tls_ktls;         /* handshakes after which the kernel encrypts (kTLS) */
    uint64_t acme_http;        /* --acme: HTTP-01 challenges answered (200) */
    uint64_t acme_http_refused;/* ... requests below acme-challenge/ for no outstanding token: 404 */
    uint64_t acme_alpn;        /* --acme: TLS-ALPN-01 challenge handshakes served */
    uint64_t acme_alpn_refused;/* ... ALPN acme-tls/1 for a name without a challenge: refused */
    uint64_t h2_conns;         /* connections that spoke HTTP/2 (ALPN h2 or h2c) */
    uint64_t h2_errors;        /* HTTP/2 connections ended by GOAWAY with an error: a
                                  protocol error, a flood (rapid reset, CONTINUATION,
                                  SETTINGS/PING), -A */
    uint64_t h2_yields;        /* HTTP/2: sends stopped at the per-event budget, more queued */
    uint64_t h2_refused;       /* HTTP/2: streams refused, the connection's header bytes full */
    uint64_t h2_file_waits;    /* HTTP/2: streams that waited for a file slot (per connection) */
    uint64_t h2_flood[H2_FLOOD_KINDS]; /* HTTP/2 connections ended by GOAWAY ENHANCE_YOUR_CALM */
    /* HTTP/3 (quic/quic.c, h3/h3.c) */
    uint64_t h3_conns;         /* QUIC connections begun (an Initial accepted) */
    uint64_t h3_handshakes;    /* ... whose handshake completed */
    uint64_t h3_failed;        /* ... ended by an error (handshake, protocol, ours) */
    uint64_t h3_idle;          /* ... closed by the idle timeout (-T) */
    uint64_t h3_refused;       /* Initials dropped: over -N or -K, draining, no certificate */
    uint64_t h3_resets;        /* stateless resets sent: a packet for no connection of ours */
    uint64_t h3_version_neg;   /* version negotiation packets sent */
    uint64_t h3_dropped;       /* datagrams dropped: not QUIC, or for no connection */
    uint64_t h3_send_lost;     /* datagrams lost to a full socket buffer */
    uint64_t h3_retries;       /* Retry packets sent (--h3-retry): the address proves itself */
    uint64_t h3_bad_tokens;    /* Initials with a Retry token that failed: INVALID_TOKEN */
    uint64_t h3_validated;     /* connections begun with a token (Retry's or NEW_TOKEN's) */
    uint64_t h3_rapid_reset;   /* connections closed for streams reset too fast */
    uint64_t h3_fields_refused; /* request streams whose fields were over the limits: 431 */
    uint64_t h3_streams_refused; /* streams refused, the connection's request fields full */
    uint64_t offences;         /* connections a flood defence ended, remembered per address */
    uint64_t offender_reduced; /* ... connections from such an address since: smaller budgets */
    uint64_t refused_offender; /* ... and refused at accept: closed unread (--flood-memory) */
    uint64_t proxy_headers;    /* -y: PROXY headers that named a client */
    uint64_t proxy_local;      /* ... that kept the proxy's address (LOCAL, UNKNOWN: checks) */
    uint64_t proxy_untrusted;  /* -y: connections from outside -Y, closed unread */
    uint64_t proxy_malformed;  /* -y: PROXY headers malformed or cut short, closed */
    uint64_t proxy_timeout;    /* -y: PROXY headers not complete in time (-s), closed */
    uint64_t health_ok;        /* -k: health checks answered 200 */
    uint64_t health_failed;    /* -k: health checks answered 503 (draining) */
    uint64_t grpc[17];         /* gRPC calls proxied, by grpc-status (0 OK ... 16) */
    uint64_t backend[CONFIG_BACKENDS][BACKEND_KINDS]; /* per backend slot, BACKEND_* */
    /* ... and how long its requests took, as duration[] below */
    uint64_t be_duration[CONFIG_BACKENDS][STATS_BOUNDS + 1];
    uint64_t be_duration_us[CONFIG_BACKENDS];
    uint64_t cgi_spawned;      /* CGI processes started (handlers/cgi.c) */
    uint64_t cgi_killed;       /* ... killed: at the deadline (-Q), or the client went first */
    uint64_t cgi_redirects;    /* CGI local redirects answered inside the server (RFC 3875 6.2.2) */
    uint64_t cgi_refused;      /* CGI requests refused: over -J, spawner busy or gone, 503 */
    uint64_t cgi_failed;       /* CGI processes that gave no (valid) head: 502 */
    uint64_t cache_hits;       /* response cache: answered from a fresh stored response */
    uint64_t cache_stale;      /* ... from a stale one while one fetch refreshes it */
    uint64_t cache_stale_errors; /* ... from a stale one because the backend failed */
    uint64_t cache_misses;     /* ... fetched from the backend (one fetch each) */
    uint64_t cache_collapsed;  /* ... waited for a fetch another request began */
    uint64_t cache_fetches;    /* backend requests the cache made (misses, refreshes) */
    uint64_t cache_stored;     /* responses stored whole */
    uint64_t cache_revalidated; /* stored responses made fresh by a 304 */
    uint64_t cache_passes;     /* requests sent by: the last response was not storable */
    uint64_t cache_bypass;     /* requests that may not share: Authorization, Cookie, a body */
    uint64_t cache_lock_timeouts; /* waiters that gave up on a slow fetch and asked themselves */
    uint64_t cache_purges;     /* PURGE requests */
    uint64_t ftp_sessions;     /* -f: FTP control connections accepted */
    uint64_t ftp_logins;       /* ... logged in (anonymous, ftp) */
    uint64_t ftp_downloads;    /* RETRs completed (226) */
    uint64_t ftp_uploads;      /* STORs and APPEs completed (226) */
    uint64_t ftp_refused;      /* logins other than anonymous, uploads and MKDs refused */
    uint64_t ftp_bounce;       /* PORT/EPRT to another address or a port below 1024 */
    uint64_t ftp_pasv_theft;   /* data connections to a passive port from another address */
    uint64_t ftp_timeouts;     /* login, idle, data set-up, transfer rate (-B) deadlines */
    uint64_t compressed[3];    /* answers compressed on the fly: gzip, br, zstd (compress.c) */
    uint64_t compress_capped;  /* ... sent identity: the streams or memory cap was reached */
    uint64_t compress_in, compress_out; /* ... their bytes before and after */
    uint64_t cache_coded[3];   /* cache hits sent from a stored coded body: gzip, br, zstd */
    uint64_t cache_coded_made; /* ... such bodies made (a stored response coded whole) */
    /* per protocol (STATS_*): requests and bytes (their sums are the two above) */
    uint64_t proto_requests[STATS_PROTOS], proto_bytes[STATS_PROTOS];
    /* ... and how long the requests took: how many fell in each bucket (not
       cumulative; the last is above every bound), and the sum in microseconds */
    uint64_t duration[STATS_PROTOS][STATS_BOUNDS + 1];
    uint64_t duration_us[STATS_PROTOS];
} status_counters_t;

/*
 * One loop's numbers as /metrics reads them: the counters, then counters
 * kept elsewhere (gzip, the memory and response caches), then the gauges.
 * Every field is 64 bits, so that a snapshot is an array of words to copy
 * and add.
 */
typedef struct stats_snap {
    status_counters_t c;
    struct {
        uint64_t gz_skipped_busy, gz_paced, gz_paced_ms; /* site/encoding.h */
        uint64_t mem_full;                               /* site/fcache.h */
        uint64_t cache_evictions;                        /* handlers/cache.h */
        uint64_t dict_hits, dict_saved, dict_unknown, dict_made; /* site/dict.h */
    } more;
    struct { /* what a worker that is gone leaves out of the sum */
        uint64_t conns, tls_conns;    /* open connections, of which HTTPS */
        uint64_t mem_files, mem_bytes; /* small files held in memory (-F) */
        uint64_t cache_entries, cache_bytes;
        uint64_t draining; /* 0 or 1: summed as the largest */
        uint64_t be_up[CONFIG_BACKENDS];          /* 1: the backend takes requests */
        uint64_t be_outstanding[CONFIG_BACKENDS]; /* requests at it now */
    } g;
} stats_snap_t;

#define STATS_SNAP_WORDS (sizeof(stats_snap_t) / sizeof(uint64_t))
_Static_assert(sizeof(stats_snap_t) % sizeof(uint64_t) == 0, "a snapshot is 64-bit words");

/* Start a new second at wall-clock second now, if it is one: the second that
   ended gives requests/s and bytes/s (0 after a quiet gap). */
void stats_roll(status_counters_t *st, int64_t now);

/*
 * Count a finished request of protocol proto (STATS_*) and `bytes` bytes at
 * wall-clock second now, which began at started_us (monotonic microseconds,
 * gio_now_us(): when its loop round began); it ends now, by the clock.
 */
void status_count(status_counters_t *st, int64_t now, int proto, uint64_t bytes,
                  int64_t started_us);

/* The table the workers publish into (-W); opaque. */
typedef struct stats_shm stats_shm_t;

/* A table of `workers` slots in shared memory, for the supervisor to map
   before it forks.  NULL (errno set) if it cannot be mapped. */
stats_shm_t *stats_shm_new(int workers);

void stats_shm_free(stats_shm_t *t);

/* Worker i publishes snap into its slot (no lock: only i writes it). */
void stats_shm_publish(stats_shm_t *t, int i, const stats_snap_t *snap);

/*
 * The sum over every worker, into out: own (worker self's numbers, fresher
 * than its slot) and the other slots as last published, and what workers
 * that died had counted.  Counters add up; start time is the earliest,
 * draining the largest.
 */
void stats_shm_total(stats_shm_t *t, int self, const stats_snap_t *own, stats_snap_t *out);

/*
 * Worker i is gone (the supervisor reaped it): its counters move into the
 * table's own slot for the dead, so that the sums never go down; its gauges
 * go; its slot is empty for the worker that replaces it.
 */
void stats_shm_retire(stats_shm_t *t, int i);

/* Worker i says its pid (t NULL or i out of range: nothing), and the status
   page lists the workers' (up to max into pid[]; how many): informational
   only, as any worker may write any slot. */
void stats_shm_set_pid(stats_shm_t *t, int i, long pid);
int stats_shm_pids(const stats_shm_t *t, long *pid, int max);

#endif
