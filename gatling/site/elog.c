/* The error log: see elog.h. */
#define _GNU_SOURCE
#include "elog.h"
#include "http/hbuf.h"
#include "privfs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PATH_MAX_NOTE 900 /* a reopen's note: the path cut to 600 bytes, and why */

int elog_open(const char *path, int uid, int gid, int *dirfd, char *why, size_t n)
{
    if (!path)
        return STDERR_FILENO;
    return pfs_open_log(path, -1, uid, gid, dirfd, why, n);
}

void elog_init(elog_t *l, int fd, const char *path)
{
    *l = (elog_t){.fd = fd, .path = fd == STDERR_FILENO ? NULL : path, .dirfd = -1,
                  .uid = -1, .gid = -1};
}

void elog_keep_dir(elog_t *l, int dirfd, int uid, int gid)
{
    l->dirfd = dirfd, l->uid = uid, l->gid = gid;
}

void elog_close_dir(elog_t *l)
{
    if (l->dirfd >= 0)
        close(l->dirfd);
    l->dirfd = -1;
}

void elog_reopen(elog_t *l)
{
    char why[256], text[PATH_MAX_NOTE];
    if (!l->path || l->fd < 0)
        return;
    if (pfs_reopen_log(l->fd, l->path, l->dirfd, l->uid, l->gid, why, sizeof why) < 0) {
        /* the old file goes on taking lines rather than lose them */
        snprintf(text, sizeof text, "%.600s: reopening refused: %s", l->path, why);
        elog_note(l, (int64_t)time(NULL), text);
    }
}

elog_date_t elog_utc(int64_t t)
{
    elog_date_t d;
    struct tm tm;
    time_t tt = (time_t)t;
    if (!gmtime_r(&tt, &tm) || !strftime(d.s, sizeof d.s, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(d.s, sizeof d.s, "%lld", (long long)t); /* a year past what tm holds */
    return d;
}

/* "2026-11-22T10:20:00Z gatling[pid]: " */
static void put_prefix(hbuf_t *b, int64_t now)
{
    hb_puts(b, elog_utc(now).s);
    hb_puts(b, " gatling[");
    hb_num(b, (uint64_t)getpid());
    hb_puts(b, "]: ");
}

/* Bytes of s, with control characters, DEL and '\' as \xHH: one line, always. */
static void put_escaped(hbuf_t *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f || c == '\\') {
            char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
            hb_put(b, e, 4);
        } else {
            hb_put(b, s, 1);
        }
        if (b->over)
            return;
    }
}

static void put_peer(hbuf_t *b, const struct sockaddr *sa)
{
    char a[INET6_ADDRSTRLEN];
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
    const struct sockaddr_in *a4 = (const struct sockaddr_in *)sa;
    const void *src = sa->sa_family == AF_INET6 ? (const void *)&a6->sin6_addr
                                                : (const void *)&a4->sin_addr;
    if ((sa->sa_family == AF_INET || sa->sa_family == AF_INET6) &&
        inet_ntop(sa->sa_family, src, a, sizeof a)) {
        hb_puts(b, " (peer ");
        hb_puts(b, a);
        hb_puts(b, ")");
    }
}

static void write_line(elog_t *l, hbuf_t *b)
{
    if (b->over) { /* the detail was too long: cut it, keep the line */
        b->over = 0;
        b->p = b->end - 4;
        hb_puts(b, "...");
    }
    hb_puts(b, "\n");
    (void)!write(l->fd, b->start, hb_len(b)); /* one write: lines never interleave */
}

void elog_note(elog_t *l, int64_t now, const char *text)
{
    char line[ELOG_LINE_MAX];
    hbuf_t b = hb_init(line, sizeof line);
    put_prefix(&b, now);
    put_escaped(&b, text);
    if (l->fd >= 0)
        write_line(l, &b); /* adds the newline */
    else
        hb_puts(&b, "\n");
    if (l->fd != STDERR_FILENO) /* and the terminal, or systemd's journal */
        (void)!write(STDERR_FILENO, b.start, hb_len(&b));
}

/* The per-second budget of rate-limited lines: 1 if this one may go. */
static int admit(elog_t *l, int64_t now)
{
    char line[ELOG_LINE_MAX];
    if (l->fd < 0)
        return 0;
    if (now != l->second) {
        l->second = now;
        l->lines = 0;
        if (l->dropped) {
            hbuf_t b = hb_init(line, sizeof line);
            put_prefix(&b, now);
            hb_num(&b, l->dropped);
            hb_puts(&b, " more error messages suppressed (more than ");
            hb_num(&b, ELOG_PER_SECOND);
            hb_puts(&b, " a second)");
            write_line(l, &b);
            l->dropped = 0;
        }
    }
    if (l->lines >= ELOG_PER_SECOND) {
        l->dropped++;
        return 0;
    }
    l->lines++;
    return 1;
}

void elog_text(elog_t *l, int64_t now, const char *what, const char *text)
{
    if (!admit(l, now))
        return;
    char line[ELOG_LINE_MAX];
    hbuf_t b = hb_init(line, sizeof line);
    put_prefix(&b, now);
    put_escaped(&b, what);
    hb_puts(&b, ": ");
    put_escaped(&b, text);
    write_line(l, &b);
}

void elog_event(elog_t *l, int64_t now, const char *what, const struct sockaddr *peer,
                const char *detail)
{
    if (!admit(l, now))
        return;
    char line[ELOG_LINE_MAX];
    hbuf_t b = hb_init(line, sizeof line);
    put_prefix(&b, now);
    put_escaped(&b, what);
    if (peer)
        put_peer(&b, peer);
    hb_puts(&b, " ");
    put_escaped(&b, detail);
    write_line(l, &b);
}

void elog_error(elog_t *l, int64_t now, const char *call, int err, const struct sockaddr *peer,
                const char *detail)
{
    if (!admit(l, now))
        return;
    char line[ELOG_LINE_MAX];
    hbuf_t b = hb_init(line, sizeof line);
    put_prefix(&b, now);
    hb_puts(&b, call);
    hb_puts(&b, " failed");
    if (err) {
        hb_puts(&b, ": ");
        hb_puts(&b, strerror(err));
    }
    if (peer)
        put_peer(&b, peer);
    if (detail) {
        hb_puts(&b, " ");
        put_escaped(&b, detail);
    }
    write_line(l, &b);
}
