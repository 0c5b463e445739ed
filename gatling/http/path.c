/* Request-target decoding and normalisation: see path.h. */
#define _GNU_SOURCE /* memmem */
#include "path.h"
#include "owfat.h"

#include <string.h>

/* Percent-decode src[0..n) into dst; -1 on a bad escape or a decoded NUL. */
static long decode(const char *src, size_t n, char *dst)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= n)
                return -1;
            int h = scan_fromhex(src[i + 1]), l = scan_fromhex(src[i + 2]);
            if (h < 0 || l < 0)
                return -1;
            c = (char)(h << 4 | l);
            i += 2;
        }
        if (c == 0)
            return -1;
        dst[o++] = c;
    }
    return (long)o;
}

/*
 * Remove empty, "." and ".." segments in place (p starts with '/').  The
 * output never runs ahead of the input, so one buffer serves both.  A path
 * that ended in "/", "/." or "/.." names a directory and keeps its slash.
 */
static size_t normalise(char *p, size_t n)
{
    size_t o = 0, i = 0;
    int trailing = 0;
    while (i < n) {
        while (i < n && p[i] == '/')
            i++;
        if (i >= n) {
            trailing = 1;
            break;
        }
        size_t s = i;
        while (i < n && p[i] != '/')
            i++;
        size_t len = i - s;
        if (len == 1 && p[s] == '.') {
            trailing = i >= n;
        } else if (len == 2 && p[s] == '.' && p[s + 1] == '.') {
            while (o > 0 && p[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
            trailing = i >= n;
        } else {
            p[o++] = '/';
            memmove(p + o, p + s, len);
            o += len;
            trailing = 0;
        }
    }
    if (trailing || o == 0)
        p[o++] = '/';
    p[o] = 0;
    return o;
}

int path_from_target(const char *target, size_t n, char *out, size_t outsz, path_t *res)
{
    const char *end = target + n, *p = target;
    if (outsz < n + 2)
        return 400;
    res->authority = (http_str_t){NULL, 0};
    if (n >= 7 && (case_equalb(p, 7, "http://") || (n >= 8 && case_equalb(p, 8, "https://")))) {
        p += p[4] == ':' ? 7 : 8; /* absolute-form: skip scheme and authority */
        const char *a = p;
        while (p < end && *p != '/' && *p != '?')
            p++;
        res->authority = (http_str_t){a, (size_t)(p - a)};
    } else if (n == 0 || *p != '/') {
        return 400;
    }
    const char *q = memchr(p, '?', end - p);
    const char *pend = q ? q : end;
    if (memchr(p, '#', pend - p))
        return 400;
    res->query = q ? q + 1 : NULL;
    res->query_len = q ? (size_t)(end - q - 1) : 0;
    out[0] = '/';
    long d = decode(p, pend - p, out + 1); /* absolute-form may lack the slash */
    if (d < 0)
        return 400;
    res->path = out;
    res->len = normalise(out, (size_t)d + 1);
    return 0;
}

int path_has_prefix(const char *p, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    return n >= k && !memcmp(p, prefix, k);
}

int path_hidden(const char *p, size_t n)
{
    size_t skip = sizeof PATH_WELL_KNOWN - 2; /* "/.well-known", without the last '/' */
    if (path_has_prefix(p, n, PATH_WELL_KNOWN) || (n == skip && !memcmp(p, PATH_WELL_KNOWN, n)))
        p += skip, n -= skip;
    return memmem(p, n, "/.", 2) != NULL;
}

size_t path_encode(char *dst, const char *src, size_t n, const char *keep)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = src[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            (c && strchr(keep, c))) {
            dst[o++] = c;
        } else {
            dst[o++] = '%', dst[o++] = hex[c >> 4], dst[o++] = hex[c & 15];
        }
    }
    return o;
}
