/*
 * lg — what the load generators share besides HTTP, addresses and
 * histograms: clocks, error kinds, descriptor limits, worker processes,
 * signals, option parsing and the progress line.
 */
#ifndef LG_H
#define LG_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Exit codes of both tools (documented in their man pages). */
enum {
    LG_EXIT_OK = 0,    /* finished, nothing went wrong */
    LG_EXIT_FATAL = 1, /* target unreachable, not HTTP, no response at all, system error */
    LG_EXIT_USAGE = 2, /* bad options */
    LG_EXIT_ERRORS = 3 /* finished, but errors were counted (see the report) */
};

/* Kinds of errors, counted separately.  Connect errors lose no request. */
enum {
    LG_E_REFUSED,  /* connect: ECONNREFUSED */
    LG_E_CONNECT,  /* connect: any other failure (no ports left, unreachable, ...) */
    LG_E_CTIMEOUT, /* connect: no answer within the timeout */
    LG_E_RESET,    /* connection reset with requests in flight */
    LG_E_TIMEOUT,  /* no complete response within the timeout */
    LG_E_EOF,      /* closed by the server before the response began */
    LG_E_SHORT,    /* closed in the middle of a response (short body or head) */
    LG_E_PARSE,    /* not HTTP, malformed framing, or bytes nobody asked for */
    LG_E_IO,       /* another read/write error */
    LG_E_ABORT,    /* still in flight when the run was cut off (hard cap, 2nd signal) */
    LG_E_STATUS,   /* a complete response with status >= 400 (it counts as a response too) */
    LG_E_TLS,      /* https: the TLS handshake failed, or a TLS protocol error */
    LG_E_RST,      /* HTTP/2: a stream reset by the server (RST_STREAM): its request is lost */
    LG_E_GOAWAY,   /* HTTP/2: GOAWAY with an error code, or refusing streams already sent */
    LG_E_NOH2,     /* HTTP/2 asked for: ALPN did not pick h2, or the preface got HTTP/1.x */
    LG_E_NUM
};

extern const char *const lg_err_name[LG_E_NUM];

/*
 * Command-line helpers shared by the tools.  lg_usage_set() names the program
 * and its usage text once; the others print "PROG: message: arg" and the
 * usage to stderr and exit with LG_EXIT_USAGE when arg is not acceptable.
 */
void lg_usage_set(const char *prog, const char *usage);
void lg_usage_exit(const char *msg, const char *arg);
uint64_t lg_num_opt(const char *arg, uint64_t lo, uint64_t hi, const char *what);
double lg_secs_opt(const char *arg, const char *what, int zero_ok);

/* The sum of a per-kind error count array. */
uint64_t lg_err_sum(const uint64_t err[LG_E_NUM]);

/* The error kind of a failed connect, from its errno. */
int lg_err_connect(int e);

/* The error kind of a failed read or write on an established connection. */
int lg_err_io(int e);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t lg_now_ns(void);

/*
 * Raise the soft RLIMIT_NOFILE to the hard limit and return the soft limit
 * now in force (never assume a number: read it).
 */
long lg_nofile_raise(void);

/*
 * Set by the SIGINT/SIGTERM handler: the number of signals received.  The
 * only mutable global of the tools; a signal handler needs it.
 */
extern volatile sig_atomic_t lg_signals;

/* Install the stop handler for SIGINT and SIGTERM; ignore SIGPIPE. */
void lg_signals_install(void);

/*
 * Anonymous shared memory of len bytes, zeroed, inherited by children
 * forked after the call.  NULL on failure.
 */
void *lg_shared(size_t len);

/*
 * Fork n workers.  Worker i runs fn(i, arg) and exits with its return
 * value; it ignores SIGINT (the parent forwards a stop as SIGTERM) and dies
 * with the parent.  pids[i] gets the children's ids.  0, or -1 with errno set
 * (the children already started are killed).
 */
int lg_spawn(int n, int (*fn)(int, void *), void *arg, pid_t *pids);

/* Send sig to every child still alive (pid > 0). */
void lg_kill_all(const pid_t *pids, int n, int sig);

/*
 * Reap children without blocking; pids of those reaped become 0 and their
 * wait status goes to status[i].  Returns the number still alive.
 */
int lg_reap(pid_t *pids, int *status, int n);

/*
 * Parse an unsigned decimal with an optional k/m/g suffix (powers of 1000)
 * into *v, at most max.  0, or -1 if malformed or too large.
 */
int lg_parse_u64(const char *s, uint64_t max, uint64_t *v);

/* Parse seconds (a decimal, optional ms/s/m suffix) into *v.  0 or -1. */
int lg_parse_secs(const char *s, double *v);

/* Is the progress line wanted: stderr is a terminal and not disabled? */
int lg_progress_on(int quiet);

/* Overwrite the progress line on stderr (printf format). */
void lg_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Erase the progress line. */
void lg_progress_clear(void);

#endif
