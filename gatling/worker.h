/*
 * worker — -W n: n worker processes, each its own single-process event loop
 * with its own listener on the shared port (SO_REUSEPORT, the kernel spreads
 * the connections), under a supervising parent that restarts a worker that
 * dies and forwards SIGTERM/SIGINT/SIGHUP.
 */
#ifndef GATLING_WORKER_H
#define GATLING_WORKER_H

#include "config.h"
#include "mime.h"

/* Run the supervisor until the workers have stopped.  Exit code. */
int worker_supervise(const config_t *cfg, mime_table_t *mime);

#endif
