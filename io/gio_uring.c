/*
 * gio backend: io_uring, liburing >= 2.2.  Included by gio.c only.
 *
 * Readiness: each fd with interest has a poll request (IORING_OP_POLL_ADD)
 * in flight, armed with the interest mask.  Interest changes and re-arms
 * are SQEs that ride on the io_uring_enter() that waits, so they cost no
 * extra syscall.
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
 * Receives (gio_recv_mode): for a descriptor whose reads all go through
 * gio_recv(), read interest is a receive request (IORING_OP_RECV) instead of
 * a poll, with the buffer picked by the kernel from a ring of RECV_BUFS
 * buffers of RECV_BUF_SIZE bytes (IOSQE_BUFFER_SELECT): a buffer is taken
 * only when data arrives, so a thousand idle connections hold none.  The
 * completion holds the data; the fd is reported readable, and gio_recv()
 * copies from the buffer instead of calling read(2); when the caller has
 * taken all of it the buffer goes back to the ring and the next receive
 * rides on the next wait.  A request thus costs no read system call, and
 * one io_uring_enter() serves every connection that the round touched.
 * What the caller leaves in the buffer is reported again each round (the
 * level-triggered promise).  End of file and errors are held the same way
 * and returned by gio_recv().
 *   Sends (gio_send on such a descriptor) go through the ring as well when
 * the batch is memory only (a small response, an error page): up to
 * SENDQ_MAX bytes are copied into a queue of gio's own, so a connection
 * freed meanwhile cannot pull memory from under the kernel, and an
 * IORING_OP_SEND of them rides on the next wait.  gio_send returns
 * GIO_AGAIN meanwhile; the completion is reported as write readiness, and
 * the next gio_send consumes from the batch what went out, as a sendmsg
 * would have.  A batch with a file range goes by sendmsg and sendfile(2),
 * as before, never while a queue is in flight, so bytes leave in order.
 * gio_del cancels a send in flight; its queue is freed when the
 * cancellation completes.
 *   A receive in flight is never cancelled by an interest change (its
 * completion may already hold data that would be lost): only gio_del ends
 * it.  Write interest of such an fd is a poll of its own beside it.  When
 * the ring has no free buffer the receive fails with ENOBUFS, and the fd
 * falls back to a read poll and read(2) until that poll has fired once.
 *
 * Stale completions.  user_data carries fd, the kind of request and a
 * per-fd generation; removing a request (interest change, gio_del) bumps the
 * generation, so its late -ECANCELED, or a completion that raced the
 * removal, is ignored (a buffer it took goes back to the ring) — also when
 * the fd number is already reused.  gio_del submits the removal at once: the
 * request holds a file reference, and the peer should see a close right away.
 */
#include <liburing.h>
#include <sys/mman.h>

#define BACKEND_HAS_RECV
#define BACKEND_HAS_SEND
#define UD_CONTROL UINT64_MAX /* removals' own completions: ignored */
#define UD_RECV (1ULL << 63)  /* the request is a receive, not a poll */
#define UD_SEND (1ULL << 62)  /* a send: the rest of user_data is its sendq_t */
#define RECV_BGID 7
#define RECV_BUFS 256 /* a power of two */
#define RECV_BUF_SIZE 4096

enum { HELD_NONE, HELD_DATA, HELD_EOF, HELD_ERR };

typedef struct {
    uint16_t bid;   /* HELD_DATA: the ring buffer */
    uint16_t off;   /* bytes of it taken */
    uint16_t len;   /* bytes in it */
    uint8_t state;  /* HELD_* */
    uint8_t err;    /* HELD_ERR: the errno */
} held_t;

/* Bytes queued for one descriptor; lives until its send completes. */
typedef struct sendq {
    struct sendq *next; /* orphans: the list of queues whose fd is gone */
    int fd;          /* -1 once the fd was removed: freed by the completion */
    int err;         /* a send failed: its errno, for the next gio_send */
    size_t len, off; /* bytes queued, bytes sent */
    size_t taken;    /* bytes of them consumed from the owner's batch */
    size_t inflight; /* bytes of the send in flight, 0 = none submitted */
    int small;       /* a SENDQ_SMALL block: goes back to the spares */
    char data[];
} sendq_t;

/* Bytes still to go and no error: a send is queued or in flight, the owner waits. */
static int sq_busy(const sendq_t *q)
{
    return q->off < q->len && !q->err;
}

#define SENDQ_MAX (256 * 1024) /* more than that goes by sendmsg directly */
/*
 * Queues for small responses are blocks of SENDQ_SMALL bytes kept on a
 * free list (at most SPARES_MAX of them), not malloc'd and freed per
 * response: a hundred connections' queues freed together let malloc give
 * the top of the heap back to the kernel (brk), and the next round faulted
 * it in again page by page -- a page fault per request or two.
 */
#define SENDQ_SMALL 4096
#define SPARES_MAX 256

typedef struct {
    struct io_uring ring;
    sendq_t **sq;  /* fd -> its send queue, or NULL */
    int *tosend;   /* fds whose queue waits for submission */
    uint8_t *ontosend;
    int ntosend;
    sendq_t *orphans; /* in flight, their fd removed: freed by completion or at the end */
    sendq_t *spares;  /* free SENDQ_SMALL blocks, linked by next */
    int nspares;
    uint32_t *gen;    /* fd -> generation of its poll request */
    uint32_t *rgen;   /* fd -> generation of its receive */
    uint8_t *armed;   /* fd -> mask of the poll in flight, 0 = none */
    uint8_t *recving; /* fd -> a receive is in flight */
    uint8_t *nobuf;   /* fd -> the ring was empty: read by poll + read(2) for now
                         (1), and a poll has fired since: receives again (2) */
    held_t *held;     /* fd -> what a completed receive left */
    int *rearm;       /* fds to look at again next round */
    uint8_t *onrearm;
    int nrearm;
    int *pending; /* fds holding data, EOF or an error: reported each round */
    uint8_t *onpending;
    int npending;
    struct io_uring_buf_ring *br; /* NULL: no receive path (old kernel) */
    char *bufs;
} uring_state_t;

/* A queue for n bytes: a spare block when it fits, else its own allocation. */
static sendq_t *sq_new(uring_state_t *s, size_t n)
{
    sendq_t *q;
    int small = sizeof *q + n <= SENDQ_SMALL;
    if (small && s->spares) {
        q = s->spares;
        s->spares = q->next;
        s->nspares--;
    } else if (!(q = malloc(small ? SENDQ_SMALL : sizeof *q + n))) {
        return NULL;
    }
    *q = (sendq_t){.small = small};
    return q;
}

static void sq_free(uring_state_t *s, sendq_t *q)
{
    if (q->small && s->nspares < SPARES_MAX) {
        q->next = s->spares;
        s->spares = q;
        s->nspares++;
    } else {
        free(q);
    }
}

static uint64_t ud_of(uring_state_t *s, int fd)
{
    return (uint64_t)(s->gen[fd] & 0x3fffffff) << 32 | (uint32_t)fd;
}

static uint64_t rud_of(uring_state_t *s, int fd)
{
    return UD_RECV | (uint64_t)(s->rgen[fd] & 0x3fffffff) << 32 | (uint32_t)fd;
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
    s->armed[fd] = (uint8_t)mask;
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

static int recv_arm(uring_state_t *s, int fd)
{
    struct io_uring_sqe *sqe = sqe_get(s);
    if (!sqe) {
        errno = EBUSY;
        return -1;
    }
    io_uring_prep_recv(sqe, fd, NULL, RECV_BUF_SIZE, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = RECV_BGID;
    io_uring_sqe_set_data64(sqe, rud_of(s, fd));
    s->recving[fd] = 1;
    return 0;
}

static void recv_cancel(uring_state_t *s, int fd)
{
    struct io_uring_sqe *sqe = sqe_get(s);
    if (sqe) {
        io_uring_prep_cancel64(sqe, rud_of(s, fd), 0);
        io_uring_sqe_set_data64(sqe, UD_CONTROL);
    }
    s->rgen[fd]++;
    s->recving[fd] = 0;
}

static void buf_recycle(uring_state_t *s, uint16_t bid)
{
    io_uring_buf_ring_add(s->br, s->bufs + (size_t)bid * RECV_BUF_SIZE, RECV_BUF_SIZE, bid,
                          io_uring_buf_ring_mask(RECV_BUFS), 0);
    io_uring_buf_ring_advance(s->br, 1);
}

static void push(int *list, uint8_t *on, int *n, int fd)
{
    if (!on[fd]) {
        on[fd] = 1;
        list[(*n)++] = fd;
    }
}

/* The receive path: a ring of buffers registered with the kernel, or none. */
static void recv_setup(uring_state_t *s)
{
    size_t rsz = RECV_BUFS * sizeof(struct io_uring_buf);
    void *r = mmap(NULL, rsz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *b = malloc((size_t)RECV_BUFS * RECV_BUF_SIZE);
    if (r == MAP_FAILED || !b) {
        if (r != MAP_FAILED)
            munmap(r, rsz);
        free(b);
        return;
    }
    s->br = r;
    io_uring_buf_ring_init(s->br);
    struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)r, .ring_entries = RECV_BUFS,
                                   .bgid = RECV_BGID};
    if (io_uring_register_buf_ring(&s->ring, &reg, 0) < 0) { /* before 5.19: polls only */
        munmap(r, rsz);
        free(b);
        s->br = NULL;
        return;
    }
    s->bufs = b;
    for (int i = 0; i < RECV_BUFS; i++)
        io_uring_buf_ring_add(s->br, b + (size_t)i * RECV_BUF_SIZE, RECV_BUF_SIZE, (uint16_t)i,
                              io_uring_buf_ring_mask(RECV_BUFS), i);
    io_uring_buf_ring_advance(s->br, RECV_BUFS);
}

/* The per-fd tables and the state itself (any of them may be NULL). */
static void state_free(uring_state_t *s)
{
    free(s->gen), free(s->rgen), free(s->armed), free(s->recving), free(s->nobuf);
    free(s->held), free(s->rearm), free(s->onrearm), free(s->pending), free(s->onpending);
    free(s->sq), free(s->tosend), free(s->ontosend), free(s);
}

static int backend_create(gio_loop_t *l)
{
    uring_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    size_t n = (size_t)l->maxfds;
    s->gen = calloc(n, sizeof *s->gen);
    s->rgen = calloc(n, sizeof *s->rgen);
    s->armed = calloc(n, 1);
    s->recving = calloc(n, 1);
    s->nobuf = calloc(n, 1);
    s->held = calloc(n, sizeof *s->held);
    s->rearm = calloc(n, sizeof *s->rearm);
    s->onrearm = calloc(n, 1);
    s->pending = calloc(n, sizeof *s->pending);
    s->onpending = calloc(n, 1);
    s->sq = calloc(n, sizeof *s->sq);
    s->tosend = calloc(n, sizeof *s->tosend);
    s->ontosend = calloc(n, 1);
    /* a poll and a receive per fd, plus removals: a CQ of 4x the table
       rarely overflows, and with IORING_FEAT_NODROP an overflow loses nothing */
    /* Completions' task work runs when the loop enters the kernel anyway,
       not by interrupting it (COOP_TASKRUN; TASKRUN_FLAG tells liburing's
       submit when an enter is due for it): 10-15% less CPU per keep-alive
       request here.  Kernels before 5.19 refuse the flags: then without. */
    unsigned coop = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    struct io_uring_params p = {.flags = IORING_SETUP_CQSIZE | coop};
    unsigned cq = l->maxfds < 128 ? 512 : l->maxfds < 16384 ? 4 * (unsigned)l->maxfds : 65536;
    p.cq_entries = cq;
    int r = -ENOMEM;
    if (s->gen && s->rgen && s->armed && s->recving && s->nobuf && s->held && s->rearm &&
        s->onrearm && s->pending && s->onpending && s->sq && s->tosend && s->ontosend) {
        r = io_uring_queue_init_params(256, &s->ring, &p);
        if (r == -EINVAL) {
            p = (struct io_uring_params){.flags = IORING_SETUP_CQSIZE, .cq_entries = cq};
            r = io_uring_queue_init_params(256, &s->ring, &p);
        }
        if (r == 0 && !(p.features & IORING_FEAT_NODROP)) {
            io_uring_queue_exit(&s->ring);
            r = -ENOSYS;
        }
    }
    if (r < 0) {
        state_free(s);
        errno = -r;
        return -1;
    }
    /* a new binary exec'ed on upgrade must not inherit the ring */
    fcntl(s->ring.ring_fd, F_SETFD, FD_CLOEXEC);
    recv_setup(s);
    l->api = s;
    return 0;
}

/* Free a list of queues linked by next. */
static void free_queues(sendq_t *q)
{
    while (q) {
        sendq_t *next = q->next;
        free(q);
        q = next;
    }
}

static void backend_free(gio_loop_t *l)
{
    uring_state_t *s = l->api;
    io_uring_queue_exit(&s->ring); /* cancels every request in flight */
    if (s->br) {
        munmap(s->br, RECV_BUFS * sizeof(struct io_uring_buf));
        free(s->bufs);
    }
    for (int fd = 0; fd < l->maxfds; fd++)
        free(s->sq[fd]); /* the ring is gone: no completion will come */
    free_queues(s->orphans);
    free_queues(s->spares);
    state_free(s);
}

static int backend_add(gio_loop_t *l, int fd)
{
    (void)l, (void)fd;
    return 0;
}

/* Does fd take its input from completed receives? */
static int by_recv(gio_loop_t *l, int fd)
{
    uring_state_t *s = l->api;
    return s->br && l->fds[fd].recvmode && s->nobuf[fd] != 1;
}

/*
 * Bring fd's requests in line with interest `want`: a receive for read
 * interest (unless data is held: it is reported from the pending list, or a
 * receive is already in flight), and a poll for the rest.
 */
static int sync_fd(gio_loop_t *l, int fd, unsigned want)
{
    uring_state_t *s = l->api;
    unsigned pollmask = want;
    if (s->sq[fd]) /* its completion is the write readiness */
        pollmask &= ~(unsigned)GIO_WRITE;
    if (by_recv(l, fd)) {
        pollmask &= ~(unsigned)GIO_READ;
        if ((want & GIO_READ) && !s->recving[fd] && s->held[fd].state == HELD_NONE &&
            recv_arm(s, fd) < 0)
            return -1;
    }
    if (s->armed[fd] == pollmask)
        return 0;
    if (s->armed[fd])
        disarm(s, fd);
    return pollmask ? arm(s, fd, pollmask) : 0;
}

static int backend_update(gio_loop_t *l, int fd, unsigned old, unsigned want)
{
    (void)old;
    return sync_fd(l, fd, want);
}

static void backend_del(gio_loop_t *l, int fd, unsigned kernel, int closing)
{
    (void)closing, (void)kernel;
    uring_state_t *s = l->api;
    int submit = 0;
    if (s->armed[fd])
        disarm(s, fd), submit = 1;
    if (s->recving[fd])
        recv_cancel(s, fd), submit = 1;
    sendq_t *q = s->sq[fd];
    if (q) {
        s->sq[fd] = NULL;
        if (q->inflight) { /* the kernel may still read it: the completion frees it */
            q->fd = -1;
            q->next = s->orphans;
            s->orphans = q;
            struct io_uring_sqe *sqe = sqe_get(s);
            if (sqe) {
                io_uring_prep_cancel64(sqe, UD_SEND | (uint64_t)(uintptr_t)q, 0);
                io_uring_sqe_set_data64(sqe, UD_CONTROL);
                submit = 1;
            }
        } else {
            sq_free(s, q);
        }
    }
    if (s->held[fd].state == HELD_DATA)
        buf_recycle(s, s->held[fd].bid);
    s->held[fd].state = HELD_NONE;
    s->nobuf[fd] = 0;
    if (submit)
        io_uring_submit(&s->ring);
}

/* gio_recv() on a descriptor in receive mode; GIO_PASS: read(2) it. */
static long backend_recv(gio_loop_t *l, int fd, void *buf, size_t len)
{
    uring_state_t *s = l->api;
    held_t *h = &s->held[fd];
    switch (h->state) {
    case HELD_DATA: {
        size_t n = (size_t)(h->len - h->off);
        if (n > len)
            n = len;
        memcpy(buf, s->bufs + (size_t)h->bid * RECV_BUF_SIZE + h->off, n);
        h->off = (uint16_t)(h->off + n);
        if (h->off == h->len) { /* all taken: the buffer goes back, a receive follows */
            buf_recycle(s, h->bid);
            h->state = HELD_NONE;
            push(s->rearm, s->onrearm, &s->nrearm, fd);
        }
        return (long)n;
    }
    case HELD_EOF: return GIO_EOF;
    case HELD_ERR: errno = h->err; return GIO_ERR;
    default:
        /* nothing held: the data, if any, comes with the next receive */
        return by_recv(l, fd) ? GIO_AGAIN : GIO_PASS;
    }
}

/*
 * gio_send() on a descriptor in receive mode.  A batch of memory only is
 * copied into the fd's queue (not consumed: its bytes count as sent when
 * the send completes, as with sendmsg) and GIO_AGAIN is returned; the
 * completion reports the fd writable, and the next call consumes what went
 * out.  GIO_PASS: send it directly (a file range, or no receive mode).
 */
static long backend_send(gio_loop_t *l, int fd, gio_batch_t *b, uint64_t budget)
{
    uring_state_t *s = l->api;
    sendq_t *q = s->sq[fd];
    if (q) {
        if (sq_busy(q))
            return GIO_AGAIN;
        size_t done = q->off - q->taken;
        gio_batch_consume(b, done);
        q->taken = q->off;
        if (!done && q->err) {
            errno = q->err;
            return GIO_ERR; /* the queue stays: the owner closes the fd */
        }
        if (q->off == q->len || q->err) { /* all out (or the rest never will) */
            s->sq[fd] = NULL;
            sq_free(s, q);
            push(s->rearm, s->onrearm, &s->nrearm, fd); /* a write poll, if wanted */
        }
        return done ? (long)done : GIO_AGAIN;
    }
    if (gio_batch_done(b))
        return 0;
    if (!s->br) /* gio_send calls only for descriptors in receive mode */
        return GIO_PASS;
    /* memory only: a head before a file range goes by sendmsg with
       MSG_MORE, sharing packets with the body, as gio_batch_send does */
    uint64_t n = 0;
    for (size_t i = b->first; i < b->n; i++) {
        if (!b->c[i].buf)
            return GIO_PASS;
        n += b->c[i].left;
    }
    if (budget && n > budget)
        n = budget;
    if (n > SENDQ_MAX)
        n = SENDQ_MAX;
    if (!(q = sq_new(s, (size_t)n)))
        return GIO_PASS;
    q->fd = fd;
    long got = gio_batch_copy(b, q->data, (size_t)n);
    if (got <= 0) {
        sq_free(s, q);
        return got < 0 ? GIO_ERR : GIO_PASS;
    }
    q->len = (size_t)got;
    s->sq[fd] = q;
    if (s->armed[fd] & GIO_WRITE) /* the completion says it now */
        sync_fd(l, fd, l->fds[fd].kernel);
    push(s->tosend, s->ontosend, &s->ntosend, fd);
    return GIO_AGAIN;
}

/* Submit what fd's queue holds beyond what is sent. */
static void send_submit(uring_state_t *s, sendq_t *q)
{
    struct io_uring_sqe *sqe = sqe_get(s);
    if (!sqe) { /* try again next round */
        push(s->tosend, s->ontosend, &s->ntosend, q->fd);
        return;
    }
    q->inflight = q->len - q->off;
    io_uring_prep_send(sqe, q->fd, q->data + q->off, q->inflight, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, UD_SEND | (uint64_t)(uintptr_t)q);
}

/* A send completed: 1 if its fd is to be told (writable, or an error). */
static int send_done(gio_loop_t *l, sendq_t *q, int res, unsigned *events)
{
    uring_state_t *s = l->api;
    q->inflight = 0;
    if (q->fd < 0) { /* orphaned by gio_del */
        for (sendq_t **p = &s->orphans; *p; p = &(*p)->next)
            if (*p == q) {
                *p = q->next;
                break;
            }
        sq_free(s, q);
        return 0;
    }
    if (res == -EAGAIN || res == -EINTR || (res > 0 && q->off + (size_t)res < q->len)) {
        if (res > 0) /* a short send: the rest next round */
            q->off += (size_t)res;
        push(s->tosend, s->ontosend, &s->ntosend, q->fd);
        return 0;
    }
    if (res < 0) {
        q->err = -res;
        *events = GIO_ERROR | GIO_WRITE;
    } else {
        q->off += (size_t)res;
        *events = GIO_WRITE;
    }
    return 1;
}

/* A receive completed: hold what it brought and report fd until it is taken. */
static void recv_done(gio_loop_t *l, int fd, struct io_uring_cqe *cqe)
{
    uring_state_t *s = l->api;
    s->recving[fd] = 0;
    held_t *h = &s->held[fd];
    if (cqe->res == -ENOBUFS) { /* the ring ran dry: a read poll and read(2) for now */
        s->nobuf[fd] = 1;
        push(s->rearm, s->onrearm, &s->nrearm, fd);
        return;
    }
    if (cqe->res > 0 && (cqe->flags & IORING_CQE_F_BUFFER))
        *h = (held_t){.bid = (uint16_t)(cqe->flags >> IORING_CQE_BUFFER_SHIFT),
                      .len = (uint16_t)cqe->res, .state = HELD_DATA};
    else if (cqe->res == 0)
        h->state = HELD_EOF;
    else if (cqe->res == -EINTR || cqe->res == -EAGAIN) { /* try again next round */
        push(s->rearm, s->onrearm, &s->nrearm, fd);
        return;
    } else
        *h = (held_t){.state = HELD_ERR, .err = (uint8_t)(cqe->res < 0 ? -cqe->res : EIO)};
    push(s->pending, s->onpending, &s->npending, fd);
}

/*
 * backend_poll's steps, each static and called once, so that the compiler folds
 * them back into it: the cut is for the reader, not the machine.
 */

/* Before waiting: re-arm the polls and receives that completed last round,
   and submit the sends queued since. */
static void rearm_and_send(gio_loop_t *l, uring_state_t *s)
{
    for (int i = 0; i < s->nrearm; i++) {
        int fd = s->rearm[i];
        s->onrearm[fd] = 0;
        if (!l->fds[fd].used)
            continue;
        if (s->nobuf[fd] == 2) /* read(2) had its turn: receives again */
            s->nobuf[fd] = 0;
        if (l->fds[fd].kernel)
            sync_fd(l, fd, l->fds[fd].kernel);
    }
    s->nrearm = 0;
    for (int i = 0; i < s->ntosend; i++) {
        int fd = s->tosend[i];
        s->ontosend[fd] = 0;
        if (s->sq[fd] && sq_busy(s->sq[fd]) && !s->sq[fd]->inflight)
            send_submit(s, s->sq[fd]);
    }
    s->ntosend = 0;
}

/* Drop from the pending list what was taken or closed; the timeout to wait
   with: 0 if held input is wanted, since it is news now and must not sleep. */
static int prune_pending(gio_loop_t *l, uring_state_t *s, int timeout_ms)
{
    int keep = 0;
    for (int i = 0; i < s->npending; i++) {
        int fd = s->pending[i];
        if (l->fds[fd].used && s->held[fd].state != HELD_NONE) {
            s->pending[keep++] = fd;
            if (l->fds[fd].want & GIO_READ)
                timeout_ms = 0;
        } else {
            s->onpending[fd] = 0;
        }
    }
    s->npending = keep;
    return timeout_ms;
}

/* One completion.  1 if it fired an event, written to *f. */
static int cqe_event(gio_loop_t *l, uring_state_t *s, struct io_uring_cqe *cqe, gio_fired_t *f)
{
    if (cqe->user_data == UD_CONTROL)
        return 0;
    if ((cqe->user_data & (UD_RECV | UD_SEND)) == UD_SEND) {
        sendq_t *q = (sendq_t *)(uintptr_t)(cqe->user_data & ~UD_SEND);
        int qfd = q->fd; /* send_done may free an orphan */
        if (!send_done(l, q, cqe->res, &f->events))
            return 0;
        f->fd = qfd;
        return 1;
    }
    uint32_t fd = (uint32_t)cqe->user_data;
    int stale, isrecv = (cqe->user_data & UD_RECV) != 0;
    if (fd >= (uint32_t)l->maxfds)
        stale = 1;
    else if (isrecv)
        stale = cqe->user_data != rud_of(s, (int)fd) || !s->recving[fd];
    else
        stale = cqe->user_data != ud_of(s, (int)fd) || !s->armed[fd];
    if (stale) { /* a removed request: a buffer it took goes back */
        if (isrecv && s->br && (cqe->flags & IORING_CQE_F_BUFFER))
            buf_recycle(s, (uint16_t)(cqe->flags >> IORING_CQE_BUFFER_SHIFT));
        return 0;
    }
    if (isrecv) {
        recv_done(l, (int)fd, cqe);
        return 0;
    }
    s->armed[fd] = 0;
    if (s->nobuf[fd] == 1 && cqe->res > 0 && (cqe->res & GIO_READ))
        s->nobuf[fd] = 2; /* this report is read with read(2), then receives resume */
    push(s->rearm, s->onrearm, &s->nrearm, (int)fd);
    f->fd = (int)fd;
    f->events = cqe->res < 0 ? GIO_ERROR : (unsigned)cqe->res;
    return 1;
}

static int backend_poll(gio_loop_t *l, int timeout_ms)
{
    uring_state_t *s = l->api;
    rearm_and_send(l, s);
    timeout_ms = prune_pending(l, s, timeout_ms);

    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = {timeout_ms / 1000, timeout_ms % 1000 * 1000000L};
    int r = timeout_ms < 0 ? io_uring_submit_and_wait(&s->ring, 1)
            : timeout_ms == 0 ? io_uring_submit(&s->ring)
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
        k += cqe_event(l, s, cqe, &l->fired[k]);
    }
    io_uring_cq_advance(&s->ring, seen);
    for (int i = 0; i < s->npending; i++) { /* held input: readable, until taken */
        int fd = s->pending[i];
        if (l->fds[fd].used && s->held[fd].state != HELD_NONE) {
            l->fired[k].fd = fd;
            l->fired[k++].events = GIO_READ;
        }
    }
    return k;
}

static const char *backend_name(void)
{
    return "uring";
}
