/*
 * gio core: descriptor table, cached interest, ready list, deadlines, timers.
 *
 * Exactly one backend file is compiled in, by #include below (the Redis ae
 * pattern): it implements the same small set of static functions and only
 * reports {fd, events}; dispatch stays here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gio.h"
#include "gio_batch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct gio_fd {
    void *cookie;
    int64_t deadline; /* gio_now() ms, 0 = none */
    int64_t key;      /* its key in the heap: <= deadline (see below) */
    int32_t heap;     /* its place in the deadline heap, -1 = none */
    uint8_t used;
    uint8_t want;     /* what the owner wants */
    uint8_t kernel;   /* what the kernel has been told */
    uint8_t changed;  /* on the change list */
    uint8_t revents;  /* collected by the last wait, not yet taken */
    uint8_t timedout; /* on the timeout list, not yet taken */
    uint8_t recvmode; /* gio_recv_mode(): every read goes through gio_recv() */
} gio_fd_t;

typedef struct gio_fired {
    int fd;
    unsigned events;
} gio_fired_t;

struct gio_loop {
    gio_fd_t *fds;
    int maxfds; /* table size */
    int maxfd;  /* highest registered fd, -1 if none */
    size_t nused;
    int *changes; /* fds whose want != kernel */
    int nchanges;
    gio_fired_t *fired; /* filled by the backend */
    int *ready;         /* fds with revents != 0 */
    int nready, nextready;
    int *expired; /* fds whose deadline passed */
    int nexpired, nextexpired;
    int *heap; /* fds with a deadline: a 4-ary min-heap on it */
    int nheap;
    gio_timer_t **timers; /* armed timers: a 4-ary min-heap on (when, seq) */
    uint32_t ntimers, captimers;
    uint32_t reserved; /* gio_timer_reserve's, in all */
    uint64_t tseq; /* timers set so far */
    int64_t now, now_us, wall;
    void *api;        /* the backend's state */
};

/* What del() is for, passed on to backend_del as `closing`. */
enum {
    GIO_DEL_KEEP = 0,    /* gio_del: the fd stays open */
    GIO_DEL_CLOSING = 1, /* gio_close: closed next, maybe held elsewhere */
    GIO_DEL_SOLE = 2     /* gio_close_sole: closed next, the file's last reference */
};

/* backend_recv's answer when it holds nothing for the fd: read(2) it */
#define GIO_PASS (-100)

#if defined(GIO_BACKEND_EPOLL)
#include "gio_epoll.c"
#elif defined(GIO_BACKEND_KQUEUE)
#include "gio_kqueue.c"
#elif defined(GIO_BACKEND_SIGIO)
#include "gio_sigio.c"
#elif defined(GIO_BACKEND_URING)
#include "gio_uring.c"
#elif defined(GIO_BACKEND_POLL)
#include "gio_poll.c"
#else
#error "define one GIO_BACKEND_* (the GNUmakefile does)"
#endif

#ifndef BACKEND_HAS_SEND /* readiness backends: gio_send is gio_batch_send */
static long backend_send(gio_loop_t *l, int fd, gio_batch_t *b, uint64_t budget)
{
    (void)l, (void)fd, (void)b, (void)budget;
    return GIO_PASS;
}
#endif

#ifndef BACKEND_HAS_RECV /* readiness backends: gio_recv is read(2) */
static long backend_recv(gio_loop_t *l, int fd, void *buf, size_t len)
{
    (void)l, (void)fd, (void)buf, (void)len;
    return GIO_PASS;
}
#endif

static void clock_refresh(gio_loop_t *l)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    l->now_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    l->now = l->now_us / 1000;
    clock_gettime(CLOCK_REALTIME, &ts);
    l->wall = ts.tv_sec;
}

gio_loop_t *gio_loop_new(void)
{
    struct rlimit rl;
    int n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        n = rl.rlim_cur > 1 << 20 ? 1 << 20 : (int)rl.rlim_cur;
    gio_loop_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->maxfds = n;
    l->maxfd = -1;
    /* calloc'd tables are untouched zero pages until used: no RSS for idle slots */
    l->fds = calloc(n, sizeof *l->fds);
    l->changes = calloc(n, sizeof *l->changes);
    l->fired = calloc(3 * (size_t)n, sizeof *l->fired); /* uring: a poll, a send, held input */
    l->ready = calloc(n, sizeof *l->ready);
    l->expired = calloc(n, sizeof *l->expired);
    l->heap = calloc(n, sizeof *l->heap);
    if (!l->fds || !l->changes || !l->fired || !l->ready || !l->expired || !l->heap ||
        backend_create(l) < 0) {
        int e = errno;
        free(l->fds), free(l->changes), free(l->fired), free(l->ready), free(l->expired);
        free(l->heap);
        free(l);
        errno = e;
        return NULL;
    }
    clock_refresh(l);
    return l;
}

void gio_loop_free(gio_loop_t *l)
{
    if (!l)
        return;
    for (uint32_t i = 0; i < l->ntimers; i++) /* stopped: a timer may outlive its loop */
        l->timers[i]->slot = 0;
    free(l->timers);
    backend_free(l);
    free(l->fds), free(l->changes), free(l->fired), free(l->ready), free(l->expired);
    free(l->heap);
    free(l);
}

const char *gio_backend_name(void)
{
    return backend_name();
}

/*
 * Clear an entry for a new (or no) owner.  `changed` survives: it says the fd
 * is still on the change list, and clearing it would let a del/add/want cycle
 * append the fd again and again until the list overflows.
 */
static void entry_reset(gio_fd_t *e)
{
    uint8_t changed = e->changed;
    memset(e, 0, sizeof *e);
    e->changed = changed;
    e->heap = -1;
}

/*
 * Deadlines: a 4-ary min-heap of fds keyed by their deadline, each fd knowing
 * its place (libev's choice).  Finding the earliest is O(1); setting, moving
 * and clearing one are O(log n), with a shallow tree (4 children: half the
 * levels of a binary heap, and the children of a node share a cache line).
 * Servers move a deadline on most events, so moving must be cheap; a timer
 * wheel would make it O(1) but round every deadline to its slot.  Nothing
 * ever scans the descriptor table.
 *   Most moves are later (a keep-alive connection pushes its deadline on
 * with every request), and those cost nothing: the heap is ordered by each
 * fd's key, which may lag behind its deadline (key <= deadline).  A key is
 * brought up to date only when it reaches the top and has passed (settle),
 * so a busy connection costs about one sift per timeout period, not one per
 * request.  The wait sleeps until the top's key: a lagging one wakes it
 * early, once per moved deadline at most, and costs a sift then.
 */
static int64_t key_at(const gio_loop_t *l, int i)
{
    return l->fds[l->heap[i]].key;
}

static void heap_place(gio_loop_t *l, int i, int fd)
{
    l->heap[i] = fd;
    l->fds[fd].heap = i;
}

static void sift_up(gio_loop_t *l, int i)
{
    int fd = l->heap[i];
    int64_t k = l->fds[fd].key;
    while (i > 0) {
        int parent = (i - 1) / 4;
        if (key_at(l, parent) <= k)
            break;
        heap_place(l, i, l->heap[parent]);
        i = parent;
    }
    heap_place(l, i, fd);
}

static void sift_down(gio_loop_t *l, int i)
{
    int fd = l->heap[i];
    int64_t k = l->fds[fd].key;
    for (;;) {
        int first = 4 * i + 1, best = -1;
        int64_t bk = k;
        for (int c = first; c < first + 4 && c < l->nheap; c++)
            if (key_at(l, c) < bk)
                best = c, bk = key_at(l, c);
        if (best < 0)
            break;
        heap_place(l, i, l->heap[best]);
        i = best;
    }
    heap_place(l, i, fd);
}

static void heap_remove(gio_loop_t *l, gio_fd_t *e)
{
    int i = e->heap;
    if (i < 0)
        return;
    e->heap = -1;
    int last = l->heap[--l->nheap];
    if (i == l->nheap)
        return;
    heap_place(l, i, last);
    sift_up(l, i);
    sift_down(l, l->fds[last].heap);
}

static gio_fd_t *entry(const gio_loop_t *l, int fd)
{
    if (fd < 0 || fd >= l->maxfds || !l->fds[fd].used)
        return NULL;
    return &l->fds[fd];
}

int gio_add(gio_loop_t *l, int fd, void *cookie)
{
    if (fd < 0 || fd >= l->maxfds) {
        errno = fd < 0 ? EBADF : EMFILE;
        return -1;
    }
    gio_fd_t *e = &l->fds[fd];
    if (e->used) {
        errno = EEXIST;
        return -1;
    }
    entry_reset(e);
    if (backend_add(l, fd) < 0)
        return -1;
    e->used = 1;
    e->cookie = cookie;
    if (fd > l->maxfd)
        l->maxfd = fd;
    l->nused++;
    return 0;
}

static void del(gio_loop_t *l, int fd, int closing)
{
    gio_fd_t *e = entry(l, fd);
    if (!e)
        return;
    backend_del(l, fd, e->kernel, closing);
    heap_remove(l, e);
    /* stale entries on the ready/expired lists are skipped: revents and
       timedout are 0 now, also if fd is added again in the same round */
    entry_reset(e);
    l->nused--;
    while (l->maxfd >= 0 && !l->fds[l->maxfd].used)
        l->maxfd--;
}

void gio_del(gio_loop_t *l, int fd)
{
    del(l, fd, GIO_DEL_KEEP);
}

void gio_close(gio_loop_t *l, int fd)
{
    del(l, fd, GIO_DEL_CLOSING);
    close(fd);
}

void gio_close_sole(gio_loop_t *l, int fd)
{
    del(l, fd, GIO_DEL_SOLE);
    close(fd);
}

void gio_want(gio_loop_t *l, int fd, unsigned events)
{
    gio_fd_t *e = entry(l, fd);
    if (!e)
        return;
    e->want = events & (GIO_READ | GIO_WRITE);
    if (e->want != e->kernel && !e->changed) {
        e->changed = 1;
        l->changes[l->nchanges++] = fd;
    }
}

unsigned gio_wanted(const gio_loop_t *l, int fd)
{
    const gio_fd_t *e = entry(l, fd);
    return e ? e->want : 0;
}

void *gio_cookie(const gio_loop_t *l, int fd)
{
    const gio_fd_t *e = entry(l, fd);
    return e ? e->cookie : NULL;
}

void gio_set_cookie(gio_loop_t *l, int fd, void *cookie)
{
    gio_fd_t *e = entry(l, fd);
    if (e)
        e->cookie = cookie;
}

void gio_set_deadline(gio_loop_t *l, int fd, int64_t when_ms)
{
    gio_fd_t *e = entry(l, fd);
    if (!e)
        return;
    e->timedout = 0; /* an expiry collected but not yet taken is stale now */
    if (!when_ms) {
        heap_remove(l, e);
        e->deadline = 0;
        return;
    }
    e->deadline = when_ms;
    if (e->heap < 0) {
        e->key = when_ms;
        heap_place(l, l->nheap++, fd);
        sift_up(l, e->heap);
    } else if (when_ms < e->key) {
        e->key = when_ms;
        sift_up(l, e->heap);
    } /* later: the key lags behind until it reaches the top */
}

/*
 * Timers: a second 4-ary min-heap, of the caller's gio_timer_t, each knowing
 * its place (slot - 1).  Ordered by (when, seq): among timers due together
 * the one set first fires first, and one set during gio_timers_run() (its
 * seq is newer than the run) sorts after every timer the run is to fire,
 * since gio_timer_set() never puts a time before gio_now().  No lagging keys
 * as for deadlines: timers move seldom; a descriptor's deadline moves with
 * most of its events.
 */
static int timer_before(const gio_timer_t *a, const gio_timer_t *b)
{
    return a->when < b->when || (a->when == b->when && a->seq < b->seq);
}

static void timer_place(gio_loop_t *l, uint32_t i, gio_timer_t *t)
{
    l->timers[i] = t;
    t->slot = i + 1;
}

static void timer_sift_up(gio_loop_t *l, uint32_t i)
{
    gio_timer_t *t = l->timers[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 4;
        if (!timer_before(t, l->timers[parent]))
            break;
        timer_place(l, i, l->timers[parent]);
        i = parent;
    }
    timer_place(l, i, t);
}

static void timer_sift_down(gio_loop_t *l, uint32_t i)
{
    gio_timer_t *t = l->timers[i];
    for (;;) {
        uint32_t first = 4 * i + 1;
        gio_timer_t *best = t;
        uint32_t at = i;
        for (uint32_t c = first; c < first + 4 && c < l->ntimers; c++)
            if (timer_before(l->timers[c], best))
                best = l->timers[c], at = c;
        if (at == i)
            break;
        timer_place(l, i, best);
        i = at;
    }
    timer_place(l, i, t);
}

void gio_timer_stop(gio_loop_t *l, gio_timer_t *t)
{
    if (!t->slot)
        return;
    uint32_t i = t->slot - 1;
    t->slot = 0;
    gio_timer_t *last = l->timers[--l->ntimers];
    if (i == l->ntimers)
        return;
    timer_place(l, i, last);
    timer_sift_up(l, i);
    timer_sift_down(l, last->slot - 1);
}

/* Room for cap armed timers in all.  0, or -1/ENOMEM. */
static int timers_grow(gio_loop_t *l, uint32_t cap)
{
    if (cap <= l->captimers)
        return 0;
    gio_timer_t **grown = realloc(l->timers, cap * sizeof *grown);
    if (!grown) {
        errno = ENOMEM;
        return -1;
    }
    l->timers = grown;
    l->captimers = cap;
    return 0;
}

int gio_timer_reserve(gio_loop_t *l, size_t n)
{
    if (n > UINT32_MAX / 2 - GIO_TIMER_SPARE - l->reserved) {
        errno = ENOMEM;
        return -1;
    }
    if (timers_grow(l, l->reserved + (uint32_t)n + GIO_TIMER_SPARE) < 0)
        return -1;
    l->reserved += (uint32_t)n;
    return 0;
}

int gio_timer_set(gio_loop_t *l, gio_timer_t *t, int64_t when_ms, gio_timer_fn fn, void *arg)
{
    if (!t->slot && l->ntimers == l->captimers &&
        (l->captimers > UINT32_MAX / 2 ||
         timers_grow(l, l->captimers ? 2 * l->captimers : GIO_TIMER_SPARE) < 0)) {
        errno = ENOMEM;
        return -1;
    }
    t->when = when_ms < l->now ? l->now : when_ms;
    t->seq = l->tseq++;
    t->fn = fn;
    t->arg = arg;
    if (!t->slot) {
        timer_place(l, l->ntimers++, t);
        timer_sift_up(l, t->slot - 1);
    } else { /* moved: up or down from where it is (one of the two does nothing) */
        timer_sift_up(l, t->slot - 1);
        timer_sift_down(l, t->slot - 1);
    }
    return 0;
}

int gio_timers_run(gio_loop_t *l)
{
    uint64_t before = l->tseq; /* timers set from here on wait for the next run */
    int n = 0;
    while (l->ntimers > 0) {
        gio_timer_t *t = l->timers[0];
        if (t->when > l->now || t->seq >= before)
            break;
        gio_timer_stop(l, t);
        t->fn(l, t->arg); /* last: it may free t */
        n++;
    }
    return n;
}

/* ms from now to the nearest deadline or timer (0 if passed), or -1: none. */
static int64_t next_wake(gio_loop_t *l)
{
    int64_t at = -1;
    if (l->nheap > 0)
        at = key_at(l, 0);
    if (l->ntimers > 0 && (at < 0 || l->timers[0]->when < at))
        at = l->timers[0]->when;
    if (at < 0)
        return -1;
    return at > l->now ? at - l->now : 0;
}

int64_t gio_now(const gio_loop_t *l)
{
    return l->now;
}
int64_t gio_now_us(const gio_loop_t *l)
{
    return l->now_us;
}
int64_t gio_wallclock(const gio_loop_t *l)
{
    return l->wall;
}
size_t gio_count(const gio_loop_t *l)
{
    return l->nused;
}

/* Push cached interest changes to the kernel. */
static void sync_changes(gio_loop_t *l)
{
    for (int i = 0; i < l->nchanges; i++) {
        int fd = l->changes[i];
        gio_fd_t *e = &l->fds[fd];
        if (!e->changed)
            continue;
        e->changed = 0;
        if (!e->used || e->want == e->kernel)
            continue;
        if (backend_update(l, fd, e->kernel, e->want) == 0) {
            e->kernel = e->want;
        } else {
            /* the kernel refused (fd closed behind our back?): report it as an error */
            if (!e->revents)
                l->ready[l->nready++] = fd;
            e->revents |= GIO_ERROR;
        }
    }
    l->nchanges = 0;
}

/* Bring lagging keys that have passed up to their deadlines: then a top
   that has passed is a deadline that has passed. */
static void settle(gio_loop_t *l)
{
    while (l->nheap > 0) {
        gio_fd_t *e = &l->fds[l->heap[0]];
        if (e->key == e->deadline || e->key > l->now)
            return;
        e->key = e->deadline;
        sift_down(l, 0);
    }
}

/* Collect expired deadlines: pop the heap while its top has passed. */
static void collect_deadlines(gio_loop_t *l)
{
    for (;;) {
        settle(l);
        if (l->nheap == 0 || key_at(l, 0) > l->now)
            return;
        int fd = l->heap[0];
        gio_fd_t *e = &l->fds[fd];
        heap_remove(l, e);
        e->deadline = 0;
        if (!e->timedout) {
            e->timedout = 1;
            l->expired[l->nexpired++] = fd;
        }
    }
}

int gio_wait(gio_loop_t *l, int timeout_ms)
{
    /* whatever the caller did not take from the last round is dropped:
       level-triggered backends will report it again */
    for (int i = l->nextready; i < l->nready; i++)
        l->fds[l->ready[i]].revents = 0;
    l->nready = l->nextready = 0;
    int keep = 0; /* expired fds the caller has not taken yet stay queued */
    for (int i = l->nextexpired; i < l->nexpired; i++)
        if (l->fds[l->expired[i]].timedout)
            l->expired[keep++] = l->expired[i];
    l->nexpired = keep;
    l->nextexpired = 0;

    sync_changes(l);
    clock_refresh(l);
    settle(l);
    int64_t d = next_wake(l);
    if (d >= 0 && (timeout_ms < 0 || d < timeout_ms))
        timeout_ms = d > 0x7fffffff ? 0x7fffffff : (int)d;
    if (l->nready > 0 || l->nexpired > 0) /* errors to report, or expiries not taken yet */
        timeout_ms = 0;

    int n = backend_poll(l, timeout_ms);
    int err = errno;
    clock_refresh(l);
    collect_deadlines(l);
    if (n < 0) {
        errno = err;
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int fd = l->fired[i].fd;
        if (fd < 0 || fd >= l->maxfds || !l->fds[fd].used)
            continue;
        gio_fd_t *e = &l->fds[fd];
        if (!e->revents)
            l->ready[l->nready++] = fd;
        e->revents |= (uint8_t)l->fired[i].events;
    }
    return l->nready;
}

int gio_next(gio_loop_t *l, unsigned *events)
{
    while (l->nextready < l->nready) {
        int fd = l->ready[l->nextready++];
        gio_fd_t *e = &l->fds[fd];
        unsigned ev = e->revents;
        e->revents = 0;
        if (!e->used)
            continue;
        ev &= e->want | GIO_ERROR | GIO_HANGUP;
        if (!ev)
            continue;
        *events = ev;
        return fd;
    }
    return -1;
}

int gio_next_timeout(gio_loop_t *l)
{
    while (l->nextexpired < l->nexpired) {
        int fd = l->expired[l->nextexpired++];
        gio_fd_t *e = &l->fds[fd];
        if (e->used && e->timedout) {
            e->timedout = 0;
            return fd;
        }
    }
    return -1;
}

long gio_read(int fd, void *buf, size_t len)
{
    ssize_t r = read(fd, buf, len);
    if (r > 0)
        return r;
    if (r == 0)
        return GIO_EOF;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return GIO_AGAIN;
    return GIO_ERR;
}

void gio_recv_mode(gio_loop_t *l, int fd)
{
    gio_fd_t *e = entry(l, fd);
    if (e)
        e->recvmode = 1;
}

long gio_recv(gio_loop_t *l, int fd, void *buf, size_t len)
{
    gio_fd_t *e = entry(l, fd);
    if (e && e->recvmode && len > 0) {
        long r = backend_recv(l, fd, buf, len);
        if (r != GIO_PASS)
            return r;
    }
    return gio_read(fd, buf, len);
}

long gio_send(gio_loop_t *l, int fd, gio_batch_t *b, uint64_t budget)
{
    gio_fd_t *e = entry(l, fd);
    if (e && e->recvmode) {
        long r = backend_send(l, fd, b, budget);
        if (r != GIO_PASS)
            return r;
    }
    return gio_batch_send(b, fd, budget);
}

int gio_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -1;
#ifdef SO_NOSIGPIPE
    /* macOS has no MSG_NOSIGNAL for sendfile and older SDKs none at all;
       fails harmlessly (ENOTSOCK) on pipes and files */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    return fcntl(fd, F_SETFD, FD_CLOEXEC);
}
