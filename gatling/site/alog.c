/* The access log: see alog.h. */
#define _GNU_SOURCE
#include "alog.h"
#include "http/hbuf.h"
#include "http/owfat.h"

#include <netinet/in.h>
#include <stdio.h>
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
    p = l->iso; /* RFC 3339: "2000-10-10T13:55:36Z" */
    p += fmt_ulong(p, (unsigned long)(tm.tm_year + 1900) % 10000);
    *p++ = '-', p = two(p, tm.tm_mon + 1);
    *p++ = '-', p = two(p, tm.tm_mday);
    *p++ = 'T', p = two(p, tm.tm_hour);
    *p++ = ':', p = two(p, tm.tm_min);
    *p++ = ':', p = two(p, tm.tm_sec);
    memcpy(p, "Z", 2);
    l->stamp_at = now;
}

/* The length of the valid UTF-8 sequence that starts p[0..n) (RFC 3629 4:
   no overlong form, no surrogate, nothing above U+10FFFF), or 0. */
static size_t utf8_len(const char *p, size_t n)
{
    const unsigned char *s = (const unsigned char *)p;
    unsigned lo = 0x80, hi = 0xbf;
    size_t k;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        k = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        k = 3, lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        k = 4, lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (n < k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return k;
}

/*
 * s[0..n) as a JSON string (RFC 8259 7) onto b: '"', '\\' and the control
 * bytes (and DEL) escaped, valid UTF-8 kept as it is, each byte of an
 * invalid sequence as \ufffd, so that every line is valid JSON whatever a
 * client sent.  At most 6 bytes of output a byte of input.
 */
static void json_str(hbuf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    hb_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t j = i, k;
        while (j < n && (unsigned char)s[j] >= 0x20 && (unsigned char)s[j] < 0x7f &&
               s[j] != '"' && s[j] != '\\')
            j++;
        if (j > i) { /* a run that needs nothing */
            hb_put(b, s + i, j - i);
            i = j;
        } else if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            hb_put(b, e, 2), i++;
        } else if (c < 0x80) { /* controls and DEL */
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            hb_put(b, e, 6), i++;
        } else if ((k = utf8_len(s + i, n - i))) {
            hb_put(b, s + i, k), i += k;
        } else {
            hb_put(b, "\\ufffd", 6), i++;
        }
    }
    hb_put(b, "\"", 1);
}

/* ,"name": and s as a JSON string, or null when s is NULL (or empty, if
   empty_null). */
static void json_field(hbuf_t *b, const char *name, const char *s, size_t n, int empty_null)
{
    hb_puts(b, ",\"");
    hb_puts(b, name);
    hb_puts(b, "\":");
    if (!s || (empty_null && !n))
        hb_puts(b, "null");
    else
        json_str(b, s, n);
}

/* ,"name": and v, or null when v < 0. */
static void json_num(hbuf_t *b, const char *name, int64_t v)
{
    hb_puts(b, ",\"");
    hb_puts(b, name);
    hb_puts(b, "\":");
    if (v < 0)
        hb_puts(b, "null");
    else
        hb_num(b, (uint64_t)v);
}

/* s and its length (0 for NULL), for json_field. */
#define CSTR(s) (s), slen(s)
static size_t slen(const char *s)
{
    return s ? strlen(s) : 0;
}

/* Mutual TLS: the client's certificate (nulls where none was asked, or came). */
static void json_client(hbuf_t *b, const exchange_t *ex)
{
    const ex_client_t *cl = ex ? ex->client : NULL;
    int c = cl && cl->cert;
    json_field(b, "client_verify", CSTR(cl ? cl->verify : NULL), 0);
    json_field(b, "client_s_dn", CSTR(c ? cl->s_dn : NULL), 0);
    json_field(b, "client_i_dn", CSTR(c ? cl->i_dn : NULL), 0);
    json_field(b, "client_serial", CSTR(c ? cl->serial : NULL), 0);
    json_field(b, "client_fingerprint", CSTR(c ? cl->fingerprint : NULL), 0);
}

/* One request's JSON object and its newline onto b (see alog.h). */
static void json_line(alog_t *l, hbuf_t *b, const struct sockaddr *peer,
                      const http_request_t *req, int status, uint64_t bytes, int flags,
                      const alog_facts_t *f)
{
    const http_str_t *ref = req ? http_header(req, "Referer") : NULL;
    const http_str_t *ua = req ? http_header(req, "User-Agent") : NULL;
    const http_str_t *host = req ? http_header(req, "Host") : NULL; /* or :authority */
    const exchange_t *ex = f ? f->ex : NULL;
    char ip[64];
    hb_puts(b, "{\"time\":\"");
    hb_puts(b, l->iso);
    hb_puts(b, "\"");
    json_field(b, "remote", ip, fmt_peer(ip, peer), 0);
    json_field(b, "request", req && req->line.p ? req->line.p : NULL, req ? req->line.n : 0, 0);
    json_num(b, "status", status);
    json_num(b, "bytes", (int64_t)bytes);
    json_field(b, "referer", ref ? ref->p : NULL, ref ? ref->n : 0, 0);
    json_field(b, "user_agent", ua ? ua->p : NULL, ua ? ua->n : 0, 0);
    json_field(b, "protocol", CSTR(f ? f->proto : NULL), 0);
    json_field(b, "tls_version", CSTR(f ? f->tls_version : NULL), 0);
    json_field(b, "tls_cipher", CSTR(f ? f->tls_cipher : NULL), 0);
    json_client(b, ex);
    json_field(b, "host", host ? host->p : NULL, host ? host->n : 0, 0);
    json_field(b, "vhost", ex ? ex->vhost : NULL, ex ? strnlen(ex->vhost, EX_VHOST_CAP) : 0, 1);
    json_field(b, "upstream", ex ? ex->log_upstream : NULL,
               ex ? strnlen(ex->log_upstream, EX_NOTE_CAP) : 0, 1);
    json_num(b, "upstream_us", ex && ex->log_upstream[0] ? ex->upstream_us : -1);
    json_field(b, "cache", ex ? ex->log_cache : NULL, ex ? strnlen(ex->log_cache, EX_NOTE_CAP) : 0,
               1);
    json_field(b, "rule", ex ? ex->log_rule : NULL, ex ? strnlen(ex->log_rule, EX_NOTE_CAP) : 0, 1);
    hb_puts(b, flags & ALOG_DCZ ? ",\"dcz\":true" : ",\"dcz\":false");
    json_num(b, "duration_us", f ? f->duration_us : -1);
    json_num(b, "grpc_status", ex && ex->grpc_status ? ex->grpc_status - 1 : -1);
    hb_puts(b, ex && ex->early_data ? ",\"early_data\":true}\n" : ",\"early_data\":false}\n");
}

/* --log-format json: as alog_request. */
static void alog_json(alog_t *l, const struct sockaddr *peer, const http_request_t *req,
                      int status, uint64_t bytes, int flags, const alog_facts_t *f)
{
    const http_str_t *ref = req ? http_header(req, "Referer") : NULL;
    const http_str_t *ua = req ? http_header(req, "User-Agent") : NULL;
    const ex_client_t *cl = f && f->ex ? f->ex->client : NULL;
    size_t need = 1024 + 6 * (EX_VHOST_CAP + 2 * EX_NOTE_CAP + 128) +
                  (cl ? 6 * (strlen(cl->s_dn) + strlen(cl->i_dn) + 512) : 0) +
                  6 * ((req ? req->line.n : 0) + (ref ? ref->n : 0) + (ua ? ua->n : 0));
    if (reserve(l, need) < 0)
        return;
    hbuf_t b = hb_init(l->buf + l->len, l->cap - l->len);
    json_line(l, &b, peer, req, status, bytes, flags, f);
    if (!b.over) /* reserve() made room for the worst case: a line never half-written */
        l->len += hb_len(&b);
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
                  const http_request_t *req, int status, uint64_t body_bytes, int flags,
                  const alog_facts_t *facts)
{
    if (l->fd < 0)
        return;
    if (l->json) {
        if (now != l->stamp_at)
            refresh_stamp(l, now);
        alog_json(l, peer, req, status, body_bytes, flags, facts);
        if (l->len >= ALOG_FLUSH_AT)
            alog_flush(l);
        return;
    }
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

/* alog_ftp's line as JSON: the fields an FTP transfer has (room reserved). */
static void ftp_json(alog_t *l, const struct sockaddr *peer, const char *user, size_t ulen,
                     const char *verb, const char *path, size_t plen, int code, uint64_t bytes,
                     int tls)
{
    char ip[64], req[4096 + 16];
    hbuf_t b = hb_init(l->buf + l->len, l->cap - l->len), r = hb_init(req, sizeof req);
    hb_put(&r, verb, strnlen(verb, 8)), hb_puts(&r, " "), hb_put(&r, path, plen);
    hb_puts(&b, "{\"time\":\"");
    hb_puts(&b, l->iso);
    hb_puts(&b, "\"");
    json_field(&b, "remote", ip, fmt_peer(ip, peer), 0);
    json_field(&b, "user", user, ulen, 1);
    json_field(&b, "request", req, hb_len(&r), 0);
    json_num(&b, "status", code);
    json_num(&b, "bytes", (int64_t)bytes);
    hb_puts(&b, tls ? ",\"protocol\":\"ftps\"}\n" : ",\"protocol\":\"ftp\"}\n");
    if (!b.over)
        l->len += hb_len(&b);
    if (l->len >= ALOG_FLUSH_AT)
        alog_flush(l);
}

void alog_ftp(alog_t *l, int64_t now, const struct sockaddr *peer, const char *user,
              const char *verb, const char *path, int code, uint64_t bytes, int tls)
{
    if (l->fd < 0)
        return;
    size_t plen = strnlen(path, 4096), ulen = strnlen(user, 64);
    if (reserve(l, 256 + 6 * (plen + ulen)) < 0)
        return;
    if (now != l->stamp_at)
        refresh_stamp(l, now);
    if (l->json) {
        ftp_json(l, peer, user, ulen, verb, path, plen, code, bytes, tls);
        return;
    }
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
