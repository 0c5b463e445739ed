/*
 * reload — `gatling --reload PID`: the binary upgrade (SIGUSR2) as one
 * command that waits for its outcome, for a service manager's reload
 * (systemd's ExecReload; Debian 12's systemd has no Type=notify-reload).
 *
 * The channel: the command binds the abstract Unix socket
 * "@gatling-reload.<its pid>" and sends SIGUSR2; the server learns the
 * sender's pid from the signal (si_pid: the kernel's, not a claim), and when
 * that upgrade is over connects there and writes its outcome.  Each side
 * checks the other's pid with SO_PEERCRED (the kernel's word again): the
 * server talks only to the process that signalled it, the command listens
 * only to the process it signalled.  A local user can neither steer the
 * server (it cannot signal it: the kernel's permission check) nor forge an
 * answer (its pid is not the server's); squatting on the name makes the
 * command fail, never succeed.  Abstract sockets have no file permissions,
 * so the server may run as -u's user and the command as root, or as the
 * unit's User=; no runtime directory to create, clean up or agree on.
 */
#ifndef GATLING_RELOAD_H
#define GATLING_RELOAD_H

#include <sys/types.h>

/*
 * The command: SIGUSR2 to the gatling whose pid is the text pid, then wait
 * (at most a little over the server's own 60 s) for its outcome.  Returns
 * the exit code: 0, the new process serves and the old one drains; 1, it
 * did not (the old one's reason on stderr; the old one goes on serving);
 * 2, pid is not a gatling we may signal, or the channel could not be made.
 */
int reload_run(const char *pid);

/*
 * The server: tell the command with pid asker (0: nobody asked; a plain
 * kill(1) asks nobody) how its upgrade ended, ok or not, and why.  Never
 * blocks; best effort (the command gives up on its own).
 */
void reload_tell(pid_t asker, int ok, const char *text);

#endif
