/*
 * pidfile — --pid-file PATH: the serving process's pid, for --reload,
 * logrotate's postrotate and the admin's kill, where no service manager
 * keeps it (systemd's MAINPID).
 *
 * Opened at start as a log is (site/privfs.h: root's own in a directory
 * only root may write, else as -u's user, never through a link another user
 * planted), before the chroot and -u; the descriptor is kept.  The process
 * that serves (the one process, or -W's supervisor) writes its pid once it
 * serves, so an upgrade's new process (--reload, SIGUSR2) replaces the old
 * one's pid when it takes over, and one that fails to start leaves it.  At
 * exit a process removes the file only while it still holds its own pid
 * (the old process of an upgrade leaves the new one's); where its user
 * cannot remove it (a directory of root's after -u), it empties it.
 */
#ifndef GATLING_PIDFILE_H
#define GATLING_PIDFILE_H

#include <stddef.h>
#include <sys/types.h>

#include "site/proc.h"

/* Open cfg's --pid-file into p (nothing without one).  0, or -1 with why
   (n bytes) saying what was refused. */
int pidfile_open(const config_t *cfg, proc_t *p, char *why, size_t n);

/* This process's pid into p's pid file (none: nothing). */
void pidfile_write(const proc_t *p);

/* At exit: the file removed (or emptied) if it holds this process's pid;
   the descriptors closed. */
void pidfile_end(const config_t *cfg, proc_t *p);

/* The pid a pid file at path holds: > 1, or -1 after saying why not. */
pid_t pidfile_read(const char *path);

#endif
