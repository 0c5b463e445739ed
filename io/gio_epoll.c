/*
 * gio backend: Linux epoll.  Included by gio.c only.
 *
 * Level-triggered, except for descriptors in gio_recv_mode (plain HTTP
 * connections, whose every read and send goes through gio_recv and
 * gio_send): those are registered once, for input and output, edge-
 * triggered, and never touched again until they close.  A response too big
 * for the socket buffer therefore costs no epoll_ctl to ask for write
 * readiness and none to drop it (a 1 MiB response cost two).
 *   The API stays level-triggered.  Each edge sets a flag (can read, can
 * write), and the flag stays set until gio_recv or gio_send meets EAGAIN or
 * a short transfer, which on a non-blocking TCP socket means the buffer ran
 * empty or full: after that the kernel signals the next change with an
 * edge of its own.  A descriptor whose flags meet what its owner wants is
 * on the `hot` list and reported every round, as a level-triggered poll
 * would; an idle connection (writable, wanting only input) is not, so a
 * round costs nothing per idle connection.  Errors and hang-ups stay set
 * (reported while the owner wants anything, as level-triggered epoll would).
 * A short transfer for another reason (a file that shrank under sendfile)
 * at worst waits for the connection's deadline.
 */
#include <sys/epoll.h>

/* the event bits are poll's: nothing to translate (lighttpd's trick) */
_Static_assert(EPOLLIN == POLLIN && EPOLLOUT == POLLOUT && EPOLLERR == POLLERR &&
                   EPOLLHUP == POLLHUP,
               "epoll bits differ from poll bits");

#define BACKEND_HAS_RECV
#define BACKEND_HAS_SEND
#define ET_REG 0x80 /* et[fd]: registered edge-triggered; the rest are GIO_* bits seen */

typedef struct {
    int epfd;
    struct epoll_event *events;
    uint8_t *et;   /* fd -> ET_REG | readiness seen and not yet used up */
    int *hot;      /* edge-triggered fds whose readiness meets their want */
    uint8_t *onhot;
    int nhot;
} epoll_state_t;

static int backend_create(gio_loop_t *l)
{
    epoll_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->events = calloc(l->maxfds, sizeof *s->events);
    s->et = calloc(l->maxfds, 1);
    s->hot = calloc(l->maxfds, sizeof *s->hot);
    s->onhot = calloc(l->maxfds, 1);
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!s->events || !s->et || !s->hot || !s->onhot || s->epfd < 0) {
        if (s->epfd >= 0)
            close(s->epfd);
        free(s->events), free(s->et), free(s->hot), free(s->onhot);
        free(s);
        return -1;
    }
    l->api = s;
    return 0;
}

static void backend_free(gio_loop_t *l)
{
    epoll_state_t *s = l->api;
    close(s->epfd);
    free(s->events), free(s->et), free(s->hot), free(s->onhot);
    free(s);
}

static int backend_add(gio_loop_t *l, int fd)
{
    (void)l, (void)fd;
    return 0;
}

/* Does fd have news for its owner?  Nothing while it wants nothing (a
   connection waiting for a job): as level-triggered epoll, which drops it. */
static int et_due(const gio_loop_t *l, const epoll_state_t *s, int fd)
{
    unsigned want = l->fds[fd].want;
    unsigned seen = s->et[fd] & (GIO_READ | GIO_WRITE | GIO_ERROR | GIO_HANGUP);
    return (s->et[fd] & ET_REG) && want && (seen & (want | GIO_ERROR | GIO_HANGUP));
}

/* Report fd every round from now on if what it saw meets what it wants. */
static void et_check(gio_loop_t *l, epoll_state_t *s, int fd)
{
    if (et_due(l, s, fd) && !s->onhot[fd]) {
        s->onhot[fd] = 1;
        s->hot[s->nhot++] = fd;
    }
}

static int backend_update(gio_loop_t *l, int fd, unsigned old, unsigned want)
{
    epoll_state_t *s = l->api;
    if (s->et[fd] & ET_REG) { /* registered for good: only the report changes */
        et_check(l, s, fd);
        return 0;
    }
    if (!old && want && l->fds[fd].recvmode) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.fd = fd};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
            return -1;
        s->et[fd] = ET_REG; /* the kernel reports what is ready now as a first edge */
        return 0;
    }
    struct epoll_event ev = {.events = want, .data.fd = fd};
    int op = !old ? EPOLL_CTL_ADD : !want ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    int r = epoll_ctl(s->epfd, op, fd, &ev);
    if (r < 0 && op == EPOLL_CTL_ADD && errno == EEXIST)
        r = epoll_ctl(s->epfd, EPOLL_CTL_MOD, fd, &ev);
    return r;
}

static void backend_del(gio_loop_t *l, int fd, unsigned kernel, int closing)
{
    epoll_state_t *s = l->api;
    struct epoll_event ev = {0};
    if (s->et[fd] & ET_REG)
        kernel = 1; /* registered whatever the owner wants now */
    s->et[fd] = 0;  /* a stale entry on the hot list is skipped */
    /* closing the last reference to the file removes it from the epoll set */
    if (kernel && closing != GIO_DEL_SOLE)
        epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, &ev);
}

/* gio_recv: read(2); a short read or EAGAIN means the socket ran empty. */
static long backend_recv(gio_loop_t *l, int fd, void *buf, size_t len)
{
    epoll_state_t *s = l->api;
    long r = gio_read(fd, buf, len);
    if (r == GIO_AGAIN || (r > 0 && (size_t)r < len))
        s->et[fd] &= (uint8_t)~GIO_READ;
    return r;
}

/* gio_send: the batch's sendmsg and sendfile; stopping short of the budget
   with bytes left means the socket buffer is full. */
static long backend_send(gio_loop_t *l, int fd, gio_batch_t *b, uint64_t budget)
{
    epoll_state_t *s = l->api;
    long r = gio_batch_send(b, fd, budget);
    if (r == GIO_AGAIN || (r >= 0 && !gio_batch_done(b) && (!budget || (uint64_t)r < budget)))
        s->et[fd] &= (uint8_t)~GIO_WRITE;
    return r;
}

static int backend_poll(gio_loop_t *l, int timeout_ms)
{
    epoll_state_t *s = l->api;
    int keep = 0; /* readiness the owner wants and left: news now, do not sleep */
    for (int i = 0; i < s->nhot; i++) {
        int fd = s->hot[i];
        if (l->fds[fd].used && et_due(l, s, fd)) {
            s->hot[keep++] = fd;
            timeout_ms = 0;
        } else {
            s->onhot[fd] = 0;
        }
    }
    s->nhot = keep;
    int n = epoll_wait(s->epfd, s->events, l->maxfds, timeout_ms);
    int k = 0;
    for (int i = 0; i < n; i++) {
        int fd = s->events[i].data.fd;
        unsigned ev = s->events[i].events & (GIO_READ | GIO_WRITE | GIO_ERROR | GIO_HANGUP);
        if (fd >= 0 && fd < l->maxfds && (s->et[fd] & ET_REG)) {
            s->et[fd] |= (uint8_t)ev; /* reported below, from the hot list */
            et_check(l, s, fd);
            continue;
        }
        l->fired[k].fd = fd;
        l->fired[k++].events = ev;
    }
    for (int i = 0; i < s->nhot; i++) {
        int fd = s->hot[i];
        l->fired[k].fd = fd;
        l->fired[k++].events = s->et[fd] & (GIO_READ | GIO_WRITE | GIO_ERROR | GIO_HANGUP);
    }
    return n < 0 ? n : k;
}

static const char *backend_name(void)
{
    return "epoll";
}
