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
#include "fuzz_h2site.h"

#include <sys/stat.h>

static char dir[64] = "/dev/shm/fuzz_h2.XXXXXX";
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
    int home = fuzz_site_enter(dir);
    if (mkdir("d", 0755) < 0)
        abort();
    atexit(cleanup);
    put("f.txt", 6);
    put("big.bin", 100000);
    put("d/i.html", 3000);
    put("d/i.html.gz", 100);
    fuzz_site_open(&(config_t){.timeout = 23,
                               .head_timeout = 10,
                               .min_rate = 512,
                               .max_requests = 0,
                               .threads = 1,
                               .vhosts = 1,
                               .max_age = -1,
                               .mem_file_max = 16384,
                               .hsts = -1});
    trace = getenv("FUZZ_H2_TRACE") != NULL; /* FUZZ_H2_TRACE=1: the server's frames */
    fuzz_site_leave(home);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!loop)
        setup();
    fuzz_client_t c;
    size_t cut;
    if (fuzz_client_open(&c, &data, &size, &cut) < 0)
        return 0;
    c.fr.trace = trace;
    int ok = size >= H2_PREFACE_LEN && !memcmp(data, H2_PREFACE, H2_PREFACE_LEN);
    if (!ok)
        ok = h2_recv(c.h, (const uint8_t *)H2_PREFACE, H2_PREFACE_LEN) == 0;
    fuzz_drain(&c);
    while (ok && size && h2_want_read(c.h)) {
        size_t k = cut && cut < size ? cut : size;
        uint8_t *piece = (uint8_t *)fuzz_copy(data, k); /* ASan sees over-reads */
        ok = h2_recv(c.h, piece, k) == 0;
        free(piece);
        data += k, size -= k;
        fuzz_drain(&c);
    }
    h2_report_t rep;
    h2_report(c.h, &rep);
    (void)h2_done(c.h);
    h2_goaway(c.h);
    fuzz_drain(&c);
    char bye[32];
    CHECK(h2_expire(c.h, bye, sizeof bye) == 17);
    h2_free(c.h);
    gio_batch_free(&c.out);
    return 0;
}
