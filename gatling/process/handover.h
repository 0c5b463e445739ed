/*
 * handover — listening sockets that come from outside, and a new binary
 * taking them over.
 *
 * Both directions use systemd's socket-activation protocol (sd_listen_fds(3)):
 * the listeners are descriptors 3, 4, ... and the environment says how many
 * (LISTEN_FDS) and for which process (LISTEN_PID).  systemd's .socket units
 * start gatling that way; a running gatling starts its successor that way on
 * SIGUSR2 (the binary upgrade), so that no listening socket is ever closed
 * and no connection waiting in an accept queue is lost.  Readiness goes to
 * systemd (NOTIFY_SOCKET, sd_notify(3); written here, no libsystemd) and, in
 * an upgrade, to the old process through a pipe (GATLING_UPGRADE_FD).
 *
 * GATLING_LISTEN_GROUPS says how the passed descriptors are laid out: g
 * groups of equal size, one per -W worker of the old process (each group
 * its own SO_REUSEPORT socket); systemd passes one group.  HTTP/3's UDP
 * sockets (quic/quic_steer.h: two banks) follow the listeners in an
 * upgrade: GATLING_QUIC_FDS says how many, GATLING_QUIC_BANK (1 or 2) which
 * bank the new process serves from; the ready pipe comes after them.
 * LISTEN_FDNAMES names what each listener serves ("http", "https", "ftp"):
 * an upgrade names every one, so that a port the kernel chose (-e 0, -f 0)
 * is known again; systemd passes a socket unit's FileDescriptorName=.
 */
#ifndef GATLING_HANDOVER_H
#define GATLING_HANDOVER_H

#include <stddef.h>
#include <sys/types.h>

#define HANDOVER_MAX_FDS 64
#define HANDOVER_MAX_DGRAMS 128 /* HTTP/3's sockets (quic/quic_steer.h's QUIC_STEER_MAX) */

/* HTTP/3's UDP sockets for the new binary, and the bank it is to serve from. */
typedef struct handover_dgrams {
    const int *fds;
    int n, bank;
} handover_dgrams_t;

/*
 * At start, before anything changes the directory: remember argv, the
 * binary and the start directory, for an upgrade.  0, or -1 (the upgrade
 * will then be refused with a message; the server runs).
 */
int handover_init(char **argv);

/* The process chroots: a new binary could not be found, so refuse upgrades;
   the start directory's descriptor (outside the new root) is closed. */
void handover_chrooted(void);

/*
 * The listeners passed to this process, if any: fills fds (at most max) and
 * *groups, clears the variables from the environment, makes each descriptor
 * non-blocking and close-on-exec.  Returns how many (0: none were passed,
 * or they were meant for another process), or -1 after printing why (a
 * descriptor that is not a listening stream socket, too many).
 */
int handover_listeners(int *fds, int max, int *groups);

/* What a passed listener serves, by its name in LISTEN_FDNAMES. */
enum { HANDOVER_UNNAMED, HANDOVER_HTTP, HANDOVER_HTTPS, HANDOVER_FTP };

/* After handover_listeners: the name of passed descriptor fd (HANDOVER_*), in
   this process and in the workers it forks. */
int handover_role(int fd);

/*
 * After handover_listeners: the UDP sockets an old binary passed after the
 * listeners (GATLING_QUIC_FDS of them, for bank GATLING_QUIC_BANK - 1 in
 * *bank), into fds (at most max); clears the variables.  How many (0: none),
 * or -1 after printing why.  The caller checks and owns them.
 */
int handover_datagrams(int *fds, int max, int *bank);

#define HANDOVER_WHY_MAX 1024 /* bytes of a failed start's messages the old process hears */

/*
 * First thing at start: in an upgrade whose old process asked for it
 * (GATLING_UPGRADE_WHY=1), stderr goes to a temporary file until the
 * process serves (handover_ready) or hands stderr on (handover_capture_end),
 * and then to stderr as before; if it exits first, what it said goes to
 * stderr and, after an 'e', to the old process's pipe (at most
 * HANDOVER_WHY_MAX bytes), so that the old process's error log says why.
 */
void handover_capture(void);

/* Stop capturing stderr (before -W forks its workers, which keep stderr). */
void handover_capture_end(void);

/* Where stderr goes once the start is over: the real stderr while an
   upgrade's start is captured (a process forked now that outlives the
   capture, the ACME client, writes there), else STDERR_FILENO. */
int handover_stderr(void);

/*
 * The old process: what the new one said on the pipe handover_upgrade
 * returned, once it is readable.  1: it serves; 0: it failed, why holds its
 * messages (lines joined by "; "; "" if it said nothing: an older binary,
 * or it was killed).
 */
int handover_outcome(int fd, char *why, size_t len);

/*
 * We serve now: READY=1 (and our MAINPID) to systemd if NOTIFY_SOCKET is
 * set, and a byte to the old process if we are its upgrade.
 */
void handover_ready(void);

/* Is this process an upgrade's new one (until handover_ready tells the old)?  1 or 0. */
int handover_is_upgrade(void);

/* Any other sd_notify state line ("STOPPING=1", "STATUS=..."); best effort. */
void handover_notify(const char *state);

/*
 * SIGUSR2: start the binary again (the file at the path it was started
 * from, which may be a new one) with the same arguments, in the start
 * directory, handing it fds[0..n) laid out in `groups` groups, each named
 * by roles[0..n) (HANDOVER_*; NULL: unnamed), and dg's UDP sockets after
 * them (dg NULL or dg->n 0: none).  Returns the
 * descriptor that becomes readable with one byte when the new process serves
 * (EOF without a byte: it failed), and its pid in *pid; or -1 with the
 * reason in why (why_len bytes at most).
 */
int handover_upgrade(const int *fds, const unsigned char *roles, int n, int groups,
                     const handover_dgrams_t *dg, pid_t *pid, char *why, size_t why_len);

#endif
