/*
 * bench_report — bench's report at the end of a run: the text (or --json)
 * summary of the merged counters and histograms, --surge's per class; the
 * fatal reason of a run that measured nothing, and whether errors were
 * counted (the exit status).  bench.c's main() calls it.
 */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include "bench_common.h"

#include <stddef.h>
#include <stdint.h>

/* Errors counted (any kind): the exit status is LG_EXIT_ERRORS if any. */
uint64_t bench_err_total(const bench_stats_t *s);
/* Why the run measured nothing (text in buf), or NULL. */
const char *bench_fatal_text(const bench_cfg_t *cfg, const bench_stats_t *s, char *buf,
                             size_t len);
/* The reports, text or --json (with the fatal reason and the exit status rc). */
void bench_report_text(const bench_cfg_t *cfg, const bench_stats_t *s, double secs);
void bench_report_json(const bench_cfg_t *cfg, const bench_stats_t *s, double secs,
                       const char *fatal, int rc);
void bench_report_surge_text(const bench_cfg_t *cfg, const bench_stats_t *s, double secs);
void bench_report_surge_json(const bench_cfg_t *cfg, const bench_stats_t *s, double secs,
                             const char *fatal, int rc);

#endif
