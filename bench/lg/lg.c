/* lg: clocks, error kinds, limits, worker processes, signals, progress. */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "lg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

volatile sig_atomic_t lg_signals;

const char *const lg_err_name[LG_E_NUM] = {
    [LG_E_REFUSED] = "refused", [LG_E_CONNECT] = "connect", [LG_E_CTIMEOUT] = "ctimeout",
    [LG_E_RESET] = "reset",     [LG_E_TIMEOUT] = "timeout", [LG_E_EOF] = "eof",
    [LG_E_SHORT] = "short",     [LG_E_PARSE] = "parse",     [LG_E_IO] = "io",
    [LG_E_ABORT] = "abort",     [LG_E_STATUS] = "status",   [LG_E_TLS] = "tls",
    [LG_E_RST] = "rst",         [LG_E_GOAWAY] = "goaway",   [LG_E_NOH2] = "noh2",
};

int lg_err_connect(int e)
{
    if (e == ECONNREFUSED)
        return LG_E_REFUSED;
    if (e == ETIMEDOUT)
        return LG_E_CTIMEOUT;
    return LG_E_CONNECT;
}

int lg_err_io(int e)
{
    if (e == ECONNRESET || e == EPIPE)
        return LG_E_RESET;
    if (e == ETIMEDOUT)
        return LG_E_TIMEOUT;
    return LG_E_IO;
}

int64_t lg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

long lg_nofile_raise(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        rl.rlim_cur = want;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1 << 20) ? 1 << 20 : (long)rl.rlim_cur;
}

static void on_stop(int sig)
{
    (void)sig;
    lg_signals++;
}

void lg_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: the wait returns EINTR and sees the flag */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void *lg_shared(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int lg_spawn(int n, int (*fn)(int, void *), void *arg, pid_t *pids)
{
    pid_t parent = getpid();
    fflush(NULL); /* children must not repeat buffered output */
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p < 0) {
            int e = errno;
            lg_kill_all(pids, i, SIGKILL);
            for (int j = 0; j < i; j++)
                waitpid(pids[j], NULL, 0);
            errno = e;
            return -1;
        }
        if (p == 0) {
#ifdef __linux__
            prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
            if (getppid() != parent)
                _exit(LG_EXIT_FATAL); /* the parent died before prctl took effect */
            signal(SIGINT, SIG_IGN);
            int rc = fn(i, arg);
            fflush(NULL);
            _exit(rc);
        }
        pids[i] = p;
    }
    return 0;
}

void lg_kill_all(const pid_t *pids, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            kill(pids[i], sig);
}

int lg_reap(pid_t *pids, int *status, int n)
{
    int alive = 0;
    for (int i = 0; i < n; i++) {
        if (pids[i] <= 0)
            continue;
        int st;
        pid_t r = waitpid(pids[i], &st, WNOHANG);
        if (r == pids[i] || (r < 0 && errno == ECHILD)) {
            status[i] = r == pids[i] ? st : 0;
            pids[i] = 0;
        } else {
            alive++;
        }
    }
    return alive;
}

int lg_parse_u64(const char *s, uint64_t max, uint64_t *v)
{
    char *e;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long x = strtoull(s, &e, 10);
    uint64_t mul = 1;
    if (*e == 'k' || *e == 'K')
        mul = 1000, e++;
    else if (*e == 'm' || *e == 'M')
        mul = 1000000, e++;
    else if (*e == 'g' || *e == 'G')
        mul = 1000000000, e++;
    if (errno || *e || x > max / mul)
        return -1;
    *v = x * mul;
    return 0;
}

int lg_parse_secs(const char *s, double *v)
{
    char *e;
    if (!s || !((*s >= '0' && *s <= '9') || *s == '.'))
        return -1;
    double x = strtod(s, &e);
    if (e == s)
        return -1;
    if (!strcmp(e, "ms"))
        x /= 1000;
    else if (!strcmp(e, "m"))
        x *= 60;
    else if (*e && strcmp(e, "s"))
        return -1;
    if (!(x >= 0 && x < 1e7))
        return -1;
    *v = x;
    return 0;
}

int lg_progress_on(int quiet)
{
    return !quiet && isatty(2);
}

void lg_progress(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
}

void lg_progress_clear(void)
{
    fputs("\r\033[K", stderr);
    fflush(stderr);
}

uint64_t lg_err_sum(const uint64_t err[LG_E_NUM])
{
    uint64_t n = 0;
    for (int k = 0; k < LG_E_NUM; k++)
        n += err[k];
    return n;
}

static const char *usage_prog = "lg", *usage_text = "";

void lg_usage_set(const char *prog, const char *usage)
{
    usage_prog = prog;
    usage_text = usage;
}

void lg_usage_exit(const char *msg, const char *arg)
{
    if (msg)
        fprintf(stderr, "%s: %s%s%s\n", usage_prog, msg, arg ? ": " : "", arg ? arg : "");
    fputs(usage_text, stderr);
    exit(LG_EXIT_USAGE);
}

uint64_t lg_num_opt(const char *arg, uint64_t lo, uint64_t hi, const char *what)
{
    uint64_t v;
    if (lg_parse_u64(arg, hi, &v) < 0 || v < lo) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s must be a number from %llu to %llu", what,
                 (unsigned long long)lo, (unsigned long long)hi);
        lg_usage_exit(msg, arg);
    }
    return v;
}

double lg_secs_opt(const char *arg, const char *what, int zero_ok)
{
    double v;
    if (lg_parse_secs(arg, &v) < 0 || (!zero_ok && v <= 0)) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s wants %sseconds (e.g. 10, 2.5, 500ms, 1m)", what,
                 zero_ok ? "" : "a positive number of ");
        lg_usage_exit(msg, arg);
    }
    return v;
}
