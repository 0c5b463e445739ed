/* Virtual hosts: see vhost.h. */
#define _GNU_SOURCE
#include "vhost.h"
#include "fs.h"
#include "http/owfat.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

_Static_assert(VHOST_NAME_MAX <= EX_HOST_CAP, "ex->route.name holds a vhost_name()");

int vhost_route(exchange_t *ex, int vhosts, int keep_port)
{
    ex_route_t *r = &ex->route;
    if (r->state == EX_ROUTE_NONE) {
        int n = vhosts ? vhost_name(http_header(ex->req, "Host"), ex->local_port, keep_port,
                                    r->name)
                       : 0;
        r->state = n < 0 ? EX_ROUTE_BAD : EX_ROUTE_OK;
        r->namelen = (uint16_t)(n < 0 ? 0 : n);
        r->name[r->namelen] = 0;
    }
    return r->state == EX_ROUTE_BAD ? -1 : (int)r->namelen;
}

int vhost_name(const http_str_t *host, int local_port, int keep_port, char *out)
{
    if (!host)
        return 0;
    const char *p = host->p, *end = p + host->n, *colon = NULL;
    size_t n = 0;
    if (host->n == 0 || host->n > 255)
        return -1;
    if (*p == '[') { /* IPv6 literal: "[" hex/colons/dots "]" then maybe ":port" */
        const char *close = memchr(p, ']', host->n);
        if (!close)
            return -1;
        /* an IPv6 address, nothing else ("[1..2]" is none: found by fuzzing) */
        char a6[INET6_ADDRSTRLEN];
        unsigned char bin[16];
        size_t k = (size_t)(close - p - 1);
        if (k == 0 || k >= sizeof a6 || memchr(p + 1, 0, k))
            return -1;
        memcpy(a6, p + 1, k);
        a6[k] = 0;
        if (inet_pton(AF_INET6, a6, bin) != 1)
            return -1;
        colon = close + 1 < end ? close + 1 : NULL;
        if (colon && *colon != ':')
            return -1;
        n = (size_t)(close + 1 - p);
    } else {
        for (const char *q = p; q < end; q++) {
            char ch = *q;
            if (ch == ':') {
                colon = q;
                break;
            }
            if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_'))
                return -1;
        }
        n = (size_t)((colon ? colon : end) - p);
        /* no empty name, no "." or ".." anywhere: nothing that names a path */
        if (n == 0 || *p == '.' || memmem(p, n, "..", 2))
            return -1;
        if (p[n - 1] == '.') /* "example.org." is example.org (DNS's root), as nginx has it */
            n--;
    }
    if (colon) { /* the port must be a port, even when we replace it: digits, <= 65535 */
        unsigned long port = 0;
        for (const char *q = colon + 1; q < end; q++) {
            if (*q < '0' || *q > '9')
                return -1;
            port = port * 10 + (unsigned long)(*q - '0');
            if (port > 65535)
                return -1;
        }
    }
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] | 0x20 : p[i]);
    out[n++] = ':';
    if (keep_port && colon && colon + 1 < end) {
        size_t k = (size_t)(end - colon - 1);
        if (k > 5)
            return -1;
        memcpy(out + n, colon + 1, k);
        n += k;
    } else {
        n += fmt_ulong(out + n, (unsigned long)local_port);
    }
    out[n] = 0;
    return (int)n;
}

/* A directory below the root, by fs_open_beneath's rules on symlinks. */
static int open_dir(int rootfd, const char *name, const char *root_real)
{
    struct stat sb;
    int fd = fs_open_beneath(rootfd, name, root_real);
    if (fd >= 0 && (fstat(fd, &sb) < 0 || !S_ISDIR(sb.st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* name without its ":port" into out (VHOST_NAME_MAX): its length, 0 if none. */
static size_t bare(const char *name, char *out)
{
    const char *colon = strrchr(name, ':');
    size_t n = colon ? (size_t)(colon - name) : 0;
    if (n >= VHOST_NAME_MAX)
        return 0;
    memcpy(out, name, n);
    out[n] = 0;
    return n;
}

int vhost_open(int rootfd, const char *name, int vhost_only, const char *root_real, int *which)
{
    char host[VHOST_NAME_MAX];
    int w = VHOST_NAMED, fd = name && *name ? open_dir(rootfd, name, root_real) : -1;
    if (fd < 0 && name && bare(name, host))
        w = VHOST_BARE, fd = open_dir(rootfd, host, root_real);
    if (fd < 0 && name)
        w = VHOST_DEFAULT, fd = open_dir(rootfd, "default", root_real);
    if (fd < 0 && (!name || !vhost_only))
        w = VHOST_ROOT, fd = open_dir(rootfd, ".", root_real);
    if (fd < 0 && errno != EMFILE && errno != ENFILE && errno != ENOMEM)
        errno = ENOENT; /* out of descriptors stays 503 (open_status), not 404 */
    if (which)
        *which = w;
    return fd;
}

const char *vhost_dir(int which, const char *name)
{
    static _Thread_local char host[VHOST_NAME_MAX];
    if (which == VHOST_BARE)
        return bare(name, host) ? host : "";
    return which == VHOST_NAMED ? name : which == VHOST_DEFAULT ? "default" : "";
}

int vhost_log_name(int which, const char *name, int local_port, char *out, size_t cap)
{
    int n;
    if (which == VHOST_NAMED || which == VHOST_BARE)
        n = snprintf(out, cap, "%s", name);
    else
        n = snprintf(out, cap, "%s:%d", which == VHOST_DEFAULT ? "default" : "-", local_port);
    if (n < 0 || (size_t)n >= cap)
        return cap ? (*out = 0) : 0;
    return n;
}
