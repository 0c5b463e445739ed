/*
 * kb-stream's UDP: a sending process's flows and a receiving process's
 * (kb_stream_udp.c); called by kb_stream.c, calls kb_stream_util.c.
 */
#ifndef KB_STREAM_UDP_H
#define KB_STREAM_UDP_H

#include "kb_stream_util.h"

/*
 * Process p of o->procs: set up its sockets (a receiver: from lfd), ks_wait_go(ready, go),
 * run to -t (or N streams ended) and write each stream's ks_rec_t and then the
 * process's to out; the process's exit status (0, or 1 if it could not run).
 */
int ks_udp_send(const ks_opts_t *o, int p, int ready, int go, int out);
int ks_udp_recv(const ks_opts_t *o, int p, int lfd, int ready, int go, int out);

#endif
