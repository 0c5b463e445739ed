/*
 * server — one event loop serving HTTP: listeners, the connection set,
 * shutdown.  A process runs one server; with -W n the supervisor (worker.c)
 * runs n of them in child processes that share the port.
 */
#ifndef GATLING_SERVER_H
#define GATLING_SERVER_H

#include "site/config.h"
#include "conn/conn.h"
#include "ftp/ftp.h"
#include "quic/quic.h"
#include "quic/quic_steer.h"
#include "gio.h"
#include "site/mime.h"
#include "site/site.h"
#include "site/watch.h"
#include "listeners.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SERVER_MAX_LISTENERS 16

typedef struct server {
    gio_loop_t *loop;
    site_t site; /* the handlers' states by index in it (handlers/hstate.h) */
    conn_set_t conns; /* the open connections */
    listener_t lst[SERVER_MAX_LISTENERS];
    int nlst;
    size_t max_conns; /* -N, or what the descriptor limit allows */
    int sigfd[2];     /* self-pipe: signal handlers write, the loop reads */
    watch_t sigw;     /* the cookie of sigfd[0] */
    watch_t jobsw;    /* the cookie of the job pool's descriptor */
    int upgradable;   /* SIGUSR2 starts a new binary (not in a -W worker) */
    watch_t upw;      /* the cookie of upfd */
    int upfd;         /* an upgrade under way: readable when the new one serves */
    pid_t uppid;      /* ... and the new process */
    pid_t asker;      /* ... and who asked for it (--reload: reload.h), or 0 */
    unsigned long asker_nonce; /* ... and the name it waits on */
    int64_t grace_end; /* -g: a drain's grace runs until then (loop ms); 0: none */
    gio_timer_t grace; /* ... and the loop's timer at its end */
    gio_timer_t certs; /* HTTPS: the next look at the certificate files */
    ftp_set_t ftp;     /* -f: the FTP sessions */
    quic_ep_t *quic;   /* HTTP/3 on UDP at the HTTPS port's number (quic/quic.h), or NULL */
    const quic_group_t *qgroup; /* ... its socket group, handed over on SIGUSR2 (or NULL) */
    watch_t parentw; /* -W's worker: the cookie of parent_fd */
    int parent_fd;   /* ... the supervisor's life pipe (server_watch_parent); -1 */
} server_t;

/*
 * Set up the loop around listeners that are already open, serving the
 * current directory with MIME table mime (borrowed, as are cfg and p: what
 * the process made at start).  Returns 0, or -1 after
 * printing why.  Installs the SIGTERM/SIGINT/SIGHUP handlers.
 */
int server_init(server_t *s, const config_t *cfg, const proc_t *p, mime_table_t *mime,
                const listener_t *lst, int nlst);

/* Before the ACME client and the cluster's side process are forked: a
   SIGUSR1 they send (a certificate installed) is kept, not fatal, until the
   loop's handlers (server_init) or the supervisor's take it over;
   server_usr1_early says (once) whether one came. */
void server_catch_usr1_early(void);
int server_usr1_early(void);

/* Run until shut down (signal, then open connections finished).  Exit code. */
int server_run(server_t *s);

/*
 * HTTP/3's socket group (quic/quic_steer.h) on the address of the HTTPS
 * listener among lst[0..n), per sockets a bank (one per -W worker): opened,
 * or checked if handed over.  0, or -1 after a note on stderr (HTTPS goes on
 * without HTTP/3; g is closed).
 */
int server_quic_group(const config_t *cfg, const proc_t *p, const listener_t *lst, int n,
                      quic_group_t *g, int per);

/*
 * HTTP/3 beside HTTPS (unless -3, or not built in): worker i's socket of
 * the group g (without -W the group is made here first, from lst) and the
 * credentials, before privileges are dropped (NULL: none; a failure is a
 * note on stderr, HTTPS goes on without it), then served by s's loop
 * (server_quic_start, after server_init: Alt-Svc from then on).
 */
quic_ep_t *server_quic_open(const config_t *cfg, const proc_t *p, const listener_t *lst, int n,
                            quic_group_t *g, int i);
int server_quic_start(server_t *s, quic_ep_t *q);

/* We serve now: if g was handed over, new QUIC connections come to our bank
   from now on (a failure is a note on stderr). */
void server_quic_steer(const quic_group_t *g);

void server_free(server_t *s);

/* -W's worker: fd is the read end of a pipe whose write end the supervisor
   alone holds, so that its end (EOF: the supervisor exited or died, however
   it died) starts the drain as SIGTERM does -- the portable twin of
   PR_SET_PDEATHSIG, and no second SIGTERM.  The server owns fd from here
   (closed on failure too).  0, or -1. */
int server_watch_parent(server_t *s, int fd);

#endif
