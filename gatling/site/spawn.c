/* The CGI spawner process and the loop's side of its socket: see spawn.h. */
#define _GNU_SOURCE
#include "spawn.h"
#include "elog.h"
#include "gio_os.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SPAWN_ENV_MAX 1024 /* environment strings in one request */

/* The fixed part of a request; path, cwd and the environment follow. */
typedef struct spawn_hdr {
    uint32_t op, nenv;
    uint64_t id;
    uint32_t pathlen, cwdlen, envlen, pad;
} spawn_hdr_t;

/* A child of the spawner: its request id, and whether the loop is done
   with it (released) and it has exited (a zombie until released). */
typedef struct spawn_child {
    uint64_t id;
    pid_t pid; /* 0: a free slot */
    int exited, released;
} spawn_child_t;

typedef struct spawner {
    int sock;
    elog_t log;
    spawn_child_t *child;
    size_t nchild;
    char *msg; /* SPAWN_MSG_MAX bytes */
    char *envp[SPAWN_ENV_MAX + 1];
    long long limit[CONFIG_CGI_LIMITS]; /* --cgi-limits */
    int procfd; /* /proc, opened before the chroot (a keeper lists its children); -1 */
} spawner_t;

static volatile sig_atomic_t got_chld;

static void on_chld(int sig)
{
    (void)sig;
    got_chld = 1;
}

static void note(spawner_t *sp, const char *fmt, const char *a, int err)
{
    char text[600];
    snprintf(text, sizeof text, fmt, a, strerror(err));
    elog_note(&sp->log, (int64_t)time(NULL), text);
}

/* Tell the loop's error log, through the child's stderr pipe, why there is
   no process (the loop logs what comes out of that pipe). */
static void tell(int fd, const char *what, const char *arg, int err)
{
    char text[600];
    int n = snprintf(text, sizeof text, "gatling spawner: %s(%s) failed: %s\n", what, arg,
                     strerror(err));
    if (n > 0 && write(fd, text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1) < 0)
        return; /* nobody to tell */
}

/* Close the descriptors lo..hi. */
static void close_span(unsigned lo, unsigned hi)
{
    if (lo > hi || close_range(lo, hi, 0) == 0)
        return;
    long max = hi == ~0U ? sysconf(_SC_OPEN_MAX) : (long)hi + 1;
    for (long fd = lo; fd < max; fd++)
        close((int)fd);
}

/* Close every descriptor from `from` up, except keep[0..n) (sorted up). */
static void close_from(int from, const int *keep, int n)
{
    unsigned lo = (unsigned)from;
    for (int i = 0; i < n; i++) {
        if (keep[i] < from)
            continue;
        if ((unsigned)keep[i] > lo)
            close_span(lo, (unsigned)keep[i] - 1);
        lo = (unsigned)keep[i] + 1;
    }
    close_span(lo, ~0U);
}

/* One rlimit at v (0: left alone), never above the hard limit we have; the
   hard one `extra` above the soft (CPU: SIGXCPU first, then SIGKILL). */
static void limit(int res, long long v, rlim_t extra)
{
    struct rlimit rl;
    if (v <= 0 || getrlimit(res, &rl) < 0)
        return;
    rlim_t want = (rlim_t)v, max = rl.rlim_max;
    if (max != RLIM_INFINITY && max < want)
        want = max;
    rl.rlim_cur = want;
    rl.rlim_max = max == RLIM_INFINITY || max - want > extra ? want + extra : max;
    setrlimit(res, &rl);
}

/* In the CGI child: descriptors, session, limits, signals, directory, exec. */
static void child_exec(spawner_t *sp, const char *path, const char *cwd, const int fds[3])
{
    int hi[3];
    for (int i = 0; i < 3; i++) /* above 0-2 first, so that dup2 never overwrites one */
        hi[i] = fcntl(fds[i], F_DUPFD, 3);
    if (hi[0] < 0 || hi[1] < 0 || hi[2] < 0 || dup2(hi[0], 0) < 0 || dup2(hi[1], 1) < 0 ||
        dup2(hi[2], 2) < 0)
        _exit(127);
    close_from(3, NULL, 0);
    setsid();
    limit(RLIMIT_CPU, sp->limit[CONFIG_CGI_CPU], 1);
    limit(RLIMIT_AS, sp->limit[CONFIG_CGI_MEM], 0);
    limit(RLIMIT_NPROC, sp->limit[CONFIG_CGI_PROCS], 0);
    limit(RLIMIT_NOFILE, sp->limit[CONFIG_CGI_FILES], 0);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, &dfl, NULL); /* ignored signals would stay ignored across exec */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (chdir(cwd) < 0) {
        tell(2, "chdir", cwd, errno);
        _exit(127);
    }
    char *argv[] = {(char *)path, NULL};
    execve(path, argv, sp->envp);
    tell(2, "execve", path, errno);
    _exit(127);
}

/* The keeper's children now, from /proc (zombies too): how many into pid[]. */
static int keeper_children(int procfd, pid_t *pid, int max)
{
    char name[64], buf[4096];
    snprintf(name, sizeof name, "self/task/%d/children", (int)getpid());
    int fd = procfd >= 0 ? openat(procfd, name, O_RDONLY | O_CLOEXEC) : -1;
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    /* "pid pid ... ": a read cut short ends inside a number, which must not
       count (its head would name another process): only what a space ends */
    while (n > 0 && buf[n - 1] != ' ')
        n--;
    buf[n > 0 ? n : 0] = 0;
    int k = 0;
    for (char *s = buf, *e; k < max && (pid[k] = (pid_t)strtol(s, &e, 10)) > 0 && *e == ' ';
         s = e)
        k++;
    return k;
}

/* The request is over: kill the program's group, then, round by round,
   every process that ended up ours (a subreaper adopts its descendants'
   orphans, setsid or not), until none is left. */
static void keeper_kill(pid_t cgi, int procfd)
{
    pid_t pid[512];
    kill(-cgi, SIGKILL); /* cgi is not reaped: the group's id is still its own */
    kill(cgi, SIGKILL);
    for (int round = 0; round < 1000; round++) {
        int n = keeper_children(procfd, pid, 512);
        if (n == 0)
            break;
        for (int i = 0; i < n; i++)
            kill(pid[i], SIGKILL);
        for (int i = 0; i < n; i++) /* dying, each hands its children to us */
            waitpid(pid[i], NULL, 0);
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) /* without /proc: what is left of ours */
        ;
}

/* The CGI's keeper, a child of the spawner: its own session, the adopter of
   the program's orphans, and their killer when the spawner says SIGTERM
   (SPAWN_END).  It reaps nothing before that, so no id it kills is reused. */
static void keeper_main(spawner_t *sp, pid_t spawner, const char *path, const char *cwd,
                        const int fds[3])
{
    setsid();
    gio_proc_subreaper();
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, NULL);
    /* a spawner that dies (killed: it has no other way) ends its requests too */
    gio_proc_parent_death(SIGTERM);
    if (getppid() != spawner)
        kill(getpid(), SIGTERM); /* pending until the wait below */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTERM, &dfl, NULL), sigaction(SIGCHLD, &dfl, NULL);
    pid_t cgi = fork();
    if (cgi == 0)
        child_exec(sp, path, cwd, fds);
    if (cgi < 0) {
        tell(fds[2], "fork", path, errno);
        _exit(127);
    }
    int keep = sp->procfd;
    close_from(3, &keep, keep >= 3 ? 1 : 0);
    int sig;
    while (sigwait(&term, &sig) != 0)
        ;
    keeper_kill(cgi, sp->procfd);
    _exit(0);
}

static spawn_child_t *find(spawner_t *sp, uint64_t id)
{
    for (size_t i = 0; i < sp->nchild; i++)
        if (sp->child[i].pid && sp->child[i].id == id)
            return &sp->child[i];
    return NULL;
}

/* Reap c if it exited and the loop is done with it. */
static void settle(spawn_child_t *c)
{
    if (c->exited && c->released && waitpid(c->pid, NULL, WNOHANG) == c->pid)
        c->pid = 0;
}

/* SIGCHLD: note who exited, without reaping (see spawn.h), and reap the released. */
static void sweep(spawner_t *sp)
{
    got_chld = 0;
    for (size_t i = 0; i < sp->nchild; i++) {
        spawn_child_t *c = &sp->child[i];
        if (!c->pid || c->exited)
            continue;
        siginfo_t si = {0};
        if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            si.si_pid == c->pid)
            c->exited = 1;
        settle(c);
    }
}

/* Check a SPAWN_RUN message msg[0..n) and point envp at its strings.  The
   path and cwd, or NULL if the message is malformed. */
static const char *run_args(spawner_t *sp, size_t n, const char **cwd)
{
    spawn_hdr_t h;
    memcpy(&h, sp->msg, sizeof h);
    size_t need = sizeof h + (size_t)h.pathlen + 1 + (size_t)h.cwdlen + 1 + (size_t)h.envlen;
    if (h.pathlen == 0 || h.pathlen > 8192 || h.cwdlen > 8192 || h.envlen > SPAWN_MSG_MAX ||
        need != n || h.nenv > SPAWN_ENV_MAX)
        return NULL;
    char *path = sp->msg + sizeof h, *dir = path + h.pathlen + 1, *env = dir + h.cwdlen + 1;
    if (path[h.pathlen] || dir[h.cwdlen] || strlen(path) != h.pathlen || strlen(dir) != h.cwdlen)
        return NULL;
    size_t at = 0;
    for (uint32_t i = 0; i < h.nenv; i++) {
        char *e = memchr(env + at, 0, h.envlen - at);
        if (!e)
            return NULL;
        sp->envp[i] = env + at;
        at = (size_t)(e - env) + 1;
    }
    if (at != h.envlen)
        return NULL;
    sp->envp[h.nenv] = NULL;
    *cwd = dir;
    return path;
}

static void run(spawner_t *sp, size_t n, const int fds[3])
{
    spawn_hdr_t h;
    memcpy(&h, sp->msg, sizeof h);
    const char *cwd = NULL, *path = run_args(sp, n, &cwd);
    spawn_child_t *slot = NULL;
    for (size_t i = 0; i < sp->nchild && !slot; i++)
        if (!sp->child[i].pid)
            slot = &sp->child[i];
    if (!path || !slot || find(sp, h.id)) {
        tell(fds[2], "spawn", !path ? "malformed request" : slot ? "id in use" : "too many",
             EINVAL);
        return;
    }
    pid_t self = getpid(), pid = fork();
    if (pid == 0)
        keeper_main(sp, self, path, cwd, fds);
    if (pid < 0) {
        tell(fds[2], "fork", path, errno);
        note(sp, "CGI spawner: fork() for %s failed: %s", path, errno);
        return;
    }
    *slot = (spawn_child_t){.id = h.id, .pid = pid};
}

static void end(spawner_t *sp, uint64_t id)
{
    spawn_child_t *c = find(sp, id);
    if (!c)
        return;
    kill(c->pid, SIGTERM); /* its keeper: c is not reaped, so the id is still its */
    c->released = 1;
    sweep(sp);
}

/* One message from the loop: 1 to go on, 0 when the loop is gone. */
static int serve_one(spawner_t *sp)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(3 * sizeof(int))];
    } ctl;
    struct iovec iov = {sp->msg, SPAWN_MSG_MAX};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                       .msg_controllen = sizeof ctl.buf};
    ssize_t n = recvmsg(sp->sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? -1 : 0;
    if (n == 0)
        return 0;
    int fds[3] = {-1, -1, -1}, nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (nfds < 3)
                fds[nfds++] = fd;
            else
                close(fd);
        }
    }
    spawn_hdr_t h;
    if ((size_t)n >= sizeof h && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        memcpy(&h, sp->msg, sizeof h);
        if (h.op == SPAWN_RUN && nfds == 3)
            run(sp, (size_t)n, fds);
        else if (h.op == SPAWN_END)
            end(sp, h.id);
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    return 1;
}

/* keep[0..3) sorted up, without repeats and negatives, into keep[0..*n). */
static void sort_fds(int *keep, int *n)
{
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (keep[j] < keep[i]) {
                int t = keep[i];
                keep[i] = keep[j], keep[j] = t;
            }
    *n = 0;
    for (int i = 0; i < 3; i++)
        if (keep[i] >= 0 && (*n == 0 || keep[*n - 1] != keep[i]))
            keep[(*n)++] = keep[i];
}

/* The caller's confinement (a chroot, -u), but with --cgi-user's ids in -u's
   place: the spawner and every program it starts then run as that user. */
static int confine_as_cgi(const config_t *cfg, const proc_t *p,
                          int (*confine)(const config_t *, const proc_t *))
{
    static config_t as; /* large for a stack; this process is the spawner's alone */
    static proc_t pas;
    as = *cfg, pas = *p;
    if (p->cgi_uid >= 0)
        pas.uid = p->cgi_uid, pas.gid = p->cgi_gid, as.user = cfg->cgi_user;
    return confine(&as, &pas);
}

/* The spawner's life after the fork: confine, then serve until the loop goes. */
static void spawner_main(const config_t *cfg, const proc_t *p,
                         int (*confine)(const config_t *, const proc_t *), int sock)
{
    spawner_t sp = {.sock = sock};
    prctl(PR_SET_NAME, "gatling-cgi"); /* --reload refuses it by this name (reload.h) */
    memcpy(sp.limit, cfg->cgi_limit, sizeof sp.limit);
    struct sigaction ign = {.sa_handler = SIG_IGN}, chld = {.sa_handler = on_chld};
    sigemptyset(&ign.sa_mask), sigemptyset(&chld.sa_mask);
    const int quiet[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE, SIGWINCH};
    for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++)
        sigaction(quiet[i], &ign, NULL);
    sigaction(SIGCHLD, &chld, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigaddset(&block, SIGTERM); /* ignored here; blocked, so that a keeper just forked
                                   keeps an early SPAWN_END's TERM pending */
    sigprocmask(SIG_BLOCK, &block, &old);
    sigdelset(&old, SIGCHLD);
    sp.procfd = p->proc_fd >= 0 ? p->proc_fd /* -W: opened before the chroot */
                                : open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (confine_as_cgi(cfg, p, confine) < 0)
        _exit(1);
    gio_proc_private(); /* after the uid change: its programs must not read it */
    int keep[3] = {sock, p->error_fd, sp.procfd}, nkeep = 0;
    sort_fds(keep, &nkeep);
    close_from(3, keep, nkeep);
    elog_init(&sp.log, p->error_fd, cfg->error_log);
    sp.nchild = (size_t)cfg->cgi_max * 4 + 16;
    sp.child = calloc(sp.nchild, sizeof *sp.child);
    sp.msg = malloc(SPAWN_MSG_MAX);
    if (!sp.child || !sp.msg)
        _exit(1);
    for (;;) {
        struct pollfd p = {.fd = sock, .events = POLLIN};
        int r = ppoll(&p, 1, NULL, &old);
        if (got_chld)
            sweep(&sp);
        if (r <= 0 || !p.revents)
            continue;
        int k;
        while ((k = serve_one(&sp)) > 0)
            ;
        if (k == 0)
            break;
    }
    for (size_t i = 0; i < sp.nchild; i++) /* the server is gone: so go its CGIs */
        if (sp.child[i].pid)
            kill(sp.child[i].pid, SIGTERM);
    /* ... before the spawner: each keeper kills its program's processes
       (SIGKILL, keeper_kill) and exits, so none is left once this one is gone */
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
    _exit(0);
}

int spawn_start(const config_t *cfg, const proc_t *p,
                int (*confine)(const config_t *cfg, const proc_t *p), int *fd, pid_t *pid)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        fprintf(stderr, "gatling: socketpair() for the CGI spawner failed: %s\n",
                strerror(errno));
        return -1;
    }
    int big = 4 * SPAWN_MSG_MAX;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    fflush(NULL);
    *pid = fork();
    if (*pid == 0) {
        close(sv[0]);
        spawner_main(cfg, p, confine, sv[1]);
    }
    close(sv[1]);
    if (*pid < 0) {
        fprintf(stderr, "gatling: fork() for the CGI spawner failed: %s\n", strerror(errno));
        close(sv[0]);
        return -1;
    }
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    *fd = sv[0];
    return 0;
}

/* sendmsg without blocking or SIGPIPE: 0 or -1 with errno. */
static int send_msg(int fd, struct iovec *iov, int niov, const int *fds, int nfds)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(3 * sizeof(int))];
    } ctl;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
    if (nfds) {
        memset(&ctl, 0, sizeof ctl);
        m.msg_control = ctl.buf;
        m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    ssize_t r;
    do
        r = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -1 : 0;
}

int spawn_run(int fd, uint64_t id, const char *path, const char *cwd, const char *env,
              size_t envlen, int nenv, const int fds[3])
{
    size_t pl = strlen(path), cl = strlen(cwd);
    if (sizeof(spawn_hdr_t) + pl + cl + 2 + envlen > SPAWN_MSG_MAX || pl > 8192 || cl > 8192 ||
        nenv < 0 || nenv > SPAWN_ENV_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    spawn_hdr_t h = {.op = SPAWN_RUN, .nenv = (uint32_t)nenv, .id = id, .pathlen = (uint32_t)pl,
                     .cwdlen = (uint32_t)cl, .envlen = (uint32_t)envlen};
    struct iovec iov[] = {{&h, sizeof h},          {(char *)path, pl + 1},
                          {(char *)cwd, cl + 1},   {(char *)env, envlen}};
    return send_msg(fd, iov, 4, fds, 3);
}

int spawn_end(int fd, uint64_t id)
{
    spawn_hdr_t h = {.op = SPAWN_END, .id = id};
    struct iovec iov = {&h, sizeof h};
    return send_msg(fd, &iov, 1, NULL, 0);
}
