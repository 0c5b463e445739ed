/*
 * stats — what one loop counts: requests and bytes in total and over the
 * last second, per protocol with a histogram of request durations, and what
 * each defence did.  route/status.c shows them as /server-status,
 * route/metrics.c as /metrics, both from counters.h's rows (each
 * counter's field, names and meaning, once).  Only the loop's thread writes
 * them, so counting is a plain increment.
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
#include "counters.h"

#include <stddef.h>
#include <stdint.h>

/* The protocols requests are counted by (/metrics' protocol label). */
enum { STATS_HTTP1, STATS_H2, STATS_FTP, STATS_H3, STATS_PROTOS };

/* The request duration histogram's upper bounds in microseconds, 0.5 ms to
   10 s; a last bucket holds what took longer. */
#define STATS_BOUNDS 14
extern const uint32_t stats_bounds_us[STATS_BOUNDS];

/* What is counted per backend (of a -P rule or a --pool): counters.h's
   STATS_BACKEND_COUNTERS, BACKEND_<kind> in its order. */
#define STATS_BACKEND_ENUM(kind, metric, help, key, label, ckey, clabel) BACKEND_##kind,
enum { STATS_BACKEND_COUNTERS(STATS_BACKEND_ENUM) BACKEND_KINDS };

/* The floods an HTTP/2 connection is ended for (h2/h2.c), each counted. */
enum {
    H2_FLOOD_SETTINGS,     /* SETTINGS frames too fast (CVE-2019-9515) */
    H2_FLOOD_PING,         /* PING frames too fast (CVE-2019-9512) */
    H2_FLOOD_WINDOW,       /* WINDOW_UPDATEs beyond what our DATA took, too fast (9511) */
    H2_FLOOD_EMPTY_DATA,   /* DATA frames with no data, not ending a stream (9518) */
    H2_FLOOD_OTHER,        /* PRIORITY, PRIORITY_UPDATE and unknown frames too fast (9513) */
    H2_FLOOD_RESET_SENT,   /* streams we had to reset ("MadeYouReset", CVE-2025-8671) */
    H2_FLOOD_RAPID_RESET,  /* streams the client reset too fast (CVE-2023-44487) */
    H2_FLOOD_CONTINUATION, /* over 8 CONTINUATIONs in a header block (CVE-2024-28182) */
    H2_FLOOD_KINDS
};

/* The fields a row of counters.h declares, by its where (C, M, G; A and O
   are S's, the side processes'): */
#define STATS_FIELD_C_C(f) uint64_t f;
#define STATS_FIELD_M_M(f) uint64_t f;
#define STATS_FIELD_G_G(f) uint64_t f;
#define STATS_FIELD_S_A(f) uint64_t f;
#define STATS_FIELD_S_O(f) uint64_t f;
#define STATS_FIELD_C_E(f)
#define STATS_FIELD_C_M(f)
#define STATS_FIELD_C_G(f)
#define STATS_FIELD_C_A(f)
#define STATS_FIELD_C_O(f)
#define STATS_FIELD_M_C(f)
#define STATS_FIELD_M_E(f)
#define STATS_FIELD_M_G(f)
#define STATS_FIELD_M_A(f)
#define STATS_FIELD_M_O(f)
#define STATS_FIELD_G_C(f)
#define STATS_FIELD_G_E(f)
#define STATS_FIELD_G_M(f)
#define STATS_FIELD_G_A(f)
#define STATS_FIELD_G_O(f)
#define STATS_FIELD_S_C(f)
#define STATS_FIELD_S_E(f)
#define STATS_FIELD_S_M(f)
#define STATS_FIELD_S_G(f)
#define STATS_FIELD_C(w, f, ...) STATS_FIELD_C_##w(f)
#define STATS_FIELD_M(w, f, ...) STATS_FIELD_M_##w(f)
#define STATS_FIELD_G(w, f, ...) STATS_FIELD_G_##w(f)
#define STATS_FIELD_S(w, f, ...) STATS_FIELD_S_##w(f)

typedef struct status_counters {
    uint64_t requests, bytes;           /* since start */
    uint64_t last_requests, last_bytes; /* at the start of the last full second */
    uint64_t rps, bps;                  /* over the last full second */
    int64_t second;                     /* wall-clock second being counted */
    int64_t started;
    STATS_COUNTERS(STATS_FIELD_C) /* counters.h's C rows: what the defences did, ... */
    uint64_t h2_flood[H2_FLOOD_KINDS]; /* HTTP/2 connections ended by GOAWAY ENHANCE_YOUR_CALM */
    uint64_t grpc[17];         /* gRPC calls proxied, by grpc-status (0 OK ... 16) */
    uint64_t backend[CONFIG_BACKENDS][BACKEND_KINDS]; /* per backend slot, BACKEND_* */
    /* ... and how long its requests took, as duration[] below */
    uint64_t be_duration[CONFIG_BACKENDS][STATS_BOUNDS + 1];
    uint64_t be_duration_us[CONFIG_BACKENDS];
    uint64_t compressed[3];    /* answers compressed on the fly: gzip, br, zstd (compress.c) */
    uint64_t cache_coded[3];   /* cache hits sent from a stored coded body: gzip, br, zstd */
    /* per protocol (STATS_*): requests and bytes (their sums are the two above) */
    uint64_t proto_requests[STATS_PROTOS], proto_bytes[STATS_PROTOS];
    /* ... and how long the requests took: how many fell in each bucket (not
       cumulative; the last is above every bound), and the sum in microseconds */
    uint64_t duration[STATS_PROTOS][STATS_BOUNDS + 1];
    uint64_t duration_us[STATS_PROTOS];
} status_counters_t;

/*
 * One loop's numbers as /metrics reads them: the counters, then counters
 * kept elsewhere (gzip, the memory and response caches, dictionaries:
 * counters.h's M rows), then the gauges (its G rows, and the backends').
 * Every field is 64 bits, so that a snapshot is an array of words to copy
 * and add.
 */
typedef struct stats_snap {
    status_counters_t c;
    struct {
        STATS_COUNTERS(STATS_FIELD_M)
    } more;
    struct { /* what a worker that is gone leaves out of the sum */
        STATS_COUNTERS(STATS_FIELD_G) /* draining: 0 or 1, summed as the largest */
        uint64_t be_up[CONFIG_BACKENDS];          /* 1: the backend takes requests */
        uint64_t be_outstanding[CONFIG_BACKENDS]; /* requests at it now */
    } g;
    struct { /* the side processes' (A and O rows): 0 in a loop's snapshot and in
                the workers' sum; status_side fills them after it */
        STATS_COUNTERS(STATS_FIELD_S)
        uint64_t has; /* STATS_SIDE_*: which of them are there */
    } side;
} stats_snap_t;

/* What stats_snap_t's side holds, and a row needs (stats_row_t's side). */
enum { STATS_SIDE_NONE, STATS_SIDE_ACME, STATS_SIDE_ONDEMAND };

/* One row of counters.h as the pages read it. */
enum { STATS_COUNTER, STATS_GAUGE, STATS_MS };
typedef struct stats_row {
    size_t off;              /* where its value is in a stats_snap_t */
    int type;                /* STATS_COUNTER, STATS_GAUGE, STATS_MS */
    const char *metric;      /* its family on /metrics, or NULL */
    const char *lkey, *lval; /* its sample's label there, or NULL */
    const char *help;        /* the family's help (its first row's), or NULL */
    const char *skey;        /* its key on /server-status, or NULL */
    const char *slabel;      /* its label there */
    int side;                /* STATS_SIDE_*: shown when the snapshot's side.has is this or more */
} stats_row_t;

/* counters.h's rows, in its order; stats_shown: is r there in snap (its
   side process's numbers, if it is one's)? */
int stats_shown(const stats_snap_t *snap, const stats_row_t *r);
extern const stats_row_t stats_rows[];
extern const size_t stats_nrows;

/* Row r's value in snap. */
uint64_t stats_value(const stats_snap_t *snap, const stats_row_t *r);

#define STATS_SNAP_WORDS (sizeof(stats_snap_t) / sizeof(uint64_t))
_Static_assert(sizeof(stats_snap_t) % sizeof(uint64_t) == 0, "a snapshot is 64-bit words");

/* Start a new second at wall-clock second now, if it is one: the second that
   ended gives requests/s and bytes/s (0 after a quiet gap). */
void stats_roll(status_counters_t *st, int64_t now);

/*
 * Count a finished request of protocol proto (STATS_*), answered with
 * `status` (0: none, FTP's), and `bytes` bytes at
 * wall-clock second now, which took took_us microseconds by its loop's clock
 * (gio_now_us() now less gio_now_us() when its first bytes were read: the
 * clock the loop reads once a round, so that counting reads no clock; a
 * request answered within one round took 0).
 */
void status_count(status_counters_t *st, int64_t now, int proto, unsigned status, uint64_t bytes,
                  int64_t took_us);

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

/* Worker i's numbers as it last published them, into out: 0, or -1 if t
   has no slot i (out untouched).  Under -W the status page's per-worker
   view; a worker's own are fresher from status_snapshot. */
int stats_shm_worker(stats_shm_t *t, int i, stats_snap_t *out);

/* The number of workers t has slots for (0 for NULL: no -W). */
int stats_shm_workers(const stats_shm_t *t);

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
/* Worker i's pid as it said it (0: none, or t NULL or no slot i). */
long stats_shm_pid(const stats_shm_t *t, int i);

#endif
