/*
 * tls_early — early data (TLS 1.3's 0-RTT, QUIC's): --early-data's option
 * row, and what the handshakes and the connections ask about it.  The
 * replay table itself is site/replay.h's, shared by -W's workers.
 */
#ifndef GATLING_TLS_EARLY_H
#define GATLING_TLS_EARLY_H

#include "site/optdef.h"

/* --early-data's row (options.c's sections[]). */
extern const optdef_t tls_early_opts[];

#endif
