/* The -W supervisor: see worker.h. */
#define _GNU_SOURCE /* ppoll */
#include "worker.h"
#include "acme_setup.h"
#include "gio.h"
#include "gio_os.h"
#include "site/elog.h"
#include "site/peerboard.h"
#include "site/spawn.h"
#include "site/stats.h"
#include "handover.h"
#include "reload.h"
#include "sandbox.h"
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORKERS_MAX 64

static volatile sig_atomic_t got_term, got_hup, got_chld, got_usr1, got_usr2;
static volatile sig_atomic_t usr2_from; /* who sent it (kill(2)): --reload waits (reload.h) */
static volatile unsigned long usr2_nonce; /* ... and the name it waits on */
static volatile sig_atomic_t got_winch, winch_from; /* --reload asks which executable */
static volatile unsigned long winch_nonce;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (sig == SIGCHLD)
        got_chld = 1;
    else if (sig == SIGHUP)
        got_hup = 1;
    else if (sig == SIGUSR1)
        got_usr1 = 1;
    else if (sig == SIGUSR2)
        got_usr2 = 1, usr2_from = reload_sender(si, &usr2_nonce);
    else if (sig == SIGWINCH)
        got_winch = 1, winch_from = reload_sender(si, &winch_nonce);
    else
        got_term++;
}

typedef struct supervisor {
    config_t cfg; /* with the real port filled in */
    proc_t proc;  /* what the start made; a worker's copy gets its slot and spawner */
    mime_table_t *mime;
    /* The listening sockets, opened here (one SO_REUSEPORT socket per worker,
       so the kernel spreads connections) or handed over: they stay open here
       while workers come and go, so no queued connection is ever lost. */
    int fds[HANDOVER_MAX_FDS];
    int nfds, groups;
    pid_t pid[WORKERS_MAX];
    time_t started[WORKERS_MAX];
    int ready[2]; /* workers write a byte once they listen */
    int life[2];  /* the supervisor alone holds life[1]: its end is the workers' (EOF) */
    int stopping; /* the listeners are closed: waiting for the workers to finish */
    int terms;    /* how many TERMs have been passed on to the workers */
    int up_fd;    /* an upgrade under way: the new process writes here once it serves */
    pid_t up_pid; /* ... and this is it */
    pid_t asker;  /* ... and who asked for it (--reload: reload.h), or 0 */
    unsigned long nonce; /* ... and the name it waits on */
    /* HTTP/3's UDP sockets (quic/quic_steer.h): two banks of one per worker,
       held here until the end so that no socket's index in the group moves */
    quic_group_t qg;
} supervisor_t;

/* The listeners worker i serves: groups i, i + W, i + 2W, ...; with fewer
   groups than workers, group i % groups.  How many, or -1 if too many. */
static int worker_listeners(const supervisor_t *sv, int i, listener_t *lst)
{
    int w = sv->cfg.workers, per = sv->nfds / sv->groups, n = 0;
    for (int g = sv->groups > w ? i : i % sv->groups; g < sv->groups; g += w) {
        if (n + per > SERVER_MAX_LISTENERS)
            return -1;
        server_adopt(&sv->cfg, &sv->proc, sv->fds + g * per, per, lst + n);
        n += per;
        if (sv->groups <= w)
            break;
    }
    return n;
}

static elog_t note_log; /* the supervisor's view of the error log */

/* "binary upgrade: ..." in the error log (and on stderr); its end (end 0: it
   failed, 1: the new one serves) to the --reload that asked (sv's asker), if one did. */
static void upgrade_note(const supervisor_t *sv, int end, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void upgrade_note(const supervisor_t *sv, int end, const char *fmt, ...)
{
    char text[1400];
    int k = snprintf(text, sizeof text, "binary upgrade: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + k, sizeof text - (size_t)k, fmt, ap);
    va_end(ap);
    elog_note(&note_log, (int64_t)time(NULL), text);
    if (end >= 0)
        reload_tell(sv->asker, sv->nonce, end, text);
}

/* After -u (a change of ids clears PR_SET_PDEATHSIG: prctl(2)): the
   supervisor's death, however it died, is a SIGTERM to this worker, which
   drains; one that died before is found by the pid it had at the fork. */
static void worker_parent_death(pid_t supervisor)
{
    gio_proc_parent_death(SIGTERM);
    if (getppid() != supervisor)
        got_term = 1; /* passed on below, as a TERM that came early */
}

/* In the child: serve our share of the listeners. */
static void worker_main(supervisor_t *sv, int i, pid_t supervisor)
{
    listener_t lst[SERVER_MAX_LISTENERS];
    server_t s;
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    /* TERM, HUP or USR1 before server_init installs the worker's handlers
       lands in the supervisor's, inherited: noted here, passed on below (a
       TERM right after a restart was lost, and the supervisor waited) */
    got_term = got_hup = got_usr1 = 0;
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    sv->proc.worker = i; /* its slot in the table of counters */
    stats_shm_set_pid(sv->proc.stats_shm, i, (long)getpid()); /* /server-status lists it */
    prctl(PR_SET_NAME, "gatling-worker"); /* --reload refuses it by this name (reload.h) */
    elog_close_dir(&note_log); /* the supervisor's, outside any chroot: not a worker's */
    acme_detach(); /* the ACME keeper's stop pipe is the supervisor's to hold */
    close(sv->life[1]);
    int n = worker_listeners(sv, i, lst);
    quic_ep_t *quic = n > 0 ? server_quic_open(&sv->cfg, &sv->proc, lst, n, &sv->qg, i) : NULL;
    quic_group_close(&sv->qg); /* the endpoint has its own descriptor */
    for (int k = 0; k < sv->nfds; k++) { /* the others' sockets are not ours to hold */
        int mine = 0;
        for (int j = 0; j < n; j++)
            mine |= lst[j].fd == sv->fds[k];
        if (!mine)
            close(sv->fds[k]);
    }
    pid_t spawner; /* -w, -z: each worker its own CGI spawner, before -u */
    int cgi = sv->cfg.ncgi_regex || sv->cfg.cgi_exec;
    if (n < 0 || (cgi && spawn_start(&sv->cfg, &sv->proc, server_drop_privileges,
                                     &sv->proc.spawn_fd, &spawner) < 0) ||
        server_drop_privileges(&sv->cfg, &sv->proc) < 0)
        _exit(1);
    worker_parent_death(supervisor);
    sv->proc.spawn_pid = cgi ? (int)spawner : 0;
    if (sv->proc.proc_fd >= 0) /* the spawner's now: the loop keeps nothing outside the chroot */
        close(sv->proc.proc_fd), sv->proc.proc_fd = -1;
    if (server_init(&s, &sv->cfg, &sv->proc, sv->mime, lst, n) < 0 ||
        server_quic_start(&s, quic) < 0 || server_watch_parent(&s, sv->life[0]) < 0 ||
        sandbox_enter(&sv->cfg, SANDBOX_WORKER, 0, 0) < 0)
        _exit(1);
    if (got_term)
        raise(SIGTERM);
    if (got_hup)
        raise(SIGHUP);
    if (got_usr1)
        raise(SIGUSR1);
    if (write(sv->ready[1], "r", 1) != 1)
        _exit(1);
    close(sv->ready[0]), close(sv->ready[1]);
    int rc = server_run(&s);
    server_free(&s);
    _exit(rc);
}

static pid_t spawn(supervisor_t *sv, int i)
{
    pid_t self = getpid(), pid = fork();
    if (pid == 0)
        worker_main(sv, i, self);
    if (pid < 0)
        fprintf(stderr, "gatling: fork() failed: %s\n", strerror(errno));
    sv->pid[i] = pid > 0 ? pid : 0;
    sv->started[i] = time(NULL);
    return pid;
}

/* Wait for n workers to report that they listen (10 s at most). */
static int wait_ready(supervisor_t *sv, int n)
{
    char b;
    struct pollfd p = {.fd = sv->ready[0], .events = POLLIN};
    while (n > 0) {
        if (poll(&p, 1, 10000) <= 0)
            return -1;
        if (read(sv->ready[0], &b, 1) == 1)
            n--;
    }
    return 0;
}

static void forward(supervisor_t *sv, int sig)
{
    for (int i = 0; i < sv->cfg.workers; i++)
        if (sv->pid[i] > 0)
            kill(sv->pid[i], sig);
}

/* Reap exited workers; restart them unless we are stopping.  Live count. */
static int reap(supervisor_t *sv, int stopping)
{
    int status, live = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < sv->cfg.workers; i++) {
            if (sv->pid[i] != pid)
                continue;
            sv->pid[i] = 0;
            stats_shm_retire(sv->proc.stats_shm, i); /* /metrics' sums never go down */
            if (stopping)
                break;
            fprintf(stderr, "gatling: worker %d (pid %d) died (%s %d), restarting\n", i, (int)pid,
                    WIFSIGNALED(status) ? "signal" : "status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
            if (time(NULL) - sv->started[i] < 1)
                sleep(1); /* a worker that dies at once must not make us fork-bomb */
            spawn(sv, i);
        }
    }
    for (int i = 0; i < sv->cfg.workers; i++)
        live += sv->pid[i] > 0;
    return live;
}

/* One SO_REUSEPORT socket per worker (and one for HTTPS), all on the ports
   of the first. */
static int open_listeners(supervisor_t *sv)
{
    listener_t l[2];
    int k;
    for (int i = 0; i < sv->cfg.workers; i++) {
        if (server_listen(&sv->cfg, &sv->proc, l, &k, 1, SERVER_BACKLOG) < 0)
            return -1;
        for (int j = 0; j < k; j++)
            sv->fds[sv->nfds++] = l[j].fd;
        if (i == 0)
            sv->proc.port = server_port(&l[0]);
    }
    sv->groups = sv->cfg.workers; /* each: HTTP, and HTTPS if it was bound */
    return 0;
}

/* The "listening on" lines: one per listener of the first group (every
   group has the same ports).  Each names its socket's own port and says
   https as the workers will decide it (server_adopt): systemd passes sockets
   in the order of the socket unit, which may put HTTPS first. */
static void announce(const supervisor_t *sv, int passed)
{
    const config_t *cfg = &sv->cfg;
    for (int i = 0; i < sv->nfds / sv->groups; i++) {
        listener_t l = {.fd = sv->fds[i]};
        int port = server_port(&l);
        int kind = server_passed_kind(cfg, &sv->proc, sv->fds[i], port);
        fprintf(stderr, "gatling %s (%s): %d workers listening on %s port %d%s%s\n",
                GATLING_VERSION, gio_backend_name(), cfg->workers,
                passed      ? "a passed socket,"
                : cfg->addr ? cfg->addr
                            : "::",
                port, kind == HANDOVER_HTTPS ? " (https)" : kind == HANDOVER_FTP ? " (ftp)" : "",
                passed ? " (-i and -p ignored)" : "");
    }
}

static void close_listeners(supervisor_t *sv)
{
    for (int i = 0; i < sv->nfds; i++)
        close(sv->fds[i]);
    sv->nfds = 0;
}

/* The listeners, handed over or opened here, and each worker's share of them
   checked to fit a server.  0, or an exit code. */
static int supervisor_listen(supervisor_t *sv, const int *fds, int nfds, int groups)
{
    listener_t probe[SERVER_MAX_LISTENERS];
    if (nfds > 0) {
        memcpy(sv->fds, fds, (size_t)nfds * sizeof *fds);
        sv->nfds = nfds, sv->groups = groups;
    } else if (open_listeners(sv) < 0) {
        close_listeners(sv);
        return 1;
    }
    for (int i = 0; i < sv->cfg.workers; i++)
        if (worker_listeners(sv, i, probe) < 0) {
            fprintf(stderr,
                    "gatling: %d listeners in %d groups for %d workers: more than %d "
                    "each\n",
                    sv->nfds, sv->groups, sv->cfg.workers, SERVER_MAX_LISTENERS);
            return 1;
        }
    /* HTTP/3: a socket per worker in each bank, on the HTTPS listener's address */
    server_adopt(&sv->cfg, &sv->proc, sv->fds, sv->nfds / sv->groups, probe);
    server_quic_group(&sv->cfg, &sv->proc, probe, sv->nfds / sv->groups, &sv->qg,
                      sv->cfg.workers);
    return 0;
}

/* Catch the signals the supervisor waits for, and block them so that none slips
   in between its check and its wait; *old is the mask to wait with. */
static void catch_signals(sigset_t *old)
{
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM), sigaddset(&block, SIGINT), sigaddset(&block, SIGUSR2);
    sigaddset(&block, SIGHUP), sigaddset(&block, SIGCHLD), sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGWINCH);
    sigprocmask(SIG_BLOCK, &block, old);
    struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL), sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL), sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL), sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGWINCH, &sa, NULL);
    if (server_usr1_early()) /* a certificate installed before this: the workers load it */
        got_usr1 = 1;
}

/* The upgrade under way is over: the new process serves (r > 0 and its byte
   arrived), failed (r > 0, no byte), or did not serve within 60 s (r == 0). */
static void upgrade_finish(supervisor_t *sv, int r)
{
    char why[HANDOVER_WHY_MAX];
    int ok = r > 0 && handover_outcome(sv->up_fd, why, sizeof why);
    close(sv->up_fd);
    sv->up_fd = -1;
    if (ok) {
        upgrade_note(sv, 1, "pid %d serves; this one (pid %d) drains", (int)sv->up_pid,
                     (int)getpid());
        got_hup = 1; /* drain, as for SIGHUP */
    } else {
        if (r == 0)
            kill(sv->up_pid, SIGKILL);
        waitpid(sv->up_pid, NULL, 0);
        upgrade_note(sv, 0, "the new process %s%s; this one goes on serving",
                     !r       ? "did not serve within 60 s, killed"
                     : why[0] ? "failed: "
                              : "failed (see its messages)",
                     r ? why : "");
    }
}

/* SIGUSR2: start the new binary, unless stopping or an upgrade is under way. */
static void upgrade_start(supervisor_t *sv)
{
    char why[256];
    pid_t asker = (pid_t)usr2_from;
    unsigned long nonce = usr2_nonce;
    got_usr2 = usr2_from = 0;
    if (sv->stopping || sv->up_fd >= 0) {
        reload_tell(asker, nonce, 0, sv->up_fd >= 0 ? "binary upgrade: one is under way"
                                                    : "binary upgrade: this process is stopping");
        return;
    }
    sv->asker = asker, sv->nonce = nonce;
    handover_dgrams_t dg = {.fds = sv->qg.fds, .n = quic_group_passable(&sv->qg),
                            .bank = 1 - sv->qg.bank};
    unsigned char roles[HANDOVER_MAX_FDS];
    for (int i = 0; i < sv->nfds && i < HANDOVER_MAX_FDS; i++) {
        listener_t l = {.fd = sv->fds[i]};
        roles[i] = (unsigned char)server_passed_kind(&sv->cfg, &sv->proc, sv->fds[i],
                                                     server_port(&l));
    }
    if ((sv->up_fd = handover_upgrade(sv->fds, roles, sv->nfds, sv->groups, &dg, &sv->up_pid,
                                      why, sizeof why)) >= 0)
        upgrade_note(sv, -1, "started pid %d", (int)sv->up_pid);
    else
        upgrade_note(sv, 0, "%s; this one goes on serving", why);
}

/* TERM, INT, HUP: stop listening, and pass the signal on; USR1: reopen the logs. */
static void handle_signals(supervisor_t *sv)
{
    if ((got_term > sv->terms || got_hup) && !sv->stopping) {
        sv->stopping = 1;
        close_listeners(sv);
        if (sv->up_fd >= 0) /* stopping wins over an upgrade under way */
            close(sv->up_fd), sv->up_fd = -1;
    }
    if (got_term > sv->terms) { /* each TERM goes on: a second one stops the workers now */
        sv->terms = got_term;
        forward(sv, SIGTERM);
    } else if (got_hup == 1) {
        got_hup = 2;
        forward(sv, SIGHUP);
    }
    if (got_usr1) {
        got_usr1 = 0;
        elog_reopen(&note_log);
        forward(sv, SIGUSR1);
    }
}

/* Wait for signals and for an upgrade's new process until the workers are done. */
static int supervise(supervisor_t *sv, const sigset_t *old)
{
    for (;;) {
        struct pollfd up = {.fd = sv->up_fd, .events = POLLIN};
        struct timespec limit = {60, 0};
        int r = ppoll(&up, 1, up.fd >= 0 ? &limit : NULL, old);
        if (up.fd >= 0 && r >= 0 && (r == 0 || up.revents))
            upgrade_finish(sv, r);
        if (got_usr2)
            upgrade_start(sv);
        if (got_winch) { /* --reload asks which executable this is */
            got_winch = 0;
            reload_identify((pid_t)winch_from, winch_nonce, sv->proc.exe_id);
        }
        handle_signals(sv);
        got_chld = 0;
        if (reap(sv, sv->stopping) == 0 && sv->stopping)
            return 0;
    }
}

int worker_supervise(const config_t *cfg, const proc_t *p, mime_table_t *mime, const int *fds,
                     int nfds, int groups, quic_group_t *qg)
{
    supervisor_t sv = {.cfg = *cfg, .proc = *p, .mime = mime, .up_fd = -1, .qg = *qg};
    qg->nfds = 0; /* ours now */
    elog_init(&note_log, p->error_fd, cfg->error_log);
    elog_keep_dir(&note_log, p->error_dir, p->uid, p->gid);
    if (cfg->workers > WORKERS_MAX) {
        fprintf(stderr, "gatling: -W %d: at most %d workers\n", cfg->workers, WORKERS_MAX);
        quic_group_close(&sv.qg);
        return 2;
    }
    int rc = supervisor_listen(&sv, fds, nfds, groups);
    if (rc) {
        quic_group_close(&sv.qg);
        return rc;
    }
    if (pipe2(sv.ready, O_CLOEXEC) < 0 || pipe2(sv.life, O_CLOEXEC) < 0)
        return 1;
    /* where the workers publish their counters for /metrics (site/stats.h) */
    if (!(sv.proc.stats_shm = stats_shm_new(cfg->workers))) {
        fprintf(stderr, "gatling: mmap() of the workers' counters failed: %s\n", strerror(errno));
        return 1;
    }
    /* where a flood that one worker's defence ended is told to the others */
    if (!(sv.proc.peer_board = peer_board_new())) {
        fprintf(stderr, "gatling: mmap() of the workers' offence board failed: %s\n",
                strerror(errno));
        return 1;
    }
    sigset_t old;
    catch_signals(&old);
    for (int i = 0; i < cfg->workers; i++)
        spawn(&sv, i);
    if (wait_ready(&sv, cfg->workers) < 0) {
        fprintf(stderr, "gatling: workers did not start\n");
        forward(&sv, SIGKILL);
        return 1;
    }
    announce(&sv, nfds > 0);
    sandbox_say_workers(cfg); /* after the lines the tests wait for */
    server_quic_steer(&sv.qg);
    handover_ready();
    rc = supervise(&sv, &old);
    if (sv.terms > 1) /* a second TERM: out at once, as one process goes (server.c); the ACME
                         keeper and the cluster's side process end by themselves (acme.h) */
        _exit(rc);
    quic_group_close(&sv.qg); /* the workers are gone */
    stats_shm_free(sv.proc.stats_shm);
    peer_board_free(sv.proc.peer_board);
    return rc;
}
