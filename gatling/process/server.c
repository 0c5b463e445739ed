/*
 * One server loop: its listeners (opened in listeners.c), accepting,
 * dispatching readiness to connections, signals, and the orderly shutdown.
 */
#define _GNU_SOURCE
#include "server.h"
#include "conn/conn.h"
#include "h1/h1.h"
#include "h2/h2.h"
#include "site/encoding.h"
#include "site/elog.h"
#include "site/privfs.h"
#include "handover.h"
#include "reload.h"
#include "route/router.h"
#include "route/router_table.h"
#include "gio_os.h"
#include "site/jobs.h"
#include "site/peerlimits.h"
#include "site/watch.h"
#include "http/owfat.h"
#include "conn/proxyproto.h"
#include "site/nets.h"
#include "tls/tls.h"
#include "route/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <grp.h>
#include <unistd.h>

#define ACCEPT_BATCH 64               /* connections taken per listener event */
#define ACCEPT_PAUSE_MS 100           /* back-off when out of descriptors */
#define TIMEOUT_BATCH 64              /* deadlines handled per loop round */
#define SERVER_FD_RESERVE 64          /* descriptors kept for files, logs and refusals */
#define SERVER_MAX_AUTH_WAIT 60       /* the longest wait, in seconds */
#define UPGRADE_WAIT_MS 60000         /* a new binary that does not serve by then is killed */

/* The only file-scope mutable state: what signal handlers may touch. */
static int sig_pipe_fd = -1;
static volatile sig_atomic_t sig_term, sig_hup, sig_usr1, sig_usr2;
static volatile sig_atomic_t sig_usr2_from; /* who sent it (kill(2)): --reload waits (reload.h) */
static volatile unsigned long sig_usr2_nonce; /* ... and the name it waits on */
static volatile sig_atomic_t sig_winch, sig_winch_from; /* --reload asks which executable */
static volatile unsigned long sig_winch_nonce;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int e = errno;
    if (sig == SIGHUP)
        sig_hup = 1;
    else if (sig == SIGUSR1)
        sig_usr1 = 1;
    else if (sig == SIGUSR2)
        sig_usr2 = 1, sig_usr2_from = reload_sender(si, &sig_usr2_nonce);
    else if (sig == SIGWINCH)
        sig_winch = 1, sig_winch_from = reload_sender(si, &sig_winch_nonce);
    else
        sig_term++;
    if (sig_pipe_fd >= 0) {
        char b = (char)sig;
        ssize_t r = write(sig_pipe_fd, &b, 1);
        (void)r; /* a full pipe already wakes the loop */
    }
    errno = e;
}

static void on_signals(watch_t *w, unsigned events);

static int install_signals(server_t *s)
{
    if (pipe2(s->sigfd, O_CLOEXEC) < 0 || gio_nonblock(s->sigfd[0]) < 0 ||
        gio_nonblock(s->sigfd[1]) < 0)
        return -1;
    sig_pipe_fd = s->sigfd[1];
    struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGWINCH, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    watch_init(&s->sigw, on_signals);
    if (gio_add(s->loop, s->sigfd[0], &s->sigw) < 0)
        return -1;
    gio_want(s->loop, s->sigfd[0], GIO_READ);
    if (sig_usr1) { /* one came before the pipe (server_catch_usr1_early): the loop sees it */
        char b = (char)SIGUSR1;
        ssize_t r = write(s->sigfd[1], &b, 1);
        (void)r;
    }
    return 0;
}

/* The ACME client and the cluster's side process, forked before the
   listeners, signal SIGUSR1 when they install a certificate; its default
   action would end a server that has not reached install_signals yet. */
void server_catch_usr1_early(void)
{
    struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
}

int server_usr1_early(void)
{
    int got = sig_usr1;
    sig_usr1 = 0;
    return got;
}

/* -N: the cap on open connections, below what the descriptor limit allows. */
static size_t conn_cap(const config_t *cfg)
{
    struct rlimit rl;
    size_t fds = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        fds = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1 << 20 ? 1 << 20 : rl.rlim_cur;
    /* room for listeners, logs, the self-pipe, open files of the cache and
       the one descriptor a refusal needs: past this, 503 rather than EMFILE */
    size_t room = fds > SERVER_FD_RESERVE * 2 ? fds - SERVER_FD_RESERVE : fds / 2;
    if (cfg->max_conns > 0 && (size_t)cfg->max_conns < room)
        return (size_t)cfg->max_conns;
    return room;
}

/* -y: does this listener (adopted ones too: by kind and port) expect PROXY headers? */
static int behind_proxy(const config_t *cfg, const listener_t *l)
{
    if (l->tls ? cfg->proxy_https : cfg->proxy_http)
        return 1;
    for (int i = 0; i < cfg->nproxy_ports; i++)
        if (cfg->proxy_ports[i] == l->port)
            return 1;
    return 0;
}

/* Does HTTPS answer (for -X): its port bound, and a certificate loaded? */
static void https_readiness(server_t *s)
{
    const proc_t *p = s->site.proc;
    s->site.https_ready = p->tls && !p->tls_skipped && tls_store_count(p->tls) > 0;
}

/* The job pool's descriptor: finished jobs to complete on the loop. */
static void on_jobs(watch_t *w, unsigned events)
{
    server_t *s = (server_t *)((char *)w - offsetof(server_t, jobsw));
    (void)events;
    jobs_complete(s->site.jobs);
}

static void on_listener(watch_t *w, unsigned events);
static void arm_certificates(server_t *s);

int server_init(server_t *s, const config_t *cfg, const proc_t *p, mime_table_t *mime,
                const listener_t *lst, int nlst)
{
    memset(s, 0, sizeof *s);
    s->sigfd[0] = s->sigfd[1] = s->upfd = s->parent_fd = -1;
    if (!(s->loop = gio_loop_new())) {
        fprintf(stderr, "gatling: cannot create the %s loop: %s\n", gio_backend_name(),
                strerror(errno));
        return -1;
    }
    if (site_init(&s->site, cfg, p, s->loop, mime) < 0)
        return -1;
    watch_init(&s->jobsw, on_jobs);
    if (gio_add(s->loop, jobs_fd(s->site.jobs), &s->jobsw) < 0) {
        fprintf(stderr, "gatling: cannot watch the worker threads: %s\n", strerror(errno));
        return -1;
    }
    gio_want(s->loop, jobs_fd(s->site.jobs), GIO_READ);
    if (router_init(&s->site) < 0) /* every handler's per-loop state */
        return -1;
    s->max_conns = conn_cap(cfg);
    limits_cfg_t lc = {.rpm = (unsigned)cfg->rpm,
                       .conns_per_addr = (unsigned)cfg->max_conns_addr,
                       .free_fails = cfg->free_fails ? (unsigned)cfg->free_fails : UINT_MAX,
                       .max_wait_s = SERVER_MAX_AUTH_WAIT,
                       .offence_ms = (unsigned)cfg->offence_s * 1000u};
    /* more addresses than connections: those with connections are never evicted */
    if (!(s->site.limits = limits_new(&lc, s->max_conns + 4096))) {
        fprintf(stderr, "gatling: out of memory\n");
        return -1;
    }
    if (p->peer_board) /* -W: floods remembered across the workers */
        limits_share(s->site.limits, p->peer_board);
    for (int i = 0; i < nlst; i++) {
        s->lst[i] = lst[i];
        s->lst[i].port = server_port(&lst[i]);
        s->lst[i].deferred = server_deferred(lst[i].fd);
        s->lst[i].proxy = !lst[i].ftp && behind_proxy(cfg, &s->lst[i]); /* FTP: no PROXY */
        s->lst[i].srv = s;
        watch_init(&s->lst[i].w, on_listener);
        if (gio_add(s->loop, lst[i].fd, &s->lst[i].w) < 0) {
            fprintf(stderr, "gatling: cannot watch listener: %s\n", strerror(errno));
            return -1;
        }
        gio_want(s->loop, lst[i].fd, GIO_READ);
    }
    s->nlst = nlst;
    https_readiness(s);
    arm_certificates(s);
    metrics_owe(&s->site); /* -W: a worker's slot is filled at its start */
    if (install_signals(s) < 0) {
        fprintf(stderr, "gatling: signal set-up failed: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int server_quic_group(const config_t *cfg, const proc_t *p, const listener_t *lst, int n,
                      quic_group_t *g, int per)
{
    char err[256];
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int i = 0;
    while (i < n && !lst[i].tls)
        i++;
    if (!server_h3_wanted(cfg, p) || i == n) {
        quic_group_close(g); /* handed over for nothing */
        return -1;
    }
    if (getsockname(lst[i].fd, (struct sockaddr *)&ss, &len) < 0) {
        snprintf(err, sizeof err, "getsockname: %s", strerror(errno));
        quic_group_close(g);
    } else if (quic_group_open(g, (struct sockaddr *)&ss, len, per, err, sizeof err) == 0) {
        if (g->rcvbuf && g->rcvbuf < QUIC_SOCKBUF / 2)
            fprintf(stderr, "gatling: HTTP/3: the UDP receive buffer is %d KiB "
                    "(net.core.rmem_max): a burst of new visitors beyond it is dropped until "
                    "they send again; run as root or raise net.core.rmem_max to %d\n",
                    g->rcvbuf / 1024, QUIC_SOCKBUF);
        return 0;
    }
    fprintf(stderr, "gatling: HTTP/3: %s: serving HTTPS without it\n", err);
    return -1;
}

quic_ep_t *server_quic_open(const config_t *cfg, const proc_t *p, const listener_t *lst, int n,
                            quic_group_t *g, int i)
{
    char err[PATH_MAX + 512];
    int index, fd;
    if (cfg->workers == 1 && !g->per && server_quic_group(cfg, p, lst, n, g, 1) < 0)
        return NULL;
    if (!server_h3_wanted(cfg, p) || !g->nfds)
        return NULL;
    if ((fd = quic_group_take(g, i, &index)) < 0) {
        fprintf(stderr, "gatling: HTTP/3: no socket for worker %d: serving HTTPS without it\n", i);
        return NULL;
    }
    quic_ep_t *q = quic_open(cfg, p, fd, index, err, sizeof err);
    if (!q)
        fprintf(stderr, "gatling: HTTP/3: %s: serving HTTPS without it\n", err);
    return q;
}

void server_quic_steer(const quic_group_t *g)
{
    if (g->passed && g->nfds && quic_group_steer(g) < 0)
        fprintf(stderr, "gatling: HTTP/3: cannot steer new connections here (%s): they go "
                "on to the old process\n", strerror(errno));
}

int server_quic_start(server_t *s, quic_ep_t *q)
{
    if (!q)
        return 0;
    if (quic_start(q, &s->site, s->max_conns) < 0) { /* the caller frees q */
        fprintf(stderr, "gatling: HTTP/3: cannot watch its socket: %s\n", strerror(errno));
        return -1;
    }
    s->quic = q;
    snprintf(s->site.alt_svc, sizeof s->site.alt_svc, "h3=\":%d\"; ma=86400", quic_port(q));
    return 0;
}

static void refuse(int fd, const listener_t *l)
{
    if (l->ftp)
        ftp_refuse(fd);
    else
        h1_refuse(fd, l->tls);
}

static void accept_some(server_t *s, listener_t *l)
{
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        union {
            struct sockaddr sa;
            struct sockaddr_in6 in6;
        } peer;
        socklen_t plen = sizeof peer;
        int fd = accept4(l->fd, &peer.sa, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: stop accepting for a moment instead of
                   spinning on a listener that stays readable */
                s->site.stats.refused_fds++;
                site_error(&s->site, "accept4()", errno, NULL, "pausing accept for 100 ms");
                gio_want(s->loop, l->fd, 0);
                gio_set_deadline(s->loop, l->fd, gio_now(s->loop) + ACCEPT_PAUSE_MS);
            }
            return; /* EAGAIN, ECONNABORTED, EINTR: nothing more now */
        }
        if (l->proxy && !net_contains(s->site.cfg->trust, s->site.cfg->ntrust, &peer.sa)) {
            s->site.stats.proxy_untrusted++; /* not a proxy of ours: no word, no byte read */
            close(fd);
            continue;
        }
        if (s->site.nconns >= s->max_conns) {
            s->site.stats.refused_cap++;
            refuse(fd, l); /* 503 (FTP: 421) at once, unread, and close */
            continue;
        }
        /* behind a proxy, -K counts the client the header names (conn_open.c) */
        int lim =
            l->proxy ? LIMIT_OK : limits_conn_open(s->site.limits, &peer.sa, gio_now(s->loop));
        if (lim == LIMIT_OFFENDER) { /* a flood ended its connections lately: not a byte */
            s->site.stats.refused_offender++;
            close(fd);
            continue;
        }
        if (lim != LIMIT_OK) {
            if (lim == LIMIT_CONNS)
                s->site.stats.refused_addr++;
            else
                s->site.stats.refused_cap++;
            refuse(fd, l); /* 503 (FTP: 421) at once, unread, and close */
            continue;
        }
        if (l->ftp) { /* the session counts itself in nconns and closes the -K count */
            ftp_new(&s->ftp, &s->site, fd, &peer.sa, plen);
            continue;
        }
#ifndef __linux__ /* where accepted sockets may not inherit it from the listener */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#endif
        unsigned how = (l->tls ? CONN_NEW_TLS : 0) | (l->proxy ? CONN_NEW_PROXY : 0);
        conn_t *c = conn_new(&s->conns, &s->site, fd, &peer.sa, plen, how);
        if (!c) {
            if (!l->proxy)
                limits_conn_close(s->site.limits, &peer.sa);
            continue;
        }
        c->local_port = (uint16_t)l->port;
        /* with -a the request is here already: reading it now saves
           registering the socket, and a connection that closes after its
           response never meets the event loop at all */
        if (l->deferred && !l->tls)
            conn_event(c, GIO_READ);
    }
}

/* A listener is readable (events), or its accept pause is over (0). */
static void on_listener(watch_t *w, unsigned events)
{
    listener_t *l = (listener_t *)((char *)w - offsetof(listener_t, w));
    if (events)
        accept_some(l->srv, l);
    else
        gio_want(l->srv->loop, l->fd, GIO_READ);
}

/* Stop listening; idle connections close now, busy ones after their response. */
static void start_draining(server_t *s)
{
    s->site.draining = 1;
    s->grace_end = 0;
    gio_timer_stop(s->loop, &s->grace);
    if (s->conns.draining)
        return;
    for (int i = 0; i < s->nlst; i++)
        gio_close(s->loop, s->lst[i].fd);
    s->nlst = 0;
    s->site.alt_svc[0] = 0;
    if (s->quic)
        quic_drain(s->quic);
    conn_set_drain(&s->conns);
    ftp_set_drain(&s->ftp);
}

/* SIGUSR1: logrotate moved the file away; start a new one at the same path. */
static void reopen_log(server_t *s)
{
    const config_t *cfg = s->site.cfg;
    if (!cfg->log_file || s->site.log.fd < 0)
        return;
    alog_flush(&s->site.log);
    /* O_NOFOLLOW and checked (site/privfs.h), whoever this process is now */
    char why[256], text[PATH_MAX + 300];
    if (pfs_reopen_log(s->site.log.fd, cfg->log_file, -1, -1, -1, why, sizeof why) < 0) {
        snprintf(text, sizeof text, "%s: reopening the access log refused: %s", cfg->log_file,
                 why);
        elog_note(&s->site.elog, gio_wallclock(s->loop), text);
    }
}

/* Renewed certificates (SIGUSR1, or every tls_store_check_period): new
   connections get them; open ones keep what they started with.  A -C
   directory that had none gets its first ones the same way. */
static void check_certificates(server_t *s, int force)
{
    tls_store_t *st = s->site.proc->tls;
    char err[PATH_MAX + 512], text[sizeof err + 96];
    if (!st)
        return;
    int had = tls_store_count(st);
    int r = tls_store_check(st, gio_wallclock(s->loop), force, err, sizeof err);
    char *kept = s->site.cert_reload_err; /* for the status page, cut short past its size */
    size_t kn = r < 0 ? strnlen(err, sizeof s->site.cert_reload_err - 1) : 0;
    if (r) {
        memcpy(kept, err, kn);
        kept[kn] = 0;
    }
    if (r > 0 && had) {
        snprintf(text, sizeof text, "HTTPS: certificates reloaded%s%s", err[0] ? ": " : "", err);
    } else if (r > 0) {
        int n = tls_store_count(st);
        snprintf(text, sizeof text, "HTTPS: %d certificate%s loaded from %s: HTTPS answers now%s%s",
                 n, n == 1 ? "" : "s", s->site.proc->tls_dir, err[0] ? ": " : "", err);
        https_readiness(s);
    } else if (r < 0) {
        s->site.stats.tls_reload_failed++;
        snprintf(text, sizeof text, "HTTPS: %s: %s",
                 had ? "reloading the certificates failed, the old ones stay"
                     : "loading the certificates failed, handshakes are still refused",
                 err);
    } else {
        return;
    }
    elog_note(&s->site.elog, gio_wallclock(s->loop), text);
    if (r > 0 && s->quic && quic_reload(s->quic, err, sizeof err) < 0) { /* HTTP/3's copy */
        snprintf(text, sizeof text, "HTTP/3: reloading the certificates failed: %s", err);
        elog_note(&s->site.elog, gio_wallclock(s->loop), text);
    }
}

/* HTTPS: look at the certificate files every tls_store_check_period
   seconds (the store's own clock says whether that much time passed). */
static void on_certificates(gio_loop_t *l, void *arg)
{
    (void)l;
    check_certificates(arg, 0);
    arm_certificates(arg);
}

static void arm_certificates(server_t *s)
{
    const proc_t *p = s->site.proc;
    if (!p->tls)
        return;
    int64_t every = (int64_t)tls_store_check_period(p->tls) * 1000;
    gio_timer_set(s->loop, &s->certs, gio_now(s->loop) + every, on_certificates, s);
}

/* "binary upgrade: ..." in the error log (and on stderr); its end (end 0: it
   failed, 1: the new one serves) to the --reload that asked, if one did. */
static void upgrade_note(server_t *s, int end, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void upgrade_note(server_t *s, int end, const char *fmt, ...)
{
    char text[1400];
    int k = snprintf(text, sizeof text, "binary upgrade: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + k, sizeof text - (size_t)k, fmt, ap);
    va_end(ap);
    elog_note(&s->site.elog, (int64_t)time(NULL), text);
    if (end >= 0) {
        reload_tell(s->asker, s->asker_nonce, end, text);
        s->asker = 0;
    }
}

static void on_upgrade(watch_t *w, unsigned events);

/* SIGUSR2: start the new binary with our listeners; drain once it serves. */
static void start_upgrade(server_t *s, pid_t asker, unsigned long nonce)
{
    int fds[SERVER_MAX_LISTENERS];
    unsigned char roles[SERVER_MAX_LISTENERS];
    char why[256];
    if (s->upfd >= 0 || s->conns.draining || s->grace_end || !s->nlst) {
        reload_tell(asker, nonce, 0,
                    s->upfd >= 0 ? "binary upgrade: one is under way"
                                 : "binary upgrade: this process is stopping");
        return;
    }
    s->asker = asker, s->asker_nonce = nonce;
    for (int i = 0; i < s->nlst; i++) {
        fds[i] = s->lst[i].fd;
        roles[i] = s->lst[i].ftp   ? HANDOVER_FTP
                   : s->lst[i].tls ? HANDOVER_HTTPS
                                   : HANDOVER_HTTP;
    }
    const quic_group_t *g = s->qgroup;
    handover_dgrams_t dg = {.fds = g ? g->fds : NULL,
                            .n = g && s->quic ? quic_group_passable(g) : 0,
                            .bank = g ? 1 - g->bank : 0};
    int fd = handover_upgrade(fds, roles, s->nlst, 1, &dg, &s->uppid, why, sizeof why);
    if (fd < 0) {
        upgrade_note(s, 0, "%s; this one goes on serving", why);
        return;
    }
    watch_init(&s->upw, on_upgrade);
    if (gio_add(s->loop, fd, &s->upw) < 0) {
        close(fd);
        return;
    }
    s->upfd = fd;
    gio_want(s->loop, fd, GIO_READ);
    gio_set_deadline(s->loop, fd, gio_now(s->loop) + UPGRADE_WAIT_MS);
    upgrade_note(s, -1, "started pid %d", (int)s->uppid);
}

/* The new binary said it serves (a byte), failed (EOF) or is too slow (ev 0). */
static void finish_upgrade(server_t *s, unsigned ev)
{
    char why[HANDOVER_WHY_MAX];
    int ok = ev && handover_outcome(s->upfd, why, sizeof why);
    gio_close(s->loop, s->upfd);
    s->upfd = -1;
    if (ok) {
        start_draining(s);
        upgrade_note(s, 1, "pid %d serves; this one (pid %d) drains", (int)s->uppid, (int)getpid());
        return;
    }
    if (!ev)
        kill(s->uppid, SIGKILL);
    waitpid(s->uppid, NULL, 0);
    upgrade_note(s, 0, "the new process %s%s; this one goes on serving",
                 !ev       ? "did not serve within 60 s, killed"
                 : why[0] ? "failed: "
                           : "failed (see its messages)",
                 ev ? why : "");
}

static void on_upgrade(watch_t *w, unsigned events)
{
    finish_upgrade((server_t *)((char *)w - offsetof(server_t, upw)), events);
}

/* The -g grace is over: drain now. */
static void on_grace(gio_loop_t *l, void *arg)
{
    (void)l;
    start_draining(arg);
}

/*
 * TERM, INT, HUP.  With -g the health check (-k) fails first, for the grace,
 * while the listeners stay open and everything else is served as before: a
 * load balancer that polls it stops sending before the listeners close, so
 * no connection of its meets a closed port.  Then the drain proper.
 */
static void begin_drain(server_t *s)
{
    int grace = s->site.cfg->drain_grace;
    if (s->conns.draining || s->grace_end)
        return;
    s->site.draining = 1;
    if (grace <= 0 || !s->nlst) {
        start_draining(s);
        return;
    }
    s->grace_end = gio_now(s->loop) + (int64_t)grace * 1000;
    gio_timer_set(s->loop, &s->grace, s->grace_end, on_grace, s);
    char text[96];
    snprintf(text, sizeof text, "draining: health check failing for %d s, then close", grace);
    elog_note(&s->site.elog, gio_wallclock(s->loop), text);
}

static void handle_signals(server_t *s)
{
    char buf[64];
    while (read(s->sigfd[0], buf, sizeof buf) > 0)
        ;
    if (sig_term > 1) { /* a second SIGTERM: stop now */
        alog_flush(&s->site.log);
        _exit(0);
    }
    if (sig_usr1) {
        sig_usr1 = 0;
        reopen_log(s);
        elog_reopen(&s->site.elog);
        check_certificates(s, 1);
    }
    if (sig_term || sig_hup)
        begin_drain(s);
    if (sig_winch) { /* --reload asks which executable this is */
        sig_winch = 0;
        reload_identify((pid_t)sig_winch_from, sig_winch_nonce, s->site.proc->exe_id);
    }
    if (sig_usr2) {
        sig_usr2 = 0;
        if (s->upgradable)
            start_upgrade(s, (pid_t)sig_usr2_from, sig_usr2_nonce);
    }
}

static void on_signals(watch_t *w, unsigned events)
{
    (void)events;
    handle_signals((server_t *)((char *)w - offsetof(server_t, sigw)));
}

/*
 * What one wait brought: every ready descriptor's watch, the passed deadlines
 * (as events 0), the timers that are due (each module arms its own: the
 * open-file cache's expiry, the certificate check, the drain's grace, -W's
 * publish, HTTP/2's spare streams, the response cache's clock), then the
 * connections woken by a producer.  1 if it did something the counters may
 * show.
 */
static int run_round(server_t *s)
{
    unsigned ev;
    int fd, did = 0;
    while ((fd = gio_next(s->loop, &ev)) >= 0) {
        watch_t *w = gio_cookie(s->loop, fd);
        w->on(w, ev);
        did = 1;
    }
    /* at most TIMEOUT_BATCH expiries a round: a thousand slowloris connections that
       arrived together expire together, and closing them all at once would stall the
       clients that are being served; the rest wait for the next round (gio keeps them) */
    for (int k = 0; k < TIMEOUT_BATCH && (fd = gio_next_timeout(s->loop)) >= 0; k++) {
        watch_t *w = gio_cookie(s->loop, fd);
        w->on(w, 0);
        did = 1;
    }
    /* a timer is loop work too, but not -W's publish itself: that would owe the next */
    int64_t published = s->site.stats_published;
    int ran = gio_timers_run(s->loop);
    did |= ran > (s->site.stats_published != published);
    conn_set_run_poked(&s->conns);
    return did;
}

int server_run(server_t *s)
{
    int quic_more = 0;
    while (!s->conns.draining || s->site.nconns > 0) {
        /* connections a producer woke again while they ran: no sleep */
        int nap = s->conns.poked || quic_more ? 0 : -1;
        if (gio_wait(s->loop, nap) < 0 && errno != EINTR) {
            fprintf(stderr, "gatling: %s wait failed: %s\n", gio_backend_name(), strerror(errno));
            return 1;
        }
        if (run_round(s))
            metrics_owe(&s->site); /* -W: publish what this round counted */
        quic_more = s->quic && quic_run(s->quic);
        alog_flush(&s->site.log);
    }
    return 0;
}

static void on_parent(watch_t *w, unsigned events)
{
    server_t *s = (server_t *)((char *)w - offsetof(server_t, parentw));
    (void)events; /* nothing is written there: readable is the end */
    gio_close(s->loop, s->parent_fd);
    s->parent_fd = -1;
    begin_drain(s);
}

int server_watch_parent(server_t *s, int fd)
{
    watch_init(&s->parentw, on_parent);
    if (gio_nonblock(fd) < 0 || gio_add(s->loop, fd, &s->parentw) < 0) {
        close(fd);
        return -1;
    }
    s->parent_fd = fd;
    gio_want(s->loop, fd, GIO_READ);
    return 0;
}

void server_free(server_t *s)
{
    if (s->parent_fd >= 0)
        gio_close(s->loop, s->parent_fd);
    gio_timer_stop(s->loop, &s->grace);
    gio_timer_stop(s->loop, &s->certs);
    if (s->upfd >= 0)
        gio_close(s->loop, s->upfd);
    for (int i = 0; i < s->nlst; i++)
        gio_close(s->loop, s->lst[i].fd);
    if (s->sigfd[0] >= 0) {
        sig_pipe_fd = -1;
        close(s->sigfd[0]);
        close(s->sigfd[1]);
    }
    if (s->site.jobs)
        gio_del(s->loop, jobs_fd(s->site.jobs));
    quic_free(s->quic); /* its streams' exchanges end while the handlers are there */
    router_free(&s->site); /* the cache's fetches first: they are the proxy's and CGI's */
    site_free(&s->site);
    conn_set_free(&s->conns);
    gio_loop_free(s->loop);
}
