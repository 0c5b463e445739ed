/*
 * gatling — a scalable static web server.
 *
 * main() parses the command line into a struct config, sets up the document
 * root and the listeners, and runs the loop (or the -W supervisor).
 */
#include "acme_setup.h"
#include "advise.h"
#include "check.h"
#include "options.h"
#include "pidfile.h"
#include "cluster_setup.h"
#include "site/config.h"
#include "site/elog.h"
#include "site/proc.h"
#include "site/optdef.h"
#include "site/privfs.h"
#include "site/replay.h"
#include "site/spawn.h"
#include "handlers/proxy.h"
#include "handover.h"
#include "reload.h"
#include "sandbox.h"
#include "gio.h"
#include "gio_os.h"
#include "site/mime.h"
#include "server.h"
#include "tls/tls.h"
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --cgi-user: looked up now, as -u; only root can become it, and CGI as root
   (or as the server itself) would defeat its purpose.  And -W with CGI:
   /proc for the workers' spawners, opened before the chroot (site/spawn.h). */
static int cgi_user(const config_t *cfg, proc_t *p)
{
    if (cfg->workers > 1 && (cfg->ncgi_regex || cfg->cgi_exec)) /* before -W's chroot */
        p->proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!cfg->cgi_user)
        return 0;
    struct passwd *pw = getpwnam(cfg->cgi_user);
    const char *why = !pw                     ? "no such user"
                      : pw->pw_uid == 0       ? "is root"
                      : (int)pw->pw_uid == p->uid ? "is -u's user: CGI could signal the server"
                      : geteuid() != 0        ? "only root can start CGI as another user"
                                              : NULL;
    if (why) {
        fprintf(stderr, "gatling: --cgi-user %s: %s\n", cfg->cgi_user, why);
        return -1;
    }
    p->cgi_uid = (int)pw->pw_uid, p->cgi_gid = (int)pw->pw_gid;
    return 0;
}

/* -u, -l, -q: look up the user while /etc is still visible, then open the
   logs by site/privfs.h's rules (as that user where their directory is not
   root's alone).  -W's supervisor keeps the error log's directory: it stays
   root, and reopens through it, never by name in a chroot. */
static int prepare(const config_t *cfg, proc_t *p)
{
    char why[512];
    /* before any fork: no process of ours (CGI included) reads our memory or
       traces us (keys, other clients' credentials); server_drop_privileges
       sets it again after -u */
    gio_proc_private();
    reload_identity(p->exe_id, sizeof p->exe_id); /* --reload asks for it (reload.h) */
    char at[PATH_MAX + 32];
    int failed = 0;
    if (cfg->user) {
        struct passwd *pw = getpwnam(cfg->user);
        if (!pw) {
            fprintf(stderr, "gatling: %s-u %s: no such user\n", opt_where_of('u', at, sizeof at),
                    cfg->user);
            if (!cfg->check)
                return -1;
            failed = 1, p->uid = PFS_NO_USER; /* --check goes on to the logs */
        } else {
            p->uid = (int)pw->pw_uid, p->gid = (int)pw->pw_gid;
        }
    }
    p->log_fd = cfg->access_log ? STDOUT_FILENO : -1;
    if (cfg->access_log && cfg->log_file &&
        (p->log_fd = pfs_open_log(cfg->log_file, -1, p->uid, p->gid, NULL, why,
                                  sizeof why)) < 0) {
        fprintf(stderr, "gatling: %s-l %s: the access log cannot be opened: %s\n",
                opt_where_of('l', at, sizeof at), cfg->log_file, why);
        if (!cfg->check)
            return -1;
        failed = 1;
    }
    if ((p->error_fd = elog_open(cfg->error_log, p->uid, p->gid,
                                 cfg->workers > 1 ? &p->error_dir : NULL, why, sizeof why)) < 0) {
        fprintf(stderr, "gatling: %s-q %s: the error log cannot be opened: %s\n",
                opt_where_of('q', at, sizeof at), cfg->error_log, why);
        return -1;
    }
    if (pidfile_open(cfg, p, why, sizeof why) < 0) {
        fprintf(stderr, "gatling: --pid-file %s: cannot be opened: %s\n", cfg->pid_file, why);
        return -1;
    }
    if (p->uid == PFS_NO_USER)
        p->uid = -1;
    return failed ? -1 : cgi_user(cfg, p);
}

/* Who reads the certificates at start: -u's user where it owns them (--acme's
   STATE/live) or others than root may write the directory (links and FIFOs
   it planted are then followed as that user, not as root); -1: root; -2:
   refused, said (a link on the way that site/privfs.h's walk does not follow,
   or such a directory and no -u: root would follow what they planted). */
static int cert_reader(const proc_t *p)
{
    int fd;
    pfs_dir_t d = {0};
    char why[PATH_MAX + 160];
    if (!p->tls_dir || geteuid() != 0)
        return -1;
    if (p->tls_dir_acme && p->uid >= 0)
        return p->uid;
    if ((fd = pfs_walk_dir(p->tls_dir, 0, p->uid, p->gid, &d, why, sizeof why)) >= 0)
        close(fd);
    else if (errno == ELOOP) {
        fprintf(stderr, "gatling: -C %s: %s\n", p->tls_dir, *why ? why : strerror(errno));
        return -2;
    }
    if (fd >= 0 && !d.trusted && p->uid < 0) { /* as the logs' rule: root would read a key
                                                  of its own through a link planted there */
        fprintf(stderr, "gatling: -C %s: the directory (or one above it) can be written by "
                "others than root: give -u USER to have it read as that user, or keep it where "
                "only root can write\n", p->tls_dir);
        return -2;
    }
    return fd >= 0 && !d.trusted ? p->uid : -1;
}

/* HTTPS: the certificates, read while the files are still visible and
   readable (before a chroot and -u). */
static int load_certificates(const config_t *cfg, proc_t *p)
{
    if (cfg->tls_off)
        return 0;
    char real[PATH_MAX];
    const char *docroot = realpath(cfg->root ? cfg->root : ".", real);
    int missing;
    pfs_ids_t ids;
    int reader = cert_reader(p);
    if (reader == -2)
        return -1;
    if (pfs_become(&ids, reader, p->gid) < 0) {
        fprintf(stderr, "gatling: -C %s: cannot become -u's user: %s\n", p->tls_dir,
                strerror(errno));
        return -1;
    }
    p->tls = tls_store_load(p->tls_dir, cfg, p, docroot, &missing);
    pfs_unbecome(&ids);
    int n = tls_store_count(p->tls);
    if (p->tls && !n) /* the port is bound now all the same: before a chroot and -u */
        fprintf(stderr,
                "gatling: HTTPS: no certificate in %s yet: handshakes are refused%s until one "
                "appears (looked for every %d s and on SIGUSR1)\n",
                p->tls_dir, p->acme_chal ? ", but for ACME's TLS-ALPN-01 challenges," : "",
                tls_store_check_period(p->tls));
    else if (p->tls)
        fprintf(stderr, "gatling: HTTPS with %d certificate%s from %s\n", n, n == 1 ? "" : "s",
                p->tls_dir ? p->tls_dir : "server.pem");
    if (p->tls)
        return 0;
    if (!missing)
        return -1;
    if (cfg->tls_port_given) {
        fprintf(stderr, "gatling: -e %d: no certificate: give -C dir, or put server.pem here\n",
                p->tls_port);
        return -1;
    }
    return 0; /* no certificates, no HTTPS */
}

/* A socket passed on the HTTPS port without certificates would serve plain
   HTTP where clients expect TLS: refuse. */
static int check_passed_https(const proc_t *p, const int *fds, int n)
{
    for (int i = 0; i < n && !p->tls; i++) {
        listener_t l = {.fd = fds[i]};
        if (server_port(&l) == p->tls_port) {
            fprintf(stderr,
                    "gatling: a passed socket is on the HTTPS port %d, but there is no "
                    "certificate (-C dir) or HTTPS is off (-E)\n",
                    p->tls_port);
            return -1;
        }
    }
    return 0;
}

/* -c's directory, as root walked by site/privfs.h's rule (a link of another
   user's on the way is not followed: root chroots there): a descriptor, or
   -1 after saying why. */
static int open_root(const config_t *cfg, const proc_t *p)
{
    const char *root = cfg->root ? cfg->root : ".";
    char why[PATH_MAX + 160] = "";
    int fd = geteuid() == 0 ? pfs_walk_dir(root, 0, p->uid, p->gid, NULL, why, sizeof why)
                            : open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fchdir(fd) < 0) {
        fprintf(stderr, "gatling: -c %s: %s\n", root, *why ? why : strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* -c: change into the document root; as root, also chroot there (unless
   --no-chroot). */
static int enter_root(const config_t *cfg, const proc_t *p)
{
    int fd;
    if (!cfg->root)
        return 0;
    if ((fd = open_root(cfg, p)) < 0)
        return -1;
    close(fd);
    if (geteuid() == 0 && !cfg->no_chroot) {
        if (chroot(".") < 0 || chdir("/") < 0) {
            fprintf(stderr, "gatling: chroot(\"%s\") failed: %s\n", cfg->root, strerror(errno));
            return -1;
        }
        handover_chrooted();
    }
    return 0;
}

/* The CGI spawner confines itself as main() does below: -c, then -u. */
static int confine(const config_t *cfg, const proc_t *p)
{
    return enter_root(cfg, p) < 0 || server_drop_privileges(cfg, p) < 0 ? -1 : 0;
}

/* -w, -z: the CGI spawner, started before the chroot and -u (site/spawn.h). */
static int start_spawner(const config_t *cfg, proc_t *p)
{
    pid_t pid;
    if (!cfg->ncgi_regex && !cfg->cgi_exec)
        return 0;
    if (spawn_start(cfg, p, confine, &p->spawn_fd, &pid) < 0)
        return -1;
    p->spawn_pid = (int)pid;
    return 0;
}

/* -m's file could not be loaded (mime_load's errno e): say why. */
static void mime_failed(const config_t *cfg, int e)
{
    fprintf(stderr, "gatling: -m: cannot read MIME types from %s: %s\n",
            cfg->mime_file ? cfg->mime_file : "/etc/mime.types",
            e == EINVAL ? "not a regular file" : strerror(e));
}

/* --check, -c: the document root is a directory gatling can enter. */
static int check_root(const config_t *cfg, const proc_t *p)
{
    int fd = open_root(cfg, p);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

/* --pool's file: lists, read again when they change: their directories,
   opened before a chroot; --proxy-ca's CAs, read as root.  0, or -1 after
   saying why (quiet: not, the options' check said it). */
static int open_pools(const config_t *cfg, proc_t *p, int quiet)
{
    return cfg->npools || cfg->proxy_ca ? proxy_open(cfg, p, quiet) : 0;
}

/*
 * --check: the start-up's own steps as far as the listeners (the MIME
 * types, the logs and -u, --acme's state, the certificates, the document
 * root), each problem said on stderr, what they make into p; nothing is
 * bound, nothing served.  failed: the options had problems already.
 * Returns 0 or 2.
 */
static int check_run(const config_t *cfg, proc_t *p, int failed)
{
    mime_table_t *mime = mime_load(cfg->mime_file);
    if (!mime)
        mime_failed(cfg, errno);
    failed |= !mime;
    mime_free(mime);
    open_pools(cfg, p, 1); /* for advise; what fails there the options' check said */
    if (prepare(cfg, p) < 0)
        failed = 1;
    else {
        if (p->log_fd > STDERR_FILENO)
            close(p->log_fd);
        if (p->error_fd > STDERR_FILENO)
            close(p->error_fd);
    }
    pidfile_end(cfg, p); /* opened, not written: left as it was */
    if (acme_prepare(cfg, p) < 0 || load_certificates(cfg, p) < 0)
        failed = 1;
    advise(cfg, p); /* the start's own warnings (advise.h) */
    sandbox_check(cfg);
    acme_end(p); /* its challenges' directory: no client was started */
    tls_store_free(p->tls);
    p->tls = NULL;
    if (check_root(cfg, p) < 0 || check_dictionaries(cfg) < 0)
        failed = 1;
    fprintf(stderr, failed ? "gatling: --check: the configuration has the problems above\n"
                           : "gatling: --check: the configuration is good\n");
    return failed ? 2 : 0;
}

/* "listening on ..." for each listener (the tests wait for these lines). */
static void say_listening(const config_t *cfg, const listener_t *lst, int n, int passed)
{
    for (int i = 0; i < n; i++)
        fprintf(stderr, "gatling %s (%s): listening on %s port %d%s%s\n", GATLING_VERSION,
                gio_backend_name(),
                passed      ? "a passed socket,"
                : cfg->addr ? cfg->addr
                            : "::",
                server_port(&lst[i]), lst[i].tls ? " (https)" : lst[i].ftp ? " (ftp)" : "",
                passed ? " (-i and -p ignored)" : "");
}

/* The options, and --check's run (into p): -1 to start, or an exit code. */
static int configure(int argc, char **argv, config_t *cfg, proc_t *p, conf_args_t *ca)
{
    int rc = options_parse(argc, argv, cfg, ca);
    proc_asked(p, cfg); /* the ports and -C: the start fills in what was not given */
    if (cfg->check && (rc < 0 || rc == 2))
        rc = check_run(cfg, p, rc == 2);
    if (rc >= 0)
        conf_free(ca);
    return rc;
}

/* --acme: its state directory before the certificates (without -C they are
   its live/), then the cluster's side process and the ACME client (which
   reads the side process's page), before a chroot, -u and -W: the processes
   that talk to the network never hold the served keys and the ticket
   secret, which are loaded after the forks.  0, or -1 with all of it ended. */
static int start_sides(const config_t *cfg, proc_t *p, const int *fds, int n)
{
    if (acme_prepare(cfg, p) < 0 || cluster_launch(cfg, p) < 0 || acme_launch(cfg, p) < 0 ||
        load_certificates(cfg, p) < 0 || check_passed_https(p, fds, n) < 0) {
        acme_end(p);
        cluster_end(p);
        tls_store_free(p->tls);
        return -1;
    }
    return 0;
}

#ifdef GATLING_GCOV
/* make coverage (COV=1) links the server with -Wl,--wrap=_exit: a process that ends by
   _exit (the ACME client, a -W worker, a child whose exec failed) writes its gcov counters
   first, as exit() does, or the code that only they run would count as never run. */
void __gcov_dump(void);
void __real__exit(int status) __attribute__((noreturn));
void __wrap__exit(int status) __attribute__((noreturn));
void __wrap__exit(int status)
{
    __gcov_dump();
    __real__exit(status);
}
#endif

/* What main() has made, for its one cleanup (finish): each part released
   only once it is there. */
typedef struct run {
    config_t cfg;        /* what the options say */
    proc_t proc;         /* what the start made of them (site/proc.h) */
    conf_args_t ca;      /* the options file's words, which cfg points into */
    mime_table_t *mime;
    quic_group_t qg;     /* HTTP/3's sockets, if an old binary passed them */
    int qg_close;        /* ... closed at the end (the single process's) */
    quic_ep_t *quic;     /* made and not yet the server's */
    int sides;           /* start_sides done: the ACME client, the certificates */
    int reap_cluster;    /* ... and the cluster's side process is ended and reaped (else it
                            ends with us, PR_SET_PDEATHSIG: after -u it is not ours to kill) */
    server_t s;
    int served;          /* s is set up */
} run_t;

/* The one cleanup: whatever r holds, in the order the parts depend on. */
static int finish(run_t *r, int rc)
{
    quic_free(r->quic);
    if (r->reap_cluster)
        cluster_end(&r->proc);
    if (r->sides)
        acme_end(&r->proc);
    if (r->served)
        server_free(&r->s);
    if (r->qg_close)
        quic_group_close(&r->qg);
    if (r->sides)
        tls_store_free(r->proc.tls);
    mime_free(r->mime);
    pidfile_end(&r->cfg, &r->proc);
    replay_free(r->proc.replay);
    conf_free(&r->ca);
    return rc;
}

/* One process: the listeners (or the passed ones), HTTP/3's, the CGI spawner,
   the chroot and -u, the loop.  The loop's exit code, or 1. */
static int serve(run_t *r, int *fds, int n)
{
    const config_t *cfg = &r->cfg;
    proc_t *p = &r->proc;
    listener_t lst[SERVER_MAX_LISTENERS];
    int passed = n > 0;
    if (passed)
        server_adopt(cfg, p, fds, n, lst);
    r->qg_close = 1;
    if ((!passed && server_listen(cfg, p, lst, &n, 0, SERVER_BACKLOG) < 0) ||
        (r->quic = server_quic_open(cfg, p, lst, n, &r->qg, 0), start_spawner(cfg, p) < 0) ||
        enter_root(cfg, p) < 0 || server_drop_privileges(cfg, p) < 0 ||
        server_init(&r->s, cfg, p, r->mime, lst, n) < 0 || server_quic_start(&r->s, r->quic) < 0)
        return 1;
    r->quic = NULL; /* the server's now */
    r->served = r->reap_cluster = 1;
    r->s.upgradable = 1;
    r->s.qgroup = &r->qg;
    say_listening(cfg, lst, n, passed);
    /* after the lines the tests wait for; before the loop takes its first request */
    if (sandbox_enter(cfg, SANDBOX_SERVER, 1, handover_is_upgrade()) < 0)
        return 1;
    if (r->s.quic)
        server_quic_steer(&r->qg);
    /* serving: an upgrade's new process replaces the old one's pid, before
       it tells the old one (which then drains, and leaves a pid not its own) */
    pidfile_write(p);
    handover_ready();
    return server_run(&r->s);
}

/* From the options to the loop: the listeners an old process passed, the
   MIME types, the logs and -u, the side processes and the certificates, then
   -W's supervisor or one process.  Its exit code. */
static int start(run_t *r, char **argv)
{
    const config_t *cfg = &r->cfg;
    proc_t *p = &r->proc;
    handover_init(argv); /* before anything changes the directory */
    int fds[SERVER_MAX_LISTENERS], groups;
    int n = handover_listeners(fds, SERVER_MAX_LISTENERS, &groups);
    server_passed_ports(p, fds, n); /* -e 0, -f 0: the ports an old process got */
    if (n < 0 || (r->qg.nfds = handover_datagrams(r->qg.fds, QUIC_STEER_MAX, &r->qg.bank)) < 0)
        return 1;
    r->qg.passed = r->qg.nfds > 0;
    r->mime = mime_load(cfg->mime_file); /* before a chroot hides /etc */
    int mime_errno = errno;
    if (open_pools(cfg, p, 0) < 0 || prepare(cfg, p) < 0)
        return 1;
    if (!r->mime) {
        mime_failed(cfg, mime_errno);
        return 1;
    }
    server_catch_usr1_early(); /* the sides' SIGUSR1 must not end this process */
    if (start_sides(cfg, p, fds, n) < 0) /* which ends what it started */
        return 1;
    r->sides = 1;
    advise(cfg, p); /* the start's own warnings (advise.h) */
    /* --early-data: the ClientHellos that carried it, made before -W's fork */
    if (cfg->early_data && !(p->replay = replay_new((unsigned)cfg->early_data, replay_clock_ms()))) {
        fprintf(stderr, "gatling: mmap() of the early data's replay table (--early-data %d) "
                "failed: %s\n", cfg->early_data, strerror(errno));
        return 1;
    }
    if (cfg->workers == 1)
        return serve(r, fds, n);
    handover_capture_end(); /* the workers keep stderr */
    r->reap_cluster = 1;
    pidfile_write(p); /* the supervisor's: what --reload and SIGUSR1 are sent to */
    return enter_root(cfg, p) < 0 ? 1
                                  : worker_supervise(cfg, p, r->mime, fds, n, groups, &r->qg);
}

int main(int argc, char **argv)
{
    static run_t r; /* static: the server's structures are large */
    if (argc >= 2 && !strcmp(argv[1], "--reload")) { /* a command of its own: reload.h */
        if (argc <= 3)
            return reload_run(argv[2]);
        fputs("gatling: --reload pid: a command of its own, nothing after the pid\n", stderr);
        return usage_error();
    }
    handover_capture(); /* an upgrade's new process: what it says goes to the old one too */
    proc_init(&r.proc); /* nothing made yet */
    int rc = configure(argc, argv, &r.cfg, &r.proc, &r.ca);
    if (rc < 0)
        rc = start(&r, argv);
    return finish(&r, rc);
}
