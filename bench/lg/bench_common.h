/*
 * bench — the throughput load generator: what main() (bench.c) hands to a
 * worker's loop (bench_run.c, bench_surge.c, bench_h3.c: each declared in its
 * own header) and what the loop hands back; and what the loops share
 * (bench_common.c).
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "lg.h"
#include "lg_h2.h"
#include "lg_hist.h"
#include "lg_net.h"

#define BENCH_MAX_DEPTH 1024 /* pipelining depth limit */

/* One request, ready to send: the keep-alive form and the last-on-connection
   form (HTTP/1.1), or its HTTP/2 header fields (--h2). */
typedef struct bench_req {
    char *ka, *close;
    size_t kalen, closelen;
    lg_h2_req_t *h2;
} bench_req_t;

typedef struct bench_cfg {
    lg_url_t url;     /* the target (connections go to url.addr) */
    bench_req_t *req; /* requests cycled through (-f), at least one */
    size_t nreq;
    lg_addr_t *srcs; /* -b: local addresses to bind, NULL: the kernel picks */
    size_t nsrcs;
    unsigned conns;          /* -c, over all processes */
    unsigned procs;          /* -P */
    uint64_t nreqs;          /* -n, over all processes; 0: no count limit */
    double duration;         /* -d seconds; 0: none */
    double hardcap;          /* -T seconds: nothing runs longer */
    double timeout;          /* -t seconds per connect and per response */
    unsigned depth;          /* -p: requests in flight per connection (HTTP/1.1) */
    unsigned streams;        /* --streams: requests in flight per connection (HTTP/2) */
    unsigned per_conn;       /* -r: requests per keep-alive connection; 0: unlimited */
    unsigned max_connecting; /* connects (ftp: and logins) in progress per process */
    double rate;             /* -R: open loop, requests/s over all processes; 0: closed loop */
    int keepalive;           /* -k */
    int h2;                  /* --h2: HTTP/2 (ALPN h2 on https, prior knowledge on http) */
    int h3;                  /* --h3: HTTP/3 over QUIC (bench_h3.c) */
    int idle;                /* --idle N: --h3 connections held open without a request */
    const char *cafile;      /* -C: --h3 verifies the server's certificate against it */
    int head;                /* -m HEAD: responses have no body */
    int connect_only;        /* --connect-only */
    int resume;              /* --resume: https connections resume the last session */
    int json;                /* -J */
    int progress;            /* show the progress line (this process draws it) */
    double surge;     /* --surge: visitors/s over all processes (req[0] the page, the rest its
                         assets); 0: not a surge */
    double returning; /* --returning: share of visitors that resume a TLS session, 0..1 */
    int early;        /* --early-data: returning visitors send the page's request in 0-RTT */
} bench_cfg_t;

/* Why a worker gave up early. */
enum {
    BENCH_RUN_OK,
    BENCH_UNREACHABLE,
    BENCH_NOT_HTTP, /* ftp://: not an FTP server */
    BENCH_SYSERR,
    BENCH_NOT_TLS,
    BENCH_NOT_H2,
    BENCH_FTP_LOGIN /* ftp://: the anonymous login was refused (fatal_errno: the reply code) */
};

/*
 * One worker's results.  Lives in shared memory: the worker updates it as it
 * goes, the parent reads the counters for the progress line and merges all
 * of them at the end.  Plain data, no pointers.
 */
typedef struct bench_stats {
    uint64_t requests;  /* requests issued on an established connection */
    uint64_t responses; /* complete responses, any status */
    uint64_t lost;      /* requests that got no complete response */
    uint64_t attempts;  /* connect() calls */
    uint64_t connects;  /* connections established */
    uint64_t bytes;     /* bytes read, heads and framing included */
    uint64_t body;      /* body bytes */
    uint64_t status[6]; /* [0]: unknown class, [1..5]: 1xx (unused) .. 5xx */
    uint64_t err[LG_E_NUM];
    int64_t start_ns, end_ns;
    int32_t fatal; /* BENCH_RUN_* */
    int32_t fatal_errno;
    int32_t open; /* connections open now */
    int32_t finished;
    int32_t ramped;  /* -k: all this worker's connections are open */
    int64_t ramp_ns; /* how long opening them took */
    /* the measurement window: from the start (after the ramp) to -d or a stop
       signal; the rates are computed over it, not over the drain after it */
    uint64_t win_responses, win_bytes, win_connects;
    int64_t win_ns;
    lg_hist_t lat;  /* response latency, microseconds */
    lg_hist_t conn; /* connect latency, microseconds */
    lg_hist_t hs;   /* https: TLS handshake time, microseconds */
    uint64_t resumed; /* https: handshakes that resumed a session */
    uint64_t retried; /* --h2: requests sent again after a graceful GOAWAY refused them */
    uint64_t unsent;  /* -R with -d: requests due before -d's end that found no free slot */
    /* --surge (lat is then the page-load time; err[] counts failed visitors, one kind each) */
    uint64_t visitors;  /* visitors started (each a new connection) */
    uint64_t pages;     /* page loads complete, every response below 400 */
    uint64_t unstarted; /* arrivals due before -d's end that found every slot (-c) busy */
    uint64_t returning; /* visitors that were to resume */
    uint64_t offered;   /* ... and had a session to offer */
    uint64_t early_sent;     /* --early-data: ... whose session allowed early data: sent */
    uint64_t early_accepted; /* ... and the server took it (else sent again after the handshake) */
    uint64_t late;      /* visitors started more than 1 ms after their arrival time */
    int64_t late_max_ns;
} bench_stats_t;

/* A run's fatal reason (BENCH_RUN_*) and its errno: the first one stays. */
static inline void bench_stats_fatal(bench_stats_t *st, int why, int e)
{
    if (!st->fatal) {
        st->fatal = why;
        st->fatal_errno = e;
    }
}

/*
 * Write what out holds, and what an HTTP/2 session (h2, or NULL) has to send,
 * batch after batch, over TLS (ssl, or NULL) or fd, until the socket is full
 * or all is out; then watch fd on loop for what lets the rest go (and for
 * reading).  0, or -1 with the LG_E_* kind of the failure in *why.
 */
struct ssl_st;
struct gio_loop;
int bench_flush(struct gio_loop *loop, lg_h2_t *h2, struct ssl_st *ssl, int fd, gio_batch_t *out,
                int *why);

/* Open loop: sleep until due (lg_now_ns), at most 50 us at a time (bench_common.c says why). */
void bench_nap_until(int64_t due);
/* -R: how many fall due from next_due, every interval_ns, before min(now + 1, stop_at). */
uint64_t bench_due_before(int64_t next_due, int64_t interval_ns, int64_t now, int64_t stop_at);
/* -R with -d, at the stop: those due before -d's end never sent, within -n's limit (0: none). */
uint64_t bench_unsent(int64_t next_due, int64_t interval_ns, int64_t now, int64_t stop_at,
                      uint64_t limit, uint64_t started);

/* Start a results struct. */
void bench_stats_init(bench_stats_t *st);

/* dst += src. */
void bench_stats_merge(bench_stats_t *dst, const bench_stats_t *src);

/* Close the measurement window at now_ns (at -d or a signal; with -n the whole run):
   what the rates are computed over. */
void bench_stats_window(bench_stats_t *st, int64_t now_ns);

#endif
