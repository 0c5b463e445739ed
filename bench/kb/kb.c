/* The kernel micro-benchmarks' common part: see kb.h. */
#define _GNU_SOURCE
#include "kb.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define KB_HAVE_TSC 1
#else
#define KB_HAVE_TSC 0
#endif

volatile int kb_stop;

static const char *tool;
static kb_opts_t *opts;
static uint64_t t_start;

static void on_signal(int sig)
{
    (void)sig;
    kb_stop = 1;
}

/* Does the first "flags" line of /proc/cpuinfo list flag (a whole word)? */
static int cpuinfo_flag(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char *line = NULL;
    size_t cap = 0;
    int found = 0;
    size_t len = strlen(flag);
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        for (char *p = strstr(line, flag); p; p = strstr(p + 1, flag))
            if ((p == line || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\n' || p[len] == '\0'))
                found = 1;
        break;
    }
    free(line);
    fclose(f);
    return found;
}

/*
 * Cycles measure time only if the TSC ticks at one rate in every P-state and
 * C-state: CPUID 0x80000007 EDX bit 8 (invariant TSC), or, where a hypervisor
 * hides that leaf, the kernel's own verdict in /proc/cpuinfo (constant_tsc
 * and nonstop_tsc).  1 if so.
 */
static int tsc_invariant(void)
{
#if KB_HAVE_TSC
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8)))
        return 1;
    return cpuinfo_flag("constant_tsc") && cpuinfo_flag("nonstop_tsc");
#else
    return 0;
#endif
}

static void usage(FILE *f, const char *what, const char *columns, long default_n, int has_ipv6,
                  int has_dir)
{
    fprintf(f,
            "usage: %s [-n N] [-i K] [-C]%s%s [-h]\n"
            "%s\n"
            "  -n N   how many (default %ld)\n"
            "  -i K   print every K-th sample (default: about 1000 lines in all)\n"
            "  -C     CPU cycles (time-stamp counter) instead of microseconds\n"
            "%s%s"
            "Output: '#' comment lines, then one line per sample: N, then %s.\n"
            "Exit: 0 done, 3 stopped at a limit (named in a message), 1 failed, 2 usage.\n"
            "See kbench(1).\n",
            tool, has_ipv6 ? " [-6]" : "", has_dir ? " [-d dir]" : "", what, default_n,
            has_ipv6 ? "  -6     IPv6 (::1) instead of IPv4 (127.0.0.1)\n" : "",
            has_dir ? "  -d dir temporary files in dir (default $TMPDIR or /tmp)\n" : "",
            columns);
}

long kb_sysctl(const char *path)
{
    char p[128], buf[64];
    snprintf(p, sizeof p, "/proc/sys/%s", path);
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    long v = -1;
    if (fgets(buf, sizeof buf, f))
        v = strtol(buf, NULL, 10);
    fclose(f);
    return v;
}

static void print_limit(const char *name, int res)
{
    struct rlimit r;
    if (getrlimit(res, &r) < 0)
        return;
    if (r.rlim_cur == RLIM_INFINITY)
        printf("# %s: unlimited\n", name);
    else
        printf("# %s: %llu\n", name, (unsigned long long)r.rlim_cur);
}

void kb_start(int argc, char **argv, const char *name, const char *what, const char *columns,
              long default_n, int has_ipv6, int has_dir, kb_opts_t *o)
{
    tool = name;
    opts = o;
    *o = (kb_opts_t){.n = default_n, .every = 0};
    int c;
    char *end;
    while ((c = getopt(argc, argv, has_ipv6 ? "n:i:C6h" : has_dir ? "n:i:Cd:h" : "n:i:Ch")) != -1) {
        switch (c) {
        case 'n':
        case 'i':
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 1 || v > 100000000) {
                fprintf(stderr, "%s: -%c %s: a whole number from 1 to 100000000, please\n",
                        tool, c, optarg);
                exit(KB_USAGE);
            }
            if (c == 'n')
                o->n = v;
            else
                o->every = v;
            break;
        case 'C':
            if (!KB_HAVE_TSC) {
                fprintf(stderr, "%s: -C: no usable cycle counter on this CPU\n", tool);
                exit(KB_USAGE);
            }
            if (!tsc_invariant()) {
                fprintf(stderr,
                        "%s: -C: no usable cycle counter: the time-stamp counter is not "
                        "invariant here (no CPUID invariant-TSC bit, no constant_tsc and "
                        "nonstop_tsc in /proc/cpuinfo), so cycles would not measure time; "
                        "leave out -C for microseconds\n",
                        tool);
                exit(KB_USAGE);
            }
            o->cycles = 1;
            break;
        case '6': o->ipv6 = 1; break;
        case 'd':
            if (strlen(optarg) > 512) {
                fprintf(stderr, "%s: -d: at most 512 bytes, please\n", tool);
                exit(KB_USAGE);
            }
            o->dir = optarg;
            break;
        case 'h': usage(stdout, what, columns, default_n, has_ipv6, has_dir); exit(KB_OK);
        default: usage(stderr, what, columns, default_n, has_ipv6, has_dir); exit(KB_USAGE);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument %s\n", tool, argv[optind]);
        usage(stderr, what, columns, default_n, has_ipv6, has_dir);
        exit(KB_USAGE);
    }
    if (!o->every)
        o->every = o->n > 1000 ? o->n / 1000 : 1;
    if (!o->dir)
        o->dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL), sigaction(SIGTERM, &sa, NULL), sigaction(SIGHUP, &sa, NULL);
    struct utsname u;
    uname(&u);
    printf("# %s: %s\n", tool, what);
    printf("# kernel: %s %s %s\n", u.sysname, u.release, u.machine);
    printf("# n: %ld, a sample every %ld, unit: %s\n", o->n, o->every,
           o->cycles ? "cycles" : "us");
    printf("# columns: N\t%s\n", columns);
    print_limit("RLIMIT_NOFILE", RLIMIT_NOFILE);
    print_limit("RLIMIT_NPROC", RLIMIT_NPROC);
    print_limit("RLIMIT_AS", RLIMIT_AS);
    fflush(stdout);
    t_start = kb_now();
}

uint64_t kb_now(void)
{
#if KB_HAVE_TSC
    if (opts && opts->cycles)
        return __rdtsc();
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int kb_due(long n)
{
    return n % opts->every == 0 || n == opts->n || n == 1;
}

void kb_sample(long n, int k, const uint64_t *iv)
{
    printf("%ld", n);
    for (int i = 0; i < k; i++) {
        if (opts->cycles)
            printf("\t%llu", (unsigned long long)iv[i]);
        else
            printf("\t%.3f", (double)iv[i] / 1000.0);
    }
    putchar('\n');
}

/* Lines of /proc/self/maps: the mappings we hold, or -1. */
static long count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    long n = 0;
    int c;
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* Which limit an errno means for call, or NULL. */
static void explain(const char *call, int err, char *out, size_t len)
{
    struct rlimit r;
    out[0] = 0;
    switch (err) {
    case EMFILE:
        getrlimit(RLIMIT_NOFILE, &r);
        snprintf(out, len, "the per-process descriptor limit RLIMIT_NOFILE (%llu)",
                 (unsigned long long)r.rlim_cur);
        break;
    case ENFILE:
        snprintf(out, len, "the system-wide file limit fs.file-max (%ld)",
                 kb_sysctl("fs/file-max"));
        break;
    case EAGAIN:
        if (strstr(call, "fork") || strstr(call, "pthread_create")) {
            getrlimit(RLIMIT_NPROC, &r);
            snprintf(out, len, "RLIMIT_NPROC (%llu), kernel.threads-max (%ld) or "
                     "kernel.pid_max (%ld)", (unsigned long long)r.rlim_cur,
                     kb_sysctl("kernel/threads-max"), kb_sysctl("kernel/pid_max"));
        }
        break;
    case ENOMEM: {
        getrlimit(RLIMIT_AS, &r);
        long maps = count_maps(), max = kb_sysctl("vm/max_map_count");
        if (strstr(call, "mmap") && maps > 0 && max > 0 && maps >= max - 2)
            snprintf(out, len, "vm.max_map_count (%ld mappings per process; %ld now)", max,
                     maps);
        else if (strstr(call, "mmap") && r.rlim_cur != RLIM_INFINITY)
            snprintf(out, len, "the address-space limit RLIMIT_AS (%llu bytes; %ld mappings "
                     "now, vm.max_map_count %ld)", (unsigned long long)r.rlim_cur, maps, max);
        else if (strstr(call, "mmap"))
            snprintf(out, len, "memory (%ld mappings now, vm.max_map_count %ld)", maps, max);
        else
            snprintf(out, len, "memory (RLIMIT_AS, RLIMIT_STACK or the machine's)");
        break;
    }
    case EADDRINUSE:
    case EADDRNOTAVAIL: {
        char buf[64] = "?";
        FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
        if (f) {
            if (!fgets(buf, sizeof buf, f))
                strcpy(buf, "?");
            fclose(f);
            buf[strcspn(buf, "\n")] = 0;
            for (char *p = buf; *p; p++)
                if (*p == '\t')
                    *p = '-';
        }
        snprintf(out, len, "the ephemeral port range net.ipv4.ip_local_port_range (%s)", buf);
        break;
    }
    }
}

int kb_fail(const char *call, int err, long n)
{
    char why[256];
    explain(call, err, why, sizeof why);
    if (why[0]) {
        printf("# stopped at N=%ld: %s failed: %s: the limit is %s\n", n, call, strerror(err),
               why);
        fprintf(stderr, "%s: stopped at N=%ld: %s failed: %s: the limit is %s\n", tool, n, call,
                strerror(err), why);
        return KB_LIMIT;
    }
    printf("# failed at N=%ld: %s: %s\n", n, call, strerror(err));
    fprintf(stderr, "%s: failed at N=%ld: %s: %s\n", tool, n, call, strerror(err));
    return KB_FAILED;
}

int kb_end(long n, int rc)
{
    double secs = opts->cycles ? 0 : (double)(kb_now() - t_start) / 1e9;
    if (kb_stop && rc == KB_OK) {
        printf("# interrupted at N=%ld\n", n);
        rc = KB_FAILED;
    }
    if (opts->cycles)
        printf("# done: N=%ld\n", n);
    else
        printf("# done: N=%ld in %.3f s\n", n, secs);
    fflush(stdout);
    return rc;
}
