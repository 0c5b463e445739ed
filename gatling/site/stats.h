/*
 * stats — what one loop counts: requests and bytes in total and over the
 * last second, and what each defence did.  handlers/status.c shows them as
 * /server-status.
 */
#ifndef GATLING_STATS_H
#define GATLING_STATS_H

#include <stdint.h>

/* The floods an HTTP/2 connection is ended for (conn/h2.c), each counted. */
enum {
    H2_FLOOD_SETTINGS,     /* SETTINGS frames too fast (CVE-2019-9515) */
    H2_FLOOD_PING,         /* PING frames too fast (CVE-2019-9512) */
    H2_FLOOD_WINDOW,       /* WINDOW_UPDATEs of less than 1 KiB too fast (data dribble, 9511) */
    H2_FLOOD_EMPTY_DATA,   /* DATA frames with no data, not ending a stream (9518) */
    H2_FLOOD_OTHER,        /* PRIORITY, PRIORITY_UPDATE and unknown frames too fast (9513) */
    H2_FLOOD_RESET_SENT,   /* streams we had to reset ("MadeYouReset", CVE-2025-8671) */
    H2_FLOOD_RAPID_RESET,  /* streams the client reset, nghttp2's limit (CVE-2023-44487) */
    H2_FLOOD_CONTINUATION, /* CONTINUATION frames, nghttp2's limit (CVE-2024-28182) */
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
    uint64_t h2_conns;         /* connections that spoke HTTP/2 (ALPN h2 or h2c) */
    uint64_t h2_errors;        /* HTTP/2 connections ended by GOAWAY with an error: a
                                  protocol error, a flood (rapid reset, CONTINUATION,
                                  SETTINGS/PING), -A */
    uint64_t h2_yields;        /* HTTP/2: sends stopped at the per-event budget, more queued */
    uint64_t h2_refused;       /* HTTP/2: streams refused, the connection's header bytes full */
    uint64_t h2_file_waits;    /* HTTP/2: streams that waited for a file slot (per connection) */
    uint64_t h2_flood[H2_FLOOD_KINDS]; /* HTTP/2 connections ended by GOAWAY ENHANCE_YOUR_CALM */
    uint64_t proxy_headers;    /* -y: PROXY headers that named a client */
    uint64_t proxy_local;      /* ... that kept the proxy's address (LOCAL, UNKNOWN: checks) */
    uint64_t proxy_untrusted;  /* -y: connections from outside -Y, closed unread */
    uint64_t proxy_malformed;  /* -y: PROXY headers malformed or cut short, closed */
    uint64_t proxy_timeout;    /* -y: PROXY headers not complete in time (-s), closed */
    uint64_t health_ok;        /* -k: health checks answered 200 */
    uint64_t health_failed;    /* -k: health checks answered 503 (draining) */
    uint64_t backend_connects; /* -P: backend connections opened */
    uint64_t backend_reuses;   /* -P: requests sent on a pooled backend connection */
    uint64_t backend_502;      /* -P: backend failures: 502, or a response cut short */
    uint64_t backend_504;      /* -P: backends silent past -Q: 504 (or cut short) */
    uint64_t backend_tunnel_idle; /* -P: WebSocket tunnels closed idle (-Q's second value) */
    uint64_t backend_unsized;  /* -P: bodies without a length not read whole: 413, 503 */
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
} status_counters_t;

/* Start a new second at wall-clock second now, if it is one: the second that
   ended gives requests/s and bytes/s (0 after a quiet gap). */
void stats_roll(status_counters_t *st, int64_t now);

/* Count a finished request of `bytes` bytes at wall-clock second now. */
void status_count(status_counters_t *st, int64_t now, uint64_t bytes);

#endif
