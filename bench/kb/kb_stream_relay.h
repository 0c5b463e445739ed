/*
 * kb-stream's relay (-R): copies or splices each accepted connection to the target
 * (kb_stream_relay.c); called by kb_stream.c, calls kb_stream_util.c.
 */
#ifndef KB_STREAM_RELAY_H
#define KB_STREAM_RELAY_H

#include "kb_stream_util.h"

/*
 * Accept on lfd until -n connections or -t seconds, relay each to o->addr, then
 * print the bytes each way and its CPU share: 0, 3 if a connection failed or did
 * not finish, 1 if it could not start.
 */
int ks_relay(const ks_opts_t *o, int lfd);

#endif
