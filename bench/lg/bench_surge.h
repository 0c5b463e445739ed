/*
 * bench_surge — bench --surge's worker loop (bench_surge.c).
 */
#ifndef BENCH_SURGE_H
#define BENCH_SURGE_H

#include "bench_common.h"

/*
 * --surge: worker `index` of an open-loop arrival of visitors (bench_surge.c),
 * each a new connection loading the page and its assets.  As bench_run().
 */
int bench_surge(const bench_cfg_t *cfg, unsigned index, bench_stats_t *all);

#endif
