/*
 * The serving loops' side of the ACME client's state directory: see
 * acme_chal.h for the layout.  Everything is read through the descriptor
 * opened before a chroot, with openat() of a name checked first (a token is
 * base64url, a name a host name or an IP address: never "/" or ".."), and
 * every read is bounded by the buffer it fills.
 */
#define _GNU_SOURCE /* memrchr */
#include "acme_chal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct acme_chal {
    int dirfd; /* the state directory's challenges/ */
    int ask_fd; /* --acme-on-demand: the loops' end of the asks' socket; -1 */
    char *refused; /* ... challenges/ondemand as last read (NULL: not yet) */
    long long refused_ms; /* when (monotonic ms) */
};

#define CHAL_PATH_MAX 320 /* "challenges/tls-alpn-01/" + a 253-byte name + ".pem" */
#define REFUSED_FRESH_MS 20 /* challenges/ondemand's copy is read again after this */

acme_chal_t *acme_chal_open(int fd)
{
    acme_chal_t *c = malloc(sizeof *c);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->dirfd = fd;
    c->ask_fd = -1;
    c->refused = NULL;
    return c;
}

void acme_chal_free(acme_chal_t *c)
{
    if (!c)
        return;
    close(c->dirfd);
    if (c->ask_fd >= 0)
        close(c->ask_fd);
    free(c->refused);
    free(c);
}

static int b64url_char(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_';
}

/* One LDH label of a host name, 1-63 bytes, no '-' at either end. */
static int label_ok(const char *s, size_t n)
{
    if (!n || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-'))
            return 0;
    }
    return 1;
}

int acme_chal_host_ok(const char *s, size_t len)
{
    if (!len || len > 253)
        return 0;
    for (size_t at = 0; at <= len;) {
        const char *dot = memchr(s + at, '.', len - at);
        size_t n = dot ? (size_t)(dot - (s + at)) : len - at;
        if (!label_ok(s + at, n))
            return 0;
        if (!dot)
            return 1;
        at += n + 1;
    }
    return 0; /* a trailing dot */
}

int acme_chal_name_ok(const char *s, size_t len)
{
    char tmp[64];
    unsigned char a[16];
    if (len && len < sizeof tmp && memchr(s, ':', len)) { /* IPv6, RFC 8738 */
        memcpy(tmp, s, len), tmp[len] = 0;
        return inet_pton(AF_INET6, tmp, a) == 1;
    }
    if (len && len < sizeof tmp && strspn(s, "0123456789.") >= len) { /* IPv4 */
        memcpy(tmp, s, len), tmp[len] = 0;
        return inet_pton(AF_INET, tmp, a) == 1;
    }
    return acme_chal_host_ok(s, len);
}

/*
 * Read the regular file path below c's directory into buf (at most cap
 * bytes).  Its length; 0 when it is missing, not a regular file, or longer
 * than cap (what the client writes always fits: anything else is not ours).
 */
static size_t read_small(const acme_chal_t *c, const char *path, char *buf, size_t cap)
{
    int fd = openat(c->dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return 0;
    struct stat sb;
    size_t got = 0;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        (unsigned long long)sb.st_size <= cap) {
        while (got < cap) { /* at most to cap: the file may have grown since fstat */
            ssize_t r = read(fd, buf + got, cap - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        if (got != (size_t)sb.st_size)
            got = 0; /* it changed under us (a rename would not): not trusted */
    }
    close(fd);
    return got;
}

int acme_chal_http(acme_chal_t *c, const char *token, size_t len, char *buf, size_t cap)
{
    if (!len || len > ACME_TOKEN_MAX)
        return -1;
    for (size_t i = 0; i < len; i++)
        if (!b64url_char((unsigned char)token[i]))
            return -1;
    char path[sizeof ACME_CHAL_HTTP + 1 + ACME_TOKEN_MAX + 1];
    snprintf(path, sizeof path, "%s/%.*s", ACME_CHAL_HTTP, (int)len, token);
    char tmp[ACME_KEYAUTH_MAX + 2]; /* a line end a hand may have added */
    size_t n = c ? read_small(c, path, tmp, sizeof tmp) : 0;
    while (n && (tmp[n - 1] == '\n' || tmp[n - 1] == '\r'))
        n--;
    /* the key authorization is TOKEN "." base64url: this token, then the thumbprint */
    if (n <= len + 1 || n > ACME_KEYAUTH_MAX || n > cap || memcmp(tmp, token, len) ||
        tmp[len] != '.')
        return 0;
    for (size_t i = len + 1; i < n; i++)
        if (!b64url_char((unsigned char)tmp[i]))
            return 0;
    memcpy(buf, tmp, n);
    return (int)n;
}

/*
 * RFC 8738 6: a TLS-ALPN-01 hello for an IP address names it by its reverse
 * mapping ("1.2.0.192.in-addr.arpa", 32 nibbles then "ip6.arpa"), and the
 * challenge file by the address itself: that address's text into out (cap
 * bytes), or 0 when name is no such reverse name.
 */
static size_t reverse_ip(const char *name, size_t len, char *out, size_t cap)
{
    unsigned char a[16];
    static const char v4[] = ".in-addr.arpa", v6[] = ".ip6.arpa";
    int six = len > sizeof v6 - 1 && !strncasecmp(name + len - (sizeof v6 - 1), v6, sizeof v6 - 1);
    int four = len > sizeof v4 - 1 && !strncasecmp(name + len - (sizeof v4 - 1), v4, sizeof v4 - 1);
    if (!six && !four)
        return 0;
    size_t n = len - (six ? sizeof v6 - 1 : sizeof v4 - 1), k = 0;
    char label[4][4];
    if (six && n != 63)
        return 0;
    for (size_t at = 0; at < n; k++) { /* the labels, last first */
        const char *dot = memchr(name + at, '.', n - at);
        size_t l = dot ? (size_t)(dot - (name + at)) : n - at;
        if (six) {
            const char *hex = "0123456789abcdef", *h = l == 1 ? strchr(hex, name[at] | 0x20) : NULL;
            if (!h || !*h || k >= 32)
                return 0;
            int v = (int)(h - hex), byte = 15 - (int)(k / 2);
            a[byte] = (unsigned char)(k % 2 ? (a[byte] | v << 4) : v);
        } else {
            if (k >= 4 || !l || l > 3 || strspn(name + at, "0123456789") < l)
                return 0;
            memcpy(label[3 - k], name + at, l), label[3 - k][l] = 0;
        }
        at += l + 1;
    }
    if (six)
        return k == 32 && inet_ntop(AF_INET6, a, out, (socklen_t)cap) ? strlen(out) : 0;
    if (k != 4)
        return 0;
    int w = snprintf(out, cap, "%s.%s.%s.%s", label[0], label[1], label[2], label[3]);
    return w > 0 && (size_t)w < cap && inet_pton(AF_INET, out, a) == 1 ? (size_t)w : 0;
}

char *acme_chal_alpn_pem(acme_chal_t *c, const char *name, size_t len, size_t *pemlen)
{
    char ip[INET6_ADDRSTRLEN];
    if (len && name[len - 1] == '.')
        len--; /* an absolute name */
    size_t iplen = reverse_ip(name, len, ip, sizeof ip);
    if (iplen)
        name = ip, len = iplen;
    if (!c || !acme_chal_name_ok(name, len))
        return NULL;
    char path[CHAL_PATH_MAX];
    int k = snprintf(path, sizeof path, "%s/", ACME_CHAL_ALPN);
    for (size_t i = 0; i < len; i++) /* as the client names the file: lower case */
        path[k++] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 'a' - 'A' : name[i]);
    snprintf(path + k, sizeof path - (size_t)k, ".pem");
    char *buf = malloc(ACME_ALPN_PEM_MAX + 1);
    if (!buf)
        return NULL;
    size_t n = read_small(c, path, buf, ACME_ALPN_PEM_MAX);
    if (!n) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *pemlen = n;
    return buf;
}

int acme_chal_status(acme_chal_t *c, char *buf, size_t cap)
{
    if (!c || cap < 2)
        return 0;
    size_t n = read_small(c, ACME_CHAL_STATUS, buf, cap - 1);
    buf[n] = 0;
    return (int)n;
}

/* A decimal number of at most 18 digits at *p, then a space or a line end;
   *p moves past it.  -1 if there is none. */
static long long number(const char **p)
{
    long long v = 0;
    int k = 0;
    for (; **p >= '0' && **p <= '9' && k < 18; (*p)++, k++)
        v = v * 10 + (**p - '0');
    return k && (**p == ' ' || **p == '\n' || !**p) ? v : -1;
}

/* "NAME NOT_AFTER NEXT FAILS [ISSUER]" at p, into slot i of st.  0, or -1. */
static int status_cert(const char *p, acme_status_t *st)
{
    const char *sp = strchr(p, ' ');
    if (st->n == ACME_STATUS_NAMES || !sp || !acme_chal_name_ok(p, (size_t)(sp - p)))
        return -1;
    memcpy(st->names[st->n].name, p, (size_t)(sp - p));
    st->names[st->n].name[sp - p] = 0;
    p = sp + 1;
    long long v[3];
    for (int i = 0; i < 3; i++) {
        if ((v[i] = number(&p)) < 0 || (i < 2 && *p++ != ' '))
            return -1;
    }
    const char *end = p + strcspn(p, "\n");
    st->names[st->n].issuer[0] = 0;
    if (*p == ' ') { /* ISSUER, the rest of the line */
        size_t n = (size_t)(end - p - 1);
        if (!n || n >= sizeof st->names[0].issuer)
            return -1;
        for (size_t i = 1; i <= n; i++)
            if ((unsigned char)p[i] < ' ' || (unsigned char)p[i] >= 0x7f)
                return -1;
        memcpy(st->names[st->n].issuer, p + 1, n);
        st->names[st->n].issuer[n] = 0;
    } else if (*p && *p != '\n')
        return -1;
    st->names[st->n].not_after = v[0], st->names[st->n].next = v[1];
    st->names[st->n].ondemand = 0;
    st->names[st->n++].fails = (unsigned long long)v[2];
    return 0;
}

/* A counter's line ("orders N", "od_asks N"...): where its number goes,
   *p moved past its key; NULL for another line. */
static unsigned long long *status_counter(acme_status_t *st, const char **p)
{
    static const char *const keys[] = {"orders ",         "failures ",       "od_names ",
                                       "od_asks ",        "od_allowed ",     "od_refused ",
                                       "od_limited ",     "od_invalid "};
    unsigned long long *to[] = {&st->orders,     &st->failures,   &st->od_names,
                                &st->od_asks,    &st->od_allowed, &st->od_refused,
                                &st->od_limited, &st->od_invalid};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strncmp(*p, keys[i], strlen(keys[i]))) {
            *p += strlen(keys[i]);
            return to[i];
        }
    return NULL;
}

/* "ondemand_name NAME": a name of the list got on demand. */
static int status_od_name(const char *p, acme_status_t *st)
{
    size_t n = strcspn(p, "\n");
    for (int i = 0; i < st->n; i++)
        if (strlen(st->names[i].name) == n && !memcmp(st->names[i].name, p, n)) {
            st->names[i].ondemand = 1;
            return 0;
        }
    return -1; /* after its cert line, always */
}

int acme_chal_status_parse(const char *text, acme_status_t *st)
{
    memset(st, 0, offsetof(acme_status_t, names));
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        long long v = 0;
        unsigned long long *to = status_counter(st, &p);
        if (to) {
            if ((v = number(&p)) < 0 || (*p && *p != '\n'))
                return -1;
            *to = (unsigned long long)v;
        } else if (!strncmp(p, "ondemand_name ", 14)) {
            if (status_od_name(p + 14, st) < 0)
                return -1;
        } else if (!strncmp(p, "cert ", 5)) {
            if (status_cert(p + 5, st) < 0)
                return -1;
        } else if (p[0] != '\n') {
            return -1;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    return 0;
}

/* ---- --acme-on-demand ---- */

void acme_chal_set_ask(acme_chal_t *c, int fd)
{
    if (c->ask_fd >= 0)
        close(c->ask_fd);
    c->ask_fd = fd;
}

int acme_chal_ondemand(const acme_chal_t *c)
{
    return c && c->ask_fd >= 0;
}

int acme_chal_ondemand_ok(const char *s, size_t len)
{
    if (!acme_chal_host_ok(s, len) || !memchr(s, '.', len))
        return 0;
    const char *dot = memrchr(s, '.', len); /* a last label of digits: an address */
    return strspn(dot + 1, "0123456789") < (size_t)(s + len - dot - 1);
}

int acme_chal_ask(acme_chal_t *c, const char *name, size_t len, const char *addr)
{
    char msg[ACME_OD_MSG_MAX];
    if (!acme_chal_ondemand(c) || !acme_chal_ondemand_ok(name, len))
        return -1;
    int k = snprintf(msg, sizeof msg, "%.*s %s", (int)len, name, addr ? addr : "-");
    if (k < 0 || (size_t)k >= sizeof msg)
        return -1;
    return send(c->ask_fd, msg, (size_t)k, MSG_DONTWAIT | MSG_NOSIGNAL) == k ? 0 : -1;
}

/* challenges/ondemand, read again when the copy is older than
   REFUSED_FRESH_MS (the handshakes that wait look every 50 ms, each). */
static const char *refused_text(acme_chal_t *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (c->refused && now - c->refused_ms < REFUSED_FRESH_MS)
        return c->refused;
    if (!c->refused && !(c->refused = malloc(ACME_OD_REFUSED_MAX + 1)))
        return "";
    int fd = openat(c->dirfd, ACME_CHAL_REFUSED, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n = fd >= 0 ? read(fd, c->refused, ACME_OD_REFUSED_MAX) : -1;
    if (fd >= 0)
        close(fd);
    c->refused[n > 0 ? n : 0] = 0;
    c->refused_ms = now;
    return c->refused;
}

int acme_chal_refused(acme_chal_t *c, const char *name, size_t len, long long now)
{
    const char *p = refused_text(c);
    for (; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        const char *sp = strchr(p, ' ');
        if (sp && (size_t)(sp - p) == len && !strncasecmp(p, name, len))
            return strtoll(sp + 1, NULL, 10) > now;
    }
    return 0;
}
