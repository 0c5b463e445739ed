/*
 * sandbox — --sandbox: what a serving process may still do once it serves
 * (gatling(8)'s SECURITY).  A first layer of issue 88's plan:
 *   seccomp (libseccomp): a deny-list answered with EPERM -- ptrace and
 *     process_vm_*, mount and pivot_root, bpf, kexec, module loading,
 *     personality changes, new user namespaces (unshare, clone; clone3 is
 *     answered ENOSYS so that libc falls back to clone, whose flags the
 *     filter sees), setns, keyctl, perf_event_open, userfaultfd, reboot,
 *     swap; and in a -W worker execve/execveat too (its CGI spawner was
 *     forked before, and the binary upgrade is the supervisor's).  No new
 *     privileges (NoNewPrivs).
 *   Landlock (the syscalls, its ABI asked at run time): in a -W worker
 *     only, no new TCP bind (ABI 4; not with -f, whose passive mode binds),
 *     signals and abstract Unix sockets scoped to the worker (ABI 6).
 * The single process keeps execve and no Landlock: its upgrade (SIGUSR2)
 * forks and execs the new binary, which would inherit both; an upgraded
 * process finds the filter already there and keeps it.
 */
#ifndef GATLING_SANDBOX_H
#define GATLING_SANDBOX_H

#include "site/config.h"
#include "site/optdef.h"

#include <stddef.h>

/* --sandbox's row of the options table (site/optdef.h), ended by OPT_LAST. */
extern const optdef_t sandbox_opts[];

typedef enum {
    SANDBOX_SERVER, /* the single process (-W 1): it upgrades itself */
    SANDBOX_WORKER  /* a -W worker: its supervisor upgrades */
} sandbox_role_t;

/*
 * Confine the calling process for role, after its listeners, logs,
 * certificates, CGI spawner and loop are made, before its first request.
 * --sandbox off: nothing.  What applied, and what the kernel lacks, goes
 * into one line on stderr when say is set; a failure is said always.
 * upgraded: an upgrade's new process, which keeps the filter it inherited
 * from the old one rather than stack a second (a filter from elsewhere, a
 * container's or systemd's, gets ours on top).  A kernel without seccomp
 * filters or Landlock: said, and the process serves without it.  0; -1 after saying why when a
 * layer the kernel offers could not be applied (the process must not serve).
 */
int sandbox_enter(const config_t *cfg, sandbox_role_t role, int say, int upgraded);

/* The line a -W worker's start would say (sandbox_enter's, from what this
   kernel offers): the supervisor says it once, after its "listening" line,
   for workers that confine themselves quietly and say only a failure. */
void sandbox_say_workers(const config_t *cfg);

/*
 * --check: the line the start would say for a single process and for a
 * -W worker (what this kernel offers), into f's stderr.
 */
void sandbox_check(const config_t *cfg);

#endif
