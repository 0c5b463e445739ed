/*
 * spawn — the CGI spawner: a small helper process that creates the CGI
 * processes, so that the event loop never forks (the server may be large,
 * and a fork copies its page tables) and never waits for a child.
 *
 * main.c (or, with -W, each worker) starts it before the chroot and the
 * privilege drop (-c, -u); it confines itself the same way (the caller's
 * confine function, with --cgi-user's ids in -u's place where given), is
 * not dumpable, closes every descriptor but its socket, the error log and
 * /proc (opened before the chroot, or proc_t's proc_fd under -W), and then
 * serves requests from the loop over a non-blocking SOCK_SEQPACKET
 * socketpair, one message per request:
 *
 *   SPAWN_RUN  id, the program's path, the working directory, the
 *              environment ("NAME=value\0" strings, see handlers/cgienv.h),
 *              and the child's stdin, stdout and stderr pipe ends by
 *              SCM_RIGHTS.  A keeper is forked for it (its own session, a
 *              subreaper: it adopts the program's descendants' orphans),
 *              which forks the program: its own session and process
 *              group (setsid), --cgi-limits' rlimits, that directory as
 *              its cwd, the pipes as 0/1/2, no other descriptor, default
 *              signal dispositions and an empty signal mask; it execs the
 *              program with argv[0] its path.  What fails (fork, chdir, execve) is written to
 *              the child's stderr pipe, where the loop logs it, and the
 *              loop sees a process that exits without output.
 *   SPAWN_END  id: the request is over.  Its keeper gets SIGTERM and
 *              kills (SIGKILL) the program's process group and then, round
 *              by round from /proc/self/task/PID/children, every process
 *              it adopted or still has, setsid or not; then it exits and
 *              is reaped.  Nothing is reaped before: a pid that exited
 *              stays a zombie, so no id killed can name another's.
 *
 * The spawner answers nothing: it reaps children on SIGCHLD (waitpid
 * WNOHANG) and exits, killing the process groups it still has, when the
 * loop's end of the socket closes.  It ignores the signals a terminal or
 * the supervisor sends the server (INT, TERM, HUP, USR1, USR2, PIPE): the
 * server's end decides.  If the spawner dies, the loop sees its socket
 * close and answers CGI requests 503 from then on (handlers/cgi.c).
 */
#ifndef GATLING_SPAWN_H
#define GATLING_SPAWN_H

#include "config.h"
#include "proc.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPAWN_MSG_MAX (128 * 1024) /* a request: the header, two paths, the environment */

enum { SPAWN_RUN = 1, SPAWN_END = 2 };

/*
 * Fork the spawner.  In the child: confine(cfg, p) (chroot, -u; it returns 0
 * or -1 after printing why, and the spawner then exits), then serve.  In
 * the caller: *fd is the loop's end of the socket (non-blocking,
 * close-on-exec) and *pid the spawner's.  0, or -1 after printing why.
 */
int spawn_start(const config_t *cfg, const proc_t *p,
                int (*confine)(const config_t *cfg, const proc_t *p), int *fd, pid_t *pid);

/*
 * Ask for a CGI process for request id: the program at path (absolute, as
 * the spawner sees it), cwd its working directory, env[0..envlen) holding
 * nenv "NAME=value\0" strings, fds[3] its stdin, stdout and stderr (the
 * caller closes its copies afterwards).  Never blocks.  0, or -1 with errno:
 * EAGAIN (the socket is full: answer 503), EPIPE/ECONNRESET (the spawner
 * is gone), EMSGSIZE (too large).
 */
int spawn_run(int fd, uint64_t id, const char *path, const char *cwd, const char *env,
              size_t envlen, int nenv, const int fds[3]);

/* Request id is over: kill what is left of its process group.  0, or -1
   with errno as for spawn_run (EAGAIN: try again when writable). */
int spawn_end(int fd, uint64_t id);

#endif
