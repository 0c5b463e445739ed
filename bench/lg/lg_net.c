/* lg_net: URL and source address parsing, non-blocking connects. */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "lg_net.h"

#include "gio.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LG_MAX_SRCS 65536

static int fail(char *err, size_t errlen, const char *fmt, const char *arg)
{
    snprintf(err, errlen, fmt, arg);
    return -1;
}

void lg_addr_set_port(lg_addr_t *a, unsigned port)
{
    if (a->ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&a->ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)&a->ss)->sin_port = htons((uint16_t)port);
}

/* Resolve host (no brackets) into a; numeric first, then names. */
static int resolve(const char *host, lg_addr_t *a, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int r = getaddrinfo(host, NULL, &hints, &res);
    if (r != 0 || !res)
        return fail(err, errlen, "cannot resolve host '%s'", host);
    memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
    a->len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int lg_url_parse(const char *s, lg_url_t *u, char *err, size_t errlen)
{
    memset(u, 0, sizeof *u);
    if (!strncmp(s, "https://", 8))
        s += 8, u->tls = 1;
    else if (!strncmp(s, "http://", 7))
        s += 7;
    else if (!strncmp(s, "ftp://", 6))
        s += 6, u->ftp = 1;
    else if (strstr(s, "://"))
        return fail(err, errlen, "%s: only http://, https:// and ftp:// URLs", s);
    char host[256];
    const char *p = s, *end;
    size_t hl;
    if (*p == '[') {
        end = strchr(p, ']');
        if (!end)
            return fail(err, errlen, "%s: missing ']'", s);
        hl = (size_t)(end - p - 1);
        if (hl == 0 || hl >= sizeof host)
            return fail(err, errlen, "%s: bad IPv6 literal", s);
        memcpy(host, p + 1, hl);
        p = end + 1;
    } else {
        hl = strcspn(p, ":/?#");
        if (hl == 0 || hl >= sizeof host)
            return fail(err, errlen, "%s: no host", s);
        memcpy(host, p, hl);
        p += hl;
    }
    host[hl] = 0;
    u->port = u->tls ? 443 : u->ftp ? 21 : 80;
    if (*p == ':') {
        char *e;
        unsigned long port = strtoul(p + 1, &e, 10);
        if (e == p + 1 || port == 0 || port > 65535 || (*e && !strchr("/?#", *e)))
            return fail(err, errlen, "%s: bad port", s);
        u->port = (unsigned)port;
        p = e;
    } else if (*p && !strchr("/?#", *p)) {
        return fail(err, errlen, "%s: bad host", s);
    }
    /* Host: is the authority exactly as written */
    snprintf(u->host, sizeof u->host, "%.*s", (int)(p - s), s);
    if (resolve(host, &u->addr, err, errlen) < 0)
        return -1;
    lg_addr_set_port(&u->addr, u->port);
    size_t pl = strcspn(p, "#");
    u->path = malloc(pl + 2);
    if (!u->path)
        return fail(err, errlen, "%s: out of memory", s);
    if (*p != '/')
        u->path[0] = '/', memcpy(u->path + 1, p, pl), u->path[pl + 1] = 0;
    else
        memcpy(u->path, p, pl), u->path[pl] = 0;
    for (const char *c = u->path; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return fail(err, errlen, "%s: space or control character in the path", s);
    return 0;
}

void lg_url_free(lg_url_t *u)
{
    free(u->path);
    u->path = NULL;
}

/* One literal address of the wanted family. */
static int parse_one(const char *s, int family, lg_addr_t *a)
{
    memset(a, 0, sizeof *a);
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&a->ss;
        if (inet_pton(AF_INET, s, &in->sin_addr) != 1)
            return -1;
        in->sin_family = AF_INET;
        a->len = sizeof *in;
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->ss;
        if (inet_pton(AF_INET6, s, &in6->sin6_addr) != 1)
            return -1;
        in6->sin6_family = AF_INET6;
        a->len = sizeof *in6;
    }
    return 0;
}

/* Append the IPv4 range lo..hi (host order) to *v. */
static int push_range(lg_addr_t **v, size_t *n, uint32_t lo, uint32_t hi)
{
    if (hi < lo || hi - lo >= LG_MAX_SRCS || *n + (hi - lo + 1) > LG_MAX_SRCS)
        return -1;
    lg_addr_t *nv = realloc(*v, (*n + (hi - lo + 1)) * sizeof **v);
    if (!nv)
        return -1;
    *v = nv;
    for (uint64_t x = lo; x <= hi; x++) {
        lg_addr_t *a = &nv[(*n)++];
        memset(a, 0, sizeof *a);
        struct sockaddr_in *in = (struct sockaddr_in *)&a->ss;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl((uint32_t)x);
        a->len = sizeof *in;
    }
    return 0;
}

static int parse_item(const char *item, int family, lg_addr_t **v, size_t *n)
{
    char lo[64], hi[192];
    const char *dash = family == AF_INET ? strchr(item, '-') : NULL;
    lg_addr_t a, b;
    if (!dash) {
        if (parse_one(item, family, &a) < 0 || *n >= LG_MAX_SRCS)
            return -1;
        lg_addr_t *nv = realloc(*v, (*n + 1) * sizeof **v);
        if (!nv)
            return -1;
        *v = nv;
        nv[(*n)++] = a;
        return 0;
    }
    size_t ll = (size_t)(dash - item);
    if (ll >= sizeof lo || strlen(dash + 1) >= 128)
        return -1;
    memcpy(lo, item, ll);
    lo[ll] = 0;
    if (strchr(dash + 1, '.')) {
        snprintf(hi, sizeof hi, "%s", dash + 1);
    } else { /* "127.0.0.2-9": the last octet */
        const char *dot = strrchr(lo, '.');
        if (!dot)
            return -1;
        snprintf(hi, sizeof hi, "%.*s%s", (int)(dot - lo + 1), lo, dash + 1);
    }
    if (parse_one(lo, AF_INET, &a) < 0 || parse_one(hi, AF_INET, &b) < 0)
        return -1;
    return push_range(v, n, ntohl(((struct sockaddr_in *)&a.ss)->sin_addr.s_addr),
                      ntohl(((struct sockaddr_in *)&b.ss)->sin_addr.s_addr));
}

lg_addr_t *lg_srcs_parse(const char *s, int family, size_t *n, char *err, size_t errlen)
{
    lg_addr_t *v = NULL;
    char *copy = strdup(s), *save = NULL;
    *n = 0;
    if (!copy) {
        fail(err, errlen, "%s: out of memory", s);
        return NULL;
    }
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (parse_item(tok, family, &v, n) < 0) {
            snprintf(err, errlen, "bad source address '%s' (want %s addresses%s)", tok,
                     family == AF_INET ? "IPv4" : "IPv6",
                     family == AF_INET ? ", or a range A-B" : "");
            free(v);
            free(copy);
            *n = 0;
            return NULL;
        }
    }
    free(copy);
    if (!*n) {
        fail(err, errlen, "empty source address list '%s'", s);
        free(v);
        return NULL;
    }
    return v;
}

int lg_connect(const lg_addr_t *dst, const lg_addr_t *src, int *now)
{
#ifdef SOCK_NONBLOCK
    int fd = socket(dst->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
#else /* macOS: two more syscalls */
    int fd = socket(dst->ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        return -errno;
    if (gio_nonblock(fd) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
#endif
    int one = 1;
    /* requests are single writes: never hold one back behind an unacked one */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (src) {
#ifdef IP_BIND_ADDRESS_NO_PORT
        /* without it bind() reserves a port for any destination: ~28k per address */
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
#endif
        if (bind(fd, (const struct sockaddr *)&src->ss, src->len) < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
    }
    *now = 0;
    if (connect(fd, (const struct sockaddr *)&dst->ss, dst->len) == 0) {
        *now = 1;
    } else if (errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int lg_connect_result(int fd)
{
    int e = 0;
    socklen_t l = sizeof e;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
        return errno;
    return e;
}

const char *lg_addr_str(const lg_addr_t *a, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    int v6 = a->ss.ss_family == AF_INET6;
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->ss;
    const struct sockaddr_in *in = (const struct sockaddr_in *)&a->ss;
    inet_ntop(v6 ? AF_INET6 : AF_INET, v6 ? (const void *)&in6->sin6_addr : (const void *)&in->sin_addr,
              ip, sizeof ip);
    unsigned port = ntohs(v6 ? in6->sin6_port : in->sin_port);
    if (!port)
        snprintf(buf, len, "%s", ip);
    else
        snprintf(buf, len, v6 ? "[%s]:%u" : "%s:%u", ip, port);
    return buf;
}

unsigned lg_ephemeral_ports(void)
{
    unsigned lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%u %u", &lo, &hi) != 2 || hi < lo)
            lo = 32768, hi = 60999;
        fclose(f);
    }
    return hi - lo + 1;
}
