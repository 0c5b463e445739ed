/*
 * proc — what this process has made of its configuration at start: the
 * descriptors, ids, pids, shared mappings and the TLS store.  config_t
 * (config.h) holds only what the options set, a value that can be built,
 * checked (--check), printed and thrown away (a reload parses its own);
 * main() owns one proc_t beside it (as nginx's ngx_cycle_t beside each
 * module's conf), fills it after parsing (the logs and -u before any
 * chroot, then the side processes and the certificates), and each loop
 * reaches it through its site_t (site.h: s->proc).  -W's workers each get
 * a copy with their own slot, spawner and CGI socket (worker.c).
 */
#ifndef GATLING_PROC_H
#define GATLING_PROC_H

#include "config.h"

#include <limits.h>

typedef struct proc {
    int log_fd;   /* the access log (-1: none), opened before any chroot */
    int error_fd; /* the error log (stderr, or -q's file), opened before any chroot */
    int error_dir; /* -W: -q's directory, for the root supervisor's reopen; -1 */
    int pid_fd, pid_dir; /* --pid-file and its directory (gatling/process/pidfile.h); -1: none */
    int uid, gid; /* -u's ids, looked up before any chroot; -1 = stay */
    /* the ports listened on: -p's, -e's and -f's (proc_ports), then for a 0
       the port the kernel chose (or an old process's, passed on an upgrade);
       the configuration keeps what was asked */
    int port, tls_port, ftp_port;
    /* the certificates' directory: -C's, or --acme's STATEDIR/live without -C
       (acme_setup.c: tls_dir_acme then, the path in acme_live); NULL: none */
    const char *tls_dir;
    int tls_dir_acme;
    char acme_live[PATH_MAX];
    /* --acme: the names the client is started with: --acme-names's (the
       configuration's), or the host directories' (acme_launch's copies,
       freed by acme_end); none with on demand alone */
    const char *const *acme_names;
    int acme_nnames;
    int cgi_uid, cgi_gid; /* --cgi-user's, the same way; -1: CGI runs as -u */
    int proc_fd; /* -W with CGI: /proc, opened before the chroot for the workers'
                    spawners (site/spawn.h), closed by each worker once it has its own */
    int pool_dirfd[CONFIG_POOLS]; /* file: pools: the list's directory, opened before a chroot */
    struct ssl_ctx_st *proxy_tls; /* --proxy-ca read into h2/'s client context before a chroot
                                     (handlers/proxy_tls.c); NULL: none */
    struct tls_store *tls; /* the certificates (tls.h), loaded before any chroot; NULL: no HTTPS */
    int tls_skipped;       /* the default HTTPS port was busy: HTTP only */
    int spawn_fd;          /* the CGI spawner's socket (site/spawn.h); -1: none */
    int spawn_pid;         /* ... its process, reaped once it is gone; 0: none */
    struct stats_shm *stats_shm; /* -W: where the workers publish their numbers
                                    (site/stats.h); NULL: one process */
    int worker;                  /* ... this worker's slot in it */
    struct acme_chal *acme_chal; /* --acme: the client's challenges (site/acme_chal.h) */
    int acme_pid;                /* ... its process; 0: none */
    int acme_od_fd;  /* --acme-on-demand: the client's end of the asks' socket (acme_launch);
                        -1 none */
    struct cluster_view *cluster; /* --cluster: what the side process shares (site/cluster.h) */
    int cluster_purge_fd;         /* ... the pipe the loops send their purges to; -1: none */
    int cluster_pid;              /* ... the side process; 0: none */
    char exe_id[320]; /* reload_identity(): the executable, read before any chroot;
                         --reload's question is answered with it */
    struct peer_board *peer_board; /* -W: the flood offences the workers share
                                      (site/peerboard.h); NULL: one process */
    struct replay *replay; /* --early-data: the ClientHellos that carried it, shared by
                              the workers (site/replay.h); NULL: early data refused */
} proc_t;

/* Nothing made yet: every descriptor -1, every pointer NULL, every pid 0. */
void proc_init(proc_t *p);

/* What the options asked that the start fills in, into p once they are
   read (the configuration is not written after that): the ports (-p, -e,
   -f: the listeners put the kernel's choice for a 0) and the certificates'
   directory (-C: --acme's live/ when it is not given). */
void proc_asked(proc_t *p, const config_t *cfg);

#endif
