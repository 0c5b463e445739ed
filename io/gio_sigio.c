/*
 * gio backend: Linux realtime signals (F_SETSIG), the way before epoll.
 * Included by gio.c only.
 *
 * backend_add() makes the kernel queue one realtime signal {si_fd, si_band}
 * per readiness event on fd (F_SETOWN_EX to this thread, F_SETSIG, O_ASYNC).
 * The signal and SIGIO stay blocked and are only ever collected with
 * sigtimedwait(): no handlers, no async-signal-safety concerns.
 *
 * Level-triggered on top of edges.  A signal says "something happened on fd"
 * once.  The API promises two things no new signal announces: a descriptor
 * the caller left ready is reported again, and interest set on an fd that is
 * already ready is honoured.  So a signal is never reported as it stands: it
 * puts fd on the *check list*, and each round ends with one poll() (timeout
 * 0) over that list, which gives the current state.  On the list are:
 *   1. fds named by a signal this round;
 *   2. fds whose interest changed: events may have come while nobody wanted
 *      them;
 *   3. fds that poll() found ready last round: the caller may have stopped
 *      short.  An fd leaves the list once poll() finds it not ready; after
 *      that, every new arrival of data or of buffer space raises a signal
 *      (poll() itself sets the socket's no-space flag that makes the kernel
 *      signal POLL_OUT later);
 *   4. after a queue overflow, every fd with interest.
 * A stale signal (its fd closed, the number reused) costs one poll() slot and
 * is never reported, since poll() looks at the file that is there now.
 *
 * Overflow: once RLIMIT_SIGPENDING signals are queued, the kernel drops the
 * event and raises plain SIGIO.  Then the queue is flushed (setting the rt
 * signal to SIG_IGN discards its queued instances) and case 4 applies: one
 * O(n) poll() finds everything the lost signals would have named.
 *
 * Limits: one sigio loop per thread (signals go to the thread that created
 * it); children inherit the blocked signals (reset the mask before exec).
 * F_SETOWN belongs to the open file: a descriptor shared with another
 * process signals whoever registered it last.  Anonymous-inode descriptors
 * (eventfd, signalfd, timerfd) raise no SIGIO at all: gio_add() refuses them
 * (EINVAL) rather than never reporting them.  A unix-domain socket must be
 * registered before it first fills up: its EAGAIN arms the POLL_OUT signal
 * only while O_ASYNC is set, and unlike TCP's, its poll() does not arm it:
 * a writer to a unix socket must write until EAGAIN before it waits for
 * GIO_WRITE (a socket merely past a quarter of its buffer polls not
 * writable, and its space comes back unannounced).
 */
#include <signal.h>
#include <sys/stat.h>

#define GIO_SIGIO_RTOFFSET 4 /* the rt signal is SIGRTMIN + this */

typedef struct {
    int sig;          /* our realtime signal */
    sigset_t set;     /* { sig, SIGIO } */
    sigset_t oldmask; /* to restore in backend_free() */
    pid_t tid;        /* the loop's thread: signals go there */
    int *check;       /* the check list */
    uint8_t *incheck; /* fd -> on the check list */
    int ncheck;
    struct pollfd *pfd; /* built from the check list each round */
} sigio_state_t;

static void check_push(sigio_state_t *s, int fd)
{
    if (!s->incheck[fd]) {
        s->incheck[fd] = 1;
        s->check[s->ncheck++] = fd;
    }
}

/* Discard every queued instance of sig (POSIX: SIG_IGN drops pending ones). */
static void sig_flush(int sig)
{
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(sig, &ign, &old);
    sigaction(sig, &old, NULL);
}

static int backend_create(gio_loop_t *l)
{
    sigio_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->check = calloc(l->maxfds, sizeof *s->check);
    s->incheck = calloc(l->maxfds, 1);
    s->pfd = calloc(l->maxfds, sizeof *s->pfd);
    if (!s->check || !s->incheck || !s->pfd) {
        free(s->check), free(s->incheck), free(s->pfd), free(s);
        return -1;
    }
    s->sig = SIGRTMIN + GIO_SIGIO_RTOFFSET;
    s->tid = gettid();
    sigemptyset(&s->set);
    sigaddset(&s->set, s->sig);
    sigaddset(&s->set, SIGIO);
    sigprocmask(SIG_BLOCK, &s->set, &s->oldmask);
    l->api = s;
    return 0;
}

static void backend_free(gio_loop_t *l)
{
    sigio_state_t *s = l->api;
    /* registered fds stay open: silence them before the signals can be
       unblocked (their default action kills the process) */
    for (int fd = 0; fd <= l->maxfd; fd++)
        if (l->fds[fd].used)
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_ASYNC);
    sig_flush(s->sig);
    sig_flush(SIGIO);
    sigprocmask(SIG_SETMASK, &s->oldmask, NULL);
    free(s->check), free(s->incheck), free(s->pfd), free(s);
}

static int backend_add(gio_loop_t *l, int fd)
{
    sigio_state_t *s = l->api;
    struct f_owner_ex owner = {.type = F_OWNER_TID, .pid = s->tid};
    struct stat st;
    int fl;
    if (fstat(fd, &st) < 0)
        return -1;
    if (!(st.st_mode & S_IFMT)) { /* anon inode: no fasync, would never be reported */
        errno = EINVAL;
        return -1;
    }
    if (fcntl(fd, F_SETOWN_EX, &owner) < 0 || fcntl(fd, F_SETSIG, s->sig) < 0 ||
        (fl = fcntl(fd, F_GETFL)) < 0)
        return -1;
    /* O_ASYNC already set (a descriptor inherited from a process that watched
       it): the kernel's registration names that process's fd number in
       si_fd; clearing and setting the flag again registers ours */
    if ((fl & O_ASYNC) && fcntl(fd, F_SETFL, fl & ~O_ASYNC) < 0)
        return -1;
    if (fcntl(fd, F_SETFL, fl | O_ASYNC) < 0)
        return -1;
    return 0;
}

static int backend_update(gio_loop_t *l, int fd, unsigned old, unsigned want)
{
    (void)old;
    if (want) /* whatever happened while it was not wanted: poll() will tell */
        check_push(l->api, fd);
    return 0;
}

static void backend_del(gio_loop_t *l, int fd, unsigned kernel, int closing)
{
    (void)l, (void)kernel;
    /* O_ASYNC belongs to the open file, which may live on in another process
       (a listener handed to a new binary): only an fd that stays open here
       and unwatched is silenced (errors: already closed) */
    int fl = closing ? -1 : fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_ASYNC))
        fcntl(fd, F_SETFL, fl & ~O_ASYNC);
    /* it may stay on the check list: check_ready() skips it unless re-added */
}

/* Take queued signals onto the check list; wait up to timeout_ms for the first. */
static int collect(gio_loop_t *l, int timeout_ms)
{
    sigio_state_t *s = l->api;
    struct timespec ts = {timeout_ms / 1000, timeout_ms % 1000 * 1000000L}, zero = {0, 0};
    siginfo_t si;
    /* at most maxfds per round; more stay queued for the next one */
    for (int i = 0; i < l->maxfds; i++) {
        int sig = sigtimedwait(&s->set, &si, i ? &zero : timeout_ms < 0 ? NULL : &ts);
        if (sig < 0) /* EAGAIN: queue empty or timed out; EINTR: a handler ran */
            return i == 0 && errno == EINTR ? -1 : 0;
        if (sig == SIGIO) { /* the rt queue overflowed: events were lost */
            sig_flush(s->sig);
            for (int fd = 0; fd <= l->maxfd; fd++)
                if (l->fds[fd].used && l->fds[fd].kernel)
                    check_push(s, fd);
        } else if (si.si_fd >= 0 && si.si_fd < l->maxfds) {
            check_push(s, si.si_fd);
        }
    }
    return 0;
}

/* poll() the check list; the ready ones are reported and stay on it. */
static int check_ready(gio_loop_t *l)
{
    sigio_state_t *s = l->api;
    int n = 0, k = 0;
    for (int i = 0; i < s->ncheck; i++) {
        int fd = s->check[i];
        s->incheck[fd] = 0;
        if (l->fds[fd].used && l->fds[fd].kernel)
            s->pfd[n++] = (struct pollfd){.fd = fd, .events = l->fds[fd].kernel};
    }
    s->ncheck = 0;
    int r = n ? poll(s->pfd, n, 0) : 0;
    for (int i = 0; i < n; i++) {
        if (r < 0) { /* could not look (ENOMEM): look again next round */
            check_push(s, s->pfd[i].fd);
            continue;
        }
        if (!s->pfd[i].revents)
            continue;
        if (s->pfd[i].revents & POLLNVAL) /* closed behind our back */
            s->pfd[i].revents = POLLERR;
        l->fired[k].fd = s->pfd[i].fd;
        l->fired[k++].events = (unsigned short)s->pfd[i].revents;
        check_push(s, s->pfd[i].fd);
    }
    return k;
}

static int backend_poll(gio_loop_t *l, int timeout_ms)
{
    sigio_state_t *s = l->api;
    /* with fds to re-check, look without sleeping first; sleep only if none is ready */
    int t = s->ncheck ? 0 : timeout_ms;
    for (;;) {
        if (collect(l, t) < 0)
            return -1;
        int n = check_ready(l);
        if (n > 0 || t == timeout_ms)
            return n;
        t = timeout_ms;
    }
}

static const char *backend_name(void)
{
    return "sigio";
}
