/* The -W supervisor: see worker.h. */
#include "worker.h"
#include "gio.h"
#include "server.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORKERS_MAX 64

static volatile sig_atomic_t got_term, got_hup, got_chld, got_usr1;

static void on_signal(int sig)
{
    if (sig == SIGCHLD)
        got_chld = 1;
    else if (sig == SIGHUP)
        got_hup = 1;
    else if (sig == SIGUSR1)
        got_usr1 = 1;
    else
        got_term++;
}

typedef struct supervisor {
    config_t cfg; /* with the real port filled in */
    mime_table_t *mime;
    listener_t reserve; /* bound, not listening: keeps the port ours */
    pid_t pid[WORKERS_MAX];
    time_t started[WORKERS_MAX];
    int ready[2]; /* workers write a byte once they listen */
} supervisor_t;

/* In the child: open our own listener on the shared port and serve. */
static void worker_main(supervisor_t *sv)
{
    listener_t lst[SERVER_MAX_LISTENERS];
    int n;
    server_t s;
    close(sv->reserve.fd);
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (server_listen(&sv->cfg, lst, &n, 1, 4096) < 0 || server_drop_privileges(&sv->cfg) < 0)
        _exit(1);
    if (server_init(&s, &sv->cfg, sv->mime, lst, n) < 0)
        _exit(1);
    if (write(sv->ready[1], "r", 1) != 1)
        _exit(1);
    close(sv->ready[0]), close(sv->ready[1]);
    int rc = server_run(&s);
    server_free(&s);
    _exit(rc);
}

static pid_t spawn(supervisor_t *sv, int i)
{
    pid_t pid = fork();
    if (pid == 0)
        worker_main(sv);
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

int worker_supervise(const config_t *cfg, mime_table_t *mime)
{
    supervisor_t sv = {.cfg = *cfg, .mime = mime};
    int n;
    if (cfg->workers > WORKERS_MAX) {
        fprintf(stderr, "gatling: -W %d: at most %d workers\n", cfg->workers, WORKERS_MAX);
        return 2;
    }
    if (server_listen(cfg, &sv.reserve, &n, 1, 0) < 0)
        return 1;
    sv.cfg.port = server_port(&sv.reserve);
    if (pipe(sv.ready) < 0)
        return 1;
    /* block the signals we wait for, so none slips in between check and wait */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM), sigaddset(&block, SIGINT);
    sigaddset(&block, SIGHUP), sigaddset(&block, SIGCHLD), sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &old);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL), sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL), sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    for (int i = 0; i < cfg->workers; i++)
        spawn(&sv, i);
    if (wait_ready(&sv, cfg->workers) < 0) {
        fprintf(stderr, "gatling: workers did not start\n");
        forward(&sv, SIGKILL);
        return 1;
    }
    fprintf(stderr, "gatling %s (%s): %d workers listening on %s port %d\n", GATLING_VERSION,
            gio_backend_name(), cfg->workers, cfg->addr ? cfg->addr : "::", sv.cfg.port);
    int stopping = 0, terms = 0;
    for (;;) {
        sigsuspend(&old);
        if ((got_term > terms || got_hup) && !stopping) {
            stopping = 1;
            close(sv.reserve.fd);
        }
        if (got_term > terms) { /* each TERM goes on: a second one stops the workers now */
            terms = got_term;
            forward(&sv, SIGTERM);
        } else if (got_hup == 1) {
            got_hup = 2;
            forward(&sv, SIGHUP);
        }
        if (got_usr1) {
            got_usr1 = 0;
            forward(&sv, SIGUSR1);
        }
        got_chld = 0;
        if (reap(&sv, stopping) == 0 && stopping)
            return 0;
    }
}
