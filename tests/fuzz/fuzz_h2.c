/*
 * HTTP/2 input: bytes from a client into an h2 session (h2/h2.c) as
 * conn.c hands them over (h2_recv), with everything the session queues
 * (h2_fill) drained as a socket would take it -- no socket, no loop turning.
 * The session runs on a real site (router, static files, listings, status)
 * over a small document root in /dev/shm; gzip and access log are off, so
 * no job leaves for a worker thread.
 *
 * Input: the first byte says how the rest is cut into reads (0: at once,
 * else pieces of 1..63 bytes); the rest is the client's bytes, with the
 * connection preface put in front unless they start with it.  What the
 * server sends must be whole frames no larger than 16 KiB, and nothing
 * is read once the session says it is done.
 */
#define _GNU_SOURCE
#include "fuzz.h"
#include "h2/h2.h"
#include "handlers/hstate.h"
#include "site/config.h"
#include "site/mime.h"
#include "site/peerlimits.h"
#include "site/site.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64] = "/dev/shm/fuzz_h2.XXXXXX";
static config_t cfg;
static proc_t proc;
static site_t site; /* the handlers keep their states in it (handlers/hstate.h) */
static gio_loop_t *loop;
static struct sockaddr_in peer;
static int trace;

/* A file of len bytes: lines of 63 x's. */
static void put(const char *name, size_t len)
{
    static char buf[100000];
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || len > sizeof buf)
        abort();
    for (size_t i = 0; i < len; i++)
        buf[i] = i % 64 == 63 ? '\n' : 'x';
    if (write(fd, buf, len) != (ssize_t)len)
        abort();
    close(fd);
}

static void cleanup(void)
{
    static const char *const files[] = {"f.txt", "big.bin", "d/i.html", "d/i.html.gz", "d"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlinkat(site.rootfd, files[i],
                 i + 1 == sizeof files / sizeof files[0] ? AT_REMOVEDIR : 0);
    rmdir(dir);
}

/* The document root is made and the site opened in it; then back to where
   libFuzzer was started, whose relative paths it goes on using. */
static void setup(void)
{
    int home = open(".", O_RDONLY | O_DIRECTORY);
    if (home < 0 || !mkdtemp(dir) || chdir(dir) < 0 || mkdir("d", 0755) < 0)
        abort();
    atexit(cleanup);
    put("f.txt", 6);
    put("big.bin", 100000);
    put("d/i.html", 3000);
    put("d/i.html.gz", 100);
    cfg = (config_t){.timeout = 23,
                     .head_timeout = 10,
                     .min_rate = 512,
                     .max_requests = 0,
                     .threads = 1,
                     .vhosts = 1,
                     .max_age = -1,
                     .mem_file_max = 16384,
                     .hsts = -1};
    proc_init(&proc);
    if (!(loop = gio_loop_new()) || site_init(&site, &cfg, &proc, loop, mime_load(NULL)) < 0)
        abort();
    limits_cfg_t lc = {.free_fails = 5, .max_wait_s = 1};
    if (!(site.limits = limits_new(&lc, 64)))
        abort();
    trace = getenv("FUZZ_H2_TRACE") != NULL;
    if (fchdir(home) < 0)
        abort();
    close(home);
    peer = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
}

static void wake(void *conn)
{
    (void)conn;
}

/* Where the server's output stands in its frames. */
typedef struct {
    uint8_t hd[9];
    size_t have, left;
} framing_t;

/* What the server sent: whole frames of at most 16 KiB (DATA is cut to one
   TLS record, and nothing else it sends is larger). */
static void check_frames(framing_t *fr, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (fr->left) {
            size_t k = n - i < fr->left ? n - i : fr->left;
            i += k, fr->left -= k;
            continue;
        }
        fr->hd[fr->have++] = p[i++];
        if (fr->have == 9) {
            fr->have = 0;
            fr->left = (size_t)fr->hd[0] << 16 | fr->hd[1] << 8 | fr->hd[2];
            CHECK(fr->left <= 16384);
            if (trace) /* FUZZ_H2_TRACE=1: what the server sends, a frame a line */
                fprintf(stderr, "frame type %u flags %#x stream %u length %zu\n", fr->hd[3],
                        fr->hd[4], (unsigned)fr->hd[8] | (unsigned)fr->hd[7] << 8, fr->left);
        }
    }
}

/* Take everything queued, as a socket that reads at once would: h2_fill
   leaves whole frames. */
static void drain(h2_t *h, gio_batch_t *out, framing_t *fr)
{
    static char buf[65536];
    for (int rounds = 0; rounds < 64; rounds++) {
        long q = h2_fill(h, 256 * 1024);
        CHECK(q >= 0 || q == -1);
        if (q <= 0)
            break;
        while (!gio_batch_done(out)) {
            long k = gio_batch_copy(out, buf, sizeof buf);
            CHECK(k > 0);
            check_frames(fr, (const uint8_t *)buf, (size_t)k);
            gio_batch_consume(out, (uint64_t)k);
        }
        CHECK(!fr->have && !fr->left);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!loop)
        setup();
    if (!size)
        return 0;
    size_t cut = data[0] ? data[0] % 63 + 1 : 0;
    data++, size--;
    gio_batch_t out;
    gio_batch_init(&out);
    framing_t fr = {0};
    codec_conn_t f = {
        .out = &out, .site = &site, .peer = (const struct sockaddr *)&peer, .local_port = 80};
    h2_t *h = h2_new(&f, wake);
    if (!h)
        return 0;
    int ok = size >= H2_PREFACE_LEN && !memcmp(data, H2_PREFACE, H2_PREFACE_LEN);
    if (!ok)
        ok = h2_recv(h, (const uint8_t *)H2_PREFACE, H2_PREFACE_LEN) == 0;
    drain(h, &out, &fr);
    while (ok && size && h2_want_read(h)) {
        size_t k = cut && cut < size ? cut : size;
        uint8_t *piece = (uint8_t *)fuzz_copy(data, k); /* ASan sees over-reads */
        ok = h2_recv(h, piece, k) == 0;
        free(piece);
        data += k, size -= k;
        drain(h, &out, &fr);
    }
    h2_report_t rep;
    h2_report(h, &rep);
    (void)h2_done(h);
    h2_goaway(h);
    drain(h, &out, &fr);
    char bye[32];
    CHECK(h2_expire(h, bye, sizeof bye) == 17);
    h2_free(h);
    gio_batch_free(&out);
    return 0;
}
