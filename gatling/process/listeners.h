/*
 * listeners — the listening sockets of a server (server.h): opened, adopted
 * on a binary upgrade, passed by the service manager; and -u.  server.h
 * includes it.
 */
#ifndef GATLING_LISTENERS_H
#define GATLING_LISTENERS_H

#include "site/config.h"
#include "site/proc.h"
#include "site/watch.h"

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

/*
 * Open the listening sockets the configuration asks for: -i's address, or
 * [::] (dual-stack) falling back to 0.0.0.0; with certificates (p->tls)
 * also the HTTPS port (-e; -e 0 fills in p's port with the kernel's choice, a busy
 * default port sets p->tls_skipped).  reuseport sets SO_REUSEPORT so
 * that worker processes can each open their own.  On success fills lst/n and
 * returns 0; on failure prints why to stderr and returns -1.
 */
int server_listen(const config_t *cfg, proc_t *p, listener_t *lst, int *n, int reuseport,
                  int backlog);

/* The backlog asked for: the kernel clamps it to net.core.somaxconn (4096 on
   Debian 12), so the admin's sysctl decides, not a number compiled in here;
   a backlog of 4096 dropped the handshakes of a 30,000-client flood that
   65535 (with somaxconn raised) held (bench/doc/netlab.md). */
#define SERVER_BACKLOG 65535

/*
 * Listeners handed over (handover.h) instead of opened: fills lst from fds,
 * with the send-queue limit that server_listen sets.
 */
void server_adopt(const config_t *cfg, const proc_t *p, const int *fds, int n, listener_t *lst);

/*
 * What passed listener fd on port serves (HANDOVER_HTTP, _HTTPS or _FTP):
 * its name in LISTEN_FDNAMES if it has one, else its port (the HTTPS one
 * if HTTPS is on, -f's).  A socket named https while HTTPS is off, or ftp
 * without -f, is plain HTTP, as such a port is without names.
 */
int server_passed_kind(const config_t *cfg, const proc_t *p, int fd, int port);

/* -e 0, -f 0 in a binary upgrade: the ports the old process's kernel chose,
   from the passed listeners' names, into p's (nothing else changes). */
void server_passed_ports(proc_t *p, const int *fds, int n);

/*
 * -u: become p->uid/gid (supplementary groups dropped).  0, or -1 after
 * printing why.  A no-op without -u, or when we are that user already (a
 * binary upgrade started by a process that dropped its privileges).
 */
int server_drop_privileges(const config_t *cfg, const proc_t *p);

/* The port the first listener is bound to (useful with -p 0). */
int server_port(const listener_t *lst);

/* Does the listener hand over connections with data only (-a, or systemd's
   DeferAcceptSec=)? */
int server_deferred(int fd);

/* Whether HTTP/3 is to be served: built in, no -3, HTTPS up. */
int server_h3_wanted(const config_t *cfg, const proc_t *p);

#endif
