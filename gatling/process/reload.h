/*
 * reload — `gatling --reload PID`: the binary upgrade (SIGUSR2) as one
 * command that waits for its outcome, for a service manager's reload
 * (systemd's ExecReload; Debian 12's systemd has no Type=notify-reload).
 *
 * The target: the command signals only a process that is this gatling (the
 * same executable: inode, or path when the file was replaced since it
 * started; where /proc/PID/exe is closed to it, as the process says when
 * asked: reload_identity), that runs as the caller's own uid (root reloads a
 * server running as root; a server that runs as -u's user is reloaded by
 * that user, or by its unit), and that is the server, not one of its -W
 * workers, its CGI spawner or its ACME/cluster side processes (told by
 * their names, which say so).  pidof picks any of those, or another user's
 * process named gatling: the documented form is systemctl reload, whose
 * unit gives the pid systemd started ($MAINPID).
 *
 * The channel: the command binds the abstract Unix socket
 * "@gatling-reload.<its pid>.<nonce>", 64 random bits, and sends SIGUSR2
 * with the nonce as the signal's value (sigqueue); the server learns the
 * sender's pid from the signal (si_pid: the kernel's, not a claim), and when
 * that upgrade is over connects there and writes its outcome.  Each side
 * checks the other's pid with SO_PEERCRED (the kernel's word again): the
 * server talks only to the process that signalled it, the command listens
 * only to the process it signalled.  A local user can neither steer the
 * server (it cannot signal it: the kernel's permission check) nor forge an
 * answer (its pid is not the server's), nor squat the name (it cannot guess
 * it).  A plain kill(1), or the command of a gatling from before the
 * nonce, is answered on "@gatling-reload.<pid>"; a server from before the
 * nonce takes the signal of this command (sigqueue) as a plain SIGUSR2 and
 * upgrades without an answer, so the first reload of a package upgrade
 * that brings the nonce waits its 70 s and says so.  Abstract sockets have
 * no file permissions, so the server may run as -u's user and the command
 * as that user or the unit's User=; no runtime directory to create, clean
 * up or agree on.
 */
#ifndef GATLING_RELOAD_H
#define GATLING_RELOAD_H

#include <signal.h>
#include <sys/types.h>

/*
 * The command: SIGUSR2 to the gatling whose pid is the text pid, then wait
 * (at most a little over the server's own 60 s) for its outcome.  Returns
 * the exit code: 0, the new process serves and the old one drains; 1, it
 * did not (the old one's reason on stderr; the old one goes on serving);
 * 2, pid is not the gatling we may reload (why on stderr), or the channel
 * could not be made.
 */
int reload_run(const char *pid);

/*
 * The server's signal handler: the pid of the process that sent this
 * SIGUSR2 (kill or sigqueue), or 0; its nonce into *nonce (0 for a plain
 * kill).  Async-signal-safe.
 */
pid_t reload_sender(const siginfo_t *si, volatile unsigned long *nonce);

/*
 * The executable's identity, "gatling DEV:INO PATH" of /proc/self/exe
 * ("gatling DEV:INO root PATH" when root started it: root's --reload of a
 * bare pid that -u made another user's takes it), into buf ("gatling ?"
 * when it cannot be read or does not fit): read at start,
 * before any chroot, and the server's answer to the command's SIGWINCH
 * (sigqueue with a nonce, answered as SIGUSR2 is: reload_tell).  The
 * command asks so where /proc/PID/exe is closed to it, which is always so
 * but for root: the server is never dumpable (main.c), so its own user's
 * command (a unit's ExecReload) could not compare it otherwise.  SIGWINCH's
 * default is to be ignored: a process that is not gatling is not harmed by
 * the question, and does not answer it.
 */
void reload_identity(char *buf, size_t len);

/* The server's answer to that question (SIGWINCH from asker, with nonce,
   from its handler's reload_sender): exe_id, reload_identity()'s.  A plain
   kill (nonce 0) is nobody's question and gets no answer. */
void reload_identify(pid_t asker, unsigned long nonce, const char *exe_id);

/*
 * The server: tell the command with pid asker and that nonce (asker 0:
 * nobody asked) how its upgrade ended, ok or not, and why.  Never blocks;
 * best effort (the command gives up on its own).
 */
void reload_tell(pid_t asker, unsigned long nonce, int ok, const char *text);

#endif
