/*
 * gio — gatling's IO abstraction layer.
 *
 * One small API over the kernel's readiness notification, with the backend
 * (epoll, kqueue, sigio, uring or poll) chosen at build time.  From the
 * caller's point of view it is level-triggered, in the spirit of djb's io
 * library:
 *
 *   gio_loop_t *l = gio_loop_new();
 *   gio_add(l, fd, cookie);            register (fd must be non-blocking)
 *   gio_want(l, fd, GIO_READ);         say what you wait for (cached, lazy)
 *   for (;;) {
 *       gio_wait(l, -1);               block until something is ready
 *       while ((fd = gio_next(l, &ev)) >= 0) ... handle ev on fd ...
 *       while ((fd = gio_next_timeout(l)) >= 0) ... deadline passed ...
 *       gio_timers_run(l);             timers of no descriptor (below)
 *   }
 *
 * Interest changes are cached: toggling between read and write costs no
 * syscall until the next gio_wait() tells the kernel.  A readiness report may
 * be spurious (the caller must tolerate EAGAIN); a descriptor that is still
 * ready after the caller stopped short is reported again on the next wait.
 *
 * Names use the gio_ prefix: libowfat's io_ and iob_ names live in the same link.
 */
#ifndef GIO_H
#define GIO_H

#include "gio_bits.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gio_loop gio_loop_t;
struct gio_batch; /* gio_batch.h */

/*
 * gio_batch_send() through the loop: for a descriptor in gio_recv_mode on
 * the uring backend, a batch of memory only is sent by the ring
 * (GIO_AGAIN until the send completes, reported as write readiness; then
 * the bytes that went out are returned and consumed).  Elsewhere it is
 * gio_batch_send().  See gio(3).  (Declared here, not in gio_batch.h: the
 * loop calls the batches, never the other way.)
 */
long gio_send(gio_loop_t *l, int fd, struct gio_batch *b, uint64_t budget);

/*
 * Create a loop.  Its descriptor table is sized from RLIMIT_NOFILE (the soft
 * limit, read once here).  Returns NULL with errno set on failure.
 */
gio_loop_t *gio_loop_new(void);

/* Free the loop and the backend's kernel object; registered fds stay open. */
void gio_loop_free(gio_loop_t *l);

/* The backend this library was built with: "epoll", "poll", "sigio", ... */
const char *gio_backend_name(void);

/*
 * Register fd with an owner pointer.  No interest yet, no deadline.
 * Returns 0, or -1 with errno set (EBADF/EMFILE if fd exceeds the table,
 * EEXIST if already registered, or the backend's error).
 */
int gio_add(gio_loop_t *l, int fd, void *cookie);

/*
 * Forget fd: no further events or timeouts are reported for it, not even
 * ones already collected by the current gio_wait().  Does not close it.
 */
void gio_del(gio_loop_t *l, int fd);

/* gio_del() then close(). */
void gio_close(gio_loop_t *l, int fd);

/*
 * gio_close() for a descriptor that is the only reference to its open file
 * (an accepted connection: not dup'ed, close-on-exec).  Where closing the
 * last reference takes it off the kernel's interest list by itself (epoll),
 * no system call is spent on removing it first.  A descriptor that another
 * process may hold (a listener handed over on upgrade) must use gio_close:
 * its registration would outlive the close.
 */
void gio_close_sole(gio_loop_t *l, int fd);

/* Set the interest set (GIO_READ | GIO_WRITE, or 0); cached until gio_wait. */
void gio_want(gio_loop_t *l, int fd, unsigned events);

/* Current interest set of fd (0 if not registered). */
unsigned gio_wanted(const gio_loop_t *l, int fd);

void *gio_cookie(const gio_loop_t *l, int fd);
void gio_set_cookie(gio_loop_t *l, int fd, void *cookie);

/*
 * Deadline of fd in gio_now() milliseconds; 0 clears it.  When it passes,
 * fd is returned once by gio_next_timeout() and the deadline is cleared.
 * Setting a deadline also cancels an expiry collected by the last
 * gio_wait() and not yet taken: the owner's newest word counts.
 */
void gio_set_deadline(gio_loop_t *l, int fd, int64_t when_ms);

/* Monotonic milliseconds, refreshed by each gio_wait(). */
int64_t gio_now(const gio_loop_t *l);

/* The same instant in monotonic microseconds (gio_now() is it / 1000). */
int64_t gio_now_us(const gio_loop_t *l);

/* Wall-clock seconds (time(NULL)), refreshed by each gio_wait(). */
int64_t gio_wallclock(const gio_loop_t *l);

/*
 * Tell the kernel about changed interests, then wait at most timeout_ms
 * (-1: until an event, or the nearest deadline or timer) for readiness.  Returns the
 * number of descriptors reported ready (possibly 0 on timeout), or -1 with
 * errno set; EINTR is returned as -1/EINTR so that signal flags can be seen.
 */
int gio_wait(gio_loop_t *l, int timeout_ms);

/*
 * Take the next ready descriptor from the last gio_wait(); *events gets the
 * ready bits masked by the current interest (GIO_ERROR/GIO_HANGUP always
 * pass).  Returns -1 when none are left.
 */
int gio_next(gio_loop_t *l, unsigned *events);

/*
 * Take the next descriptor whose deadline has passed; -1 when none.  The
 * caller may stop early: what it leaves stays queued for the next round, and
 * gio_wait() then does not sleep.
 */
int gio_next_timeout(gio_loop_t *l);

/*
 * Timers that belong to no descriptor.  The caller owns the gio_timer_t
 * (embedded in its own struct, or allocated) and zeroes it, or
 * GIO_TIMER_INIT, before its first use: a zeroed timer is stopped.
 *
 *   static void tick(gio_loop_t *l, void *arg) { ... gio_timer_set(...) again ... }
 *   gio_timer_set(l, &x->timer, gio_now(l) + 250, tick, x);
 *   ...
 *   gio_wait(l, -1);                   wakes for the earliest timer too
 *   ... gio_next(), gio_next_timeout() ...
 *   gio_timers_run(l);                 calls tick once its time has come
 *
 * The timers share no structure with the descriptors' deadlines: a 4-ary
 * min-heap of their own (O(1) earliest, O(log n) set, move and stop), and
 * gio_wait() sleeps no longer than until the earliest of both, on every
 * backend.  A timer fires once, then is stopped; its callback may set it
 * again, set or stop others, or free the memory it lives in.  Stop a timer
 * before its memory goes.
 */
typedef void (*gio_timer_fn)(gio_loop_t *l, void *arg);

typedef struct gio_timer {
    int64_t when;    /* gio_now() ms it is due at, while armed */
    uint64_t seq;    /* the loop's count of sets when it was set: ties go to the older */
    gio_timer_fn fn;
    void *arg;
    uint32_t slot;   /* its place in the loop's timer heap, plus 1; 0: stopped */
} gio_timer_t;

#define GIO_TIMER_INIT {0, 0, NULL, NULL, 0}

/*
 * Arm t to call fn(l, arg) once gio_now() reaches when_ms (a time already
 * passed counts as now), replacing its time, fn and arg if it is armed
 * already.  0, or -1/ENOMEM when the heap could not grow (t stays as it was).
 */
int gio_timer_set(gio_loop_t *l, gio_timer_t *t, int64_t when_ms, gio_timer_fn fn, void *arg);

/*
 * Room for n more timers armed at once, beyond what earlier calls reserved
 * and GIO_TIMER_SPARE for everyone else: a caller with a known bound (a
 * timer per connection, at most so many connections) reserves it once, and
 * gio_timer_set cannot fail for it while the others stay within the spare.
 * 0, or -1/ENOMEM.
 */
int gio_timer_reserve(gio_loop_t *l, size_t n);
#define GIO_TIMER_SPARE 16

/* Disarm t; nothing if it is not armed. */
void gio_timer_stop(gio_loop_t *l, gio_timer_t *t);

/* 1 if t is armed (set, and not yet fired or stopped). */
static inline int gio_timer_armed(const gio_timer_t *t)
{
    return t->slot != 0;
}

/*
 * Call the callback of every timer due by gio_now() (the last gio_wait's
 * clock), earliest first (ties in the order they were set), each once.  A
 * timer set by a callback for now or earlier fires in the next call, not
 * in this one, so a timer re-armed in its own callback cannot hold the
 * loop.  Returns how many fired.  The loop's owner calls it after each
 * gio_wait(): a due timer left unrun keeps gio_wait() from sleeping.
 */
int gio_timers_run(gio_loop_t *l);

/* Number of registered descriptors. */
size_t gio_count(const gio_loop_t *l);

/*
 * read(2) with the gio return convention: bytes read, GIO_EOF, GIO_AGAIN
 * (also for EINTR) or GIO_ERR.
 */
long gio_read(int fd, void *buf, size_t len);

/*
 * Promise that every read of fd goes through gio_recv() (never read(2) or a
 * library that reads the socket itself, such as OpenSSL).  On a completion
 * backend (uring) gio then receives into buffers of its own before it
 * reports fd readable, and gio_recv() copies from them: a request costs no
 * read system call, and one io_uring_enter() serves every connection of the
 * round.  Other backends change nothing.  gio_del() ends the mode.
 */
void gio_recv_mode(gio_loop_t *l, int fd);

/* gio_read() for a registered fd; for one in gio_recv_mode, from what gio
   has received (GIO_AGAIN: nothing yet, wait for readiness). */
long gio_recv(gio_loop_t *l, int fd, void *buf, size_t len);

/*
 * Make fd non-blocking and close-on-exec (and, where the OS has
 * SO_NOSIGPIPE, a socket that never raises SIGPIPE).  0 or -1.
 */
int gio_nonblock(int fd);

#endif
