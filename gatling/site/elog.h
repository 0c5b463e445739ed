/*
 * elog — the error log: what failed at run time that no client can see
 * (out of descriptors, an unreadable .htaccess, sendfile failing, out of
 * memory), one line each, on standard error or in the -q file:
 *
 *   2026-11-22T10:20:00Z gatling[4242]: sendfile() failed: Input/output error (peer 127.0.0.1) /big.iso
 *
 * A flood cannot fill the disk: at most ELOG_PER_SECOND lines a second are
 * written, the rest are counted and reported in one line when writing
 * resumes.  Text from a request (a path) is escaped: no control character
 * reaches the file.
 */
#ifndef GATLING_ELOG_H
#define GATLING_ELOG_H

#include <stdint.h>
#include <sys/socket.h>

#define ELOG_PER_SECOND 20
#define ELOG_LINE_MAX 1024

typedef struct elog {
    int fd;           /* stderr, or the -q file */
    const char *path; /* the -q file, or NULL */
    int dirfd;        /* -W's supervisor: the file's directory, from start; -1 */
    int uid, gid;     /* -u's ids, for a reopen by root (site/privfs.h); -1 */
    int64_t second;   /* the wall-clock second being counted */
    unsigned lines;   /* written in that second */
    uint64_t dropped; /* not written since the last report */
} elog_t;

/*
 * Open path for appending (O_APPEND, made 0640) by privfs's rules (as -u's
 * uid/gid where its directory is not root's alone, -1: none): the
 * descriptor, or STDERR_FILENO when path is NULL, or -1 with errno set and
 * why (n bytes) saying what was refused.  With dirfd non-NULL, the file's
 * directory comes back there (for elog_keep_dir).  Call it before any chroot.
 */
int elog_open(const char *path, int uid, int gid, int *dirfd, char *why, size_t n);

/* Write the log to fd (from elog_open); path is what SIGUSR1 reopens. */
void elog_init(elog_t *l, int fd, const char *path);

/*
 * -W's supervisor, which stays root: reopen through dirfd (elog_open's,
 * from before the chroot; the log owns it now), as uid/gid where the
 * directory is not root's alone; never by name inside a chroot.
 */
void elog_keep_dir(elog_t *l, int dirfd, int uid, int gid);

/* A worker forked from the supervisor: close the directory kept (a
   descriptor outside the chroot would let it out); reopens go by name. */
void elog_close_dir(elog_t *l);

/* SIGUSR1: reopen the same path (logrotate), O_NOFOLLOW and checked as
   elog_open does; on failure keep the old file and say why in it. */
void elog_reopen(elog_t *l);

/*
 * One line: the time, what failed (call, e.g. "sendfile()"), the error text
 * of err (0: none), the peer (NULL: none) and detail (NULL: none; escaped,
 * truncated to fit the line).
 */
void elog_error(elog_t *l, int64_t now, const char *call, int err, const struct sockaddr *peer,
                const char *detail);

/*
 * A defence acting on a client (a flood that ended its connection): "what
 * (peer A) detail", detail escaped, rate-limited with elog_error's lines.
 */
void elog_event(elog_t *l, int64_t now, const char *what, const struct sockaddr *peer,
                const char *detail);

/*
 * A line of someone else's words (a CGI script's stderr): "what: text",
 * both escaped, rate-limited with elog_error's lines.
 */
void elog_text(elog_t *l, int64_t now, const char *what, const char *text);

/*
 * An event an admin wants to see (a binary upgrade, ...): one line, not
 * rate-limited, escaped; also on stderr when the log is a -q file.
 */
void elog_note(elog_t *l, int64_t now, const char *text);

/* t as the logs write a date: ISO 8601 in UTC, "2026-12-01T10:00:00Z" (the
   lines' own prefix, and a certificate's expiry in --acme's lines).  A
   value, so that elog_utc(t).s may be an argument (C11: it lives until the
   call's full expression ends). */
typedef struct {
    char s[32];
} elog_date_t;
elog_date_t elog_utc(int64_t t);

#endif
