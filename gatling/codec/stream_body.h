/*
 * stream_body — what an HTTP/2 stream and an HTTP/3 stream do alike for
 * their exchange (h2_stream.c, h3.c): the response's head and error page, its
 * body as a queue of parts (buffers as the handler gave them, file ranges)
 * that the codec frames as it can, a producer's back-pressure (EX_STREAM_HIGH
 * / LOW), a producer's request body offered as it comes and held while it
 * cannot take it, and a job's return.  What differs is the codec's and comes
 * through sb_ops_t: how a head is sent, how a stream is reset, how flow
 * control opens, how a data reader that waited goes on.
 *
 * A stream begins with its exchange and then its sbody_t (sb_stream_t's
 * layout), so that the exchange's codec ops below find the body from the
 * exchange without a pointer, and a codec's ex_codec_t names them directly.
 * No allocation but the parts array (kept with a spare stream) and the held
 * request body; nothing here is called per DATA frame: the codec reads parts[]
 * itself.
 */
#ifndef GATLING_STREAM_BODY_H
#define GATLING_STREAM_BODY_H

#include "http/exchange.h"
#include "http/head.h"
#include "http/response.h"
#include "site/alog.h"
#include "site/jobs.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SB_HELD_MAX (4 << 20) /* request body bytes a connection holds for producers */

#define SB_CHUNK 512      /* a stream's first block of request fields, behind it */
#define SB_CHUNK_MAX 4096 /* ... and the largest block that fields share */
#define SB_CONN_FIELDS_MAX (256 * 1024) /* request fields held by all of a connection's streams */

/* A block of a stream's request fields (names, values, the log line):
   blocks are added, never moved, so the request's pointers stay good.  The
   first (SB_CHUNK bytes) is in the stream's own allocation, right behind
   it, and a spare stream keeps it: most requests need no malloc for fields. */
typedef struct sb_chunk {
    struct sb_chunk *next;
    size_t len, cap;
    char b[];
} sb_chunk_t;

/* A piece of a response body: a buffer (p), or a range of file fd. */
typedef struct sb_part {
    const char *p;
    int fd;
    uint8_t owned; /* p is free()d with the stream */
    uint64_t off, len;
} sb_part_t;

/* Why a stream is reset (each codec has its own code for it). */
enum { SB_INTERNAL, SB_CALM, SB_REFUSED };

/* Why admission turned a request away (codec/admit.h): -A, a head over
   HTTP_MAX_HEAD (431), the connection's field blocks full (refused). */
enum { SB_RATE_LIMITED, SB_FIELDS_OVER, SB_NO_ROOM };

/* What differs between the codecs: ex is the stream's exchange. */
typedef struct sb_ops {
    /* the response's head, status with a body of len (EX_LEN_STREAM: to come
       as it comes); 0, or -1 (the exchange fails) */
    int (*submit)(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime);
    void (*reset)(exchange_t *ex, int why);     /* both directions end (SB_*) */
    void (*consume)(exchange_t *ex, size_t n);  /* n request body bytes done: flow control */
    /* a data reader that waited (waits) goes on (NULL: the codec never sets waits) */
    void (*resume)(exchange_t *ex);
    /* the router answered (what the codec counts then), or NULL */
    void (*routed)(exchange_t *ex);
    /* admission (codec/admit.h): the connection's last request (-R): say
       GOAWAY; 1 if it was not said before (counted), else 0 */
    int (*last)(exchange_t *ex);
    /* the request is turned away (SB_RATE_LIMITED, SB_FIELDS_OVER,
       SB_NO_ROOM): the codec's counter, and for -A its end of the stream or
       of the connection (431 and the refusal's reset are admit.c's) */
    void (*turned_away)(exchange_t *ex, int why);
    /* an informational head (100, 103) of fields f[0..n): 0, -1 on ENOMEM,
       1 when it could not go otherwise */
    int (*info)(exchange_t *ex, const http_field_t *f, size_t n);
    /* the access log's JSON facts of the stream's exchange (codec_log_facts
       and the codec's TLS) */
    void (*log_facts)(exchange_t *ex, alog_facts_t *out);
    const char *version; /* in the access log's request line: "HTTP/2.0" */
    int stats_kind;      /* the status page's count: STATS_H2, STATS_H3 */
} sb_ops_t;

/* What a connection's streams share (in h2_t and h3_t). */
typedef struct sb_conn {
    void (*wake)(void *conn); /* run the connection soon, not now */
    void *conn;
    size_t held_bytes; /* request body bytes its streams hold (at most SB_HELD_MAX) */
    size_t fields_bytes; /* their blocks of request fields (sb_room: at most SB_CONN_FIELDS_MAX) */
    unsigned drainers; /* streams with want_drain set */
    uint32_t requests; /* requests admitted (admit_request: -R) */
} sb_conn_t;

typedef struct sbody {
    const sb_ops_t *ops;
    sb_conn_t *c;
    sb_part_t *parts; /* the response body, in order */
    unsigned nparts, cap, cur; /* cur: the part being framed (the codec's) */
    uint8_t closed;     /* the stream is closed or reset: nothing more goes out */
    uint8_t streamed;   /* its head said no length (EX_LEN_STREAM) */
    uint8_t ended;      /* ex_body_end (or abort, or an error page) was called */
    uint8_t want_drain; /* more than ex_stream_high was queued: tell the producer below LOW */
    uint8_t waits;      /* the codec's data reader found nothing and waits (ops->resume) */
    uint8_t early;      /* dispatched at its head: its request body goes to the producer */
    uint8_t input_held; /* input() took less than offered: the rest is in held */
    uint8_t input_last; /* the client ended the body: tell input() once held is empty */
    uint8_t input_done; /* input() was told */
    uint8_t offering;   /* inside the producer's input() */
    uint8_t bad;        /* its head is over HTTP_MAX_HEAD (admit_keep): 431 */
    uint8_t refused;    /* the connection's fields were full: reset, not answered */
    size_t hdrlen;      /* bytes of request fields kept (admit_keep) */
    uint64_t given;     /* body bytes handed over (queued: given - body_sent) */
    uint64_t body_sent; /* ... and framed by the codec */
    uint64_t body_left; /* bytes of a known length still to frame */
    http_field_t *trailers; /* the trailer section to end the body with (one block), or NULL */
    size_t ntrailers;
    char *held;         /* request body bytes the producer has not taken yet */
    size_t held_len;
    sb_chunk_t *fields; /* the request's names, values and log line (sb_room) */
    sb_chunk_t *first;  /* the block behind the stream, in its allocation (sb_pool_take) */
    uint8_t first_used; /* ... holds some of them */
    void *spare_next;   /* a spare stream: the next in its pool (sb_pool_t) */
} sbody_t;

/* The layout every stream begins with. */
typedef struct sb_stream {
    exchange_t ex;
    sbody_t sb;
} sb_stream_t;

#define SB_CHECK_LAYOUT(type)                                                               \
    _Static_assert(offsetof(type, ex) == 0 &&                                              \
                       offsetof(type, sb) == offsetof(sb_stream_t, sb),                    \
                   #type " begins as sb_stream_t")

/*
 * Spare streams: the memory of ended streams, shared by a codec's
 * connections (HTTP/2: the process's; HTTP/3: an endpoint's).  A stream that
 * ends goes back to its pool and the next stream of any connection takes
 * it, still warm in the cache, instead of a malloc and a free of its ~9 KB
 * per request.  An idle connection never holds any.  A pool keeps at most
 * max, and
 *   - by default no more than are open (a busy server's stream memory at
 *     most doubles), and is emptied whenever no stream is open;
 *   - with linger set, no more than the most that were open at once since
 *     it was last empty, and is emptied by its owner once it has not been
 *     used for a while (h2_stream.c, on a timer of the loop's): HTTP/2's streams mostly end within
 *     the loop's turn that began them, so "none open" comes many times a
 *     second under load, and emptying then cost a malloc and a free a
 *     request again.
 */
typedef struct sb_pool {
    sb_stream_t *spare; /* newest first, linked by sb.spare_next */
    unsigned nspare, max;
    uint8_t linger;
    size_t live;    /* streams taken and not given back */
    size_t peak;    /* linger: the most live since the pool was last empty */
    uint64_t takes; /* streams taken, ever: whether it is in use */
} sb_pool_t;

/* A stream's memory, of size bytes and its first block of request fields
   behind (SB_CHUNK, sb.first): a spare one of p's (its parts array kept), or
   new.
   What lies between the exchange and req_off (the stream's http_request_t)
   is zeroed, and the request up to its headers; the exchange is
   codec_exchange_init's, which leaves its 4 KiB path buffer alone (not 5 KiB
   zeroed per request).  NULL on ENOMEM. */
sb_stream_t *sb_pool_take(sb_pool_t *p, size_t size, size_t req_off);

/* s, released (sb_release), goes back to p, or is freed. */
void sb_pool_give(sb_pool_t *p, sb_stream_t *s);

/* p's spare streams are freed. */
void sb_pool_empty(sb_pool_t *p);

static inline sbody_t *sb_of(exchange_t *ex)
{
    return &((sb_stream_t *)ex)->sb;
}

static inline exchange_t *sb_ex(sbody_t *b)
{
    return &((sb_stream_t *)((char *)b - offsetof(sb_stream_t, sb)))->ex;
}

/* A producer did something: the connection runs soon. */
static inline void sb_wake(sbody_t *b)
{
    if (sb_ex(b)->producer)
        b->c->wake(b->c->conn);
}

/* What a stream's exchange and body hold goes (a running job lets go of it,
   its file, gzip state, owned parts, the held request body, its count as a
   drainer, the request's field blocks but the first); the parts array stays
   for a spare stream. */
void sb_release(sbody_t *b);

/* Producers that stopped above EX_STREAM_HIGH hear that their queue fell
   below EX_STREAM_LOW, once. */
void sb_drained(sbody_t *b);

/* The exchange's codec ops that are the same for both codecs (exchange.h
   says what each does); a codec's ex_codec_t names them. */
int sb_codec_head(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime);
int sb_codec_error(exchange_t *ex, int status);
int sb_codec_body_buf(exchange_t *ex, const void *p, size_t n, int flags);
int sb_codec_body_file(exchange_t *ex, int fd, uint64_t off, uint64_t len);
int sb_codec_body_end(exchange_t *ex);
void sb_codec_body_abort(exchange_t *ex);
uint64_t sb_codec_queued(const exchange_t *ex);
void sb_codec_input_ready(exchange_t *ex);
int sb_codec_trailers(exchange_t *ex, const ex_field_t *f, int n);

/* n bytes of a producer's request body came: offered, the rest held (at
   most SB_HELD_MAX per connection: past it the stream is reset, SB_CALM). */
void sb_body_to_producer(sbody_t *b, const uint8_t *p, size_t n);

/* The request body held is offered again (the producer took less before, or
   a job decided who takes it); its end is told once all is taken. */
void sb_offer_held(sbody_t *b);

/* n bytes for request fields in the stream's blocks: in the current one if
   they fit, else in a new one twice as large (SB_CHUNK to SB_CHUNK_MAX; the
   first is the stream's own, first); a field of more than half SB_CHUNK
   gets a block of its own, of its size.  So a stream holds about what its
   request needs.  The connection's streams hold at most
   SB_CONN_FIELDS_MAX bytes of blocks (fields_bytes).  NULL: that cap is
   reached, or ENOMEM. */
char *sb_room(sbody_t *b, size_t n);

#define SB_HEAD_NAMES 2048 /* the handler's field names, with a NUL each, at most */

/* What a response head's fields are and point into (sb_head_fields): the
   table http/head.h makes (with the numbers' digits), and the handler's
   names in lower case, each NUL-terminated, SB_HEAD_NAMES bytes in all. */
typedef struct sb_head_strs {
    head_fields_t t;
    char names[SB_HEAD_NAMES];
} sb_head_strs_t;

/* A response head's fields as http/head.h makes them for every protocol
   (codec_head_facts's), the names in lower case for HPACK and QPACK:
   :status, server, date, content-type (ctype; NULL: none), content-length
   (len where the status has a body), last-modified (mtime; -1: none), HSTS
   on a secure exchange (-x), then the exchange's own, without the
   connection-specific ones and drop (a codec's own; NULL: none).  How many
   there are, in strs->t.low[0..n) (at most HEAD_FIELDS_MAX), or 0 if the
   handler's names are longer than SB_HEAD_NAMES in all (the codec fails the
   stream); they point into strs, ex and the site's dates: encode them
   before the loop turns. */
size_t sb_head_fields(const exchange_t *ex, int status, const char *ctype, uint64_t len,
                      time_t mtime, const char *drop, sb_head_strs_t *strs);

/* The access log's request field, as nginx writes it ("GET /x HTTP/2.0"; a
   CONNECT's target is its Host): the bytes it needs at most, and then it
   written into line (n of them: sb_line_size's) as req->line. */
size_t sb_line_size(const http_request_t *req);
void sb_line(http_request_t *req, char *line, size_t n, const char *version);

/* The router answers the request; a job it leaves goes to the pool (a full
   queue sheds it: 503), answered again when it is done (or the stream is
   reset, SB_REFUSED, when it was cancelled).  The codec has counted the
   request and checked its limits. */
void sb_dispatch(sbody_t *b);

/* The router answers afresh (a job's return, a local redirect: the
   exchange's redispatch op): as sb_dispatch, then the request body held for
   the job goes to its taker and the connection runs soon. */
void sb_dispatch_again(sbody_t *b);
void sb_codec_redispatch(exchange_t *ex);

/* A codec's ex_codec_t: these, and its own misdirected and hints. */
#define SB_CODEC_OPS                                                                        \
    .head = sb_codec_head, .error = sb_codec_error, .body_buf = sb_codec_body_buf,          \
    .body_file = sb_codec_body_file, .body_end = sb_codec_body_end,                         \
    .body_abort = sb_codec_body_abort, .queued = sb_codec_queued,                           \
    .input_ready = sb_codec_input_ready, .redispatch = sb_codec_redispatch,                  \
    .trailers = sb_codec_trailers

#endif
