/*
 * Directory listings: escaping, hrefs, hidden entries (a symlink through a
 * closed directory too), sort orders, the parent link, well-formedness, and
 * the speed of a 10,000-entry directory.
 */
#define _GNU_SOURCE
#include "listing.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define T0 1795240800 /* 2026-11-21 06:00:00 UTC */

typedef struct file {
    const char *name;
    long long size; /* -1: a directory */
    int dt;         /* mtime = T0 + dt */
} file_t;

/* The listable entries, and a symlink "link" -> "q?x" (size 1, T0 + 5). */
static const file_t files[] = {
    {"100%", 5, 3},         {"a&b<c>.txt", 1234, 1}, {"a:b", 0, 7},
    {"bad\xff", 2048, 2},   {"na\xc3\xafve", 3, 9},  {"q?x", 1, 5},
    {"sp ace", 1536000, 4}, {"x\"y'z", 10, 6},       {"subdir", -1, 8},
};

static void set_mtime(int dfd, const char *name, time_t t)
{
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    if (utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) != 0)
        perror("utimensat");
}

static void make_file(int dfd, const char *name, long long size, mode_t mode)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0 || ftruncate(fd, size) != 0 || fchmod(fd, mode) != 0)
        perror(name);
    if (fd >= 0)
        close(fd);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static fs_at_t top_at = {.rootfd = -1, .dir = ""}; /* the URL paths "/d/" etc. start there */

static char *render(int dfd, const char *urlpath, const char *q, size_t *len)
{
    char *out = NULL;
    *len = 0;
    if (listing_render(dfd, &top_at, urlpath, strlen(urlpath), q, q ? strlen(q) : 0, &out, len) !=
        0)
        return NULL;
    char *s = realloc(out, *len + 1); /* NUL-terminate for strstr */
    if (!s) {
        free(out);
        return NULL;
    }
    s[*len] = 0;
    return s;
}

/* The hrefs of the body rows (without "../"), space-separated, into dst. */
static void body_hrefs(const char *html, char *dst, size_t dstsz)
{
    const char *p = html ? strstr(html, "<tbody>") : NULL;
    size_t n = 0;
    dst[0] = 0;
    while (p && (p = strstr(p, "<a href=\""))) {
        p += 9;
        const char *e = strchr(p, '"');
        if (!e)
            break;
        if (strncmp(p, "../\"", 4) != 0 && n + (size_t)(e - p) + 2 < dstsz) {
            n += (size_t)snprintf(dst + n, dstsz - n, "%s%.*s", n ? " " : "", (int)(e - p), p);
        }
        p = e;
    }
}

static void reverse_words(const char *src, char *dst)
{
    size_t n = strlen(src), o = 0;
    dst[0] = 0;
    for (size_t end = n; end > 0;) {
        size_t start = end;
        while (start > 0 && src[start - 1] != ' ')
            start--;
        o += (size_t)sprintf(dst + o, "%s%.*s", o ? " " : "", (int)(end - start), src + start);
        end = start ? start - 1 : 0;
    }
}

/*
 * A small well-formedness check of our output: tags close, attribute values
 * are quoted and hold no '<', '>', space or raw quote (hrefs), '&' starts a
 * reference, no '>' in text, the text is valid UTF-8 without controls.
 */
static int well_formed(const char *s, size_t n, char *why, size_t whysz)
{
    int in_tag = 0, in_quote = 0, is_href = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\n') || c == 0x7f)
            return snprintf(why, whysz, "control byte at %zu", i), 0;
        if (c >= 0x80) { /* one UTF-8 sequence, checked roughly: lead + continuations */
            int k = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 ? 1 : -1;
            for (int j = 1; k > 0 && j <= k; j++)
                if (i + j >= n || ((unsigned char)s[i + j] & 0xc0) != 0x80)
                    k = -1;
            if (k < 0)
                return snprintf(why, whysz, "bad UTF-8 at %zu", i), 0;
            i += (size_t)k;
            continue;
        }
        if (in_quote) {
            if (c == '"')
                in_quote = 0;
            else if (c == '<' || c == '>' || (is_href && c == ' '))
                return snprintf(why, whysz, "'%c' in attribute at %zu", c, i), 0;
        } else if (in_tag) {
            if (c == '"') {
                in_quote = 1;
                is_href = i >= 5 && !strncmp(s + i - 5, "href=", 5);
            } else if (c == '>') {
                in_tag = 0;
            } else if (c == '<' || c == '\'') {
                return snprintf(why, whysz, "'%c' in tag at %zu", c, i), 0;
            }
        } else if (c == '<') {
            in_tag = 1;
        } else if (c == '>' || c == '"' || c == '\'') {
            return snprintf(why, whysz, "raw '%c' in text at %zu", c, i), 0;
        } else if (c == '&') {
            size_t j = i + 1;
            while (j < n && j < i + 10 && (s[j] == '#' || (s[j] | 0x20) >= 'a') &&
                   (s[j] | 0x20) <= 'z')
                j++;
            while (j < n && s[j] >= '0' && s[j] <= '9')
                j++;
            if (j >= n || s[j] != ';' || j == i + 1)
                return snprintf(why, whysz, "bare '&' at %zu", i), 0;
        }
    }
    if (in_tag || in_quote)
        return snprintf(why, whysz, "unterminated tag"), 0;
    return 1;
}

static int count(const char *hay, const char *needle)
{
    int k = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        k++;
    return k;
}

static void check_sorts(int dfd)
{
    static const struct {
        const char *q, *want;
    } orders[] = {
        {NULL, "100%25 a%26b%3Cc%3E.txt a%3Ab bad%FF link na%C3%AFve q%3Fx sp%20ace subdir/ "
               "x%22y%27z"},
        {"M=A", "a%26b%3Cc%3E.txt bad%FF 100%25 sp%20ace link q%3Fx x%22y%27z a%3Ab subdir/ "
                "na%C3%AFve"},
        {"S=A", "subdir/ a%3Ab link q%3Fx na%C3%AFve 100%25 x%22y%27z a%26b%3Cc%3E.txt bad%FF "
                "sp%20ace"},
    };
    static const struct {
        const char *q, *as; /* as: the ascending order it must equal or reverse */
        int reversed;
        const char *heads;
    } keys[] = {
        {"N=A", NULL, 0, "?N=D ?M=A ?S=A"},        {"N=D", NULL, 1, "?N=A ?M=A ?S=A"},
        {"M=A", "M=A", 0, "?N=A ?M=D ?S=A"},       {"M=D", "M=A", 1, "?N=A ?M=A ?S=A"},
        {"S=A", "S=A", 0, "?N=A ?M=A ?S=D"},       {"S=D", "S=A", 1, "?N=A ?M=A ?S=A"},
        {"X=Y", NULL, 0, "?N=D ?M=A ?S=A"},        {"C=M;O=D", NULL, 0, "?N=D ?M=A ?S=A"},
        {"N=a", NULL, 0, "?N=D ?M=A ?S=A"},        {"N=AA", NULL, 0, "?N=D ?M=A ?S=A"},
        {"foo=1&S=D", "S=A", 1, "?N=A ?M=A ?S=A"}, {"x;M=D;N=A", "M=A", 1, "?N=A ?M=A ?S=A"},
        {"", NULL, 0, "?N=D ?M=A ?S=A"},
    };
    char got[2048], want[2048], heads[64];
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *asc = orders[0].want;
        for (size_t o = 1; o < 3; o++)
            if (keys[k].as && !strcmp(keys[k].as, orders[o].q))
                asc = orders[o].want;
        if (keys[k].reversed)
            reverse_words(asc, want);
        else
            strcpy(want, asc);
        size_t len;
        char *html = render(dfd, "/d/", keys[k].q, &len);
        body_hrefs(html, got, sizeof got);
        is_str(got, want, "order for query \"%s\"", keys[k].q);
        heads[0] = 0;
        const char *p = html ? strstr(html, "<thead>") : NULL;
        for (int i = 0; p && i < 3 && (p = strstr(p, "<th><a href=\"")); i++, p++)
            snprintf(heads + strlen(heads), sizeof heads - strlen(heads), "%s%.4s", i ? " " : "",
                     p + 13);
        is_str(heads, keys[k].heads, "column header links for \"%s\"", keys[k].q);
        free(html);
    }
}

static void check_content(int dfd)
{
    size_t len;
    char *html = render(dfd, "/d/", NULL, &len);
    ok(html != NULL, "render /d/");
    if (!html)
        return;
    ok(!strncmp(html, "<!DOCTYPE html>\n", 16), "doctype first");
    ok(strstr(html, "<meta charset=\"utf-8\">") != NULL, "charset meta");
    ok(strstr(html, "<title>Index of /d/</title>") != NULL, "title");
    ok(strlen(html) == len, "no NUL in output");
    static const char *const want[] = {
        "<a href=\"a%26b%3Cc%3E.txt\">a&amp;b&lt;c&gt;.txt</a>",
        "<a href=\"sp%20ace\">sp ace</a>",
        "<a href=\"q%3Fx\">q?x</a>",
        "<a href=\"100%25\">100%</a>",
        "<a href=\"x%22y%27z\">x&quot;y&#39;z</a>",
        "<a href=\"a%3Ab\">a:b</a>",
        "<a href=\"na%C3%AFve\">na\xc3\xafve</a>",
        "<a href=\"bad%FF\">bad\xef\xbf\xbd</a>",
        "<a href=\"subdir/\">subdir/</a></td><td>2026-11-21 06:00</td><td>-</td>",
        "<a href=\"../\">../</a>",
        "<a href=\"link\">link</a></td><td>2026-11-21 06:00</td><td title=\"1\">1</td>",
        "<td title=\"1234\">1.2K</td>",
        "<td title=\"2048\">2.0K</td>",
        "<td title=\"1536000\">1.5M</td>",
        "<td title=\"0\">0</td>",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ok(strstr(html, want[i]) != NULL, "contains %s", want[i]);
    static const char *const hidden[] = {"hidden", "secret", "closed", "dangle", "fifo",
                                         "viaclosed"};
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
        ok(strstr(html, hidden[i]) == NULL, "%s is not listed", hidden[i]);
    is_int(count(html, "<tr>"), 1 + 1 + 10, "header, parent and 10 rows");
    is_int(count(html, "<tr>"), count(html, "</tr>"), "rows close");
    char why[128] = "";
    ok(well_formed(html, len, why, sizeof why), "well-formed: %s", why);
    free(html);

    html = render(dfd, "/", NULL, &len);
    ok(html && !strstr(html, "href=\"../\""), "no parent link at /");
    ok(html && strstr(html, "<title>Index of /</title>"), "title at /");
    free(html);

    html = render(dfd, "/<\"x&\xff/", NULL, &len);
    ok(html && strstr(html, "<title>Index of /&lt;&quot;x&amp;\xef\xbf\xbd/</title>"),
       "URL path escaped in the title");
    ok(html && well_formed(html, len, why, sizeof why), "well-formed with odd path: %s", why);
    free(html);
}

static void check_sizes(const char *top)
{
    static const struct {
        long long size;
        const char *shown;
    } sz[] = {
        {1023, "1023"},    {1024, "1.0K"},      {1075, "1.0K"},
        {1076, "1.1K"},    {10188, "9.9K"},     {10189, "10K"},
        {10239, "10K"},    {1048063, "1023K"},  {1048064, "1.0M"},
        {1048575, "1.0M"}, {5LL << 30, "5.0G"}, {(1LL << 40) + (1LL << 39), "1.5T"},
    };
    char path[512];
    snprintf(path, sizeof path, "%s/sizes", top);
    mkdir(path, 0755);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
        char name[32], cell[96];
        snprintf(name, sizeof name, "s%02zu", i);
        make_file(dfd, name, sz[i].size, 0644);
        size_t len;
        char *html = render(dfd, "/sizes/", "N=A", &len);
        snprintf(cell, sizeof cell, "<td title=\"%lld\">%s</td>", sz[i].size, sz[i].shown);
        ok(html && strstr(html, cell), "size %lld shown as %s", sz[i].size, sz[i].shown);
        free(html);
        unlinkat(dfd, name, 0);
    }
    close(dfd);
}

static void check_api(int dfd)
{
    char *out = (char *)"untouched";
    size_t len = 7;
    errno = 0;
    is_int(listing_render(dfd, &top_at, "/d", 2, NULL, 0, &out, &len), -1, "urlpath without '/'");
    is_int(errno, EINVAL, "... EINVAL");
    is_int(listing_render(dfd, &top_at, "", 0, NULL, 0, &out, &len), -1, "empty urlpath");
    errno = 0;
    is_int(listing_render(-1, &top_at, "/", 1, NULL, 0, &out, &len), -1, "bad dirfd");
    is_int(errno, EBADF, "... EBADF");
    ok(!strcmp(out, "untouched") && len == 7, "outputs untouched on error");

    /* the caller's descriptor keeps its offset and stays open */
    is_int(lseek(dfd, 0, SEEK_CUR), 0, "dirfd offset unchanged");
    ok(fcntl(dfd, F_GETFD) >= 0, "dirfd still open");

    int pfd = openat(dfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    char *html = render(pfd, "/d/", NULL, &len);
    ok(html && strstr(html, "sp%20ace"), "works on an O_PATH descriptor");
    free(html);
    close(pfd);
}

static void check_big(const char *top)
{
    char path[512];
    snprintf(path, sizeof path, "%s/big", top);
    mkdir(path, 0755);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < 10000; i++) {
        char name[32];
        snprintf(name, sizeof name, "file-%05d <&> %d.txt", (i * 7919) % 10000, i);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
    }
    /* CPU time (user and system: the stat calls too), not the wall clock:
       make check runs this beside other jobs, whose CPU time is not ours */
    struct timespec a, b;
    size_t len;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    char *html = render(dfd, "/big/", "M=D", &len);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    ok(html != NULL, "render 10,000 entries");
    ok(s < 1.0, "10,000 entries in %.1f ms of CPU (limit 1 s)", s * 1e3);
    printf("# 10,000-entry listing: %.1f ms of CPU, %zu bytes\n", s * 1e3, len);
    is_int(html ? count(html, "<tr>") : 0, 10000 + 2, "10,000 rows");
    free(html);
    close(dfd);
}

int main(void)
{
    umask(022);
    char top[] = "/tmp/t_listing.XXXXXX";
    if (!mkdtemp(top)) {
        perror("mkdtemp");
        return 1;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/d", top);
    mkdir(path, 0755);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char real[PATH_MAX];
    top_at.rootfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    top_at.root_real = realpath(top, real);

    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (files[i].size < 0)
            mkdirat(dfd, files[i].name, 0755);
        else
            make_file(dfd, files[i].name, files[i].size, 0644);
    mkdirat(dfd, "subdir/inner", 0755);
    symlinkat("q?x", dfd, "link");
    symlinkat("nowhere", dfd, "dangle");
    make_file(dfd, ".hidden", 1, 0644);
    make_file(dfd, "secret", 1, 0600);
    mkdirat(dfd, "closed", 0750);
    make_file(dfd, "closed/in", 1, 0644);
    symlinkat("closed/in", dfd, "viaclosed"); /* a 644 file others cannot reach */
    mknodat(dfd, "fifo", S_IFIFO | 0644, 0);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        set_mtime(dfd, files[i].name, T0 + files[i].dt);

    check_content(dfd);
    check_sorts(dfd);
    check_api(dfd);
    check_sizes(top);
    check_big(top);

    close(dfd);
    close(top_at.rootfd);
    nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
