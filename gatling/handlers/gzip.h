/*
 * gzip — on-the-fly gzip, zstd or brotli of a file for the static handler,
 * on a worker thread (site/encoding.h keeps the results).
 */
#ifndef GATLING_GZIP_H
#define GATLING_GZIP_H

#include "http/exchange.h"
#include "site/fcache.h"

/*
 * The file f is not coded in enc (ENC_GZIP, ENC_BR, ENC_ZSTD) yet: hand the
 * compression to a worker thread
 * and let the request wait for it (1: ex->job set), or, if it is being
 * compressed for another request already, too much is in flight or the
 * request waited once already (its slot, hstate.h), serve identity (0).
 */
int gzip_wait(exchange_t *ex, fcache_entry_t *f, int enc);

#endif
