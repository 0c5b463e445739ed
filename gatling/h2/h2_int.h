/*
 * h2_int — what the HTTP/2 codec's three files share (not for anyone else):
 * the session and stream structures, the limits, and the functions called
 * from one file into a lower one.  The calls go one way:
 *   h2.c         the session: frames in (dispatch by type, SETTINGS, PING,
 *                GOAWAY, WINDOW_UPDATE, PRIORITY), the request's fields,
 *                h2.h's functions (h2_new, h2_recv, h2_fill, ...)
 *     -> h2_stream.c  streams, their exchanges (the sb_ops), request
 *                bodies, dispatch, DATA by priority (output scheduling)
 *       -> h2_out.c   the frame blocks onto the batch, control frames
 *                out, connection errors and the flood limits
 * and all three use h2_frame.c (the wire format, pure) and stream_body.c (what
 * a stream does alike over HTTP/3: its exchange's body parts, a producer's
 * request body, dispatch; h2_stream.c gives it its sb_ops).  h2.h's h2_goaway
 * is defined in h2_out.c, as a stream's dispatch calls it too (-R: the
 * connection's last request).  h2_stream.c keeps the process's spare streams
 * and the loop's timer that frees them once unused a while.
 */
#ifndef GATLING_H2_INT_H
#define GATLING_H2_INT_H

#include "codec/codec.h"
#include "codec/stream_body.h"
#include "h2_frame.h"
#include "h2_hpack.h"
#include "http/exchange.h"
#include "site/jobs.h"

#include <nghttp2/nghttp2.h>
#include <stddef.h>
#include <stdint.h>

typedef struct h2 h2_t; /* (as h2.h says) */

#define H2_MAX_STREAMS 100
#define H2_GOAWAY_PING "gatl-bye" /* the PING after the first GOAWAY (h2_goaway) */
#define H2_WINDOW (1 << 20)            /* a stream's receive window */
#define H2_CONN_WINDOW (16 << 20)      /* the connection's */
#define H2_DEFAULT_WINDOW 65535        /* RFC 9113 6.9.2: before SETTINGS say otherwise */
#define H2_FRAME_MAX 16384             /* our SETTINGS_MAX_FRAME_SIZE: the default */
#define H2_DATA_TLS (16384 - 9)        /* under TLS one DATA frame = one full record */
#define H2_HDR_CAP HTTP_MAX_HEAD       /* a request's header list, as for HTTP/1.1 (admit_keep) */
#define H2_PEND_CAP 16384              /* frames are written into blocks this large */
#define H2_FILES_MAX 32                /* streams holding an open file, per connection */
#define H2_RESET_BURST 200             /* rapid reset (CVE-2023-44487): streams reset */
#define H2_RESET_RATE 50               /* ... per second after the burst */
#define H2_RESET_YOUNG 1000 /* ms: streams reset later (deadlines) are not counted */
#define H2_CLOSED_MEMORY 64            /* streams the client closed, remembered (RFC 9113 5.1) */
#define H2_MAX_SETTINGS 32             /* entries in one SETTINGS frame */
#define H2_MAX_CONTINUATIONS 8         /* CONTINUATIONs in a header block (CVE-2024-28182) */
#define H2_POOL_MAX 512                /* streams the process keeps for reuse (sb_pool_t) */
#define H2_SPARES_LINGER 1000          /* ms spare streams outlive their last use */
#define H2_FRESH_MAX 256 /* WINDOW_UPDATEs new streams may open beyond our DATA (fresh) */
#define H2_TABLE 4096                  /* HPACK dynamic tables, both ways (RFC 7541's default) */

/* A block of frame bytes: control frames, HEADERS (HPACK writes straight
   into it) and DATA frames' headers.  The batch points into it; bytes are
   only appended while the batch is sending, and the blocks are rewound
   once it has sent everything (h2_fill). */
typedef struct h2_block {
    struct h2_block *next;
    size_t len;
    char b[H2_PEND_CAP];
} h2_block_t;

typedef struct h2_stream {
    exchange_t ex; /* first: the stream is found from its exchange */
    sbody_t sb;    /* then its body (stream_body.h) */
    h2_t *h2;
    int32_t id;
    uint8_t dispatched, answered;
    uint8_t deferred; /* its request has ended; answered once fewer files are held */
    uint8_t has_file; /* it holds an open file (counted in h2_t's files) */
    uint8_t peer_ended; /* the client ended its side (END_STREAM) or reset the stream */
    uint8_t remote_ended; /* END_STREAM came (half-closed remote) */
    uint8_t local_ended;  /* our END_STREAM is written */
    uint8_t in_body;  /* its head is complete, its body still coming (dropped, as HTTP/1.1's) */
    uint8_t urgency, incremental; /* RFC 9218 */
    uint8_t produced;  /* counted in h2_t's producers (early, or answered by a producer) */
    uint64_t body_got; /* request body bytes: at most CODEC_BODY_MAX, as for HTTP/1.1 */
    int64_t clen;      /* the request's content-length, -1: none (8.1.1: DATA must match) */
    uint64_t data_in;  /* DATA payload bytes received */
    int64_t send_win;  /* what the client lets us send on it */
    uint64_t owed;     /* what our DATA took from that, not yet given back (on_window) */
    int32_t recv_win;  /* what it may still send us */
    uint32_t recv_unacked; /* consumed and not yet given back by WINDOW_UPDATE */
    uint32_t seq;      /* when an incremental stream was last served (round robin) */
    int64_t begun; /* gio_now() when its HEADERS came: the -s deadline of an incomplete request */
    struct h2_stream *next; /* the session's list of streams */
    http_request_t req;
} h2_stream_t;

typedef struct h2_bucket {
    uint64_t milli; /* frames left, in thousandths */
    int64_t at;     /* gio_now() when last filled */
} h2_bucket_t;

/* The header block being read (HEADERS and its CONTINUATIONs). */
typedef struct h2_block_in {
    h2_stream_t *s;   /* the stream its fields go to, NULL: decoded and dropped */
    int32_t id;       /* its stream, 0: none is being read */
    uint8_t end;      /* its HEADERS had END_STREAM */
    h2f_fields_t fs;  /* what its fields showed (trailer: checked, not kept) */
    uint8_t conts;    /* CONTINUATION frames so far */
    uint8_t malformed; /* 8.1.1: a stream error PROTOCOL_ERROR at its end */
} h2_block_in_t;

struct h2 {
    codec_conn_t f;
    void (*wake)(void *conn);
    h2_stream_t *all;   /* every stream; the closed ones are freed once the batch is empty */
    h2e_t *enc;                /* HPACK (h2_hpack.h), made at the first response ... */
    nghttp2_hd_inflater *inf; /* ... and the first request */
    h2_block_t *blocks; /* frame bytes: the first block, kept while streams are open */
    h2_block_t *pend;   /* ... the one being written */
    h2_block_t *mblk;   /* ... and where the bytes not yet on the batch begin */
    size_t mark;
    uint8_t *fbuf;      /* a frame's payload that came in pieces (H2_FRAME_MAX) */
    uint32_t fgot;
    unsigned open;
    unsigned pending;   /* streams begun whose request has not ended */
    unsigned files;     /* streams holding an open file: at most H2_FILES_MAX */
    unsigned deferred;  /* streams waiting for that */
    unsigned bodies;    /* streams whose request body is coming */
    unsigned producers; /* streams a producer answers */
    sb_conn_t sc;       /* what its streams share: wake, bytes held (bodies, fields), drainers */
    uint8_t headed;     /* a request's head was complete: the preface's -s is over */
    uint64_t body_bytes; /* request body bytes read: progress for the -B window */
    uint32_t frame_left; /* input: bytes still to come of the preface or the frame */
    uint8_t hd_have;     /* ... of the frame header read so far */
    uint8_t hd[9];
    uint8_t preface;     /* what is being read is the client's preface */
    uint8_t settings_in; /* the client's first SETTINGS came */
    uint8_t calm;        /* a flood ended the session (counted once) */
    uint8_t level;       /* its address's recent offences: budgets / 2^level (peer_allowance) */
    uint8_t goaway_sent; /* the GOAWAY that ends it: with the last stream, or an error */
    uint8_t peer_goaway; /* the client said GOAWAY */
    /* our DATA went out since the last PING: the next one is free (a
       gRPC client's BDP ping follows the DATA it reads) */
    uint8_t ping_free;
    h2_bucket_t flood[H2_FLOOD_KINDS];
    h2_block_in_t in;
    int32_t closed_ids[H2_CLOSED_MEMORY]; /* streams the client closed, newest at closed_at */
    unsigned closed_at;
    int64_t frame_since; /* gio_now() at the first byte of the frame being read */
    int64_t started;     /* the session's start */
    uint8_t goaway;      /* shutting down: the first GOAWAY (2^31-1) is said */
    unsigned after_goaway; /* streams opened since then */
    int fatal;
    int32_t max_id;          /* the highest stream a client's HEADERS opened */
    int32_t last_id;         /* after GOAWAY: the last stream answered (2^31-1 until the second) */
    int32_t last_dispatched; /* the highest stream handed to the router */
    int64_t send_win;        /* the connection's window for our DATA */
    int32_t recv_win;        /* ... and for the client's */
    uint32_t recv_unacked;
    uint32_t peer_window;    /* the client's SETTINGS_INITIAL_WINDOW_SIZE */
    uint32_t peer_table;     /* ... SETTINGS_HEADER_TABLE_SIZE */
    uint32_t seq;            /* incremental streams served */
    /* What a WINDOW_UPDATE buys (h2.c's window_bought): the bytes our
       DATA took from the connection's window and not yet given back, and
       those of the streams closed since (their late WINDOW_UPDATEs); an
       increment up to them is free.  fresh: increments beyond them the
       streams the client opened may have it send (a gRPC client opens 5
       bytes for a message's prefix on every stream), 2 a stream. */
    uint64_t owed, closed_owed;
    uint32_t fresh;
    uint64_t window_free; /* WINDOW_UPDATEs that gave back what was owed (the log line) */
    uint32_t counted[H2_FLOOD_KINDS]; /* frames each flood bucket was asked for */
};

/* ---- h2_out.c: frames into the blocks, the blocks onto the batch ---- */

/* Room for want contiguous bytes (want <= H2_PEND_CAP): the current block,
   or the next one (kept from before, or new). */
h2_block_t *h2_pend_room(h2_t *h, size_t want);

/* The process's spare block (kept when a connection's last one went, for
   the next connection to write) is freed: none is kept. */
void h2_pend_spare_free(void);

/* Bytes written and not yet on the batch? */
int h2_pend_unflushed(const h2_t *h);

/* Put what was written since the mark on the batch, by reference. */
int h2_pend_flush(h2_t *h);

/*
 * The batch has sent everything: the blocks can be written from their
 * start again.  What was written since the last flush (frames a producer's
 * call made while the batch was sending) moves to the front; if it spans
 * blocks the rewind waits for a later fill.  hold 0: nothing is open, and
 * an idle connection keeps no block.
 */
void h2_pend_rewind(h2_t *h, int hold);

/* A frame of len payload bytes (len < H2_PEND_CAP - 9): its header is
   written, the payload is the caller's to write at the pointer returned. */
uint8_t *h2_out_frame(h2_t *h, size_t len, uint8_t type, uint8_t flags, uint32_t id);

/* Bytes that need no contiguous room (a large header block's pieces). */
int h2_pend_add(h2_t *h, const uint8_t *p, size_t n);

/* WINDOW_UPDATE: stream id (0: the connection) may send inc bytes more. */
void h2_out_window(h2_t *h, int32_t id, uint32_t inc);

/* A connection error (RFC 9113 5.4.1): GOAWAY with the code, nothing more
   read; the frames written before it still go. */
void h2_conn_error(h2_t *h, uint32_t code);

/*
 * Every flood defence that ends a connection ends it here: counted once by
 * kind (stats.h's H2_FLOOD_*), GOAWAY ENHANCE_YOUR_CALM, and remembered
 * against the client's address (site/peerlimits.h, peer_offence), so that
 * its next connections start with less and then are refused a while.
 * One line on the error log names the client, the frames and n: with
 * bucket, the frames that counted towards the kind's bucket (h2_flood_take);
 * without, the SETTINGS entries or CONTINUATIONs past their cap.
 */
void h2_flood_goaway(h2_t *h, int kind, uint64_t n, int bucket);

/* One frame of a kind: 0, or -1 if that is past its limit (the session ends). */
int h2_flood_take(h2_t *h, int kind);

/* The flood buckets full, scaled by the address's allowance (h->level). */
void h2_floods_init(h2_t *h, int64_t now);

/* Shutting down: the first GOAWAY (2^31-1) and its PING (h2.h's
   h2_goaway, which streams call too, defined in h2_out.c). */
void h2_goaway(h2_t *h);

/* The PING's answer came (or the client opened a window of streams since):
   the second GOAWAY, with the last stream the client opened.  Once. */
void h2_goaway_final(h2_t *h);

/* ---- h2_stream.c: streams, request bodies, DATA by priority ---- */

/* What a stream holds goes; its memory goes back to the process's spare
   streams (its parts array with it: sb_pool_t), or is freed.  The spares
   are freed by a timer of the loop's once none was taken for
   H2_SPARES_LINGER ms, so an idle server keeps none. */
void h2_stream_free(h2_stream_t *s);

/* A stream for id (a spare one, or new) at the list's end, or NULL on ENOMEM. */
h2_stream_t *h2_stream_new(h2_t *h, int32_t id);

/* The open stream id, or NULL. */
h2_stream_t *h2_find(const h2_t *h, int32_t id);

/* Did the client close stream id (END_STREAM or RST_STREAM), lately? */
int h2_client_closed(const h2_t *h, int32_t id);

/* The stream is over: log it; its memory waits for the batch to drain. */
void h2_stream_close(h2_t *h, h2_stream_t *s);

/*
 * RST_STREAM for stream id (s: it, if open, and it closes).  The streams we
 * reset are bounded ("MadeYouReset": frames that make us reset a stream
 * cost us its work, not the client), until we have said GOAWAY: then the
 * streams the client opens meanwhile are refused, no fault of its own.
 */
void h2_rst_stream(h2_t *h, h2_stream_t *s, int32_t id, uint32_t code);

/* n bytes of DATA are done with (dropped, or taken by a producer): the
   windows open again, by WINDOW_UPDATE once half of one is used. */
void h2_consume(h2_t *h, h2_stream_t *s, size_t n);


/* A stream answered with status (413) before its request body has come:
   counted and logged as any request; the rest of the body is dropped. */
void h2_answer_early(h2_t *h, h2_stream_t *s, int status);

/*
 * A request's HEADERS or DATA has been read: END_STREAM ends its body (a
 * producer hears it once it took the rest); a complete request without a
 * producer is answered now (its body was dropped, as HTTP/1.1 drops it).
 */
void h2_request_progress(h2_t *h, h2_stream_t *s, int headers, int end);

/*
 * RFC 9218 4: the lowest urgency first; within one, the streams that are not
 * incremental one at a time in the order they were opened, then the
 * incremental ones in turns (the one served longest ago first).
 */
h2_stream_t *h2_pick(const h2_t *h);

/* One DATA frame of s: its header into the block, the body by reference
   (a file range goes by sendfile on plain connections). */
int h2_send_data(h2_t *h, h2_stream_t *s);

/* The streams that closed while the batch held their bytes: free them now;
   the others' parts that were sent. */
void h2_sweep(h2_t *h);

/* Producers that stopped above EX_STREAM_HIGH hear that their queue fell
   below EX_STREAM_LOW (they may hand over more at once: the next fill). */
void h2_drained(h2_t *h);

/* Bytes written into the blocks and not yet on the batch. */
size_t h2_unflushed_bytes(const h2_t *h);

#endif
