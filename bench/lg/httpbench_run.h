/*
 * httpbench — latency under many idle connections: what main() (httpbench.c)
 * hands to the per-process engine (httpbench_run.c, which this header is of)
 * and gets back.
 */
#ifndef HTTPBENCH_RUN_H
#define HTTPBENCH_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "lg.h"
#include "lg_hist.h"
#include "lg_net.h"

typedef struct hb_cfg {
    lg_url_t url;
    char *req; /* the request (keep-alive form with -k, else Connection: close) */
    size_t reqlen;
    lg_addr_t *srcs; /* -b */
    size_t nsrcs;
    uint64_t conns;    /* -c */
    unsigned interval; /* -i */
    unsigned sample;   /* -s */
    unsigned procs;    /* -P */
    uint64_t nreqs;    /* -n: sample requests over all processes; 0: no limit */
    double duration;   /* -d: the whole run, seconds */
    double hold;       /* -w: keep the connections this long after the last one */
    double timeout;    /* -t */
    int keepalive;     /* -k */
    int resume;        /* -z/--resume: https sessions resumed */
    int json;          /* -J */
    int progress;
} hb_cfg_t;

/* Per-worker results (in shared memory with -P). */
typedef struct hb_stats {
    uint64_t opened;  /* idle connections established */
    uint64_t dropped; /* idle connections the server closed or reset */
    uint64_t samples;
    uint64_t requests;  /* sample requests issued */
    uint64_t responses; /* sample responses complete */
    uint64_t bytes;     /* body bytes (throughput mode) */
    uint64_t err[LG_E_NUM];
    int64_t start_ns, end_ns;
    int32_t fatal; /* HB_* */
    int32_t fatal_errno;
    int32_t finished;
    int32_t timed_out; /* -d ended the run early */
    lg_hist_t clat;    /* idle connect latency, us */
    lg_hist_t sconn;   /* sample connect latency, us */
    lg_hist_t rlat;    /* sample request latency, us */
    lg_hist_t hs;      /* https: TLS handshake time, us */
    uint64_t resumed;  /* https: handshakes that resumed a session */
} hb_stats_t;

enum { HB_OK, HB_UNREACHABLE, HB_NOT_HTTP, HB_GAVE_UP, HB_SYSERR };

/*
 * Worker `index` of cfg->procs: opens idle connections [first, last) (global
 * numbers, which decide where samples fall), taking samples on the way.
 * ctl >= 0 (with -P): wait for a byte on ctl before starting, write a byte to
 * done when all are open, then hold them until ctl reaches EOF.  ctl < 0:
 * hold for cfg->hold seconds, then return.  Returns HB_*.
 */
int hb_run(const hb_cfg_t *cfg, uint64_t first, uint64_t last, int ctl, int done, hb_stats_t *st);

/*
 * Throughput mode (-c 1): fetch the URL once, printing a tput line per
 * megabyte of body.  Also the probe before a latency run (quiet = 1: print
 * nothing).  Returns HB_*.
 */
int hb_fetch(const hb_cfg_t *cfg, int quiet, hb_stats_t *st);

void hb_stats_init(hb_stats_t *st);
void hb_stats_merge(hb_stats_t *d, const hb_stats_t *s);

#endif
