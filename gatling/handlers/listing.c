/* Directory listings: see listing.h. */
#include "listing.h"
#include "http/hbuf.h"
#include "http/path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct entry {
    size_t off, len;  /* name in the arena; NUL-terminated there */
    const char *name; /* set once the arena has stopped moving */
    long long size;   /* -1 for a directory */
    time_t mtime;
} entry_t;

typedef struct dirlist {
    entry_t *v;
    size_t n, cap;
    char *names; /* arena of NUL-terminated names */
    size_t nlen, ncap;
} dirlist_t;

typedef struct obuf {
    char *p;
    size_t len, cap;
    int oom; /* sticky: later puts are no-ops, checked once at the end */
} obuf_t;

static void ob_put(obuf_t *o, const char *s, size_t n)
{
    if (o->oom)
        return;
    char *q = hb_grow(o->p, &o->cap, o->len + n, 1, 64);
    if (!q) {
        o->oom = 1;
        return;
    }
    o->p = q;
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void ob_puts(obuf_t *o, const char *s)
{
    ob_put(o, s, strlen(s));
}

/*
 * Length of the well-formed UTF-8 sequence at s[0..n) (RFC 3629: no
 * overlongs, no surrogates, nothing above U+10FFFF) with its code point in
 * *cp, or 0 if the bytes there are not one.
 */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t len;
    uint32_t c, min;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    } else if ((s[0] & 0xe0) == 0xc0) {
        len = 2, c = s[0] & 0x1f, min = 0x80;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3, c = s[0] & 0x0f, min = 0x800;
    } else if ((s[0] & 0xf8) == 0xf0) {
        len = 4, c = s[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

/* HTML5 makes controls and noncharacters in the input stream parse errors. */
static int html_forbidden(uint32_t c)
{
    return (c < 0x20 && c != '\t' && c != '\n') || (c >= 0x7f && c <= 0x9f) ||
           (c >= 0xfdd0 && c <= 0xfdef) || (c & 0xfffe) == 0xfffe;
}

/*
 * s[0..n) as HTML text or attribute value: & < > " ' become references, and
 * what is not valid, allowed UTF-8 becomes U+FFFD (a file name is bytes, the
 * page is UTF-8).  Our own escaper: libowfat's fmt_html* are broken.
 */
static void put_text(obuf_t *o, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t run = i; /* copy plain ASCII in one go */
        while (run < n && u[run] >= 0x20 && u[run] < 0x7f && !memchr("&<>\"'", u[run], 5))
            run++;
        ob_put(o, s + i, run - i);
        if ((i = run) == n)
            break;
        uint32_t c;
        size_t len = utf8_seq(u + i, n - i, &c);
        static const char *const entity[] = {
            ['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;", ['\''] = "&#39;"};
        const char *ent = len && c < sizeof entity / sizeof entity[0] ? entity[c] : NULL;
        if (ent)
            ob_puts(o, ent);
        else if (len == 0 || html_forbidden(c))
            ob_puts(o, "\xef\xbf\xbd");
        else
            ob_put(o, s + i, len);
        i += len ? len : 1;
    }
}

/*
 * s[0..n) percent-encoded as one path segment of a relative URL: only the
 * unreserved characters and "!$()*+,;=@" stay literal.  ':' is encoded so a
 * name like "a:b" is not read as a scheme, and the result needs no HTML
 * escaping inside a quoted attribute.
 */
static void put_href(obuf_t *o, const char *s, size_t n)
{
    char enc[3 * 256];
    while (n > 0) { /* a directory entry's name is at most 255 bytes: one round */
        size_t k = n < 256 ? n : 256;
        ob_put(o, enc, path_encode(enc, s, k, "-._~!$()*+,;=@"));
        s += k, n -= k;
    }
}

/*
 * sz in powers of 1024 with a one-letter unit: bytes as they are below 1 K,
 * one decimal below 10 ("1.2K"), whole units above ("15M").  Integer
 * arithmetic only, so sizes up to 2^63 round exactly.
 */
static size_t human_size(char *buf, size_t bufsz, long long sz)
{
    static const char units[] = "BKMGTPE";
    unsigned long long v = (unsigned long long)sz, div = 1;
    int u = 0;
    if (v < 1024)
        return (size_t)snprintf(buf, bufsz, "%llu", v);
    while (u < 6 && v / div >= 1024)
        div *= 1024, u++;
    unsigned long long whole = v / div, rest = v % div;
    unsigned long long tenths = whole * 10 + (rest * 10 + div / 2) / div;
    if (tenths < 100)
        return (size_t)snprintf(buf, bufsz, "%llu.%llu%c", tenths / 10, tenths % 10, units[u]);
    whole += rest >= div - rest; /* round half up without overflowing */
    if (whole >= 1024 && u < 6)
        return (size_t)snprintf(buf, bufsz, "1.0%c", units[u + 1]);
    return (size_t)snprintf(buf, bufsz, "%llu%c", whole, units[u]);
}

static int add_entry(dirlist_t *l, const char *name, const struct stat *st)
{
    size_t len = strlen(name);
    char *names = hb_grow(l->names, &l->ncap, l->nlen + len + 1, 1, 64);
    if (!names)
        return -1;
    l->names = names;
    entry_t *v = hb_grow(l->v, &l->cap, l->n + 1, sizeof *v, 64);
    if (!v)
        return -1;
    l->v = v;
    v[l->n++] = (entry_t){.off = l->nlen,
                          .len = len,
                          .size = S_ISDIR(st->st_mode) ? -1 : (long long)st->st_size,
                          .mtime = st->st_mtim.tv_sec};
    memcpy(l->names + l->nlen, name, len + 1);
    l->nlen += len + 1;
    return 0;
}

/* Where the walk of fs_public starts, and the directory's path below it. */
typedef struct where {
    const fs_at_t *at;
    const char *urlpath; /* "/dir/" */
    size_t n;
} where_t;

/*
 * Is the entry de of the directory fd listed (its target's stat in *st)?
 * Not a dotfile, world-readable (fs_mode_public), and for a symlink (or
 * what may be one) also reached without a closed directory on its way:
 * the entries of a public directory that are no symlinks are reached
 * through it alone.
 */
static int shown(int fd, const struct dirent *de, const where_t *w, struct stat *st)
{
    /* follow symlinks: a link shows its target, a dangling one fails here and is skipped,
       as is an entry removed since readdir */
    if (de->d_name[0] == '.' || fstatat(fd, de->d_name, st, 0) != 0 || !fs_mode_public(st))
        return 0;
    if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
        return 1;
    char rel[PATH_MAX];
    size_t len = strlen(de->d_name);
    if (w->n - 1 + len >= sizeof rel)
        return 0;
    memcpy(rel, w->urlpath + 1, w->n - 1);
    memcpy(rel + w->n - 1, de->d_name, len + 1);
    return fs_public(w->at, rel, -1, 0);
}

/*
 * Read the listable entries of dirfd into l.  The directory is opened anew
 * as "." below dirfd rather than dup()ed: a dup would share (and move) the
 * caller's offset, and this also works for an O_PATH descriptor.
 */
static int read_entries(int dirfd, const where_t *w, dirlist_t *l)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            rc = errno ? -1 : 0;
            break;
        }
        struct stat st;
        if (!shown(fd, de, w, &st))
            continue;
        if (add_entry(l, de->d_name, &st) != 0) {
            rc = -1;
            break;
        }
    }
    int e = errno;
    closedir(d);
    errno = e;
    for (size_t i = 0; i < l->n; i++)
        l->v[i].name = l->names + l->v[i].off;
    return rc;
}

static int cmp_name(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    int c = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static int cmp_mtime(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    return x->mtime != y->mtime ? (x->mtime > y->mtime) - (x->mtime < y->mtime) : cmp_name(a, b);
}

static int cmp_size(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    return x->size != y->size ? (x->size > y->size) - (x->size < y->size) : cmp_name(a, b);
}

/*
 * The first Apache-style key ("N=A", "M=D", ...) among the '&'- or
 * ';'-separated parameters of q; N=A if there is none.
 */
static void sort_key(const char *q, size_t qlen, char *col, char *dir)
{
    *col = 'N', *dir = 'A';
    for (size_t i = 0; q && i < qlen;) {
        size_t j = i;
        while (j < qlen && q[j] != '&' && q[j] != ';')
            j++;
        if (j - i == 3 && memchr("NMS", q[i], 3) && q[i + 1] == '=' &&
            (q[i + 2] == 'A' || q[i + 2] == 'D')) {
            *col = q[i], *dir = q[i + 2];
            return;
        }
        i = j + 1;
    }
}

/* Sort by the key; names are unique, so every order is total and "D" is the reverse of "A". */
static void sort_entries(dirlist_t *l, char col, char dir)
{
    if (l->n > 1) /* qsort(NULL, 0, ...) is undefined */
        qsort(l->v, l->n, sizeof *l->v, col == 'M' ? cmp_mtime : col == 'S' ? cmp_size : cmp_name);
    if (dir == 'D')
        for (size_t i = 0, j = l->n; i + 1 < j; i++, j--) {
            entry_t t = l->v[i];
            l->v[i] = l->v[j - 1];
            l->v[j - 1] = t;
        }
}

static void put_head(obuf_t *o, const char *urlpath, size_t n, char col, char dir)
{
    ob_puts(o, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width\">\n<title>Index of ");
    put_text(o, urlpath, n);
    ob_puts(o, "</title>\n<style>th,td{padding:0 1em 0 0;text-align:left}"
               "td:nth-child(3){text-align:right}</style>\n</head>\n<body>\n<h1>Index of ");
    put_text(o, urlpath, n);
    ob_puts(o, "</h1>\n<table>\n<thead><tr>");
    static const char *const label[] = {"Name", "Last modified", "Size"};
    for (int i = 0; i < 3; i++) {
        char c = "NMS"[i], link[] = {'?', c, '=', c == col && dir == 'A' ? 'D' : 'A', 0};
        ob_puts(o, "<th><a href=\"");
        ob_puts(o, link);
        ob_puts(o, "\">");
        ob_puts(o, label[i]);
        ob_puts(o, "</a></th>");
    }
    ob_puts(o, "</tr></thead>\n<tbody>\n");
    if (n > 1)
        ob_puts(o, "<tr><td><a href=\"../\">../</a></td><td></td><td>-</td></tr>\n");
}

static void put_row(obuf_t *o, const entry_t *e)
{
    char buf[64];
    struct tm tm;
    ob_puts(o, "<tr><td><a href=\"");
    put_href(o, e->name, e->len);
    ob_puts(o, e->size < 0 ? "/\">" : "\">");
    put_text(o, e->name, e->len);
    ob_puts(o, e->size < 0 ? "/</a></td><td>" : "</a></td><td>");
    if (gmtime_r(&e->mtime, &tm) && strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm))
        ob_puts(o, buf);
    else
        ob_puts(o, "-");
    if (e->size < 0) {
        ob_puts(o, "</td><td>-</td></tr>\n");
        return;
    }
    int k = snprintf(buf, sizeof buf, "</td><td title=\"%lld\">", e->size);
    ob_put(o, buf, k > 0 && (size_t)k < sizeof buf ? (size_t)k : 0); /* 36 bytes at most */
    ob_put(o, buf, human_size(buf, sizeof buf, e->size));
    ob_puts(o, "</td></tr>\n");
}

/* Contract in listing.h. */
int listing_render(int dirfd, const fs_at_t *at, const char *urlpath, size_t n, const char *query,
                   size_t qlen, char **out, size_t *outlen)
{
    if (n == 0 || urlpath[n - 1] != '/') {
        errno = EINVAL;
        return -1;
    }
    dirlist_t l = {0};
    obuf_t o = {0};
    int rc = -1;
    where_t w = {at, urlpath, n};
    if (read_entries(dirfd, &w, &l) != 0)
        goto done;
    char col, dir;
    sort_key(query, qlen, &col, &dir);
    sort_entries(&l, col, dir);
    /* one allocation in the common case: ~150 bytes of markup a row plus the name twice */
    o.p = hb_grow(NULL, &o.cap, 1024 + l.n * 160 + l.nlen * 2, 1, 64);
    o.oom = !o.p;
    put_head(&o, urlpath, n, col, dir);
    for (size_t i = 0; i < l.n; i++)
        put_row(&o, &l.v[i]);
    ob_puts(&o, "</tbody>\n</table>\n</body>\n</html>\n");
    if (o.oom) {
        errno = ENOMEM;
        goto done;
    }
    *out = o.p, *outlen = o.len;
    o.p = NULL;
    rc = 0;
done:;
    int e = errno;
    free(o.p);
    free(l.v);
    free(l.names);
    errno = e;
    return rc;
}
