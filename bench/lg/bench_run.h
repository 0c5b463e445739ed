/*
 * bench_run — bench's worker loop for HTTP/1.1, HTTP/2 and FTP (bench_run.c).
 */
#ifndef BENCH_RUN_H
#define BENCH_RUN_H

#include "bench_common.h"

/*
 * Run worker `index` of cfg->procs: its share of the connections and of -n,
 * until the count, the duration, a stop signal or the hard cap ends it.
 * Results go to all[index]; all[] (cfg->procs of them, shared memory with
 * -P) is read to start the requests together.  Returns BENCH_RUN_*.
 */
int bench_run(const bench_cfg_t *cfg, unsigned index, bench_stats_t *all);

#endif
