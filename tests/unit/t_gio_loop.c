/*
 * t_gio_loop — the event loop (io/gio.c and whichever backend it was built
 * with) over socketpairs and pipes.  Runs unchanged on every backend; only
 * POSIX calls, so it also links for the BSDs and macOS (make cross).
 *
 * Each block names the bug it is there to catch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gio.h"
#include "gio_batch.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NMANY 300

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int pair(int sv[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        return -1;
    gio_nonblock(sv[0]);
    gio_nonblock(sv[1]);
    return 0;
}

static void close_pair(int sv[2])
{
    close(sv[0]);
    close(sv[1]);
}

/* Take every ready descriptor of one gio_wait(); evs[fd] gets its events. */
static int collect(gio_loop_t *l, int timeout_ms, unsigned *evs, int nevs)
{
    unsigned ev;
    int fd, n = 0;
    for (int i = 0; i < nevs; i++)
        evs[i] = 0;
    if (gio_wait(l, timeout_ms) < 0)
        return -1;
    while ((fd = gio_next(l, &ev)) >= 0) {
        if (fd < nevs)
            evs[fd] = ev;
        n++;
    }
    return n;
}

/* Events of fd in one gio_wait(timeout_ms); 0 if it was not reported. */
static unsigned events_of(gio_loop_t *l, int fd, int timeout_ms)
{
    unsigned ev, got = 0;
    int f;
    if (gio_wait(l, timeout_ms) < 0)
        return 0;
    while ((f = gio_next(l, &ev)) >= 0)
        if (f == fd)
            got = ev;
    return got;
}

static void drain(int fd)
{
    char buf[65536];
    while (read(fd, buf, sizeof buf) > 0)
        ;
}

/* Registration errors must be errors, not silent table corruption. */
static void test_add_errors(gio_loop_t *l, int tablesize)
{
    int sv[2];
    pair(sv);
    errno = 0;
    ok(gio_add(l, -1, NULL) < 0 && errno == EBADF, "gio_add(-1) fails with EBADF");
    errno = 0;
    ok(gio_add(l, tablesize, NULL) < 0 && errno == EMFILE, "gio_add(table size) fails: EMFILE");
    ok(gio_add(l, sv[0], NULL) == 0, "gio_add of a socket");
    errno = 0;
    ok(gio_add(l, sv[0], NULL) < 0 && errno == EEXIST, "second gio_add fails with EEXIST");
    is_int(gio_count(l), 1, "gio_count counts the registration once");
    gio_del(l, sv[0]);
    is_int(gio_count(l), 0, "gio_del forgets it");
    ok(gio_cookie(l, sv[0]) == NULL && gio_wanted(l, sv[0]) == 0,
       "no cookie, no interest for an unregistered fd");
    close_pair(sv);
}

/*
 * Readability, the cookie, and level triggering: a descriptor the caller left
 * readable is reported again (catches edge-triggered backends — a bare rt
 * signal queue or multishot poll — and a ready list that forgets it).
 */
static void test_read_level(gio_loop_t *l)
{
    int sv[2], cookie;
    pair(sv);
    gio_add(l, sv[0], &cookie);
    gio_want(l, sv[0], GIO_READ);
    ok(gio_wanted(l, sv[0]) == GIO_READ, "gio_wanted reports the cached interest");
    is_int(gio_wait(l, 0), 0, "nothing ready before data arrives");
    unsigned ev = 0;
    is_int(gio_next(l, &ev), -1, "gio_next: none");

    write(sv[1], "ab", 2);
    ok(events_of(l, sv[0], 2000) == GIO_READ, "readable once data arrived (GIO_READ only)");
    ok(gio_cookie(l, sv[0]) == &cookie, "cookie kept");
    int other;
    gio_set_cookie(l, sv[0], &other);
    ok(gio_cookie(l, sv[0]) == &other, "gio_set_cookie replaces it");

    ok(events_of(l, sv[0], 1000) & GIO_READ, "level-triggered: reported again, not read yet");
    ok(events_of(l, sv[0], 1000) & GIO_READ, "... and again");
    char c;
    read(sv[0], &c, 1);
    ok(events_of(l, sv[0], 1000) & GIO_READ, "still reported after a partial read");
    read(sv[0], &c, 1);
    is_int(gio_read(sv[0], &c, 1), GIO_AGAIN, "gio_read on an empty socket: GIO_AGAIN");
    ok(events_of(l, sv[0], 0) == 0, "not reported once drained");
    write(sv[1], "c", 1);
    ok(events_of(l, sv[0], 2000) & GIO_READ, "new data after a drain is reported");
    gio_close(l, sv[0]);
    errno = 0;
    ok(fcntl(sv[0], F_GETFD) < 0 && errno == EBADF, "gio_close closed the descriptor");
    close(sv[1]);
}

/*
 * Cached interest: toggles between waits and within a round, masking, and a
 * descriptor that became ready while nobody wanted it (catches backends that
 * only learn of readiness from edges seen while interest was set).
 */
static void test_interest(gio_loop_t *l)
{
    int sv[2];
    pair(sv);
    write(sv[1], "x", 1); /* sv[0] is now readable and writable */
    gio_add(l, sv[0], NULL);
    gio_want(l, sv[0], GIO_WRITE);
    ok(events_of(l, sv[0], 2000) == GIO_WRITE, "want WRITE: reported GIO_WRITE only");
    gio_want(l, sv[0], GIO_READ);
    gio_want(l, sv[0], GIO_WRITE);
    gio_want(l, sv[0], GIO_READ); /* toggled three times, no wait in between */
    ok(events_of(l, sv[0], 2000) == GIO_READ, "toggled WRITE->READ->WRITE->READ: GIO_READ");
    gio_want(l, sv[0], GIO_READ | GIO_WRITE);
    ok(events_of(l, sv[0], 2000) == (GIO_READ | GIO_WRITE), "want both: both reported");

    gio_want(l, sv[0], 0);
    ok(events_of(l, sv[0], 0) == 0, "want 0: not reported although ready");
    write(sv[1], "y", 1); /* arrives while nobody wants it */
    ok(events_of(l, sv[0], 0) == 0, "want 0: still nothing after more data");
    gio_want(l, sv[0], GIO_READ);
    ok(events_of(l, sv[0], 2000) == GIO_READ,
       "want READ again: data that arrived without interest is reported");

    /* interest dropped after the wait but before gio_next: not reported */
    gio_wait(l, 2000);
    gio_want(l, sv[0], GIO_WRITE);
    unsigned ev = 0;
    int fd, seen = 0;
    while ((fd = gio_next(l, &ev)) >= 0)
        if (fd == sv[0])
            seen = 1;
    ok(!seen, "READ event not returned once interest changed to WRITE in the same round");
    ok(events_of(l, sv[0], 2000) == GIO_WRITE, "the next round reports WRITE");
    gio_close(l, sv[0]);
    close(sv[1]);
}

/*
 * Write readiness comes back once the peer makes room (catches a lost
 * POLLOUT).  Registered before it fills up, as a server does at accept():
 * the sigio backend needs that for unix-domain sockets (see gio_sigio.c).
 */
static void test_write_full(gio_loop_t *l)
{
    int sv[2];
    char buf[4096] = {0};
    pair(sv);
    gio_add(l, sv[0], NULL);
    gio_want(l, sv[0], GIO_WRITE);
    ok(events_of(l, sv[0], 2000) == GIO_WRITE, "empty socket: writable");
    while (write(sv[0], buf, sizeof buf) > 0)
        ;
    ok(events_of(l, sv[0], 0) == 0, "full socket: not writable");
    drain(sv[1]);
    ok(events_of(l, sv[0], 2000) == GIO_WRITE, "writable again once the peer read");
    gio_close(l, sv[0]);
    close(sv[1]);
}

/* Pipes work too (the server talks to CGI over pipes). */
static void test_pipe(gio_loop_t *l)
{
    int p[2];
    if (pipe(p) < 0) {
        ok(0, "pipe");
        return;
    }
    gio_nonblock(p[0]);
    gio_nonblock(p[1]);
    gio_add(l, p[0], NULL);
    gio_add(l, p[1], NULL);
    gio_want(l, p[0], GIO_READ);
    gio_want(l, p[1], GIO_WRITE);
    unsigned evs[1024];
    collect(l, 2000, evs, 1024);
    ok(evs[p[0]] == 0 && evs[p[1]] == GIO_WRITE, "pipe: write end writable, read end not");
    write(p[1], "z", 1);
    gio_want(l, p[1], 0);
    ok(events_of(l, p[0], 2000) == GIO_READ, "pipe: read end readable after a write");
    gio_close(l, p[1]);
    unsigned e = events_of(l, p[0], 2000);
    ok(e & (GIO_READ | GIO_HANGUP), "pipe: reported when the writer is gone");
    char c;
    read(p[0], &c, 1);
    is_int(gio_read(p[0], &c, 1), GIO_EOF, "gio_read after the writer closed: GIO_EOF");
    gio_close(l, p[0]);
}

/*
 * gio_del while events of the same round are pending: the deleted fd is not
 * returned, and a re-added fd does not inherit the stale event (catches a
 * ready list that is not invalidated on del).
 */
static void test_del_pending(gio_loop_t *l)
{
    int sv[3][2], fds[3];
    for (int i = 0; i < 3; i++) {
        pair(sv[i]);
        fds[i] = sv[i][0];
        gio_add(l, fds[i], NULL);
        gio_want(l, fds[i], GIO_READ);
        write(sv[i][1], "d", 1);
    }
    is_int(gio_wait(l, 2000), 3, "three readable descriptors");
    unsigned ev;
    int first = gio_next(l, &ev);
    ok(first == fds[0] || first == fds[1] || first == fds[2], "first one taken");
    int rest[2], k = 0;
    for (int i = 0; i < 3; i++)
        if (fds[i] != first)
            rest[k++] = fds[i];
    gio_del(l, rest[0]);
    gio_del(l, rest[1]);
    gio_add(l, rest[1], NULL); /* a new registration of the same fd, no interest yet */
    gio_want(l, rest[1], GIO_READ);
    is_int(gio_next(l, &ev), -1, "deleted and re-added fds: no stale events this round");
    unsigned evs[1024];
    collect(l, 2000, evs, 1024);
    ok(evs[rest[1]] == GIO_READ && evs[rest[0]] == 0,
       "next round: the re-added fd (data still pending) is reported, the deleted one not");
    gio_del(l, first);
    gio_del(l, rest[1]);
    for (int i = 0; i < 3; i++)
        close_pair(sv[i]);
}

/* A socket pair whose first end the kernel watches for reading, with
   input waiting on it; returns that end. */
static int watched_with_input(gio_loop_t *l, int sv[2])
{
    pair(sv);
    gio_add(l, sv[0], NULL);
    gio_want(l, sv[0], GIO_READ);
    gio_wait(l, 0); /* the kernel now knows */
    write(sv[1], "old", 3);
    return sv[0];
}

/*
 * A new socket pair whose first end takes the number num (just closed),
 * registered for reading: it must get no event of the closed file, and its
 * own data.  Returns the other end.
 */
static int reuse_number(gio_loop_t *l, int num, const char *after)
{
    int nv[2];
    pair(nv);
    if (nv[0] != num) { /* force the same number */
        dup2(nv[0], num);
        close(nv[0]);
    }
    gio_add(l, num, NULL);
    gio_want(l, num, GIO_READ);
    ok(events_of(l, num, 0) == 0 && events_of(l, num, 50) == 0,
       "%s: no stale event from the closed file on the reused number", after);
    write(nv[1], "new", 3);
    ok(events_of(l, num, 2000) == GIO_READ, "%s: the reused number's own data is reported", after);
    return nv[1];
}

/*
 * A closed fd whose number is reused: no stale readiness for the newcomer
 * (catches queued rt signals or poll requests of the old file being reported
 * for the new one), and the newcomer's own events do arrive.
 */
static void test_reuse(gio_loop_t *l)
{
    int sv[2], num = watched_with_input(l, sv);
    gio_close(l, num); /* closed with data and notifications pending */
    close(sv[1]);
    int peer = reuse_number(l, num, "after gio_close");

    /* del without close, then add again: the backend must re-register it */
    gio_del(l, num);
    gio_add(l, num, NULL);
    gio_want(l, num, GIO_READ);
    ok(events_of(l, num, 2000) == GIO_READ, "del + re-add of an open readable fd: reported");
    gio_close(l, num);
    close(peer);
}

/*
 * gio_close_sole: the kernel drops the closed file's registration by itself
 * (epoll skips EPOLL_CTL_DEL); the reused number gets no stale event, and a
 * descriptor closed before the kernel ever heard of it costs nothing.
 */
static void test_close_sole(gio_loop_t *l)
{
    int sv[2], num = watched_with_input(l, sv);
    gio_close_sole(l, num);
    errno = 0;
    ok(fcntl(num, F_GETFD) < 0 && errno == EBADF, "gio_close_sole closed the descriptor");
    close(sv[1]);
    int peer = reuse_number(l, num, "after gio_close_sole");
    char buf[8];
    read(num, buf, sizeof buf);
    gio_close_sole(l, num);
    close(peer);

    pair(sv); /* wanted, never waited for: closed before the kernel knew */
    gio_add(l, sv[0], NULL);
    gio_want(l, sv[0], GIO_READ);
    size_t before = gio_count(l);
    gio_close_sole(l, sv[0]);
    ok(gio_count(l) == before - 1, "closed before registration: forgotten");
    ok(gio_wait(l, 0) >= 0, "and the next wait does not trip over it");
    close(sv[1]);
}

/*
 * gio_recv_mode: reads through gio_recv() (uring: from completed receives in
 * gio's own buffers).  Partial takes are reported again, large writes come
 * through whole, EOF arrives, input that came while not wanted is kept, and
 * descriptors closed with input held give their buffers back (600 of them,
 * more than the ring holds).
 */
static void test_recv_mode(gio_loop_t *l)
{
    int sv[2];
    char buf[16384];
    pair(sv);
    gio_add(l, sv[0], NULL);
    gio_recv_mode(l, sv[0]);
    gio_want(l, sv[0], GIO_READ);
    ok(events_of(l, sv[0], 0) == 0, "recv mode: nothing reported before data");
    write(sv[1], "hello", 5);
    ok(events_of(l, sv[0], 2000) == GIO_READ, "recv mode: data reported");
    is_int(gio_recv(l, sv[0], buf, 2), 2, "recv mode: a partial take");
    ok(events_of(l, sv[0], 1000) & GIO_READ, "recv mode: the rest reported again");
    is_int(gio_recv(l, sv[0], buf + 2, sizeof buf - 2), 3, "recv mode: the rest taken");
    ok(!memcmp(buf, "hello", 5), "recv mode: in order");
    is_int(gio_recv(l, sv[0], buf, sizeof buf), GIO_AGAIN, "recv mode: then GIO_AGAIN");
    ok(events_of(l, sv[0], 50) == 0, "recv mode: nothing more reported");

    static char big[40000], got[40000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)(i * 7 + i / 256);
    size_t have = 0, sent = 0;
    for (int rounds = 0; have < sizeof big && rounds < 2000; rounds++) {
        if (sent < sizeof big) {
            ssize_t w = write(sv[1], big + sent, sizeof big - sent);
            if (w > 0)
                sent += (size_t)w;
        }
        if (!(events_of(l, sv[0], 1000) & GIO_READ))
            continue;
        long r;
        while (have < sizeof got && (r = gio_recv(l, sv[0], got + have, 3000)) > 0)
            have += (size_t)r;
    }
    ok(have == sizeof big && !memcmp(big, got, sizeof big), "recv mode: 40,000 bytes whole");

    gio_want(l, sv[0], 0); /* input that comes while nobody wants it is kept */
    gio_wait(l, 0);
    write(sv[1], "late", 4);
    ok(events_of(l, sv[0], 100) == 0, "recv mode: not reported while not wanted");
    gio_want(l, sv[0], GIO_READ);
    ok(events_of(l, sv[0], 2000) == GIO_READ, "recv mode: reported once wanted again");
    is_int(gio_recv(l, sv[0], buf, sizeof buf), 4, "recv mode: none of it lost");
    close(sv[1]);
    ok(events_of(l, sv[0], 2000) & (GIO_READ | GIO_HANGUP), "recv mode: EOF reported");
    is_int(gio_recv(l, sv[0], buf, sizeof buf), GIO_EOF, "recv mode: gio_recv gives GIO_EOF");
    gio_close_sole(l, sv[0]);

    int right = 0;
    for (int i = 0; i < 600; i++) {
        pair(sv);
        gio_add(l, sv[0], NULL);
        gio_recv_mode(l, sv[0]);
        gio_want(l, sv[0], GIO_READ);
        gio_wait(l, 0);
        write(sv[1], "xy", 2);
        unsigned ev = events_of(l, sv[0], 2000);
        if (i % 2 == 0) { /* every other one is closed holding its input */
            right += ev == GIO_READ;
        } else {
            right += ev == GIO_READ && gio_recv(l, sv[0], buf, sizeof buf) == 2 &&
                     !memcmp(buf, "xy", 2);
        }
        gio_close_sole(l, sv[0]);
        close(sv[1]);
    }
    is_int(right, 600, "recv mode: 600 connections opened, fed and closed");
    gio_wait(l, 0);
}

/*
 * gio_send on a descriptor in recv mode (uring: through the ring, from a
 * copy): memory and a file range after it leave whole and in order, the
 * batch is consumed only as bytes go out, and a descriptor closed with a
 * send stuck in flight (the peer reads nothing) is closed for the peer.
 */
static void test_send_mode(gio_loop_t *l)
{
    int sv[2];
    pair(sv);
    gio_add(l, sv[0], NULL);
    gio_recv_mode(l, sv[0]);
    char head[100], fbuf[5000];
    for (size_t i = 0; i < sizeof head; i++)
        head[i] = (char)('A' + i % 26);
    for (size_t i = 0; i < sizeof fbuf; i++)
        fbuf[i] = (char)('a' + i % 23);
    char path[] = "/tmp/t_gio_send.XXXXXX";
    int ffd = mkstemp(path);
    unlink(path);
    write(ffd, fbuf, sizeof fbuf);
    gio_batch_t b;
    gio_batch_init(&b);
    gio_batch_add_buf(&b, head, sizeof head, 0);
    gio_batch_add_file(&b, ffd, 0, sizeof fbuf, 0);
    gio_batch_add_buf(&b, "END", 3, 0);
    char got[6000];
    size_t have = 0, total = sizeof head + sizeof fbuf + 3;
    int rounds = 0, bad = 0;
    while ((!gio_batch_done(&b) || have < total) && rounds++ < 2000) {
        long r = gio_send(l, sv[0], &b, 0);
        if (r == GIO_ERR)
            bad = 1;
        gio_want(l, sv[0], gio_batch_done(&b) ? 0 : GIO_WRITE);
        events_of(l, sv[0], 10);
        ssize_t n;
        while ((n = read(sv[1], got + have, sizeof got - have)) > 0)
            have += (size_t)n;
    }
    ok(!bad && have == total && !memcmp(got, head, sizeof head) &&
           !memcmp(got + sizeof head, fbuf, sizeof fbuf) && !memcmp(got + total - 3, "END", 3),
       "send mode: memory, a file range, memory: whole and in order (%zu of %zu)", have, total);
    is_int((int)b.bytes_sent, (int)total, "send mode: the batch counts what went out");

    /* fill the peer's socket until sends stop, then close with one in flight */
    static char blob[65536];
    gio_batch_reset(&b);
    int stuck = 0;
    for (int i = 0; i < 200 && !stuck; i++) {
        gio_batch_add_buf(&b, blob, sizeof blob, 0);
        long r = gio_send(l, sv[0], &b, 0);
        gio_want(l, sv[0], GIO_WRITE);
        events_of(l, sv[0], 20);
        if (r == GIO_AGAIN && !(events_of(l, sv[0], 50) & GIO_WRITE))
            stuck = 1;
        while (!gio_batch_done(&b) && gio_send(l, sv[0], &b, 0) > 0)
            ;
    }
    ok(stuck, "send mode: a peer that reads nothing blocks the sends");
    gio_close_sole(l, sv[0]);
    gio_batch_free(&b);
    gio_wait(l, 0);
    char sink[65536];
    ssize_t n;
    size_t drained = 0;
    int eof = 0;
    for (int i = 0; i < 2000 && !eof; i++) {
        n = read(sv[1], sink, sizeof sink);
        if (n == 0)
            eof = 1;
        else if (n > 0)
            drained += (size_t)n;
        else
            usleep(1000);
        gio_wait(l, 0);
    }
    ok(eof, "send mode: closed with a send in flight: the peer sees the close (%zu read)",
       drained);
    close(sv[1]);
    close(ffd);
}

/*
 * Level behaviour of a descriptor in receive mode, whose reads and sends all
 * go through gio (epoll registers it once, edge-triggered, and keeps the
 * readiness itself): what is left ready is reported every round, a change
 * of interest alone reports what is still ready, and a full socket buffer
 * is reported writable once the peer has read.
 */
static void test_mode_level(gio_loop_t *l)
{
    int sv[2];
    pair(sv);
    gio_add(l, sv[0], NULL);
    gio_recv_mode(l, sv[0]);
    gio_want(l, sv[0], GIO_READ);
    ok(events_of(l, sv[0], 50) == 0, "mode level: writable but not wanted: nothing");
    gio_want(l, sv[0], GIO_WRITE);
    ok(events_of(l, sv[0], 1000) == GIO_WRITE, "mode level: wanted writable: reported");
    ok(events_of(l, sv[0], 1000) == GIO_WRITE, "mode level: and again, nothing was sent");
    gio_want(l, sv[0], GIO_READ);
    ok(events_of(l, sv[0], 50) == 0, "mode level: back to input only: nothing");
    gio_want(l, sv[0], GIO_WRITE);
    ok(events_of(l, sv[0], 1000) == GIO_WRITE, "mode level: writable again without new news");

    static char blob[65536];
    gio_batch_t b;
    gio_batch_init(&b);
    long r = 1;
    for (int i = 0; i < 400 && r > 0; i++) { /* until the buffers are full */
        if (gio_batch_done(&b))
            gio_batch_add_buf(&b, blob, sizeof blob, 0);
        r = gio_send(l, sv[0], &b, 0);
        if (r == GIO_AGAIN) { /* uring: the send completes a round later */
            unsigned ev = events_of(l, sv[0], 100);
            r = (ev & GIO_WRITE) ? 1 : 0;
        }
    }
    ok(r == 0, "mode level: the socket buffers filled");
    ok(events_of(l, sv[0], 100) == 0, "mode level: full: not writable");
    drain(sv[1]);
    unsigned ev = 0;
    for (int i = 0; i < 50 && !(ev & GIO_WRITE); i++) {
        ev = events_of(l, sv[0], 100);
        drain(sv[1]);
    }
    ok(ev & GIO_WRITE, "mode level: the peer read: writable reported");
    write(sv[1], "in", 2);
    gio_want(l, sv[0], 0);
    ok(events_of(l, sv[0], 50) == 0, "mode level: wanting nothing: nothing");
    gio_want(l, sv[0], GIO_READ);
    ok(events_of(l, sv[0], 1000) & GIO_READ, "mode level: input that came meanwhile reported");
    char buf[16];
    is_int(gio_recv(l, sv[0], buf, sizeof buf), 2, "mode level: and taken");
    gio_batch_free(&b);
    gio_close_sole(l, sv[0]);
    close(sv[1]);
}

/*
 * Many ready descriptors in one round, then level behaviour for each (catches
 * a fired/ready array or signal queue that loses some).
 */
static void test_many(gio_loop_t *l)
{
    static int sv[NMANY][2];
    static unsigned evs[4096];
    int n = 0, ok1 = 1, ok2 = 1;
    for (int i = 0; i < NMANY; i++) {
        if (pair(sv[i]) < 0 || sv[i][1] >= 4096)
            break;
        gio_add(l, sv[i][0], NULL);
        gio_want(l, sv[i][0], GIO_READ);
        n++;
    }
    gio_wait(l, 0);
    for (int i = 0; i < n; i++)
        write(sv[i][1], "m", 1);
    is_int(collect(l, 2000, evs, 4096), n, "%d readable descriptors reported in one round", n);
    for (int i = 0; i < n; i++)
        ok1 &= evs[sv[i][0]] == GIO_READ;
    ok(ok1, "each with GIO_READ");
    for (int i = 0; i < n; i += 2)
        drain(sv[i][0]);
    is_int(collect(l, 2000, evs, 4096), n / 2, "after draining half, the other half again");
    for (int i = 0; i < n; i++)
        ok2 &= !evs[sv[i][0]] == !(i & 1);
    ok(ok2, "exactly the undrained ones");
    for (int i = 0; i < n; i++) {
        gio_close(l, sv[i][0]);
        close(sv[i][1]);
    }
    is_int(gio_count(l), 0, "all closed");
}

/* Deadlines: wake the wait, fire exactly once, ordering, clearing, del. */
static void test_deadlines(gio_loop_t *l)
{
    int a[2], b[2];
    pair(a), pair(b);
    gio_add(l, a[0], NULL);
    gio_add(l, b[0], NULL);
    gio_wait(l, 0);
    /* the later deadline far off: a busy machine (make check's parallel
       passes) may wake this hundreds of ms late, and it still tells them apart */
    gio_set_deadline(l, a[0], gio_now(l) + 10000);
    gio_set_deadline(l, b[0], gio_now(l) + 60); /* earlier one set second */
    int64_t t0 = now_ms();
    gio_wait(l, -1); /* nothing is wanted: only the deadline can end this */
    int64_t dt = now_ms() - t0;
    ok(dt >= 50 && dt < 5000, "gio_wait(-1) returned at the earlier deadline (%lld ms)",
       (long long)dt);
    is_int(gio_next_timeout(l), b[0], "the earlier deadline fired");
    is_int(gio_next_timeout(l), -1, "... only that one");
    gio_set_deadline(l, a[0], 0);
    gio_wait(l, 300);
    is_int(gio_next_timeout(l), -1, "b's deadline fired only once");
    gio_set_deadline(l, a[0], gio_now(l) + 100);
    gio_set_deadline(l, a[0], 0);
    gio_wait(l, 300);
    is_int(gio_next_timeout(l), -1, "a cleared deadline does not fire when its time passes");

    gio_set_deadline(l, a[0], gio_now(l) + 20);
    gio_wait(l, 200);
    gio_wait(l, 0); /* not taken yet: must survive this wait */
    is_int(gio_next_timeout(l), a[0], "an expired fd not taken stays queued over a wait");
    is_int(gio_next_timeout(l), -1, "... and comes once");

    /* a caller that takes only some expiries: the next wait must not sleep */
    gio_set_deadline(l, a[0], gio_now(l) + 10);
    gio_set_deadline(l, b[0], gio_now(l) + 10);
    gio_wait(l, 200);
    int first = gio_next_timeout(l);
    ok(first == a[0] || first == b[0], "two deadlines expired, one taken");
    t0 = now_ms();
    gio_wait(l, 10000);
    dt = now_ms() - t0;
    ok(dt < 5000, "an expiry left queued: gio_wait(10 s) returns at once (%lld ms)",
       (long long)dt);
    is_int(gio_next_timeout(l), first == a[0] ? b[0] : a[0], "... with the other one");
    is_int(gio_next_timeout(l), -1, "... and no more");

    gio_set_deadline(l, a[0], gio_now(l) + 20);
    gio_set_deadline(l, b[0], gio_now(l) + 20);
    gio_del(l, a[0]);
    gio_del(l, b[0]);
    gio_add(l, b[0], NULL); /* a new registration: the old deadline is gone */
    gio_wait(l, 100);
    is_int(gio_next_timeout(l), -1, "deleted / re-added fds: old deadlines do not fire");
    gio_set_deadline(l, b[0], gio_now(l) + 10);
    gio_wait(l, 200);
    gio_del(l, b[0]); /* expired, queued, then deleted before being taken */
    is_int(gio_next_timeout(l), -1, "an expired fd deleted before gio_next_timeout: not returned");
    gio_add(l, b[0], NULL);
    gio_set_deadline(l, b[0], gio_now(l) + 10);
    gio_wait(l, 200);
    gio_set_deadline(l, b[0], gio_now(l) + 10000); /* activity pushed it out meanwhile */
    is_int(gio_next_timeout(l), -1, "a collected expiry is cancelled by a new deadline");
    gio_del(l, b[0]);
    close_pair(a), close_pair(b);
}

/* The last slot of the table (catches scans that stop short of high fds). */
static void test_high_fd(gio_loop_t *l, int tablesize)
{
    int sv[2];
    pair(sv);
    int hi = tablesize - 1;
    if (dup2(sv[0], hi) != hi) {
        ok(0, "dup2 to fd %d: %s", hi, strerror(errno));
        close_pair(sv);
        return;
    }
    ok(gio_add(l, hi, NULL) == 0, "gio_add(%d), the table's last slot", hi);
    gio_want(l, hi, GIO_READ);
    write(sv[1], "h", 1);
    ok(events_of(l, hi, 2000) == GIO_READ, "high fd reported readable");
    gio_want(l, hi, 0);
    gio_set_deadline(l, hi, gio_now(l) + 30);
    gio_wait(l, 300);
    is_int(gio_next_timeout(l), hi, "high fd's deadline fired");
    gio_wait(l, 50);
    is_int(gio_next_timeout(l), -1, "... once");
    gio_close(l, hi);
    close_pair(sv);
}

/*
 * Many del/re-add cycles of one fd between two waits: each cycle queues an
 * interest change; the change list must not grow past the table (ASan).
 */
static void test_churn(gio_loop_t *l, int tablesize)
{
    int sv[2];
    pair(sv);
    for (int i = 0; i < 3 * tablesize; i++) {
        gio_add(l, sv[0], NULL);
        gio_want(l, sv[0], GIO_READ);
        gio_del(l, sv[0]);
    }
    gio_add(l, sv[0], NULL);
    gio_want(l, sv[0], GIO_WRITE);
    ok(events_of(l, sv[0], 2000) == GIO_WRITE, "after %d del/re-add cycles in one round",
       3 * tablesize);
    gio_close(l, sv[0]);
    close(sv[1]);
}

static void test_timeout(gio_loop_t *l)
{
    int64_t t0 = now_ms();
    int n = gio_wait(l, 80);
    int64_t dt = now_ms() - t0;
    ok(n == 0 && dt >= 70 && dt < 5000, "gio_wait(80) with nothing ready: 0 after %lld ms",
       (long long)dt);
    ok(gio_now(l) >= t0 && gio_wallclock(l) > 1600000000, "clocks refreshed");
}

/*
 * The deadline heap against a plain model: random sets, moves, clears,
 * deletions and re-additions over 300 descriptors, with deadlines in the
 * past and the future; after each wait the expired set must be exactly the
 * model's, each fd once.
 */
static void test_deadline_model(gio_loop_t *l)
{
    enum { N = 300 };
    int fd[N], wr[N], index_of[4096];
    int64_t model[N]; /* 0 = none */
    unsigned seed = 12345;
    int added = 0;
    for (int i = 0; i < N; i++) {
        int p[2];
        if (pipe(p) < 0 || p[0] >= 4096)
            break;
        fd[i] = p[0], wr[i] = p[1];
        index_of[fd[i]] = i;
        added += gio_add(l, fd[i], &fd[i]) == 0;
        model[i] = 0;
    }
    is_int(added, N, "%d pipes registered", N);
    int good = 1, rounds = 0;
    for (int round = 0; round < 200; round++) {
        int64_t now = gio_now(l);
        for (int op = 0; op < 50; op++) {
            seed = seed * 1103515245 + 12345;
            int i = (int)((seed >> 8) % N), kind = (int)((seed >> 20) % 10);
            if (kind < 4) { /* set or move: past (expires now) or future */
                int64_t when = now + ((seed >> 4) & 1 ? -1 - (int64_t)(seed % 50)
                                                      : 100000 + (int64_t)(seed % 1000));
                gio_set_deadline(l, fd[i], when);
                model[i] = when;
            } else if (kind < 6) {
                gio_set_deadline(l, fd[i], 0);
                model[i] = 0;
            } else if (kind == 6) { /* deleted and added again: its deadline is gone */
                gio_del(l, fd[i]);
                gio_add(l, fd[i], &fd[i]);
                model[i] = 0;
            }
        }
        gio_wait(l, 0);
        now = gio_now(l);
        char seen[N] = {0};
        int t;
        while ((t = gio_next_timeout(l)) >= 0) {
            int i = t >= 0 && t < 4096 ? index_of[t] : -1;
            if (i < 0 || i >= N || fd[i] != t || seen[i] || !model[i] || model[i] > now)
                good = 0;
            else
                seen[i] = 1;
        }
        for (int i = 0; i < N; i++) {
            if (model[i] && model[i] <= now && !seen[i])
                good = 0; /* missed */
            if (seen[i])
                model[i] = 0; /* reported once, then cleared */
        }
        rounds++;
    }
    ok(good, "deadline heap matches the model over %d rounds of random operations", rounds);
    for (int i = 0; i < N; i++) {
        gio_del(l, fd[i]);
        close(fd[i]);
        close(wr[i]);
    }
}

int main(void)
{
    /* A small table, so that its last slot is a real, cheap fd number. */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 2048) {
        rl.rlim_cur = 2048;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    int tablesize = (int)rl.rlim_cur;
    signal(SIGPIPE, SIG_IGN);

    gio_loop_t *l = gio_loop_new();
    ok(l != NULL, "gio_loop_new");
    if (!l)
        return tap_done();
    const char *name = gio_backend_name();
    ok(name && *name, "backend: %s", name ? name : "(null)");

    test_add_errors(l, tablesize);
    test_read_level(l);
    test_interest(l);
    test_write_full(l);
    test_pipe(l);
    test_del_pending(l);
    test_reuse(l);
    test_close_sole(l);
    test_recv_mode(l);
    test_send_mode(l);
    test_mode_level(l);
    test_many(l);
    test_deadlines(l);
    test_high_fd(l, tablesize);
    test_churn(l, tablesize);
    test_timeout(l);
    test_deadline_model(l);
    is_int(gio_count(l), 0, "nothing left registered");
    gio_loop_free(l);
    return tap_done();
}
