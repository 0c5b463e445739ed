/*
 * kb-stream: bulk throughput of N TCP streams or UDP flows over P processes,
 * as OpenBSD's tcpbench and iperf3 -P measure it, with a receiver, and a relay
 * that copies (read/write) or splices (splice(2) through a pipe).  The
 * options, the processes and the report; see kb_stream_util.h and man/kb-stream.1.
 *
 * Output (stdout): '#' comment lines, then one line per stream and a total,
 * key=value separated by spaces:
 *
 *   stream role=send id=0 proc=0 bytes=... recv=... secs=... mbit=... state=ok
 *   total role=send proto=tcp ... mbit=... cpu=... cpu_max=... cpu_bound=no
 *
 * Exit: 0 every stream ok; 3 finished, but a stream stalled, failed or did not
 * finish (state names which); 1 could not start; 2 usage.
 */
#define _GNU_SOURCE
#include "kb_stream_relay.h"
#include "kb_stream_tcp.h"
#include "kb_stream_udp.h"
#include "kb_stream_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *states[] = {"ok", "stall", "error", "noreply", "mismatch", "unfinished",
                               "nofin"};

static void on_signal(int sig)
{
    (void)sig;
    ks_stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kb-stream -s [-u] [-B addr] [-p port] [-n N] [-P procs] [-t secs] [-w bytes]"
            " [-i secs] [-A cpus]\n"
            "       kb-stream -c addr -p port [-u] [-n N] [-P procs] [-t secs] [-l len]"
            " [-b rate] [-w bytes] [-S secs] [-C cc] [-A cpus]\n"
            "       kb-stream -R copy|splice -c addr -p port [-B addr] [-L port] [-n N]"
            " [-t secs] [-w bytes] [-A cpus]\n"
            "bulk throughput of N TCP streams (or UDP flows, -u) over P processes\n"
            "  -s          receive: listen on -B (default 127.0.0.1, ::1 with -6) port -p\n"
            "              (default 0: any; the first line says which), end after N streams\n"
            "  -c addr     send to addr (IPv4 or IPv6), port -p\n"
            "  -R mode     relay (TCP): accept on -B port -L, connect to -c -p, copy each\n"
            "              way with read/write (copy) or splice(2) through a pipe (splice)\n"
            "  -u          UDP: -l is the payload (0..65507), sequence numbers from 16 bytes\n"
            "  -6          IPv6 default bind address (::1)\n"
            "  -n N        streams, 1..%d (default 1)\n"
            "  -P procs    processes (default: the CPUs, at most N)\n"
            "  -t secs     sending time (default 10); receiver, relay: the most they wait\n"
            "  -l len      TCP write size (default 131072), UDP payload (default 1472)\n"
            "  -b rate     UDP: IP bits/s over all flows, k/m/g suffix (default: unlimited)\n"
            "  -w bytes    SO_SNDBUF and SO_RCVBUF\n"
            "  -S secs     a stream without progress this long stalled (default 3)\n"
            "  -C cc       TCP congestion control of the sending sockets (cubic, bbr, ...)\n"
            "  -A cpus     pin process p to the p-th CPU of the list (0,1), round robin;\n"
            "              a relay to all of them\n"
            "  -i secs     UDP receiver: a process ends this long after its last datagram"
            " (default 2)\n"
            "Exit: 0 ok, 3 a stream stalled, failed or did not finish, 1 failed, 2 usage.\n"
            "See kb-stream(1).\n",
            KS_MAX_STREAMS);
}

static void bad(const char *msg, const char *arg)
{
    fprintf(stderr, "kb-stream: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    usage(stderr);
    exit(2);
}

static double number(const char *s, double lo, double hi, const char *what)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end && strchr("kKmMgG", *end) && !end[1] && strcmp(what, "-b") == 0) {
        v *= *end == 'k' || *end == 'K' ? 1e3 : *end == 'm' || *end == 'M' ? 1e6 : 1e9;
        end++;
    }
    if (errno || end == s || *end || v != v || v < lo || v > hi) {
        char m[96];
        snprintf(m, sizeof m, "%s: a number from %g to %g, please", what, lo, hi);
        bad(m, s);
    }
    return v;
}

/* -A 0,1,...: the CPUs the processes are pinned to, round robin */
static void cpu_list(ks_opts_t *o, const char *arg)
{
    char *end;
    o->ncpus = 0;
    for (const char *p = arg; *p; p = *end ? end + 1 : end) {
        errno = 0;
        long c = strtol(p, &end, 10);
        if (errno || end == p || c < 0 || c >= CPU_SETSIZE || (*end && *end != ',') ||
            o->ncpus == KS_MAX_PROCS)
            bad("-A: CPU numbers separated by commas, please", arg);
        o->cpus[o->ncpus++] = (int)c;
    }
    if (!o->ncpus)
        bad("-A: CPU numbers separated by commas, please", arg);
}

/* Pin this process to its CPU of -A (a relay: to all of them); 0, or -1 with errno. */
static int pin(const ks_opts_t *o, int p)
{
    if (!o->ncpus)
        return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < o->ncpus; i++)
        if (p < 0 || i == p % o->ncpus)
            CPU_SET(o->cpus[i], &set);
    return sched_setaffinity(0, sizeof set, &set);
}

static void resolve(ks_opts_t *o, const char *host, int port, int v6)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                             .ai_socktype = o->udp ? SOCK_DGRAM : SOCK_STREAM}, *res;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (!host)
        host = v6 ? "::1" : "127.0.0.1";
    if (getaddrinfo(host, ps, &hints, &res) != 0)
        bad("not a numeric IPv4 or IPv6 address", host);
    memcpy(&o->addr, res->ai_addr, res->ai_addrlen);
    o->alen = res->ai_addrlen;
    o->family = res->ai_family;
    freeaddrinfo(res);
}

static void check_opts(ks_opts_t *o, int v6, int recv, int relay)
{
    if (recv + relay > 1 || (recv && o->host) || (!recv && !relay && !o->host))
        bad("one of -s, -c (alone) and -R, please", NULL);
    o->mode = recv ? KS_RECV : relay ? KS_RELAY : KS_SEND;
    if (o->mode != KS_RECV && (!o->host || !o->port))
        bad("-c and -p name where to send", NULL);
    if (o->udp && o->mode == KS_RELAY)
        bad("-R relays TCP only", NULL);
    if (!o->udp && o->len < 1)
        bad("-l: at least 1 for TCP", NULL);
    if (o->procs > o->n)
        o->procs = (int)o->n;
    if (o->mode == KS_SEND || o->mode == KS_RELAY)
        resolve(o, o->host, o->port, 0);
    else
        resolve(o, o->bind, o->port, v6);
}

static void parse(int argc, char **argv, ks_opts_t *o)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (ks_opts_t){.n = 1, .procs = cpus > 0 ? (int)cpus : 1, .secs = 10, .len = -1,
                     .stall = 3, .idle = 2};
    int c, v6 = 0, recv = 0, relay = 0;
    while ((c = getopt(argc, argv, "sc:R:uB:p:L:n:P:t:l:b:w:S:i:C:A:6h")) != -1) {
        switch (c) {
        case 's': recv = 1; break;
        case 'c': o->host = optarg; break;
        case 'R':
            if (strcmp(optarg, "copy") && strcmp(optarg, "splice"))
                bad("-R: copy or splice", optarg);
            relay = 1, o->splice = !strcmp(optarg, "splice");
            break;
        case 'u': o->udp = 1; break;
        case 'B': o->bind = optarg; break;
        case 'p': o->port = (int)number(optarg, 0, 65535, "-p"); break;
        case 'L': o->lport = (int)number(optarg, 0, 65535, "-L"); break;
        case 'n': o->n = (long)number(optarg, 1, KS_MAX_STREAMS, "-n"); break;
        case 'P': o->procs = (int)number(optarg, 1, KS_MAX_PROCS, "-P"); break;
        case 't': o->secs = number(optarg, 0.1, 3600, "-t"); break;
        case 'l': o->len = (long)number(optarg, 0, 1 << 24, "-l"); break;
        case 'b': o->rate = number(optarg, 0, 1e12, "-b"); break;
        case 'w': o->wbuf = (int)number(optarg, 1024, 1 << 30, "-w"); break;
        case 'S': o->stall = number(optarg, 0.1, 600, "-S"); break;
        case 'i': o->idle = number(optarg, 0.1, 600, "-i"); break;
        case 'C':
            if (strlen(optarg) >= 16)
                bad("-C: a congestion control's name is at most 15 bytes", optarg);
            o->cc = optarg;
            break;
        case 'A': cpu_list(o, optarg); break;
        case '6': v6 = 1; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind < argc)
        bad("unexpected argument", argv[optind]);
    if (o->len < 0)
        o->len = o->udp ? 1472 : 131072;
    if (o->udp && o->len > 65507)
        bad("-l: a UDP payload is at most 65507 bytes", NULL);
    check_opts(o, v6, recv, relay);
}

/* The listening socket of a receiver or relay (bound, listening if TCP). */
static int listen_socket(ks_opts_t *o)
{
    int one = 1, fd = socket(o->family, o->udp ? SOCK_DGRAM : SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (o->mode == KS_RECV)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    ks_sockbuf(o, fd);
    if (o->mode == KS_RELAY) {
        struct sockaddr_storage target = o->addr;
        resolve(o, o->bind, o->lport, o->family == AF_INET6);
        int r = bind(fd, (struct sockaddr *)&o->addr, o->alen);
        struct sockaddr_storage me = o->addr;
        o->addr = target;
        if (r < 0 || listen(fd, 1024) < 0)
            return -1;
        socklen_t l = sizeof me;
        getsockname(fd, (struct sockaddr *)&me, &l);
        o->lport = ntohs(((struct sockaddr_in *)&me)->sin_port);
        return fd;
    }
    socklen_t l = o->alen;
    if (bind(fd, (struct sockaddr *)&o->addr, o->alen) < 0 || (!o->udp && listen(fd, 1024) < 0)
        || getsockname(fd, (struct sockaddr *)&o->addr, &l) < 0)
        return -1;
    o->port = ntohs(((struct sockaddr_in *)&o->addr)->sin_port); /* same place in sin6 */
    return fd;
}

typedef struct {
    ks_rec_t *recs;
    int nrec, cap, done;
    double usr, sys, cpu_max, wall;
} results_t;

static int child(const ks_opts_t *o, int p, int lfd, int ready, int go, int out)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1)
        _exit(1);
    if (pin(o, p) < 0) {
        fprintf(stderr, "kb-stream: -A: CPU %d: %s\n", o->cpus[p % o->ncpus], strerror(errno));
        _exit(1);
    }
    if (o->mode == KS_SEND)
        return o->udp ? ks_udp_send(o, p, ready, go, out) : ks_tcp_send(o, p, ready, go, out);
    return o->udp ? ks_udp_recv(o, p, lfd, ready, go, out) : ks_tcp_recv(o, p, lfd, ready, go,
                                                                          out);
}

/* Read records until every process closed its end (or, receiving, N streams ended). */
static void collect(const ks_opts_t *o, int rd, pid_t *pids, results_t *res)
{
    double limit = ks_now() + o->secs + (o->mode == KS_RECV ? 1 : 3 * o->stall + 5);
    int killed = 0, streams = 0;
    for (;;) {
        struct pollfd pf = {.fd = rd, .events = POLLIN};
        int w = (int)((limit - ks_now()) * 1000);
        int r = poll(&pf, 1, w > 0 ? w : 0);
        if (r < 0 && errno == EINTR && !ks_stop)
            continue;
        if ((r <= 0 || ks_stop) && killed < 2) {
            /* the deadline, or a signal: ask the processes to report what they have */
            for (int i = 0; i < o->procs; i++)
                kill(pids[i], killed ? SIGKILL : SIGTERM);
            killed++, ks_stop = 0, limit = ks_now() + 2;
            continue;
        }
        if (r <= 0)
            break;
        ks_rec_t rec;
        ssize_t got = read(rd, &rec, sizeof rec);
        if (got != (ssize_t)sizeof rec)
            break;
        if (res->nrec == res->cap) {
            res->cap = res->cap ? 2 * res->cap : 64;
            res->recs = realloc(res->recs, (size_t)res->cap * sizeof *res->recs);
        }
        res->recs[res->nrec++] = rec;
        streams += rec.kind == 0;
        if (o->mode == KS_RECV && streams == o->n && !killed) {
            for (int i = 0; i < o->procs; i++)
                kill(pids[i], SIGTERM);
            killed = 1, limit = ks_now() + 2;
        }
    }
}

static int run_procs(const ks_opts_t *o, int lfd, results_t *res)
{
    int ready[2], go[2], out[2];
    pid_t pids[KS_MAX_PROCS];
    if (pipe(ready) < 0 || pipe(go) < 0 || pipe(out) < 0)
        return -1;
    for (int p = 0; p < o->procs; p++) {
        pids[p] = fork();
        if (pids[p] < 0)
            return -1;
        if (pids[p] == 0) {
            close(ready[0]), close(go[1]), close(out[0]);
            _exit(child(o, p, lfd, ready[1], go[0], out[1]));
        }
    }
    close(ready[1]), close(go[0]), close(out[1]);
    if (lfd >= 0)
        close(lfd);
    char c;
    int n = 0;
    while (n < o->procs && read(ready[0], &c, 1) == 1)
        n++;
    if (o->mode == KS_RECV)
        printf("# listening on port %d\n", o->port);
    fflush(stdout);
    double t0 = ks_now();
    for (int p = 0; p < n; p++)
        if (write(go[1], "g", 1) != 1)
            break;
    collect(o, out[0], pids, res);
    for (int p = 0; p < o->procs; p++)
        waitpid(pids[p], NULL, 0);
    res->wall = ks_now() - t0;
    return n == o->procs ? 0 : -1;
}

static double mbit(uint64_t bytes, double secs)
{
    return secs > 0 ? (double)bytes * 8 / secs / 1e6 : 0;
}

static int by_id(const void *a, const void *b)
{
    const ks_rec_t *x = a, *y = b;
    return x->kind != y->kind ? x->kind - y->kind : x->id - y->id;
}

static void print_stream(const ks_opts_t *o, const ks_rec_t *r, const char *role)
{
    double secs = r->t1 - r->t0;
    if (!o->udp) {
        printf("stream role=%s id=%d proc=%d bytes=%llu recv=%llu secs=%.3f mbit=%.1f "
               "state=%s peer=%s\n", role, r->id, r->proc,
               (unsigned long long)(o->mode == KS_SEND ? r->sent : r->recv),
               (unsigned long long)r->recv, secs, mbit(o->mode == KS_SEND ? r->sent : r->recv,
                                                       secs), states[r->state], r->peer);
        return;
    }
    printf("stream role=%s id=%d proc=%d dgrams=%llu sent=%llu bytes=%llu lost=%llu "
           "reordered=%llu secs=%.3f mbit=%.1f pps=%.0f state=%s peer=%s\n", role, r->id,
           r->proc, (unsigned long long)r->recv, (unsigned long long)r->sent,
           (unsigned long long)r->bytes, (unsigned long long)r->lost,
           (unsigned long long)r->reordered, secs, mbit(r->bytes, secs),
           secs > 0 ? (double)(o->mode == KS_SEND ? r->sent : r->recv) / secs : 0,
           states[r->state], r->peer);
}

/* The per-stream lines and the total; the exit status. */
static int print_results(const ks_opts_t *o, results_t *res)
{
    qsort(res->recs, (size_t)res->nrec, sizeof *res->recs, by_id);
    const char *role = o->mode == KS_SEND ? "send" : "recv";
    uint64_t sent = 0, recv = 0, bytes = 0, lost = 0, reord = 0;
    double t0 = 0, t1 = 0;
    int streams = 0, bad = 0, stalls = 0;
    for (int i = 0; i < res->nrec; i++) {
        ks_rec_t *r = &res->recs[i];
        if (r->kind) {
            double share = (r->usr + r->sys) / (r->t1 - r->t0 > 0 ? r->t1 - r->t0 : 1);
            res->cpu_max = share > res->cpu_max ? share : res->cpu_max;
            printf("proc role=%s proc=%d usr=%.3f sys=%.3f cpu=%.2f\n", role, r->proc, r->usr,
                   r->sys, share);
            continue;
        }
        print_stream(o, r, role);
        streams++, bad += r->state != ST_OK, stalls += r->state == ST_STALL;
        sent += r->sent, recv += r->recv, bytes += r->bytes, lost += r->lost;
        reord += r->reordered;
        t0 = !t0 || (r->t0 > 0 && r->t0 < t0) ? r->t0 : t0;
        t1 = r->t1 > t1 ? r->t1 : t1;
    }
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    double usr = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
    double sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    uint64_t moved = o->udp ? bytes : o->mode == KS_SEND ? sent : recv;
    printf("total role=%s proto=%s family=ipv%d streams=%d procs=%d secs=%.3f ", role,
           o->udp ? "udp" : "tcp", o->family == AF_INET6 ? 6 : 4, streams, o->procs, t1 - t0);
    if (o->udp)
        printf("dgrams=%llu sent=%llu lost=%llu reordered=%llu len=%ld ",
               (unsigned long long)recv, (unsigned long long)sent, (unsigned long long)lost,
               (unsigned long long)reord, o->mode == KS_SEND ? o->len
               : recv ? (long)(bytes / recv) : 0);
    else
        printf("sent=%llu recv=%llu ", (unsigned long long)sent, (unsigned long long)recv);
    printf("bytes=%llu mbit=%.1f usr=%.3f sys=%.3f cpu=%.2f cpu_max=%.2f cpu_bound=%s "
           "errors=%d stalls=%d\n", (unsigned long long)moved, mbit(moved, t1 - t0), usr, sys,
           (usr + sys) / (t1 - t0 > 0 ? t1 - t0 : res->wall > 0 ? res->wall : 1), res->cpu_max,
           res->cpu_max >= 0.9 ? "yes" : "no", bad, stalls);
    if (res->cpu_max >= 0.9)
        printf("# cpu_bound: a process of kb-stream was on a CPU %.0f%% of its time: it, not "
               "the path measured, may have been the limit (its system time includes the "
               "network stack's work done in its system calls)\n", res->cpu_max * 100);
    return streams < o->n || bad ? 3 : 0;
}

static void header(const ks_opts_t *o)
{
    struct utsname u;
    char a[80];
    uname(&u);
    ks_peer((const struct sockaddr *)&o->addr, a, sizeof a);
    printf("# kb-stream: %s %s %s, %ld stream%s over %d process%s, %.3g s, %s %ld%s\n",
           o->mode == KS_SEND ? "send to" : o->mode == KS_RECV ? "receive on" : "relay to", a,
           o->udp ? "UDP" : "TCP", o->n, o->n > 1 ? "s" : "", o->procs,
           o->procs > 1 ? "es" : "", o->secs, o->udp ? "payload" : "writes of", o->len,
           o->wbuf ? ", -w set" : "");
    printf("# kernel: %s %s %s\n", u.sysname, u.release, u.machine);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    ks_opts_t o;
    parse(argc, argv, &o);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL), sigaction(SIGTERM, &sa, NULL), sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int lfd = -1;
    if (o.mode != KS_SEND && (lfd = listen_socket(&o)) < 0) {
        fprintf(stderr, "kb-stream: cannot listen: %s\n", strerror(errno));
        return 1;
    }
    if (o.mode == KS_RELAY) {
        if (pin(&o, -1) < 0) {
            fprintf(stderr, "kb-stream: -A: %s\n", strerror(errno));
            return 1;
        }
        printf("# listening on port %d\n", o.lport);
        header(&o);
        return ks_relay(&o, lfd);
    }
    header(&o);
    results_t res = {0};
    if (run_procs(&o, lfd, &res) < 0) {
        fprintf(stderr, "kb-stream: a process could not start its streams\n");
        for (int i = 0; i < res.nrec; i++)
            if (res.recs[i].err)
                fprintf(stderr, "kb-stream: stream %d: %s%s%s%s\n", res.recs[i].id,
                        strerror(res.recs[i].err), o.cc ? " (or -C " : "", o.cc ? o.cc : "",
                        o.cc ? ": see net.ipv4.tcp_available_congestion_control)" : "");
        return 1;
    }
    int rc = print_results(&o, &res);
    free(res.recs);
    return rc;
}
