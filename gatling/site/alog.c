/* The access log: see alog.h. */
#define _GNU_SOURCE
#include "alog.h"
#include "http/hbuf.h"
#include "http/owfat.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ALOG_FLUSH_AT 3584 /* flush below PIPE_BUF: whole lines, never interleaved */

void alog_init(alog_t *l, int fd)
{
    memset(l, 0, sizeof *l);
    l->fd = fd;
}

void alog_free(alog_t *l)
{
    alog_flush(l);
    free(l->buf);
    l->buf = NULL;
}

static int reserve(alog_t *l, size_t n)
{
    char *b = hb_grow(l->buf, &l->cap, l->len + n, 1, 8192);
    if (!b)
        return -1;
    l->buf = b;
    return 0;
}

/* Apache's escaping for quoted log fields: \" \\ and \xHH for controls. */
static size_t escape(char *d, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            d[o++] = '\\', d[o++] = c;
        } else if (c < 0x20 || c == 0x7f) {
            d[o++] = '\\', d[o++] = 'x', d[o++] = hex[c >> 4], d[o++] = hex[c & 15];
        } else {
            d[o++] = c;
        }
    }
    return o;
}

static size_t fmt_peer(char *d, const struct sockaddr *ss)
{
    if (ss->sa_family == AF_INET)
        return fmt_ip4(d, (const char *)&((const struct sockaddr_in *)ss)->sin_addr);
    if (ss->sa_family == AF_INET6) /* v4-mapped addresses print as IPv4 */
        return fmt_ip6c(d, (const char *)&((const struct sockaddr_in6 *)ss)->sin6_addr);
    d[0] = '-';
    return 1;
}

static char *two(char *p, int v)
{
    p[0] = (char)('0' + v / 10), p[1] = (char)('0' + v % 10);
    return p + 2;
}

static void refresh_stamp(alog_t *l, int64_t now)
{
    static const char mon[][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = (time_t)now;
    struct tm tm;
    gmtime_r(&t, &tm);
    char *p = l->stamp;
    *p++ = '[';
    p = two(p, tm.tm_mday);
    *p++ = '/';
    memcpy(p, mon[tm.tm_mon], 3), p += 3;
    *p++ = '/';
    p += fmt_ulong(p, tm.tm_year + 1900);
    *p++ = ':', p = two(p, tm.tm_hour);
    *p++ = ':', p = two(p, tm.tm_min);
    *p++ = ':', p = two(p, tm.tm_sec);
    memcpy(p, " +0000]", 8);
    l->stamp_at = now;
}

/* A quoted header field, or "-" when absent. */
static char *quoted(char *p, const http_str_t *v)
{
    *p++ = '"';
    if (v)
        p += escape(p, v->p, v->n);
    else
        *p++ = '-';
    *p++ = '"';
    return p;
}

void alog_request(alog_t *l, int64_t now, const char *vhost, const struct sockaddr *peer,
                  const http_request_t *req, int status, uint64_t body_bytes, int flags)
{
    if (l->fd < 0)
        return;
    const http_str_t *ref = req ? http_header(req, "Referer") : NULL;
    const http_str_t *ua = req ? http_header(req, "User-Agent") : NULL;
    size_t need =
        128 + 4 * 272 + 4 * ((req ? req->line.n : 0) + (ref ? ref->n : 0) + (ua ? ua->n : 0));
    if (reserve(l, need) < 0)
        return;
    if (now != l->stamp_at)
        refresh_stamp(l, now);
    char *p = l->buf + l->len;
    if (vhost) {
        p += *vhost ? escape(p, vhost, strnlen(vhost, 272)) : (size_t)(*p = '-', 1);
        *p++ = ' ';
    }
    p += fmt_peer(p, peer);
    memcpy(p, " - - ", 5), p += 5;
    p += str_copy(p, l->stamp);
    *p++ = ' ';
    p = quoted(p, req && req->line.p ? &req->line : NULL);
    *p++ = ' ';
    p += fmt_ulong(p, (unsigned long)status);
    *p++ = ' ';
    if (body_bytes)
        p += fmt_ulonglong(p, body_bytes);
    else
        *p++ = '-';
    *p++ = ' ';
    p = quoted(p, ref);
    *p++ = ' ';
    p = quoted(p, ua);
    if (flags & ALOG_TLS)
        memcpy(p, " https", 6), p += 6;
    if (flags & ALOG_DCZ)
        memcpy(p, " dcz", 4), p += 4;
    *p++ = '\n';
    l->len = p - l->buf;
    if (l->len >= ALOG_FLUSH_AT)
        alog_flush(l);
}

void alog_ftp(alog_t *l, int64_t now, const struct sockaddr *peer, const char *user,
              const char *verb, const char *path, int code, uint64_t bytes, int tls)
{
    if (l->fd < 0)
        return;
    size_t plen = strnlen(path, 4096), ulen = strnlen(user, 64);
    if (reserve(l, 192 + 4 * (plen + ulen)) < 0)
        return;
    if (now != l->stamp_at)
        refresh_stamp(l, now);
    char *p = l->buf + l->len;
    p += fmt_peer(p, peer);
    memcpy(p, " - ", 3), p += 3;
    p += ulen ? escape(p, user, ulen) : (size_t)(*p = '-', 1);
    *p++ = ' ';
    p += str_copy(p, l->stamp);
    memcpy(p, " \"", 2), p += 2;
    p += escape(p, verb, strnlen(verb, 8));
    *p++ = ' ';
    p += escape(p, path, plen);
    memcpy(p, "\" ", 2), p += 2;
    p += fmt_ulong(p, (unsigned long)code);
    *p++ = ' ';
    if (bytes)
        p += fmt_ulonglong(p, bytes);
    else
        *p++ = '-';
    memcpy(p, " \"-\" \"-\" ", 9), p += 9;
    memcpy(p, tls ? "ftps\n" : "ftp\n", tls ? 5 : 4), p += tls ? 5 : 4;
    l->len = p - l->buf;
    if (l->len >= ALOG_FLUSH_AT)
        alog_flush(l);
}

void alog_flush(alog_t *l)
{
    size_t done = 0;
    while (done < l->len) {
        /* whole lines of at most ALOG_FLUSH_AT bytes per write, so that the
           workers of -W sharing one pipe never interleave inside a line */
        size_t n = l->len - done;
        if (n > ALOG_FLUSH_AT) {
            char *nl = memrchr(l->buf + done, '\n', ALOG_FLUSH_AT);
            n = nl ? (size_t)(nl - (l->buf + done)) + 1 : n;
        }
        ssize_t w = write(l->fd, l->buf + done, n);
        if (w <= 0)
            break; /* a full disk or a closed pipe drops log lines, not requests */
        done += w;
    }
    l->len = 0;
}
