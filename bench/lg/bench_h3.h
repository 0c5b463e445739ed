/*
 * bench_h3 — bench --h3's worker loop (bench_h3.c).
 */
#ifndef BENCH_H3_H
#define BENCH_H3_H

#include "bench_common.h"

/*
 * --h3: worker `index` of HTTP/3 load (bench_h3.c; built where HAVE_H3 is): as
 * bench_run(), each connection a QUIC connection with --streams requests in flight.
 */
int bench_h3(const bench_cfg_t *cfg, unsigned index, bench_stats_t *all);

#endif
