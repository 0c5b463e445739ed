/*
 * static — the parts of the static-file handler (router.h: static_serve),
 * one concern per file:
 *
 *   static.c    routing a request to a file: path -> vhost -> the open-file
 *               cache or a lookup below the vhost directory -> coding ->
 *               preconditions; directory indexes and listings
 *   auth.c      .htaccess Basic authentication, the password check on a
 *               worker thread, the throttling of failed logins
 *   ranges.c    the body: whole, one range (206) or several
 *               (multipart/byteranges), or 416
 *   redirect.c  redirects to a path (trailing '/', -r) and URL symlinks
 *   gzip.c      on-the-fly gzip of a file, on a worker thread
 */
#ifndef GATLING_STATIC_H
#define GATLING_STATIC_H

#include "http/exchange.h"
#include "http/path.h"
#include "site/fcache.h"
#include "site/site.h"
#include "site/vhost.h"

#include <time.h>

#define STATIC_KEY_MAX (VHOST_NAME_MAX + EX_PATH_CAP + 8)

/* What one request is about, gathered once and passed along. */
typedef struct target {
    path_t p;
    char vhost[VHOST_NAME_MAX];
    char key[STATIC_KEY_MAX]; /* vhost name + path: the fcache key */
    size_t keylen;
} target_t;

/* The directory t's virtual host is served from (the caller closes it);
   *which (if not NULL) says which kind (vhost.h VHOST_*). */
int static_open_vhost(const site_t *s, const target_t *t, int *which);

/*
 * .htaccess (auth.c): 0 to go on, 1 when a 401/429/500 was answered, 2 when
 * the password check was handed to a worker thread (ex->job; the request is
 * dispatched again with ex->auth_verdict set), or -1.  path is the one
 * credentials are checked against; *granted (if not NULL) remembers the
 * last Authorization value that passed for a cached file.
 */
int auth_check(exchange_t *ex, const target_t *t, const char *path, char **granted);

/* A body: the whole of it, from a file or a buffer. */
typedef struct body {
    int fd; /* -1: buf */
    const char *buf;
    uint64_t size;
} body_t;

/*
 * 200, 206 or 416 for body b of type `type`, honouring Range and If-Range
 * (ranges.c), with the fields already added to ex.  0, or -1 on ENOMEM.
 */
int ranges_serve(exchange_t *ex, const body_t *b, const char *type, time_t mtime,
                 const char *etag);

/*
 * Redirect (redirect.c) to prefix + the encoded path p (+ suffix) + its
 * query, with status; 414 when the Location would not fit.  0, or -1.
 */
int redirect_path(exchange_t *ex, int status, const char *prefix, const path_t *p,
                  const char *suffix);

/* rel below dirfd is a symlink whose target is a URL: 301 to it (1), not
   one (0), or -1 on ENOMEM. */
int redirect_symlink(exchange_t *ex, int dirfd, const char *rel);

/*
 * The file f is not gzipped yet (gzip.c): hand the compression to a worker
 * thread and let the request wait for it (1: ex->job set), or, if it is
 * being compressed for another request already or too much is in flight,
 * serve identity (0).
 */
int gzip_wait(exchange_t *ex, fcache_entry_t *f);

#endif
