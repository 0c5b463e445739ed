/*
 * Output batches: buffers by sendmsg (gathered, at most 64 at once, or
 * IOV_MAX where that is smaller),
 * file ranges by sendfile, resumed after partial writes.
 *
 * sendfile itself is behind gio_sendfile() (gio_os.h), the one place where
 * Linux and the BSDs differ.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gio_batch.h"
#include "gio_bits.h"
#include "gio_os.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* old macOS: SO_NOSIGPIPE, set by gio_nonblock() */
#endif
#ifndef MSG_MORE
#define MSG_MORE 0 /* the BSDs: headers and body may leave in separate packets */
#endif

void gio_batch_init(gio_batch_t *b)
{
    memset(b, 0, sizeof *b);
}

static gio_chunk_t *push(gio_batch_t *b)
{
    if (b->first == b->n) /* empty: reuse the array from the start */
        b->first = b->n = 0;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4;
        gio_chunk_t *c = realloc(b->c, cap * sizeof *c);
        if (!c)
            return NULL;
        b->c = c;
        b->cap = cap;
    }
    return &b->c[b->n++];
}

int gio_batch_add_buf(gio_batch_t *b, const void *buf, size_t len, int flags)
{
    if (!len) {
        if (flags & GIO_BATCH_FREE)
            free((void *)buf);
        return 0;
    }
    gio_chunk_t *c = push(b);
    if (!c)
        return -1;
    *c = (gio_chunk_t){.buf = buf, .fd = -1, .flags = flags, .off = 0, .left = len};
    b->bytes_left += len;
    return 0;
}

int gio_batch_add_file(gio_batch_t *b, int fd, uint64_t off, uint64_t len, int flags)
{
    if (!len) {
        if (flags & GIO_BATCH_CLOSE)
            close(fd);
        return 0;
    }
    gio_chunk_t *c = push(b);
    if (!c)
        return -1;
    *c = (gio_chunk_t){.buf = NULL, .fd = fd, .flags = flags, .off = off, .left = len};
    b->bytes_left += len;
    return 0;
}

static void release(gio_chunk_t *c)
{
    if (c->buf && (c->flags & GIO_BATCH_FREE))
        free((void *)c->buf);
    if (!c->buf && (c->flags & GIO_BATCH_CLOSE))
        close(c->fd);
    c->flags = 0;
}

void gio_batch_consume(gio_batch_t *b, uint64_t n)
{
    b->bytes_left -= n;
    b->bytes_sent += n;
    while (n && b->first < b->n) {
        gio_chunk_t *c = &b->c[b->first];
        uint64_t k = n < c->left ? n : c->left;
        c->off += k;
        c->left -= k;
        n -= k;
        if (!c->left) {
            release(c);
            b->first++;
        }
    }
}

/* Send the run of buffer chunks at the front; at most max bytes. */
static long send_buffers(gio_batch_t *b, int sock, uint64_t max, uint64_t *tried)
{
    struct iovec iov[IOV_MAX > 64 ? 64 : IOV_MAX];
    int n = 0, nmax = sizeof iov / sizeof iov[0];
    uint64_t total = 0;
    size_t i = b->first;
    for (; i < b->n && b->c[i].buf && n < nmax && total < max; i++, n++) {
        uint64_t len = b->c[i].left;
        if (len > max - total)
            len = max - total;
        iov[n].iov_base = (char *)b->c[i].buf + b->c[i].off;
        iov[n].iov_len = len;
        total += len;
    }
    /* MSG_MORE only when a file range follows right away: the kernel then
       merges the headers with the first file bytes.  Never on the last
       chunk, so a response is never left waiting in a corked socket. */
    int more = i < b->n && !b->c[i].buf ? MSG_MORE : 0;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = n};
    *tried = total;
    ssize_t r = sendmsg(sock, &mh, MSG_NOSIGNAL | more);
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? GIO_AGAIN : GIO_ERR;
    gio_batch_consume(b, r);
    return r;
}

static long send_file(gio_batch_t *b, int sock, uint64_t max, uint64_t *tried)
{
    gio_chunk_t *c = &b->c[b->first];
    uint64_t len = c->left < max ? c->left : max;
    *tried = len;
    long r = gio_sendfile(sock, c->fd, c->off, len);
    if (r == 0) { /* the file is shorter than promised: never hang the client */
        errno = EIO;
        return GIO_ERR;
    }
    if (r < 0)
        return r;
    gio_batch_consume(b, r);
    return r;
}

long gio_batch_send(gio_batch_t *b, int sock, uint64_t budget)
{
    uint64_t sent = 0;
    if (!budget)
        budget = UINT64_MAX;
    while (b->first < b->n && sent < budget) {
        uint64_t tried = 0;
        long r = b->c[b->first].buf ? send_buffers(b, sock, budget - sent, &tried)
                                    : send_file(b, sock, budget - sent, &tried);
        if (r < 0) /* report progress first; the error comes back next call */
            return sent ? (long)sent : r;
        sent += r;
        if ((uint64_t)r < tried)
            break; /* a short write: the socket buffer is full */
    }
    return (long)sent;
}

#define COPY_IOV 64 /* file pieces read by one preadv */

/* Fill the n pieces of iov (inside buf) from fd at off, with one preadv
   (sequential preads on macOS, whose preadv is recent).  1 all read; 0
   short, *got then where the bytes stop; GIO_ERR (EIO: the file shrank). */
static long read_run(int fd, uint64_t off, struct iovec *iov, int n, char *buf, size_t *got)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
#ifdef __APPLE__
    ssize_t r = 0;
    for (int i = 0; i < n; i++) {
        ssize_t k = pread(fd, iov[i].iov_base, iov[i].iov_len, (off_t)(off + (uint64_t)r));
        if (k < 0 && !r)
            r = -1;
        if (k <= 0)
            break;
        r += k;
        if ((size_t)k < iov[i].iov_len)
            break;
    }
#else
    ssize_t r = preadv(fd, iov, n, (off_t)off);
#endif
    if (r <= 0) {
        if (r == 0)
            errno = EIO; /* the file shrank: never hang the client */
        return GIO_ERR;
    }
    if ((size_t)r == total)
        return 1;
    for (int i = 0;; r -= (ssize_t)iov[i++].iov_len)
        if ((size_t)r < iov[i].iov_len) {
            *got = (size_t)((char *)iov[i].iov_base - buf) + (size_t)r;
            return 0;
        }
}

static long copy_out(const gio_batch_t *b, char *buf, size_t cap, int whole_ranges);

long gio_batch_copy(const gio_batch_t *b, char *buf, size_t cap)
{
    return copy_out(b, buf, cap, 1);
}

long gio_batch_copy_full(const gio_batch_t *b, char *buf, size_t cap)
{
    return copy_out(b, buf, cap, 0);
}

static long copy_out(const gio_batch_t *b, char *buf, size_t cap, int whole_ranges)
{
    struct iovec iov[COPY_IOV];
    int n = 0, fd = -1;
    uint64_t off = 0, at = 0; /* the pending run of file pieces: where it starts, goes on */
    size_t got = 0;
    for (size_t i = b->first; i < b->n && got < cap; i++) {
        const gio_chunk_t *c = &b->c[i];
        size_t k = c->left < cap - got ? (size_t)c->left : cap - got;
        if (c->buf) {
            memcpy(buf + got, c->buf + c->off, k);
            got += k;
            continue;
        }
        if (whole_ranges && k < c->left && got && i + 1 < b->n)
            break; /* a file range that does not fit, with more behind it (HTTP/2's DATA
                      frames): it starts the next copy, so each is read once, not twice */
        if (n && (c->fd != fd || c->off != at || n == COPY_IOV)) {
            long r = read_run(fd, off, iov, n, buf, &got);
            n = 0;
            if (r <= 0)
                return r < 0 ? r : (long)got;
        }
        if (!n)
            fd = c->fd, off = at = c->off;
        iov[n].iov_base = buf + got; /* DATA frames of one file: one read for them all */
        iov[n++].iov_len = k;
        at += k;
        got += k;
    }
    if (n) {
        long r = read_run(fd, off, iov, n, buf, &got);
        if (r < 0)
            return r;
    }
    return (long)got;
}

void gio_batch_reset(gio_batch_t *b)
{
    for (size_t i = b->first; i < b->n; i++)
        release(&b->c[i]);
    b->first = b->n = 0;
    b->bytes_left = 0;
    b->bytes_sent = 0;
}

void gio_batch_free(gio_batch_t *b)
{
    gio_batch_reset(b);
    free(b->c);
    gio_batch_init(b);
}
