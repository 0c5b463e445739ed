/*
 * kb — what the kernel micro-benchmarks (kb-socket, kb-bind, kb-accept,
 * kb-fork, kb-thread, kb-mmap, kb-manymap) share: the command line, the
 * clock, the sample lines, and stopping at a limit with a message that names
 * it.  See man/kbench.1.
 *
 * Output (stdout): comment lines starting with '#' (what is measured, the
 * unit, the limits that apply, how the run ended), then one line per sample:
 *
 *   N <TAB> value [<TAB> value ...]
 *
 * N is how many objects (descriptors, sockets, children, mappings) exist
 * when the timed call is made; the values are that call's latency, in µs
 * (-C: CPU cycles from the time-stamp counter, where there is one).
 *
 * Exit status: 0 when N was reached; 3 when a limit stopped the run first
 * (the samples up to it are valid, the message says which limit); 1 for any
 * other failure; 2 for a bad command line.
 */
#ifndef KB_H
#define KB_H

#include <stddef.h>
#include <stdint.h>

enum { KB_OK = 0, KB_FAILED = 1, KB_USAGE = 2, KB_LIMIT = 3 };

typedef struct kb_opts {
    long n;        /* -n: how many */
    long every;    /* -i: one sample per this many (1: each) */
    int cycles;    /* -C: cycles instead of µs */
    int ipv6;      /* -6 (socket, bind, accept) */
    const char *dir; /* -d: where temporary files go (mmap, manymap) */
} kb_opts_t;

/*
 * Parse the common options; name is the tool, what says what it measures
 * (for -h and the first comment line), columns names the value columns.
 * Exits on -h (0) and on errors (2).
 */
void kb_start(int argc, char **argv, const char *name, const char *what, const char *columns,
              long default_n, int has_ipv6, int has_dir, kb_opts_t *o);

/* A timestamp: ns from CLOCK_MONOTONIC, or the TSC with -C. */
uint64_t kb_now(void);

/* One sample line: N and k values (each an interval of kb_now() stamps). */
void kb_sample(long n, int k, const uint64_t *intervals);

/* Should N produce a sample line (every -i, and the last)? */
int kb_due(long n);

/*
 * A call failed with err at count n.  For the errors that mean a limit
 * (EMFILE, ENFILE, EAGAIN from fork, ENOMEM, EADDRINUSE, ...) print which
 * one, with its value, and return KB_LIMIT; otherwise print the error and
 * return KB_FAILED.  call is what failed ("socket()").
 */
int kb_fail(const char *call, int err, long n);

/* The last comment line: how many in how long; returns rc. */
int kb_end(long n, int rc);

/* A signal (INT, TERM, HUP) arrived: stop at the next check, clean up. */
extern volatile int kb_stop;

/* Read a sysctl from /proc/sys (path like "vm/max_map_count"): value or -1. */
long kb_sysctl(const char *path);

#endif
