/*
 * gio_bits — the constants every part of io/ speaks: the event bits and the
 * return convention of the data calls.  A header alone, so that the output
 * batches (gio_batch.c) and the OS shims (gio_os.c) need not include the
 * loop's header (gio.h includes this one): the loop calls them, they never
 * call the loop (make layers checks that no two files call each other).
 */
#ifndef GIO_BITS_H
#define GIO_BITS_H

#include <poll.h>

/* Event bits equal poll(2)'s, so the poll backend translates nothing. */
enum {
    GIO_READ = POLLIN,
    GIO_WRITE = POLLOUT,
    GIO_ERROR = POLLERR, /* reported, never requested */
    GIO_HANGUP = POLLHUP /* reported, never requested */
};

/* Return convention for gio's data calls (gio_read, gio_batch_send, ...). */
enum {
    GIO_EOF = 0,    /* peer closed (reads only) */
    GIO_AGAIN = -1, /* would block: wait for readiness and call again */
    GIO_ERR = -3    /* hard error, errno set */
};

#endif
