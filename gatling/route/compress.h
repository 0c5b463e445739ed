/*
 * compress — content coding on the fly of dynamic answers (CGI, the proxy's
 * HTTP, FastCGI and SCGI backends and pools, and the response cache in front
 * of them): a stage on the exchange's body between the handler and the
 * codec, the same over HTTP/1.1, HTTP/2 and HTTP/3.
 *
 * The router's entry (before the cache) wraps the exchange's codec for a
 * request that goes to a producer and offers zstd, br or gzip; at the
 * handler's ex_head the stage decides, by the rules of gatling.8's CONTENT
 * CODINGS (a compressible type, not encoded already, not 206/204/304/HEAD,
 * no Cache-Control: no-transform, not below the minimum size, the path not
 * skipped, a coder within the process's caps), and either steps aside or
 * streams: each chunk the handler hands over is compressed and flushed at
 * once (a backend that pauses has its bytes at the client; server-sent
 * events arrive as made), with Content-Encoding, Vary: Accept-Encoding
 * merged with the backend's, a weak ETag and no length (the codec frames a
 * stream).  The work stays on the loop, bounded by what a producer hands
 * over per event (CGI: 8 reads of 64 KiB; the proxy: 4 of PROXY_READ):
 * bench/doc/compress.md has its cost per chunk.
 *
 * Static files keep their own codings (precompressed siblings, the gzip
 * job; site/encoding.h): the stage never touches an answer from a file.
 */
#ifndef GATLING_COMPRESS_H
#define GATLING_COMPRESS_H

#include "handlers/handler.h"
#include "site/config.h"
#include "site/optdef.h"
#include "site/zcoder.h"


/* The router's entry (router.c's table, before the cache). */
extern const handler_t compress_handler;

#define COMPRESS_MIN 256                 /* min='s default */
#define COMPRESS_STREAMS 1024            /* streams='s */
#define COMPRESS_MEMORY (128L << 20)     /* memory='s: ~170 zstd or brotli coders */
#define COMPRESS_PAD 256                /* secrets: padding of 1..this many bytes */
#define COMPRESS_TYPES                                                                        \
    "text/*,application/json,application/javascript,application/x-javascript,"               \
    "application/xml,application/wasm,image/svg+xml,*+json,*+xml"

/*
 * For the response cache (cache_coded.c), which keeps coded bodies so that a
 * hit never codes.  compress_wanted: the coding ex's stage would give an
 * answer of this status, type and length with the fields now on ex (the
 * same rules as a streamed answer), or 0 (no stage on ex, or not codable).
 * compress_coder: a coder for enc within the process's caps (site/zcoder.h;
 * the caller zc_free's it), or NULL (capped or ENOMEM: counted as capped).
 * compress_precoded: the body about to go is already in the stage's coding:
 * the head's fields as the stage would make them (Vary merged, the ETag weak,
 * no Accept-Ranges, Content-Encoding), counted as a coded answer, and the
 * stage steps aside.  compress_index: the stats' index of a coding (gzip 0,
 * br 1, zstd 2), as status_counters_t's compressed[] and cache_coded[].
 */
int compress_wanted(exchange_t *ex, int status, const char *ctype, uint64_t len);
zc_t *compress_coder(exchange_t *ex, int enc, uint64_t len);
void compress_precoded(exchange_t *ex);
int compress_index(int enc);

/*
 * The stage of ex, before its head, keeps a copy of the body it codes (up to
 * max bytes): when that coded stream ends cleanly, kept(arg, enc, p, n) gets
 * it (p malloc'd, the callee's), before the codec's end.  Never called when
 * the stage steps aside, the copy outgrew max, or the stream was cut.  The
 * cache keeps a fill's coded body so (cache_coded.c): one coding per fill.
 */
typedef void (*compress_kept_t)(void *arg, int enc, char *p, size_t n);
void compress_keep(exchange_t *ex, size_t max, compress_kept_t kept, void *arg);

/* --compress's row of the option table (site/optdef.h): off | types=LIST |
   skip=LIST | min=BYTES | streams=N | memory=BYTES, repeatable. */
extern const optdef_t compress_opts[];

#endif
