/*
 * site — what every handler needs to answer a request, in one object: the
 * configuration, the document root, the caches, the MIME table, the logs and
 * the counters.  It knows nothing of listeners, connections or handlers
 * (server.h, conn/, handlers/): they sit above it and reach it through a
 * pointer (a connection's c->site, an exchange's ex->site), so the folders
 * layer top-down without a circle, each including only from those below it:
 * gatling/LAYERS is the one list of that order (site/ sits below handlers/
 * and tls/, above http/ and io/), each folder's README says what it may
 * include, and make layers (tests/layers.py) checks both.
 *
 * http/ knows a site only by its forward-declared name (exchange_t's site).
 */
#ifndef GATLING_SITE_H
#define GATLING_SITE_H

#include "alog.h"
#include "config.h"
#include "elog.h"
#include "fcache.h"
#include "fs.h"
#include "gio.h"
#include "mime.h"
#include "proc.h"
#include "stats.h"

#include <stdint.h>

struct enc_cache;
struct exchange;
struct dict;
struct jobs;
struct limits;

#define SITE_MDATES 16 /* a power of two */
#define SITE_HSTATES 8 /* the handlers' per-loop states, at most (hstate.h) */

typedef struct site {
    const config_t *cfg;
    const proc_t *proc;        /* borrowed: the descriptors, pids and stores made at start */
    gio_loop_t *loop;          /* borrowed: for the clocks */
    mime_table_t *mime;        /* borrowed */
    fcache_t *fcache;          /* open files, see fcache.h */
    struct enc_cache *gzcache; /* on-the-fly gzip; NULL with -Z */
    struct dict *dict;         /* compression dictionaries and their deltas (dict.h); NULL with -Z */
    struct jobs *jobs;         /* worker threads for what must leave the loop */
    struct limits *limits;     /* per client address: -K, -A, failed logins */
    int rootfd;                /* the document root, opened once */
    char *root_real;           /* its canonical path, for symlink checks */
    alog_t log;
    elog_t elog; /* the error log: what failed that no client sees */
    status_counters_t stats;
    int64_t stats_published; /* -W: gio_now() when they were last published (stats.h) */
    gio_timer_t stats_timer; /* ... armed when the loop did something since: the next */
    size_t nconns; /* open connections (conn.c keeps it) */
    size_t ntls;   /* ... of which HTTPS */
    int draining;  /* a drain has begun (its -g grace too): the health check fails */
    char cert_reload_err[160]; /* the last certificate reload's error, "" after a good one
                                  (server.c sets it, /server-status shows it) */
    int https_ready; /* HTTPS answers: its port bound, a certificate loaded (server.c keeps
                        it); -X redirects to it only then */
    /* the handlers' per-loop state, by index (handlers/hstate.h's HSTATE_*,
       as h2o's h2o_context_get_handler_context): site/ never looks inside */
    void *hstate[SITE_HSTATES];
    /* Is a path a program of a handler's (route/router.h's router_program,
       set by router_init; NULL before): the files handler never sends one.
       A pointer because the files handler is below route/ (the stages and
       pages, above it, call the router itself) */
    int (*program)(const struct site *site, const char *path, size_t n);
    char alt_svc[32]; /* HTTP/3 is served: the Alt-Svc value HTTPS responses carry, or "" */
    int64_t date_at; /* wall-clock second of `date` */
    char date[32];   /* the current HTTP-date, for Date: */
    /* Last-Modified dates formatted lately, by mtime: gmtime and formatting
       cost more than the rest of a small response's head */
    struct {
        int64_t key; /* mtime + 1; 0 = empty */
        char s[32];
    } mdate[SITE_MDATES];
} site_t;

/*
 * Set up the site serving the current directory for loop (borrowed, as are
 * cfg, proc and mime).  Returns 0, or -1 after printing why to stderr.
 */
int site_init(site_t *s, const config_t *cfg, const proc_t *proc, gio_loop_t *loop,
              mime_table_t *mime);

void site_free(site_t *s);

/* The HTTP-date of the current second (cached). */
const char *site_date(site_t *s);

/* The HTTP-date of t, for Last-Modified (cached by t, on the loop's thread only). */
const char *site_httpdate(site_t *s, time_t t);

/* Log a failed call (errno err) on the error log, with the peer if any. */
void site_error(site_t *s, const char *call, int err, const struct sockaddr *peer,
                const char *detail);

/* Log a defence acting on a client (elog_event): what, the peer, detail. */
void site_event(site_t *s, const char *what, const struct sockaddr *peer, const char *detail);

/* Where fs_public() walks from to a file of the directory dir below the
   root (vhost_dir()'s answer): dir is borrowed. */
static inline fs_at_t site_at(const site_t *s, const char *dir)
{
    return (fs_at_t){.rootfd = s->rootfd, .root_real = s->root_real, .dir = dir};
}

/* The symlink check root for fs_open_beneath (NULL with -L). */
static inline const char *site_root_check(const site_t *s)
{
    return s->cfg->symlinks_out ? NULL : s->root_real;
}

#endif
