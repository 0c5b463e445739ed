/*
 * gio backend: io_uring readiness (IORING_OP_POLL_ADD), liburing >= 2.2.
 * Included by gio.c only.
 *
 * Each fd with interest has at most one poll request in flight, armed with
 * the interest mask.  Interest changes and re-arms are SQEs that ride on the
 * io_uring_enter() that waits, so they cost no extra syscall.
 *
 * Oneshot, re-armed — not multishot.  A multishot poll posts a CQE per
 * wake-up: it is edge-triggered, and IORING_POLL_ADD_LEVEL is refused with it
 * (EINVAL on 6.x).  The API is level-triggered: a descriptor the caller left
 * ready must be reported again.  On top of multishot that takes one extra
 * probe per reported fd per round, which is exactly what re-arming a oneshot
 * poll is: the kernel checks readiness at arm time and completes at once if
 * the fd is still ready.  So a completed poll is re-armed in the next round
 * (if still wanted), and multishot would buy nothing but a cancel path.
 *
 * Stale completions.  user_data carries fd and a per-fd generation; removing
 * a request (interest change, gio_del) bumps the generation, so its late
 * -ECANCELED, or a completion that raced the removal, is ignored — also when
 * the fd number is already reused.  gio_del submits the removal at once: the
 * request holds a file reference, and the peer should see a close right away.
 */
#include <liburing.h>

#define UD_CONTROL UINT64_MAX /* POLL_REMOVE's own completions: ignored */

typedef struct {
    struct io_uring ring;
    uint32_t *gen;  /* fd -> generation of its poll request */
    uint8_t *armed; /* fd -> mask of the request in flight, 0 = none */
    int *rearm;     /* fds whose poll completed: re-arm next round */
    uint8_t *onrearm;
    int nrearm;
} uring_state_t;

static uint64_t ud_of(uring_state_t *s, int fd)
{
    return (uint64_t)s->gen[fd] << 32 | (uint32_t)fd;
}

static struct io_uring_sqe *sqe_get(uring_state_t *s)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
    if (!sqe && io_uring_submit(&s->ring) >= 0) /* SQ full: flush it */
        sqe = io_uring_get_sqe(&s->ring);
    return sqe;
}

static int arm(uring_state_t *s, int fd, unsigned mask)
{
    struct io_uring_sqe *sqe = sqe_get(s);
    if (!sqe) {
        errno = EBUSY;
        return -1;
    }
    io_uring_prep_poll_add(sqe, fd, mask);
    io_uring_sqe_set_data64(sqe, ud_of(s, fd));
    s->armed[fd] = mask;
    return 0;
}

static void disarm(uring_state_t *s, int fd)
{
    struct io_uring_sqe *sqe = sqe_get(s);
    if (sqe) { /* without one the request lingers until it fires, then is ignored */
        io_uring_prep_poll_remove(sqe, ud_of(s, fd));
        io_uring_sqe_set_data64(sqe, UD_CONTROL);
    }
    s->gen[fd]++;
    s->armed[fd] = 0;
}

static int backend_create(gio_loop_t *l)
{
    uring_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->gen = calloc(l->maxfds, sizeof *s->gen);
    s->armed = calloc(l->maxfds, 1);
    s->rearm = calloc(l->maxfds, sizeof *s->rearm);
    s->onrearm = calloc(l->maxfds, 1);
    /* one live request per fd, plus removals: a CQ of 2x the table rarely
       overflows, and with IORING_FEAT_NODROP an overflow loses nothing */
    struct io_uring_params p = {.flags = IORING_SETUP_CQSIZE};
    p.cq_entries = l->maxfds < 256 ? 512 : l->maxfds < 32768 ? 2 * l->maxfds : 65536;
    int r = -ENOMEM;
    if (s->gen && s->armed && s->rearm && s->onrearm) {
        r = io_uring_queue_init_params(256, &s->ring, &p);
        if (r == 0 && !(p.features & IORING_FEAT_NODROP)) {
            io_uring_queue_exit(&s->ring);
            r = -ENOSYS;
        }
    }
    if (r < 0) {
        free(s->gen), free(s->armed), free(s->rearm), free(s->onrearm), free(s);
        errno = -r;
        return -1;
    }
    l->api = s;
    return 0;
}

static void backend_free(gio_loop_t *l)
{
    uring_state_t *s = l->api;
    io_uring_queue_exit(&s->ring); /* cancels every request in flight */
    free(s->gen), free(s->armed), free(s->rearm), free(s->onrearm), free(s);
}

static int backend_add(gio_loop_t *l, int fd)
{
    (void)l, (void)fd;
    return 0;
}

static int backend_update(gio_loop_t *l, int fd, unsigned old, unsigned want)
{
    uring_state_t *s = l->api;
    (void)old;
    if (s->armed[fd] == want)
        return 0;
    if (s->armed[fd])
        disarm(s, fd);
    return want ? arm(s, fd, want) : 0;
}

static void backend_del(gio_loop_t *l, int fd, unsigned kernel, int closing)
{
    (void)closing;
    uring_state_t *s = l->api;
    (void)kernel;
    if (s->armed[fd]) {
        disarm(s, fd);
        io_uring_submit(&s->ring);
    }
}

static int backend_poll(gio_loop_t *l, int timeout_ms)
{
    uring_state_t *s = l->api;
    for (int i = 0; i < s->nrearm; i++) {
        int fd = s->rearm[i];
        s->onrearm[fd] = 0;
        if (l->fds[fd].used && l->fds[fd].kernel && !s->armed[fd])
            arm(s, fd, l->fds[fd].kernel);
    }
    s->nrearm = 0;

    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = {timeout_ms / 1000, timeout_ms % 1000 * 1000000L};
    int r = timeout_ms < 0 ? io_uring_submit_and_wait(&s->ring, 1)
                           : io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1, &ts, NULL);
    if (r == -EINTR || (r < 0 && r != -ETIME && r != -EAGAIN && r != -EBUSY)) {
        errno = -r; /* CQEs already there stay for the next round */
        return -1;
    }
    unsigned head, seen = 0;
    int k = 0;
    io_uring_for_each_cqe(&s->ring, head, cqe)
    {
        seen++;
        uint32_t fd = (uint32_t)cqe->user_data;
        if (fd >= (uint32_t)l->maxfds || cqe->user_data != ud_of(s, fd) || !s->armed[fd])
            continue; /* a removal's own CQE, or a stale request */
        s->armed[fd] = 0;
        if (!s->onrearm[fd]) {
            s->onrearm[fd] = 1;
            s->rearm[s->nrearm++] = fd;
        }
        l->fired[k].fd = fd;
        l->fired[k++].events = cqe->res < 0 ? GIO_ERROR : (unsigned)cqe->res;
    }
    io_uring_cq_advance(&s->ring, seen);
    return k;
}

static const char *backend_name(void)
{
    return "uring";
}
