/* gio_os: sendfile for Linux, FreeBSD, macOS, and a pread/send fallback. */
#define _GNU_SOURCE
#include "gio_os.h"
#include "gio.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/sendfile.h>

long gio_sendfile(int sock, int fd, uint64_t off, uint64_t len)
{
    off_t o = (off_t)off;
    if (len > 0x7ffff000)
        len = 0x7ffff000; /* Linux's per-call maximum */
    ssize_t r = sendfile(sock, fd, &o, len);
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
    int r = sendfile(fd, sock, (off_t)off, (size_t)len, NULL, &sent, 0);
#endif
    /* both report partial progress with EAGAIN/EINTR: count it */
    if (sent > 0)
        return (long)sent;
    if (r == 0)
        return 0; /* nothing sent and no error: end of file */
    return errno == EAGAIN || errno == EINTR ? GIO_AGAIN : GIO_ERR;
}

#else /* OpenBSD, NetBSD: no sendfile; copy through a small buffer */

long gio_sendfile(int sock, int fd, uint64_t off, uint64_t len)
{
    char buf[16384];
    if (len > sizeof buf)
        len = sizeof buf;
    ssize_t n = pread(fd, buf, len, (off_t)off);
    if (n <= 0)
        return n == 0 ? 0 : GIO_ERR;
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SO_NOSIGPIPE / SIGPIPE ignored by the caller */
#endif
    ssize_t w = send(sock, buf, n, MSG_NOSIGNAL);
    if (w >= 0)
        return w;
    return errno == EAGAIN || errno == EINTR ? GIO_AGAIN : GIO_ERR;
}
#endif
