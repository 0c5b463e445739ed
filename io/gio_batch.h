/*
 * gio_batch — output batches: an ordered list of memory buffers and file
 * ranges, sent to a socket with writev/sendmsg (buffers) and sendfile
 * (files).
 *
 * - Buffers that are immediately followed by a file range go out with
 *   MSG_MORE, so headers and body leave in full packets; a batch made only of
 *   buffers is sent without MSG_MORE and never waits in the kernel.
 * - Partial writes are resumed where they stopped.
 * - At most 64 buffers (fewer where IOV_MAX is smaller) go into one
 *   sendmsg; the rest go in the next, within the same call's budget.
 * - MSG_NOSIGNAL everywhere: no SIGPIPE, ever.
 * - Each gio_batch_send() call sends at most `budget` bytes, so one fast
 *   reader cannot starve the other connections of the loop.
 */
#ifndef GIO_BATCH_H
#define GIO_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum {
    GIO_BATCH_FREE = 1, /* buffer: free() it when sent or when the batch is reset */
    GIO_BATCH_CLOSE = 2 /* file: close() the fd when sent or reset */
};

typedef struct gio_chunk {
    const char *buf; /* NULL for a file range */
    int fd;          /* file descriptor for a file range */
    int flags;
    uint64_t off;  /* buffer: bytes already sent; file: next offset */
    uint64_t left; /* bytes still to send */
} gio_chunk_t;

typedef struct gio_batch {
    gio_chunk_t *c;
    size_t n, first, cap; /* chunks [first, n) are pending */
    uint64_t bytes_left;
    uint64_t bytes_sent; /* total since init or reset */
} gio_batch_t;

/* An empty batch; no allocation until the first add. */
void gio_batch_init(gio_batch_t *b);

/*
 * Append len bytes at buf (not copied: buf must live until sent, or pass
 * GIO_BATCH_FREE to hand it over).  A zero-length add is a no-op.
 * 0, or -1 on ENOMEM (ownership of buf is then NOT taken).
 */
int gio_batch_add_buf(gio_batch_t *b, const void *buf, size_t len, int flags);

/* Append len bytes of file fd from offset off (GIO_BATCH_CLOSE: take fd). */
int gio_batch_add_file(gio_batch_t *b, int fd, uint64_t off, uint64_t len, int flags);

/*
 * Send as much as possible, but at most budget bytes (0: no cap).  Returns
 * bytes sent (> 0), GIO_AGAIN if the socket would block before anything was
 * sent, GIO_ERR on a hard error (errno set; EPIPE/ECONNRESET are peer gone;
 * a file that shrank under us gives EIO), or 0 if the batch was empty.
 * Sent chunks are released as they complete.
 */
long gio_batch_send(gio_batch_t *b, int sock, uint64_t budget);

/*
 * For a layer that must transform the bytes before they leave (TLS): copy
 * up to cap pending bytes from the front of the batch into buf, reading file
 * ranges with pread, without consuming them.  Called again before
 * gio_batch_consume() it copies the same bytes.  Returns the bytes copied
 * (0 if the batch is empty), or GIO_ERR (errno set; EIO for a file that is
 * shorter than promised).  A file range that does not fit in what is left
 * of buf and has more chunks behind it is left for the next copy when
 * something was copied already: HTTP/2's DATA frames (a 9-byte header, then
 * a file range) then fill one 16 KiB TLS record each, one pread apiece,
 * where the bytes before the first one would shift every later one across
 * two records and two preads.
 */
long gio_batch_copy(const gio_batch_t *b, char *buf, size_t cap);

/* gio_batch_copy() that fills buf when there is enough, a file range cut
   where buf ends (a layer that copies several records at once: each is
   full, and the range goes on at the next copy). */
long gio_batch_copy_full(const gio_batch_t *b, char *buf, size_t cap);

/* Account n bytes (at most what gio_batch_copy gave) as sent. */
void gio_batch_consume(gio_batch_t *b, uint64_t n);

/* True when nothing is left to send. */
static inline int gio_batch_done(const gio_batch_t *b)
{
    return b->first == b->n;
}

/* Release every chunk (freeing/closing owned ones) and empty the batch. */
void gio_batch_reset(gio_batch_t *b);

/* gio_batch_reset() and free the chunk array. */
void gio_batch_free(gio_batch_t *b);

#endif
