/*
 * server — one event loop serving HTTP: listeners, the connection set,
 * shutdown.  A process runs one server; with -W n the supervisor (worker.c)
 * runs n of them in child processes that share the port.
 */
#ifndef GATLING_SERVER_H
#define GATLING_SERVER_H

#include "alog.h"
#include "config.h"
#include "fcache.h"
#include "gio.h"
#include "mime.h"
#include "status.h"

#include <stddef.h>
#include <stdint.h>

#define SERVER_MAX_LISTENERS 4
#define SERVER_SPARE_BLOCKS 32 /* request blocks kept for reuse (conn.c) */

/* Every loop cookie starts with one of these, so the loop can tell them apart. */
enum { COOKIE_LISTENER = 1, COOKIE_CONN, COOKIE_SIGNAL };

typedef struct listener {
    int kind; /* COOKIE_LISTENER */
    int fd;
    int port; /* the local port, for virtual hosts */
} listener_t;

typedef struct server {
    const config_t *cfg;
    gio_loop_t *loop;
    mime_table_t *mime;
    fcache_t *fcache; /* open files, see fcache.h */
    int rootfd;       /* the document root, opened once */
    char *root_real;  /* its canonical path, for symlink checks */
    listener_t lst[SERVER_MAX_LISTENERS];
    int nlst;
    int sigfd[2]; /* self-pipe: signal handlers write, the loop reads */
    int sigkind;  /* COOKIE_SIGNAL, the cookie of sigfd[0] */
    size_t nconns;
    struct conn *conns;                            /* every open connection, for the shutdown */
    struct conn_block *spare[SERVER_SPARE_BLOCKS]; /* free request blocks */
    int nspare;
    int draining;    /* no listeners left: exit when nconns == 0 */
    int64_t date_at; /* wall-clock second of `date` */
    char date[32];   /* the current HTTP-date, for Date: */
    alog_t log;
    status_counters_t stats;
    struct enc_cache *gzcache; /* on-the-fly gzip; NULL with -Z */
} server_t;

/*
 * Open the listening sockets the configuration asks for: -i's address, or
 * [::] (dual-stack) falling back to 0.0.0.0.  reuseport sets SO_REUSEPORT so
 * that worker processes can each open their own.  On success fills lst/n and
 * returns 0; on failure prints why to stderr and returns -1.
 */
int server_listen(const config_t *cfg, listener_t *lst, int *n, int reuseport, int backlog);

/*
 * -u: become cfg->uid/gid (supplementary groups dropped).  0, or -1 after
 * printing why.  A no-op without -u.
 */
int server_drop_privileges(const config_t *cfg);

/* The port the first listener is bound to (useful with -p 0). */
int server_port(const listener_t *lst);

/*
 * Set up the loop around listeners that are already open, serving the
 * current directory with MIME table mime (borrowed).  Returns 0, or -1 after
 * printing why.  Installs the SIGTERM/SIGINT/SIGHUP handlers.
 */
int server_init(server_t *s, const config_t *cfg, mime_table_t *mime, const listener_t *lst,
                int nlst);

/* Run until shut down (signal, then open connections finished).  Exit code. */
int server_run(server_t *s);

void server_free(server_t *s);

/* The HTTP-date of the current second (cached). */
const char *server_date(server_t *s);

#endif
