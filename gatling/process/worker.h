/*
 * worker — -W n: n worker processes, each its own single-process event loop
 * with its own listener on the shared port (SO_REUSEPORT, the kernel spreads
 * the connections), under a supervising parent that opens and holds those
 * listeners, restarts a worker that dies, forwards SIGTERM/SIGINT/SIGHUP/
 * SIGUSR1 and runs the binary upgrade on SIGUSR2 (handover.h).  Sockets
 * handed over by systemd are shared by all workers.
 */
#ifndef GATLING_WORKER_H
#define GATLING_WORKER_H

#include "quic/quic_steer.h"
#include "site/config.h"
#include "site/mime.h"
#include "site/proc.h"

/*
 * Run the supervisor until the workers have stopped.  Exit code.  cfg and
 * p (what the start made of it) are copied.  fds[0..n)
 * are listeners handed over in `groups` groups (handover.h); n == 0: open
 * our own.  qg: HTTP/3's sockets if they were handed over too (taken over,
 * qg->nfds set to 0); else the supervisor opens the group, one socket per
 * worker in each bank, and each worker serves HTTP/3 on its own.
 */
int worker_supervise(const config_t *cfg, const proc_t *p, mime_table_t *mime, const int *fds,
                     int n, int groups, quic_group_t *qg);

#endif
