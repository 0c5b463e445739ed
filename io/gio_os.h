/*
 * gio_os — the small OS shim: the few calls whose signature differs between
 * Linux, the BSDs and macOS.  Platform #ifdefs live here and in the backend
 * files, nowhere else.
 */
#ifndef GIO_OS_H
#define GIO_OS_H

#include <stdint.h>

/*
 * Send up to len bytes of file fd from offset off to socket sock.  Returns
 * bytes sent (> 0), 0 if the file ended before off, GIO_AGAIN or GIO_ERR.
 * sendfile has no MSG_NOSIGNAL, so SIGPIPE is blocked around it — unless it
 * is ignored at the first call, which is then trusted for good: a program
 * that ignores SIGPIPE must not stop ignoring it.
 */
long gio_sendfile(int sock, int fd, uint64_t off, uint64_t len);

/*
 * Bytes written to socket sock that the peer has not acknowledged yet
 * (still in the kernel's send queue), or 0 where the OS cannot tell.  A
 * send buffer can hold megabytes, so "bytes written" says little about how
 * fast a client reads; written minus this says it.
 */
uint64_t gio_unacked(int sock);

/*
 * Bytes written to socket sock that the kernel has not sent yet (the peer's
 * window is full: it does not read); where the OS cannot tell apart, what
 * gio_unacked says.
 */
uint64_t gio_unsent(int sock);

/*
 * Let socket sock (or the sockets accepted from a listener) hold at most
 * bytes of data not yet sent (TCP_NOTSENT_LOWAT, where the OS has it; a
 * no-op elsewhere).  Writability is then reported only once the unsent part
 * fell below it, and a write stops there: without it a send buffer that
 * autotuning grew to megabytes is refilled for a client that reads 32 bytes
 * every few seconds, a large copy for every few bytes it takes (the
 * slow-read ramp: 1,000 such clients cost the loop most of a core).
 */
void gio_limit_unsent(int sock, int bytes);

/*
 * This process may not be traced or have its memory read through /proc by
 * processes of its own uid (Linux: PR_SET_DUMPABLE 0; inherited by fork,
 * reset by exec and by some uid changes, so call again after a setuid).  A
 * no-op elsewhere.  0, or -1 with errno.
 */
int gio_proc_private(void);

/*
 * This process adopts the orphans among its descendants, so that none
 * leaves its subtree (Linux: PR_SET_CHILD_SUBREAPER).  0, or -1 with errno
 * (ENOSYS where the OS has no such thing).
 */
int gio_proc_subreaper(void);

/*
 * Signal sig to this process when its parent dies (Linux:
 * PR_SET_PDEATHSIG; FreeBSD: PROC_PDEATHSIG_CTL).  0, or -1 with errno
 * (ENOSYS elsewhere).  A parent that died before the call is not noticed:
 * compare getppid() after it.  Linux clears it when this process's ids
 * change, and its kernel drops the signal when the dying parent may not
 * signal this process (a parent that became another user than its root
 * child): a pipe whose write end the parent holds tells its end always.
 */
int gio_proc_parent_death(int sig);

#endif
