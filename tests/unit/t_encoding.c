/*
 * encoding: Accept-Encoding negotiation, precompressed siblings, the gzip
 * cache (round trip, hits, invalidation, eviction while referenced) and
 * ETags.  Header values are placed against a guard page so that an over-read
 * faults; run under SAN=1 to prove the cache frees nothing still in use.
 */
#include "conditional.h"
#include "encoding.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char *guard_end; /* the first byte of a PROT_NONE page */

/* s copied to end right at the guard page, without its NUL. */
static const char *guarded(const char *s, size_t *n)
{
    *n = strlen(s);
    return memcpy(guard_end - *n, s, *n);
}

static unsigned accepted(const char *ae)
{
    size_t n;
    const char *p = ae ? guarded(ae, &n) : NULL;
    return enc_accepted(p, ae ? n : 0, NULL, NULL);
}

/* The preference list as text: "br,gzip,identity". */
static const char *prefer(const char *ae)
{
    static char out[64];
    unsigned char pref[ENC_PREFER_MAX];
    int np;
    size_t n;
    const char *p = guarded(ae, &n);
    enc_accepted(p, n, pref, &np);
    out[0] = 0;
    for (int i = 0; i < np; i++) {
        const char *name = enc_name(pref[i]);
        strcat(out, i ? "," : "");
        strcat(out, name ? name : "identity");
    }
    return out;
}

static int choose(const char *ae, unsigned available)
{
    size_t n;
    const char *p = guarded(ae, &n);
    return enc_choose(p, n, available);
}

static int choose_coded(const char *ae, unsigned available)
{
    size_t n;
    const char *p = guarded(ae, &n);
    return enc_choose_coded(p, n, available);
}

static int match(const char *h, const char *etag, int weak)
{
    size_t n;
    const char *p = guarded(h, &n);
    return cond_etag_match(p, n, etag, weak);
}

static void test_accept(void)
{
    is_int(enc_accepted(NULL, 0, NULL, NULL), 0, "absent: identity only");
    is_int(enc_choose(NULL, 0, ENC_ALL), ENC_IDENTITY, "absent: choose identity");
    is_int(accepted(""), 0, "empty: identity only");
    is_int(accepted(" , ,"), 0, "only empty elements");
    is_int(accepted("gzip"), ENC_GZIP, "gzip");
    is_int(accepted("gzip;q=0"), 0, "gzip;q=0 refuses gzip");
    is_int(accepted("gzip;q=0.000"), 0, "gzip;q=0.000");
    is_int(accepted("br;q=0.001"), ENC_BR, "smallest positive q");
    is_int(accepted("*;q=0.5, gzip;q=0"), ENC_BR | ENC_ZSTD, "* covers the unnamed only");
    is_int(choose("*;q=0.5, gzip;q=0", ENC_GZIP), ENC_IDENTITY, "... so no gzip");
    is_int(choose("*;q=0.5, gzip;q=0", ENC_ALL), ENC_BR, "... br wins the tie");
    is_int(accepted("br;q=1.0, gzip;q=0.8"), ENC_BR | ENC_GZIP, "br;q=1.0, gzip;q=0.8");
    is_str(prefer("br;q=1.0, gzip;q=0.8"), "br,gzip,identity", "... in q order");
    is_int(choose("br;q=1.0, gzip;q=0.8", ENC_GZIP), ENC_GZIP, "... gzip if no br");
    is_str(prefer("gzip;q=0.9, br;q=0.8"), "gzip,br,identity", "higher q beats tie order");
    is_int(choose("gzip;q=0.9, br;q=0.8", ENC_ALL), ENC_GZIP, "... and is chosen");
    is_str(prefer("gzip, deflate, br, zstd"), "br,zstd,gzip,identity",
           "browser: ties br>zstd>gzip");
    /* coded on the fly for one answer: the cheapest to make wins a tie (issue 79) */
    is_int(choose_coded("gzip, deflate, br, zstd", ENC_ALL), ENC_ZSTD,
           "browser, coded on the fly: zstd wins the tie");
    is_int(choose_coded("*;q=0.5, gzip;q=0", ENC_ALL), ENC_ZSTD, "... and *'s tie");
    is_int(choose_coded("gzip, br", ENC_ALL), ENC_BR, "... br before gzip");
    is_int(choose_coded("zstd;q=0.5, br", ENC_ALL), ENC_BR, "... q still first");
    is_int(choose_coded("gzip, deflate, br, zstd", ENC_GZIP | ENC_BR), ENC_BR,
           "... among what is available");
    is_int(choose_coded("zstd;q=0.5, identity", ENC_ALL), ENC_IDENTITY,
           "... a ranked identity can win");
    is_int(accepted("identity;q=0"), ENC_NO_IDENTITY, "identity;q=0");
    is_int(choose("identity;q=0", ENC_ALL), ENC_IDENTITY, "... still the fallback");
    is_int(accepted("*;q=0"), ENC_NO_IDENTITY, "*;q=0 refuses identity too");
    is_int(accepted("*;q=0, identity"), 0, "... unless identity is named");
    is_int(accepted("*"), ENC_ALL, "*");
    is_str(prefer("gzip;q=0.5, identity"), "identity,gzip", "a ranked identity can win");
    is_int(choose("gzip;q=0.5, identity", ENC_GZIP), ENC_IDENTITY, "... and is chosen");
    is_str(prefer("gzip, identity"), "gzip,identity", "a coding wins a tie with identity");
    is_int(accepted("@@@, ;;;"), 0, "garbage");
    is_int(accepted("gzip garbage"), 0, "junk after the name: not acceptable");
    is_int(accepted("gzip garbage, br"), ENC_BR, "... the next item still counts");
    is_int(accepted("gzip;q=abc"), 0, "malformed q");
    is_int(accepted("gzip;q=0.5000"), 0, "four decimals");
    is_int(accepted("gzip;q=1.5"), 0, "q above 1");
    is_int(accepted("gzip;q=.5"), 0, "no leading digit");
    is_int(accepted("gzip;q="), 0, "empty q");
    is_int(accepted("gzip;q"), 0, "q without value");
    is_int(accepted("gzip;q=\"1\""), 0, "quoted q");
    is_int(accepted("gzip;"), 0, "dangling ';'");
    is_int(accepted("gzip;q=0.5;foo=\"un"), 0, "unterminated quoted string");
    is_int(accepted("gzip;foo=\"a,b\";q=0.5, br"), ENC_GZIP | ENC_BR, "quoted comma in a param");
    is_int(accepted("gzip;level=9;q=0.5"), ENC_GZIP, "unknown parameter ignored");
    is_int(accepted("x-gzip"), ENC_GZIP, "x-gzip is gzip");
    is_int(accepted("GZIP, Br, ZsTd"), ENC_ALL, "case-insensitive names");
    is_int(accepted("gzip;Q=0"), 0, "case-insensitive q");
    is_str(prefer("  gzip ;  q=0.5 ,\tbr  "), "br,gzip,identity", "whitespace everywhere");
    is_int(accepted(",,, gzip ,,"), ENC_GZIP, "empty elements around");
    is_int(accepted("gzip;q=0, gzip"), 0, "the first mention counts");
    is_int(accepted("deflate, compress"), 0, "codings we cannot serve");
    is_int(accepted("gzipx, brr"), 0, "names are not prefixes");
    int np = -1;
    enc_accepted(NULL, 0, NULL, &np);
    is_int(np, 1, "absent: the list is just identity");
}

/* Random headers from an alphabet of the bytes that matter: no crash, no
   over-read (guard page), and the result's invariants hold. */
static void test_fuzz(void)
{
    static const char alpha[] = "gzipbrstdxy-*;q=0.15,\" W/\t\\id";
    unsigned seed = 7, bad = 0;
    for (int round = 0; round < 50000; round++) {
        char h[48];
        seed = seed * 1103515245u + 12345u;
        size_t n = (seed >> 16) % sizeof h, len;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            h[i] = alpha[(seed >> 16) % (sizeof alpha - 1)];
        }
        h[n] = 0;
        const char *p = guarded(h, &len);
        unsigned char pref[ENC_PREFER_MAX];
        int np;
        unsigned m = enc_accepted(p, len, pref, &np);
        int ids = 0, codings = __builtin_popcount(m & ENC_ALL);
        for (int i = 0; i < np; i++)
            ids += pref[i] == ENC_IDENTITY;
        if ((m & ~(ENC_ALL | ENC_NO_IDENTITY)) || np != codings + 1 || ids != 1)
            bad++;
        if (cond_etag_match(p, len, "\"gzip\"", round & 1) && !strstr(h, "\"gzip\"") &&
            !strchr(h, '*'))
            bad++;
    }
    is_int(bad, 0, "50000 random headers: invariants hold");
}

static void test_names(void)
{
    is_str(enc_name(ENC_BR), "br", "br token");
    is_str(enc_name(ENC_ZSTD), "zstd", "zstd token");
    ok(enc_name(ENC_IDENTITY) == NULL, "identity has no Content-Encoding");
    is_str(enc_suffix(ENC_GZIP), ".gz", "gz suffix");
    is_str(enc_suffix(ENC_ZSTD), ".zst", "zst suffix");
    ok(enc_compressible("text/html; charset=utf-8"), "html with charset");
    ok(enc_compressible("TEXT/CSS"), "case-insensitive type");
    ok(enc_compressible("application/javascript"), "js");
    ok(enc_compressible("text/javascript ;charset=utf-8"), "space before ';'");
    ok(enc_compressible("image/svg+xml"), "svg");
    ok(enc_compressible("application/json"), "json");
    ok(!enc_compressible("image/png"), "png is not");
    ok(!enc_compressible("text/htmlx"), "no prefix match");
    ok(!enc_compressible("text/"), "partial");
    ok(!enc_compressible(NULL), "NULL");
}

/* Create dir/name with len bytes of data and mode; mtime set if sec >= 0. */
static void put(int dirfd, const char *name, const void *data, size_t len, mode_t mode, time_t sec)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ok(fd >= 0 && write(fd, data, len) == (ssize_t)len && !fchmod(fd, mode), "create %s", name);
    if (sec >= 0) {
        struct timespec ts[2] = {{sec, 0}, {sec, 0}};
        ok(!futimens(fd, ts), "set mtime of %s", name);
    }
    close(fd);
}

static void test_siblings(int dirfd)
{
    struct stat orig, st;
    put(dirfd, "a.html", "<p>hello</p>", 12, 0644, 1000000);
    put(dirfd, "a.html.br", "BR", 2, 0644, 1000001);
    put(dirfd, "a.html.gz", "GZ", 2, 0644, 999999);   /* older: stale */
    put(dirfd, "a.html.zst", "ZS", 2, 0640, 1000000); /* not world-readable */
    ok(!fstatat(dirfd, "a.html", &orig, 0), "stat original");
    is_int(enc_siblings(dirfd, "a.html", &orig, ENC_ALL), ENC_BR, "only the fresh readable br");
    is_int(enc_siblings(dirfd, "a.html", &orig, ENC_GZIP | ENC_ZSTD), 0, "want filters");

    put(dirfd, "a.html.gz", "GZ", 2, 0644, 1000000);
    put(dirfd, "a.html.zst", "ZS", 2, 0644, 1000000);
    is_int(enc_siblings(dirfd, "a.html", &orig, ENC_ALL), ENC_ALL, "same mtime counts");

    int fd = enc_open_sibling(dirfd, "a.html", &orig, ENC_BR, &st);
    ok(fd >= 0 && st.st_size == 2, "open the br sibling");
    char buf[4] = {0};
    ok(fd >= 0 && read(fd, buf, 3) == 2 && !strcmp(buf, "BR"), "... its contents");
    if (fd >= 0)
        close(fd);

    put(dirfd, "a.html.gz", "GZ", 2, 0644, 999999);
    errno = 0;
    ok(enc_open_sibling(dirfd, "a.html", &orig, ENC_GZIP, &st) < 0 && errno == ESTALE,
       "open re-checks: older");
    put(dirfd, "a.html.zst", "", 0, 0644, 1000001);
    is_int(enc_siblings(dirfd, "a.html", &orig, ENC_ZSTD), 0, "an empty sibling is ignored");
    errno = 0;
    ok(enc_open_sibling(dirfd, "a.html", &orig, ENC_ZSTD, &st) < 0 && errno == ESTALE,
       "... and not opened");

    /* A symlink (even to a good sibling), a dangling one, a directory. */
    put(dirfd, "b.css", "b{}", 3, 0644, 1000000);
    ok(!fstatat(dirfd, "b.css", &orig, 0), "stat b.css");
    ok(!symlinkat("a.html.br", dirfd, "b.css.br"), "symlink to a fresh file");
    ok(!symlinkat("nowhere", dirfd, "b.css.gz"), "dangling symlink");
    ok(!mkdirat(dirfd, "b.css.zst", 0755), "directory");
    is_int(enc_siblings(dirfd, "b.css", &orig, ENC_ALL), 0, "symlinks and directories ignored");
    errno = 0;
    ok(enc_open_sibling(dirfd, "b.css", &orig, ENC_BR, &st) < 0 && errno == ELOOP,
       "O_NOFOLLOW refuses the symlink");
    errno = 0;
    ok(enc_open_sibling(dirfd, "b.css", &orig, ENC_ZSTD, &st) < 0 && errno == EACCES,
       "a directory is not served");
    errno = 0;
    ok(enc_open_sibling(dirfd, "nope", &orig, ENC_GZIP, &st) < 0 && errno == ENOENT, "missing");

    ok(!mkdirat(dirfd, "sub", 0755), "subdirectory");
    put(dirfd, "sub/c.js", "c()", 3, 0644, 1000000);
    put(dirfd, "sub/c.js.gz", "CZ", 2, 0644, 1000000);
    ok(!fstatat(dirfd, "sub/c.js", &orig, 0), "stat sub/c.js");
    is_int(enc_siblings(dirfd, "sub/c.js", &orig, ENC_ALL), ENC_GZIP, "path with a directory");
    errno = 0;
    ok(enc_open_sibling(dirfd, "/etc/passwd", &orig, ENC_GZIP, &st) < 0 && errno == EINVAL,
       "absolute paths refused");
    is_int(enc_siblings(dirfd, "/sub/c.js", &orig, ENC_ALL), 0, "... also by enc_siblings");
    errno = 0;
    ok(enc_open_sibling(dirfd, "a.html", &orig, ENC_IDENTITY, &st) < 0 && errno == EINVAL,
       "identity has no sibling");
}

/* Inflate a gzip member and compare it with want[0..n). */
static int gunzip_equals(const unsigned char *gz, size_t len, const void *want, size_t n)
{
    unsigned char *out = malloc(n + 1);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (!out || inflateInit2(&zs, 15 + 16) != Z_OK)
        return free(out), 0;
    zs.next_in = (unsigned char *)gz;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)n + 1; /* one spare byte: more output than n is a failure */
    int r = inflate(&zs, Z_FINISH);
    int same = r == Z_STREAM_END && zs.total_out == n && zs.avail_in == 0 && !memcmp(out, want, n);
    inflateEnd(&zs);
    free(out);
    return same;
}

/* Text of about n bytes that compresses well but not trivially; seeded. */
static char *make_text(size_t n, unsigned seed)
{
    static const char *const words[] = {
        "<div class=\"item\">", "gatling ", "serves ", "files ", "</div>\n", "quickly ", "and ",
        "compresses "};
    char *s = malloc(n + 1);
    size_t i = 0;
    while (i < n) {
        seed = seed * 1103515245u + 12345u;
        const char *w = words[(seed >> 16) % 8];
        size_t l = strlen(w);
        if (l > n - i)
            l = n - i;
        memcpy(s + i, w, l);
        i += l;
    }
    s[n] = 0;
    return s;
}

static int open_stat(int dirfd, const char *name, struct stat *st)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, st) < 0)
        return -1;
    return fd;
}

static void test_gzip(int dirfd)
{
    enc_cache_t *c = enc_cache_new(0, 0);
    ok(c != NULL, "cache");
    struct stat st, st2;
    char *text = make_text(100000, 1);
    put(dirfd, "page.html", text, 100000, 0644, -1);
    int fd = open_stat(dirfd, "page.html", &st);
    ok(enc_gzip_eligible(c, "text/html; charset=utf-8", &st), "eligible");
    ok(!enc_gzip_eligible(c, "image/png", &st), "png is not eligible");
    ok(!enc_gzip_eligible(NULL, "text/html", &st), "no cache: gzip off");

    enc_gz_t *e = enc_gzip_get(c, fd, &st);
    ok(e && e->len > 18 && e->len < 100000 / 2, "compressed (%zu bytes)", e ? e->len : 0);
    ok(e && e->data[0] == 0x1f && e->data[1] == 0x8b, "gzip magic");
    ok(e && gunzip_equals(e->data, e->len, text, 100000), "round trip");
    ok(lseek(fd, 0, SEEK_CUR) == 0, "pread leaves the offset alone");
    enc_gz_t *e2 = enc_gzip_get(c, fd, &st);
    ok(e2 == e, "second get hits: same entry");
    size_t bytes, entries;
    enc_cache_stats(c, &bytes, &entries);
    ok(entries == 1 && bytes >= e->len, "one entry, %zu bytes", bytes);
    enc_gzip_release(e2);

    /* Changed: same size, new mtime, new contents.  A new entry; the old one,
       still referenced, stays readable until released. */
    char *text2 = make_text(100000, 2);
    put(dirfd, "page.html", text2, 100000, 0644, -1);
    struct timespec ts[2] = {{0, UTIME_OMIT}, {st.st_mtim.tv_sec + 5, 0}};
    ok(!utimensat(dirfd, "page.html", ts, 0), "new mtime");
    ok(!fstat(fd, &st2) && st2.st_size == st.st_size, "same size");
    enc_gz_t *e3 = enc_gzip_get(c, fd, &st2);
    ok(e3 && e3 != e && gunzip_equals(e3->data, e3->len, text2, 100000), "mtime change: new");
    ok(e->in_table == 0, "the old version is dropped at once");
    enc_cache_stats(c, NULL, &entries);
    is_int(entries, 1, "one entry left");
    ok(gunzip_equals(e->data, e->len, text, 100000), "old entry intact while referenced");
    enc_gzip_release(e);
    enc_gzip_release(e3);

    /* Changed size; the caller's stat is stale. */
    put(dirfd, "page.html", text, 50000, 0644, -1);
    errno = 0;
    ok(!enc_gzip_get(c, fd, &st) && errno == ESTALE, "stale stat: ESTALE, not cached");
    ok(!fstat(fd, &st2), "fresh stat");
    e = enc_gzip_get(c, fd, &st2);
    ok(e && gunzip_equals(e->data, e->len, text, 50000), "size change: new contents");
    enc_gzip_release(e);
    close(fd);

    /* Stale because the file changes between fstat and compression. */
    enc_cache_t *c2 = enc_cache_new(0, 0);
    fd = open_stat(dirfd, "page.html", &st);
    put(dirfd, "page.html", text, 60000, 0644, -1);
    errno = 0;
    ok(!enc_gzip_get(c2, fd, &st) && errno == ESTALE, "truncated+rewritten under us: ESTALE");
    enc_cache_stats(c2, NULL, &entries);
    is_int(entries, 0, "... nothing cached");
    enc_cache_free(c2);
    close(fd);

    /* A strong ETag promises the same bytes every time: zlib is deterministic. */
    enc_cache_t *c3 = enc_cache_new(0, 0);
    fd = open_stat(dirfd, "page.html", &st2);
    e = enc_gzip_get(c, fd, &st2);
    e2 = enc_gzip_get(c3, fd, &st2);
    ok(e && e2 && e != e2 && e->len == e2->len && !memcmp(e->data, e2->data, e->len),
       "two compressions give the same bytes");
    enc_gzip_release(e);
    enc_gzip_release(e2);
    enc_cache_free(c3);
    close(fd);

    /* Out of range, incompressible. */
    put(dirfd, "tiny.txt", text, 100, 0644, -1);
    fd = open_stat(dirfd, "tiny.txt", &st);
    errno = 0;
    ok(!enc_gzip_eligible(c, "text/plain", &st) && !enc_gzip_get(c, fd, &st) && errno == ERANGE,
       "below ENC_GZIP_MIN");
    close(fd);
    unsigned char noise[4096];
    for (size_t i = 0; i < sizeof noise; i++)
        noise[i] = (unsigned char)((i * 2654435761u) >> 13 ^ (i * 40503u) >> 5);
    put(dirfd, "noise.txt", noise, sizeof noise, 0644, -1);
    fd = open_stat(dirfd, "noise.txt", &st);
    errno = 0;
    ok(!enc_gzip_get(c, fd, &st) && errno == ERANGE, "incompressible: ERANGE");
    errno = 0;
    ok(!enc_gzip_get(c, fd, &st) && errno == ERANGE, "... remembered");
    close(fd);
    enc_cache_t *small = enc_cache_new(0, 4096);
    fd = open_stat(dirfd, "page.html", &st);
    errno = 0;
    ok(!enc_gzip_eligible(small, "text/html", &st) && !enc_gzip_get(small, fd, &st) &&
           errno == EFBIG,
       "above max_file: EFBIG");
    close(fd);
    enc_cache_free(small);
    free(text);
    free(text2);
    enc_cache_free(c);
}

/* The jobs: what begin declines (nothing to code, a version being coded
   already, the cap on jobs), one job per file version and coding, and end
   entering a result or dropping a job that never ran. */
static void test_jobs(int dirfd)
{
    enc_cache_t *c = enc_cache_new(0, 0), *small = enc_cache_new(0, 4096);
    struct stat st, st2, dir;
    char *text = make_text(20000, 3);
    put(dirfd, "job.html", text, 20000, 0644, -1);
    put(dirfd, "job2.html", text, 20000, 0644, -1);
    put(dirfd, "jobtiny.html", text, 10, 0644, -1);
    int fd = open_stat(dirfd, "job.html", &st), fd2 = open_stat(dirfd, "job2.html", &st2);
    struct stat tiny;
    int tfd = open_stat(dirfd, "jobtiny.html", &tiny);
    fstat(dirfd, &dir);
    ok(!enc_coded_begin(NULL, fd, &st, ENC_GZIP), "no cache: no job");
    ok(!enc_coded_begin(c, fd, NULL, ENC_GZIP), "no stat: no job");
    ok(!enc_coded_begin(c, dirfd, &dir, ENC_GZIP), "a directory: no job");
    ok(!enc_coded_begin(c, tfd, &tiny, ENC_GZIP), "below ENC_GZIP_MIN: no job");
    ok(!enc_coded_begin(small, fd, &st, ENC_GZIP), "above max_file: no job");
    ok(!enc_coded_begin(c, fd, &st, ENC_IDENTITY), "identity is no coding: no job");
    enc_gzjob_t *g = enc_coded_begin(c, fd, &st, ENC_GZIP);
    ok(g != NULL, "a gzip job");
    ok(!enc_coded_begin(c, fd, &st, ENC_GZIP), "the same version and coding again: declined");
    enc_gzjob_t *b = enc_coded_begin(c, fd, &st, ENC_BR);
    ok(b != NULL, "... another coding of it: a job of its own");
    enc_gzjob_t *g2 = enc_coded_begin(c, fd2, &st2, ENC_GZIP);
    ok(g2 != NULL, "... another file: a job of its own");
    struct stat later = st;
    later.st_mtim.tv_nsec = (later.st_mtim.tv_nsec + 1) % 1000000000;
    enc_gzip_limit(c, 3);
    uint64_t busy = enc_gzip_counters(c).skipped_busy;
    ok(!enc_coded_begin(c, fd, &later, ENC_GZIP), "a fourth job past a limit of 3: declined");
    is_int((int)(enc_gzip_counters(c).skipped_busy - busy), 1, "... counted as skipped_busy");
    enc_gzip_run(g);
    enc_gzip_end(g);
    enc_gz_t *e = enc_coded_lookup(c, &st, ENC_GZIP);
    ok(e && gunzip_equals(e->data, e->len, text, 20000), "the job's result is in the cache");
    enc_gzip_release(e);
    ok(!enc_coded_begin(c, fd, &st, ENC_GZIP), "a version coded already: no job");
    enc_gzip_end(b);
    enc_gzip_end(g2);
    ok(!enc_coded_lookup(c, &st, ENC_BR) && !enc_coded_lookup(c, &st2, ENC_GZIP),
       "jobs ended without a run leave nothing");
    close(fd), close(fd2), close(tfd);
    free(text);
    enc_cache_free(small);
    enc_cache_free(c);
}

/* Eviction under the memory bound, LRU order, entries pinned by responses. */
static void test_eviction(int dirfd)
{
    enum { NF = 8, SZ = 20000 };
    char *text[NF];
    int fd[NF];
    struct stat st[NF];
    for (int i = 0; i < NF; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%d.txt", i);
        text[i] = make_text(SZ, 100 + (unsigned)i);
        put(dirfd, name, text[i], SZ, 0644, -1);
        fd[i] = open_stat(dirfd, name, &st[i]);
    }
    /* Measure one entry, then allow about three. */
    enc_cache_t *probe = enc_cache_new(0, 0);
    enc_gz_t *e = enc_gzip_get(probe, fd[0], &st[0]);
    size_t one;
    enc_cache_stats(probe, &one, NULL);
    enc_gzip_release(e);
    enc_cache_free(probe);
    size_t max = one * 3 + one / 2;
    enc_cache_t *c = enc_cache_new(max, 0);

    enc_gz_t *pinned = enc_gzip_get(c, fd[0], &st[0]); /* a response in flight */
    enc_gz_t *b = enc_gzip_get(c, fd[1], &st[1]);
    enc_gzip_release(b);
    enc_gz_t *t = enc_gzip_get(c, fd[2], &st[2]);
    enc_gzip_release(t);
    b = enc_gzip_get(c, fd[1], &st[1]); /* touch f1: f2 is now the oldest idle */
    ok(b && b->in_table, "f1 cached");
    enc_gzip_release(b);
    for (int i = 3; i < NF; i++) {
        enc_gz_t *x = enc_gzip_get(c, fd[i], &st[i]);
        ok(x != NULL, "get f%d", i);
        size_t bytes, entries;
        enc_cache_stats(c, &bytes, &entries);
        ok(bytes <= max && entries <= 3, "bound held: %zu <= %zu bytes, %zu entries", bytes, max,
           entries);
        enc_gzip_release(x);
    }
    ok(pinned && !pinned->in_table, "the pinned entry was evicted from the table");
    ok(pinned && gunzip_equals(pinned->data, pinned->len, text[0], SZ),
       "... but its bytes are intact until released");
    enc_gzip_release(pinned);

    /* LRU: after f0 f1 f2 (touch f1) f3, the victims were f0 then f2, not f1. */
    enc_cache_t *l = enc_cache_new(max, 0);
    enc_gz_t *x[4];
    for (int i = 0; i < 3; i++)
        x[i] = enc_gzip_get(l, fd[i], &st[i]);
    enc_gzip_release(enc_gzip_get(l, fd[0], &st[0])); /* touch f0 */
    x[3] = enc_gzip_get(l, fd[3], &st[3]);
    ok(x[0]->in_table && !x[1]->in_table && x[2]->in_table && x[3]->in_table,
       "LRU: the least recently used goes first");
    for (int i = 0; i < 4; i++)
        enc_gzip_release(x[i]);

    /* An entry bigger than the whole cache is served, then freed. */
    enc_cache_t *tiny = enc_cache_new(100, 0);
    e = enc_gzip_get(tiny, fd[0], &st[0]);
    size_t entries;
    enc_cache_stats(tiny, NULL, &entries);
    ok(e && !e->in_table && entries == 0, "too big to cache: served uncached");
    ok(e && gunzip_equals(e->data, e->len, text[0], SZ), "... correct");
    enc_gzip_release(e);
    enc_cache_free(tiny);

    /* Freeing the cache under a response: the entry outlives it. */
    e = enc_gzip_get(l, fd[5], &st[5]);
    enc_cache_free(l);
    enc_cache_free(c);
    ok(e && gunzip_equals(e->data, e->len, text[5], SZ), "entry outlives its cache");
    enc_gzip_release(e);
    for (int i = 0; i < NF; i++) {
        close(fd[i]);
        free(text[i]);
    }
}

static void test_etag(void)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_ino = 0x1234;
    st.st_size = 0x10;
    st.st_mtim.tv_sec = 0x5f5e100;
    char id[ENC_ETAG_MAX], gz[ENC_ETAG_MAX], br[ENC_ETAG_MAX], zst[ENC_ETAG_MAX];
    is_int(enc_etag(id, &st, ENC_IDENTITY), 17, "identity length");
    is_str(id, "\"1234-10-5f5e100\"", "identity ETag");
    enc_etag(gz, &st, ENC_GZIP);
    enc_etag(br, &st, ENC_BR);
    enc_etag(zst, &st, ENC_ZSTD);
    is_str(gz, "\"1234-10-5f5e100-gz\"", "gzip ETag");
    is_str(br, "\"1234-10-5f5e100-br\"", "br ETag");
    is_str(zst, "\"1234-10-5f5e100-zst\"", "zstd ETag");
    st.st_ino = (ino_t)-1;
    st.st_size = INT64_MAX;
    st.st_mtim.tv_sec = -1;
    ok(enc_etag(zst, &st, ENC_ZSTD) < ENC_ETAG_MAX, "the longest fits: %s", zst);

    ok(match("\"1234-10-5f5e100\"", id, 0), "strong match");
    ok(!match("\"1234-10-5f5e100\"", gz, 1), "variants differ");
    ok(match("W/\"1234-10-5f5e100\"", id, 1), "W/ matches weakly");
    ok(!match("W/\"1234-10-5f5e100\"", id, 0), "... never strongly");
    ok(match("\"x\"", "W/\"x\"", 1), "our weak tag, weak comparison");
    ok(!match("\"x\"", "W/\"x\"", 0), "our weak tag, strong comparison");
    ok(match("*", id, 0) && match("*", id, 1), "*");
    ok(match(" * ", id, 0), "* with OWS");
    ok(match("\"a\", \"b\" ,W/\"c\"", "\"b\"", 0), "list, strong");
    ok(!match("\"a\", \"b\" ,W/\"c\"", "\"c\"", 0), "list, weak member, strong comparison");
    ok(match("\"a\", \"b\" ,W/\"c\"", "\"c\"", 1), "list, weak comparison");
    ok(!match("\"a\", \"b\"", "\"d\"", 1), "no member matches");
    ok(match("\"a,b\"", "\"a,b\"", 0), "comma inside the opaque-tag");
    ok(!match("\"a,b\"", "\"a\"", 1), "... is not a separator");
    ok(!match("\"\"", "\"a\"", 1) && match("\"\"", "\"\"", 0), "empty opaque-tag");
    ok(!match("", id, 1), "empty header");
    ok(!match("\"a", "\"a\"", 1), "unterminated");
    ok(!match("a", "\"a\"", 1), "unquoted");
    ok(!match("\"a\" \"b\"", "\"a\"", 1), "missing comma: malformed, no match");
    ok(!match("\"a\", garbage", "\"a\"", 1), "garbage later: no match");
    ok(!match("w/\"a\"", "\"a\"", 1), "W/ is case-sensitive");
    ok(!match("\"a b\"", "\"a b\"", 1), "space is no etagc");
    ok(!match("Sat, 29 Oct 1994 19:43:31 GMT", id, 0), "an If-Range date never matches");
    ok(!cond_etag_match(NULL, 0, id, 1), "NULL header");
}

int main(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    char *map =
        mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ok(map != MAP_FAILED && !mprotect(map + pg, (size_t)pg, PROT_NONE), "guard page");
    guard_end = map + pg;

    test_accept();
    test_fuzz();
    test_names();

    char dir[] = "/tmp/t_encoding_XXXXXX";
    ok(mkdtemp(dir) != NULL, "temp dir");
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    test_siblings(dirfd);
    test_gzip(dirfd);
    test_jobs(dirfd);
    test_eviction(dirfd);
    test_etag();
    close(dirfd);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ok(system(cmd) == 0, "clean up");
    return tap_done();
}
