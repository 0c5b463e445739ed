/*
 * HTTP/3's transport: datagrams from clients into a QUIC endpoint (quic/quic.c,
 * with ngtcp2, GnuTLS, h3.c and a real site behind it) that has no socket
 * (quic_open_loose): each datagram goes in by quic_input, and what the server
 * sends comes to a hook that checks it and drops it.  The endpoint has the
 * fixed test certificate below, so Initials are parsed and handshakes begin.
 *
 * Input: records, each a 2-byte big-endian head h:
 *   h & 0x8000   the clock moves (h & 0x7fff) ms, then the due timers run
 *                (quic_tick, the loop's gio timers: loss detection,
 *                acknowledgements, idle, closing)
 *   else         a datagram of (h & 0x3fff) bytes follows (what is left, if
 *                fewer), from client address A, or B (another port: a
 *                migration) if h & 0x4000; over 2048 bytes it counts as cut
 * At the end the endpoint drains (GOAWAY), the clock runs a minute, and the
 * endpoint is freed: every connection must have given back its -N count.
 *
 * Invariants: every datagram sent is at most 1500 bytes (or a GSO train of
 * such segments), goes to A or B, and while no handshake has completed the
 * server sends at most 3x the bytes it received (anti-amplification, RFC
 * 9000 8.1; stateless answers are smaller than what came).
 *
 * Determinism: a server's handshake depends on its randomness (key share,
 * connection IDs), so a recorded client's later packets decrypt only if the
 * server draws the same bytes again.  Each input runs in a fresh thread --
 * GnuTLS keeps its generator per thread, seeded from getrandom() and the
 * wall clock -- and in that thread getrandom() returns a fixed stream and
 * the clocks are the harness's (interposed below; every other thread gets
 * the real ones).  So a seed recorded by FUZZ_QUIC_CAPTURE (below) replays
 * the whole handshake and its requests.
 *
 * Capture (tests/fuzz/quic-capture.sh): FUZZ_QUIC_CAPTURE=FILE makes the
 * binary a server on 127.0.0.1 (the port printed on stdout) that runs
 * exactly what an input runs, writing each datagram it gets and every 20 ms
 * of silence (a tick) to FILE as records, until SIGTERM.
 */
#define _GNU_SOURCE
#include "fuzz.h"
#include "quic/quic.h"
#include "gio_udp.h"
#include "handlers/hstate.h"
#include "site/config.h"
#include "site/mime.h"
#include "site/peerlimits.h"
#include "site/site.h"
#include "tls/tls.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PKT_MAX 1500   /* quic_int.h's QUIC_PKT_MAX */
#define TRAIN_MAX 32   /* quic.c's QUIC_TRAIN */
#define RX_CAP 2048    /* quic.c's QUIC_RX_CAP: larger arrives cut */
#define TICK_MS 20     /* capture: silence this long is a tick */

/* A throwaway self-signed ECDSA P-256 certificate for localhost (valid to 2126),
   for this harness only: a recorded handshake replays only with the same key. */
static const char pem[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBmTCCAT6gAwIBAgIUYviFmV5MmQQG0x2qxMR1NjmINQAwCgYIKoZIzj0EAwIw\n"
    "FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyNTE0NDQ1NFoYDzIxMjYxMTAx\n"
    "MTQ0NDU0WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO\n"
    "PQMBBwNCAAQepo8SYsNSc3v8PNqaiTw8Ml42Wgee5kVZiJH8pC+Fb59gHFSp4uUT\n"
    "5YQ47DZ5s3XB43zKUOJilI/+mBPQqDGdo2wwajAdBgNVHQ4EFgQU1alP+hrfcw2p\n"
    "GuP0dojRtOrC/iUwHwYDVR0jBBgwFoAU1alP+hrfcw2pGuP0dojRtOrC/iUwGgYD\n"
    "VR0RBBMwEYIJbG9jYWxob3N0hwR/AAABMAwGA1UdEwEB/wQCMAAwCgYIKoZIzj0E\n"
    "AwIDSQAwRgIhALMgOL6UY1My33g6omaxYBugert5tPO745BL5ZWq7q5LAiEAqBky\n"
    "QSrpKTZbD2xPlmogO0iIRUbL4c9+NZ+sol9c95M=\n"
    "-----END CERTIFICATE-----\n"
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgy9ImOw0IPwl2wHcm\n"
    "6hBhjkaN9K4HumvNtsFeNhZXEa+hRANCAAQepo8SYsNSc3v8PNqaiTw8Ml42Wgee\n"
    "5kVZiJH8pC+Fb59gHFSp4uUT5YQ47DZ5s3XB43zKUOJilI/+mBPQqDGd\n"
    "-----END PRIVATE KEY-----\n";

/* ---- this thread's randomness and clocks ---------------------------------------- */

static _Thread_local int fixed;         /* an input's thread: the harness's */
static _Thread_local uint64_t rng;      /* splitmix64 state */
static _Thread_local int64_t mono_ms;   /* CLOCK_MONOTONIC */
#define WALL_S 1764000000               /* CLOCK_REALTIME and time() */

ssize_t getrandom(void *buf, size_t n, unsigned flags)
{
    if (!fixed)
        return syscall(SYS_getrandom, buf, n, flags);
    uint8_t *p = buf;
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        p[i] = (uint8_t)(z ^ (z >> 31));
    }
    return (ssize_t)n;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (fixed && (id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE)) {
        *ts = (struct timespec){mono_ms / 1000, mono_ms % 1000 * 1000000};
        return 0;
    }
    if (fixed && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        *ts = (struct timespec){WALL_S + mono_ms / 1000, 0};
        return 0;
    }
    return (int)syscall(SYS_clock_gettime, id, ts);
}

time_t time(time_t *t)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t)
        *t = ts.tv_sec;
    return ts.tv_sec;
}

/* ---- the site ----------------------------------------------------------------------- */

static char dir[64] = "/dev/shm/fuzz_quic.XXXXXX";
static config_t cfg;
static proc_t proc;
static site_t site; /* the handlers keep their states in it (handlers/hstate.h) */
static gio_loop_t *loop;
static struct sockaddr_in local, peer_a, peer_b;
static int trace;

static void put(const char *name, const char *text, size_t len, mode_t mode)
{
    static char buf[100000];
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0 || len > sizeof buf)
        abort();
    for (size_t i = 0; i < len; i++)
        buf[i] = text ? text[i] : i % 64 == 63 ? '\n' : 'x';
    if (write(fd, buf, len) != (ssize_t)len)
        abort();
    close(fd);
}

static void cleanup(void)
{
    static const char *const files[] = {"w/f.txt", "w/big.bin", "w/d/i.html", "c/server.pem",
                                        "w/d", "w", "c"};
    int at = open(dir, O_RDONLY | O_DIRECTORY);
    for (size_t i = 0; at >= 0 && i < sizeof files / sizeof files[0]; i++)
        unlinkat(at, files[i], i >= 4 ? AT_REMOVEDIR : 0);
    if (at >= 0)
        close(at);
    rmdir(dir);
}

/* The certificate in c/, the document root w/ (where the site is opened); then
   back to where libFuzzer was started. */
static void setup(void)
{
    int home = open(".", O_RDONLY | O_DIRECTORY);
    if (home < 0 || !mkdtemp(dir) || chdir(dir) < 0 || mkdir("c", 0700) < 0 ||
        mkdir("w", 0755) < 0 || mkdir("w/d", 0755) < 0)
        abort();
    atexit(cleanup);
    put("c/server.pem", pem, sizeof pem - 1, 0600);
    put("w/f.txt", NULL, 6, 0644);
    put("w/big.bin", NULL, 100000, 0644);
    put("w/d/i.html", NULL, 3000, 0644);
    cfg = (config_t){.timeout = 23, .head_timeout = 10, .min_rate = 512, .threads = 1,
                     .vhosts = 1, .max_age = -1, .mem_file_max = 16384, .hsts = -1};
    proc_init(&proc);
    int missing;
    if (!(proc.tls = tls_store_load("c", &cfg, &proc, NULL, &missing)) || chdir("w") < 0 ||
        !(loop = gio_loop_new()) || site_init(&site, &cfg, &proc, loop, mime_load(NULL)) < 0)
        abort();
    trace = getenv("FUZZ_QUIC_TRACE") != NULL;
    if (fchdir(home) < 0)
        abort();
    close(home);
    local = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(4433),
                                 .sin_addr.s_addr = htonl(0x7f000001)};
    peer_a = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(50000),
                                  .sin_addr.s_addr = htonl(0x7f000001)};
    peer_b = peer_a;
    peer_b.sin_port = htons(50001);
}

/* ---- one input ---------------------------------------------------------------------- */

typedef struct {
    uint64_t in, out;          /* bytes received and sent */
    int fd;                    /* capture: the real socket, else -1 */
    struct sockaddr_in client; /* capture: the real client */
} run_t;

/* What the server sends: checked, counted, and dropped (or, capturing, sent). */
static void on_out(void *arg, const struct gio_dgram *d)
{
    run_t *r = arg;
    const struct sockaddr_in *to = (const struct sockaddr_in *)&d->peer;
    CHECK(d->len > 0);
    CHECK(d->segsize ? d->segsize <= PKT_MAX && d->len <= (size_t)TRAIN_MAX * d->segsize
                     : d->len <= PKT_MAX);
    CHECK(to->sin_family == AF_INET && to->sin_addr.s_addr == peer_a.sin_addr.s_addr &&
          (to->sin_port == peer_a.sin_port || to->sin_port == peer_b.sin_port));
    r->out += d->len;
    if (trace)
        fprintf(stderr, "out %zu bytes (segments of %u) to port %u\n", d->len, d->segsize,
                ntohs(to->sin_port));
    size_t seg = d->segsize ? d->segsize : d->len;
    for (size_t off = 0; r->fd >= 0 && off < d->len; off += seg) {
        size_t k = d->len - off < seg ? d->len - off : seg;
        sendto(r->fd, (const char *)d->buf + off, k, 0, (const struct sockaddr *)&r->client,
               sizeof r->client);
    }
}

/* The thread's clock moves by ms; the loop sees it, the due timers run. */
static void advance(quic_ep_t *e, unsigned ms)
{
    mono_ms += ms;
    gio_wait(loop, 0);
    quic_tick(e);
    for (int i = 0; i < 16 && quic_run(e); i++)
        ;
}

static void feed(quic_ep_t *e, run_t *r, const uint8_t *p, size_t n, int from_b)
{
    uint8_t *copy = (uint8_t *)fuzz_copy(p, n); /* ASan sees over-reads */
    gio_dgram_t d = {.buf = copy, .cap = n, .len = n > RX_CAP ? RX_CAP : n,
                     .truncated = n > RX_CAP, .peerlen = sizeof peer_a};
    memcpy(&d.peer, from_b ? &peer_b : &peer_a, sizeof peer_a);
    struct sockaddr_in *at = (struct sockaddr_in *)&d.local; /* packet info: no port */
    at->sin_family = AF_INET, at->sin_addr = local.sin_addr;
    r->in += n;
    quic_input(e, &d);
    for (int i = 0; i < 16 && quic_run(e); i++)
        ;
    free(copy);
}

/* An input's thread starts the same way every time. */
static quic_ep_t *begin(run_t *r)
{
    fixed = 1, rng = 0x5eed, mono_ms = 1000000;
    gio_wait(loop, 0);
    limits_cfg_t lc = {.free_fails = 5, .max_wait_s = 1}; /* nothing remembered from before */
    if (!(site.limits = limits_new(&lc, 64)))
        abort();
    char err[256];
    quic_ep_t *e = quic_open_loose(&cfg, &proc, (const struct sockaddr *)&local, sizeof local,
                                   on_out, r, err, sizeof err);
    if (!e || quic_start(e, &site, 64) < 0) {
        fprintf(stderr, "fuzz_quic: %s\n", e ? "quic_start failed" : err);
        abort();
    }
    return e;
}

/* The endpoint drains and ends; every connection gave its count back. */
static void end(quic_ep_t *e, size_t conns)
{
    quic_drain(e);
    for (int i = 0; i < 12; i++)
        advance(e, 5000);
    quic_free(e);
    CHECK(site.nconns == conns);
    limits_free(site.limits);
    site.limits = NULL;
}

typedef struct {
    const uint8_t *data;
    size_t size;
} input_t;

static void *run_input(void *arg)
{
    input_t *in = arg;
    const uint8_t *p = in->data;
    size_t size = in->size, conns = site.nconns;
    uint64_t shakes = site.stats.h3_handshakes;
    run_t r = {.fd = -1};
    quic_ep_t *e = begin(&r);
    while (size >= 2) {
        unsigned h = (unsigned)p[0] << 8 | p[1];
        p += 2, size -= 2;
        if (h & 0x8000) {
            advance(e, h & 0x7fff);
            continue;
        }
        size_t n = h & 0x3fff;
        n = n < size ? n : size;
        feed(e, &r, p, n, (h & 0x4000) != 0);
        p += n, size -= n;
        if (site.stats.h3_handshakes == shakes) /* no address validated yet */
            CHECK(r.out <= 3 * r.in);
    }
    if (trace)
        fprintf(stderr, "in %llu bytes, out %llu bytes, handshakes completed %llu\n",
                (unsigned long long)r.in, (unsigned long long)r.out,
                (unsigned long long)(site.stats.h3_handshakes - shakes));
    end(e, conns);
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input_t in = {data, size};
    pthread_t t;
    if (pthread_create(&t, NULL, run_input, &in) != 0 || pthread_join(t, NULL) != 0)
        abort();
    return 0;
}

/* ---- capture ------------------------------------------------------------------------ */

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static void record(int out, unsigned h, const uint8_t *p, size_t n)
{
    uint8_t hd[2] = {(uint8_t)(h >> 8), (uint8_t)h};
    if (write(out, hd, 2) != 2 || (n && write(out, p, n) != (ssize_t)n))
        abort();
}

/* A real socket in front of what an input runs: each datagram, and each tick
   of silence, is recorded as the record that replays it. */
static void *capture(void *arg)
{
    const char *file = arg;
    int out = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    run_t r = {.fd = socket(AF_INET, SOCK_DGRAM, 0)};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t sl = sizeof sa;
    if (out < 0 || r.fd < 0 || bind(r.fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(r.fd, (struct sockaddr *)&sa, &sl) < 0)
        abort();
    printf("port %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    size_t conns = site.nconns;
    quic_ep_t *e = begin(&r);
    static uint8_t buf[65536];
    int got = 0;
    while (!stop) {
        struct pollfd pf = {.fd = r.fd, .events = POLLIN};
        if (poll(&pf, 1, TICK_MS) <= 0) {
            if (got) { /* ticks before the first datagram would only delay it */
                record(out, 0x8000 | TICK_MS, NULL, 0);
                advance(e, TICK_MS);
            }
            continue;
        }
        sl = sizeof r.client;
        ssize_t n = recvfrom(r.fd, buf, sizeof buf, 0, (struct sockaddr *)&r.client, &sl);
        if (n <= 0 || n > 0x3fff)
            continue;
        got = 1;
        record(out, (unsigned)n, buf, (size_t)n);
        feed(e, &r, buf, (size_t)n, 0);
    }
    close(out);
    r.fd = -1;
    end(e, conns);
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    setup();
    const char *file = getenv("FUZZ_QUIC_CAPTURE");
    if (!file)
        return 0;
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    pthread_t t;
    if (pthread_create(&t, NULL, capture, (void *)file) != 0 || pthread_join(t, NULL) != 0)
        abort();
    exit(0);
}
