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
#include "handlers/hstate.h"
#include "site/watch.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SERVER_MAX_LISTENERS 16

/* Every loop cookie is a watch (site/watch.h): the loop calls its on(). */
struct server;

typedef struct listener {
    watch_t w;           /* the loop's cookie (server_init sets it): first */
    struct server *srv;  /* ... and whose loop it is */
    int fd;
    int port; /* the local port, for virtual hosts */
    int tls;  /* HTTPS */
    int deferred; /* TCP_DEFER_ACCEPT: accepted connections have data waiting */
    int proxy;    /* -y: behind a proxy, connections start with a PROXY header */
    int ftp;      /* -f: FTP control connections (ftp/ftp.h) */
} listener_t;

typedef struct server {
    gio_loop_t *loop;
    union { /* what the handlers need: site/'s part first (handlers/hstate.h) */
        hsite_t hsite;
        site_t site;
    };
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
 * Open the listening sockets the configuration asks for: -i's address, or
 * [::] (dual-stack) falling back to 0.0.0.0; with certificates (cfg->tls)
 * also the HTTPS port (-e; -e 0 fills in the port the kernel chose, a busy
 * default port sets cfg->tls_skipped).  reuseport sets SO_REUSEPORT so
 * that worker processes can each open their own.  On success fills lst/n and
 * returns 0; on failure prints why to stderr and returns -1.
 */
int server_listen(config_t *cfg, listener_t *lst, int *n, int reuseport, int backlog);

/* The backlog asked for: the kernel clamps it to net.core.somaxconn (4096 on
   Debian 12), so the admin's sysctl decides, not a number compiled in here;
   a backlog of 4096 dropped the handshakes of a 30,000-client flood that
   65535 (with somaxconn raised) held (bench/doc/netlab.md). */
#define SERVER_BACKLOG 65535

/*
 * Listeners handed over (handover.h) instead of opened: fills lst from fds,
 * with the send-queue limit that server_listen sets.
 */
void server_adopt(const config_t *cfg, const int *fds, int n, listener_t *lst);

/*
 * What passed listener fd on port serves (HANDOVER_HTTP, _HTTPS or _FTP):
 * its name in LISTEN_FDNAMES if it has one, else its port (the HTTPS one
 * if HTTPS is on, -f's).  A socket named https while HTTPS is off, or ftp
 * without -f, is plain HTTP, as such a port is without names.
 */
int server_passed_kind(const config_t *cfg, int fd, int port);

/* -e 0, -f 0 in a binary upgrade: the ports the old process's kernel chose,
   from the passed listeners' names, into cfg (nothing else changes). */
void server_passed_ports(config_t *cfg, const int *fds, int n);

/*
 * -u: become cfg->uid/gid (supplementary groups dropped).  0, or -1 after
 * printing why.  A no-op without -u, or when we are that user already (a
 * binary upgrade started by a process that dropped its privileges).
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

/* Before the ACME client and the cluster's side process are forked: a
   SIGUSR1 they send (a certificate installed) is kept, not fatal, until the
   loop's handlers (server_init) or the supervisor's take it over;
   server_usr1_early says (once) whether one came. */
void server_catch_usr1_early(void);
int server_usr1_early(void);

/* Run until shut down (signal, then open connections finished).  Exit code. */
int server_run(server_t *s);

/* Whether HTTP/3 is to be served: built in, no -3, HTTPS up. */
int server_h3_wanted(const config_t *cfg);

/*
 * HTTP/3's socket group (quic/quic_steer.h) on the address of the HTTPS
 * listener among lst[0..n), per sockets a bank (one per -W worker): opened,
 * or checked if handed over.  0, or -1 after a note on stderr (HTTPS goes on
 * without HTTP/3; g is closed).
 */
int server_quic_group(const config_t *cfg, const listener_t *lst, int n, quic_group_t *g,
                      int per);

/*
 * HTTP/3 beside HTTPS (unless -3, or not built in): worker i's socket of
 * the group g (without -W the group is made here first, from lst) and the
 * credentials, before privileges are dropped (NULL: none; a failure is a
 * note on stderr, HTTPS goes on without it), then served by s's loop
 * (server_quic_start, after server_init: Alt-Svc from then on).
 */
quic_ep_t *server_quic_open(const config_t *cfg, const listener_t *lst, int n, quic_group_t *g,
                            int i);
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
