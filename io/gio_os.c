/*
 * gio_os: sendfile for Linux, FreeBSD and macOS, and a pread/send fallback
 * for the systems without one (OpenBSD, NetBSD).
 *
 * SIGPIPE: sendmsg takes MSG_NOSIGNAL, sendfile takes no such flag, and
 * Linux's sendfile to a socket whose peer is gone raises SIGPIPE, which kills
 * a process that kept the default action.  So sendfile runs with SIGPIPE
 * blocked in the calling thread, and a SIGPIPE it raised is taken off the
 * pending set before the mask is restored: two cheap sigprocmask calls per
 * sendfile, against a process killed by one impatient client.  macOS has
 * SO_NOSIGPIPE instead, set by gio_nonblock().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gio_os.h"
#include "gio_bits.h"

#include <errno.h>
#include <signal.h>
#if defined(__linux__)
#include <sys/prctl.h>
#elif defined(__FreeBSD__)
#include <sys/procctl.h>
#endif
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#if defined(__linux__) || defined(__FreeBSD__)
/*
 * Is SIGPIPE ignored?  Asked once: a server that ignores it (gatling does,
 * before its first response) then saves two sigprocmask calls per sendfile.
 * The cost is the contract in gio_os.h: do not stop ignoring it later.
 */
static int pipe_ignored(void)
{
    static int ignored = -1; /* a cache of process state, not loop state */
    if (ignored < 0) {
        struct sigaction sa;
        ignored = sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
    }
    return ignored;
}

/* Block SIGPIPE in this thread; *old gets the previous mask. */
static void pipe_block(sigset_t *old)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    sigprocmask(SIG_BLOCK, &s, old);
}

/* Drop a SIGPIPE raised while blocked (only if it was not blocked before). */
static void pipe_restore(const sigset_t *old, int err)
{
    sigset_t s;
    if (err == EPIPE && !sigismember(old, SIGPIPE) && sigpending(&s) == 0 &&
        sigismember(&s, SIGPIPE)) {
        int sig;
        sigemptyset(&s);
        sigaddset(&s, SIGPIPE);
        sigwait(&s, &sig); /* pending, so this returns at once */
    }
    sigprocmask(SIG_SETMASK, old, NULL);
    errno = err;
}
#endif

#if defined(__linux__)
#include <sys/sendfile.h>

long gio_sendfile(int sock, int fd, uint64_t off, uint64_t len)
{
    off_t o = (off_t)off;
    sigset_t old;
    if (len > 0x7ffff000)
        len = 0x7ffff000; /* Linux's per-call maximum */
    int guard = !pipe_ignored();
    if (guard)
        pipe_block(&old);
    ssize_t r = sendfile(sock, fd, &o, len);
    if (guard)
        pipe_restore(&old, r < 0 ? errno : 0);
    if (r >= 0)
        return r;
    return errno == EAGAIN || errno == EINTR ? GIO_AGAIN : GIO_ERR;
}

#elif defined(__FreeBSD__) || defined(__APPLE__)
#include <sys/uio.h>

long gio_sendfile(int sock, int fd, uint64_t off, uint64_t len)
{
    off_t sent = 0;
#if defined(__APPLE__)
    sent = (off_t)len;
    int r = sendfile(fd, sock, (off_t)off, &sent, NULL, 0);
#else
    sigset_t old;
    int guard = !pipe_ignored();
    if (guard)
        pipe_block(&old);
    int r = sendfile(fd, sock, (off_t)off, (size_t)len, NULL, &sent, 0);
    if (guard)
        pipe_restore(&old, r < 0 ? errno : 0);
#endif
    /* both report partial progress with EAGAIN/EINTR: count it */
    if (sent > 0)
        return (long)sent;
    if (r == 0)
        return 0; /* nothing sent and no error: end of file */
    return errno == EAGAIN || errno == EINTR ? GIO_AGAIN : GIO_ERR;
}

#else /* OpenBSD, NetBSD: no sendfile; copy through a small buffer */

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

long gio_sendfile(int sock, int fd, uint64_t off, uint64_t len)
{
    char buf[16384];
    if (len > sizeof buf)
        len = sizeof buf;
    ssize_t n = pread(fd, buf, len, (off_t)off);
    if (n <= 0)
        return n == 0 ? 0 : GIO_ERR;
    ssize_t w = send(sock, buf, n, MSG_NOSIGNAL);
    if (w >= 0)
        return w;
    return errno == EAGAIN || errno == EINTR ? GIO_AGAIN : GIO_ERR;
}
#endif

#if defined(__linux__)
#include <linux/sockios.h>
#elif defined(__FreeBSD__)
#include <sys/filio.h>
#endif
#include <sys/ioctl.h>

uint64_t gio_unacked(int sock)
{
    int n = 0;
#if defined(__linux__)
    if (ioctl(sock, SIOCOUTQ, &n) < 0)
        n = 0;
#elif defined(__FreeBSD__)
    if (ioctl(sock, FIONWRITE, &n) < 0)
        n = 0;
#elif defined(__APPLE__)
    socklen_t len = sizeof n;
    if (getsockopt(sock, SOL_SOCKET, SO_NWRITE, &n, &len) < 0)
        n = 0;
#else
    (void)sock;
#endif
    return n > 0 ? (uint64_t)n : 0;
}

uint64_t gio_unsent(int sock)
{
#if defined(__linux__) && defined(SIOCOUTQNSD)
    int n = 0;
    if (ioctl(sock, SIOCOUTQNSD, &n) < 0)
        n = 0;
    return n > 0 ? (uint64_t)n : 0;
#else
    return gio_unacked(sock);
#endif
}

#include <netinet/in.h>
#include <netinet/tcp.h>

void gio_limit_unsent(int sock, int bytes)
{
#ifdef TCP_NOTSENT_LOWAT
    setsockopt(sock, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &bytes, sizeof bytes);
#else
    (void)sock, (void)bytes;
#endif
}

int gio_proc_private(void)
{
#if defined(__linux__)
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#else
    return 0;
#endif
}

int gio_proc_subreaper(void)
{
#if defined(__linux__) && defined(PR_SET_CHILD_SUBREAPER)
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int gio_proc_parent_death(int sig)
{
#if defined(__linux__)
    return prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0);
#elif defined(__FreeBSD__) && defined(PROC_PDEATHSIG_CTL)
    return procctl(P_PID, 0, PROC_PDEATHSIG_CTL, &sig);
#else
    (void)sig;
    errno = ENOSYS;
    return -1;
#endif
}
