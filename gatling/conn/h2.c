/* The HTTP/2 codec: see h2.h. */
#include "h2.h"
#include "h2_frame.h"
#include "handlers/router.h"
#include "http/hbuf.h"
#include "http/owfat.h"
#include "http/response.h"
#include "site/alog.h"
#include "site/encoding.h"
#include "site/fcache.h"
#include "site/jobs.h"
#include "site/peerlimits.h"
#include "tls.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

#define H2_MAX_STREAMS 100
#define H2_WINDOW (1 << 20)            /* a stream's receive window */
#define H2_CONN_WINDOW (16 << 20)      /* the connection's */
#define H2_DEFAULT_WINDOW 65535        /* RFC 9113 6.9.2: before SETTINGS say otherwise */
#define H2_FRAME_MAX 16384             /* our SETTINGS_MAX_FRAME_SIZE: the default */
#define H2_DATA_TLS (16384 - 9)        /* under TLS one DATA frame = one full record */
#define H2_HDR_CAP HTTP_MAX_HEAD       /* a request's header list, as for HTTP/1.1 */
#define H2_PEND_CAP 16384              /* frames are written into blocks this large */
#define H2_CHUNK 512                   /* a stream's first block of request fields */
#define H2_CHUNK_MAX 4096              /* ... and the largest one shared by fields */
#define H2_FILES_MAX 32                /* streams holding an open file, per connection */
#define H2_CONN_HDR_CAP (256 * 1024)   /* request fields held by all of a connection's streams */
#define H2_RESET_BURST 200             /* rapid reset (CVE-2023-44487): streams reset */
#define H2_RESET_RATE 50               /* ... per second after the burst */
#define H2_CLOSED_MEMORY 64            /* streams the client closed, remembered (RFC 9113 5.1) */
#define H2_MAX_SETTINGS 32             /* entries in one SETTINGS frame */
#define H2_MAX_CONTINUATIONS 8         /* CONTINUATIONs in a header block (CVE-2024-28182) */
#define H2_HELD_MAX (4 << 20)          /* request body bytes a connection holds for producers */
#define H2_SPARE 16                    /* streams kept for reuse while the connection is busy */
#define H2_TABLE 4096                  /* HPACK dynamic tables, both ways (RFC 7541's default) */


/*
 * The floods (stats.h's H2_FLOOD_*): per connection, a bucket of burst
 * frames refilled at rate a second; a frame finding it empty ends the
 * session with ENHANCE_YOUR_CALM, counted by kind.  A browser sends a few of
 * each per connection; WINDOW_UPDATEs count only when small, as the ones a
 * client sends while reading a download are many but each opens much.
 */
static const struct {
    uint16_t burst, rate;
} flood_limit[H2_FLOOD_KINDS] = {
    [H2_FLOOD_SETTINGS] = {32, 8},
    [H2_FLOOD_PING] = {64, 16},
    [H2_FLOOD_WINDOW] = {128, 32},
    [H2_FLOOD_EMPTY_DATA] = {64, 16},
    [H2_FLOOD_OTHER] = {256, 64},
    [H2_FLOOD_RESET_SENT] = {100, 20},
    [H2_FLOOD_RAPID_RESET] = {H2_RESET_BURST, H2_RESET_RATE},
};

/* A piece of a response body: a buffer (p) or a file range. */
typedef struct h2_part {
    const char *p;
    int fd;
    uint8_t owned; /* p is free()d with the stream */
    uint64_t off, len;
} h2_part_t;

/* A block of frame bytes: control frames, HEADERS (HPACK writes straight
   into it) and DATA frames' headers.  The batch points into it; bytes are
   only appended while the batch is sending, and the blocks are rewound
   once it has sent everything (h2_fill). */
typedef struct h2_block {
    struct h2_block *next;
    size_t len;
    char b[H2_PEND_CAP];
} h2_block_t;

/* A block of a stream's request fields (names, values, the log line):
   blocks are added, never moved, so the request's pointers stay good. */
typedef struct h2_chunk {
    struct h2_chunk *next;
    size_t len, cap;
    char b[];
} h2_chunk_t;

typedef struct h2_stream {
    exchange_t ex; /* first: the stream is found from its exchange */
    h2_t *h2;
    int32_t id;
    uint8_t dispatched, answered, closed, bad, refused;
    uint8_t deferred; /* its request has ended; answered once fewer files are held */
    uint8_t has_file; /* it holds an open file (counted in h2_t's files) */
    uint8_t peer_ended; /* the client ended its side (END_STREAM) or reset the stream */
    uint8_t remote_ended; /* END_STREAM came (half-closed remote) */
    uint8_t local_ended;  /* our END_STREAM is written */
    uint8_t in_body;  /* its head is complete, its body still coming (dropped, as HTTP/1.1's) */
    uint8_t first_used; /* the block of fields behind the stream (first_chunk) holds some */
    uint8_t urgency, incremental; /* RFC 9218 */
    uint64_t body_got; /* request body bytes: at most H1_BODY_MAX, as for HTTP/1.1 */
    int64_t clen;      /* the request's content-length, -1: none (8.1.1: DATA must match) */
    uint64_t data_in;  /* DATA payload bytes received */
    int64_t send_win;  /* what the client lets us send on it */
    int32_t recv_win;  /* what it may still send us */
    uint32_t recv_unacked; /* consumed and not yet given back by WINDOW_UPDATE */
    uint32_t seq;      /* when an incremental stream was last served (round robin) */
    /* a producer's stream (exchange.h) */
    uint8_t early;       /* dispatched at its HEADERS: its body goes to the producer */
    uint8_t streamed;    /* its head said no length (EX_LEN_STREAM) */
    uint8_t produced;    /* counted in h2_t's producers (early, or answered by a producer) */
    uint8_t ended;       /* ex_body_end (or abort) was called */
    uint8_t want_drain;  /* more than EX_STREAM_HIGH was queued: tell the producer below LOW */
    uint8_t input_held;  /* input() took less than offered: the rest is in held */
    uint8_t input_last;  /* the client ended the body: tell input() once held is empty */
    uint8_t input_done;  /* input() was told */
    uint8_t offering;    /* inside the producer's input() */
    uint64_t given;      /* body bytes handed over (queued: given - body_sent) */
    char *held;          /* request body bytes the producer has not taken yet */
    size_t held_len;
    int64_t begun; /* gio_now() when its HEADERS came: the -s deadline of an incomplete request */
    struct h2_stream *next; /* the session's list of streams (and the spare ones') */
    uint64_t body_left;     /* body bytes still to frame */
    uint64_t body_sent;
    h2_part_t *parts;
    unsigned nparts, cap, cur;
    size_t hdrlen;       /* bytes of fields kept: at most H2_HDR_CAP, as for an HTTP/1.1 head */
    h2_chunk_t *chunks;  /* the request's names and values, and its log line */
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
    h1_conn_t f;
    void (*wake)(void *conn);
    h2_stream_t *all;   /* every stream; the closed ones are freed once the batch is empty */
    h2_stream_t *spare; /* freed streams kept for the next ones, while streams are open */
    unsigned nspare;
    nghttp2_hd_deflater *def; /* HPACK, made at the first response ... */
    nghttp2_hd_inflater *inf; /* ... and the first request */
    h2_block_t *blocks; /* frame bytes: the first block, kept while streams are open */
    h2_block_t *pend;   /* ... the one being written */
    h2_block_t *mblk;   /* ... and where the bytes not yet on the batch begin */
    size_t mark;
    uint8_t *fbuf;      /* a frame's payload that came in pieces (H2_FRAME_MAX) */
    uint32_t fgot;
    uint32_t requests;
    unsigned open;
    unsigned pending;   /* streams begun whose request has not ended */
    unsigned files;     /* streams holding an open file: at most H2_FILES_MAX */
    unsigned deferred;  /* streams waiting for that */
    unsigned bodies;    /* streams whose request body is coming */
    unsigned producers; /* streams a producer answers */
    size_t held_bytes;  /* their request body bytes held (at most H2_HELD_MAX) */
    uint8_t headed;     /* a request's head was complete: the preface's -s is over */
    uint64_t body_bytes; /* request body bytes read: progress for the -B window */
    size_t hdr_bytes;   /* the streams' chunks, in bytes: at most H2_CONN_HDR_CAP */
    uint32_t frame_left; /* input: bytes still to come of the preface or the frame */
    uint8_t hd_have;     /* ... of the frame header read so far */
    uint8_t hd[9];
    uint8_t preface;     /* what is being read is the client's preface */
    uint8_t settings_in; /* the client's first SETTINGS came */
    uint8_t calm;        /* a flood ended the session (counted once) */
    uint8_t level;       /* its address's recent offences: budgets / 2^level (peer_allowance) */
    uint8_t goaway_sent;
    uint8_t peer_goaway; /* the client said GOAWAY */
    h2_bucket_t flood[H2_FLOOD_KINDS];
    h2_block_in_t in;
    int32_t closed_ids[H2_CLOSED_MEMORY]; /* streams the client closed, newest at closed_at */
    unsigned closed_at;
    int64_t frame_since; /* gio_now() at the first byte of the frame being read */
    int64_t started;     /* the session's start */
    uint8_t goaway;
    int fatal;
    int32_t max_id;          /* the highest stream a client's HEADERS opened */
    int32_t last_id;         /* after GOAWAY: the last stream that is answered */
    int32_t last_dispatched; /* the highest stream handed to the router */
    int64_t send_win;        /* the connection's window for our DATA */
    int32_t recv_win;        /* ... and for the client's */
    uint32_t recv_unacked;
    uint32_t peer_window;    /* the client's SETTINGS_INITIAL_WINDOW_SIZE */
    uint32_t peer_table;     /* ... SETTINGS_HEADER_TABLE_SIZE */
    uint32_t seq;            /* incremental streams served */
};

static const ex_codec_t h2_codec;

int h2_preface(const char *p, size_t n)
{
    size_t k = n < H2_PREFACE_LEN ? n : H2_PREFACE_LEN;
    if (memcmp(p, H2_PREFACE, k))
        return -1;
    return n >= H2_PREFACE_LEN;
}

/* ---- output: frames into the blocks, the blocks onto the batch ---- */

/* Room for want contiguous bytes (want <= H2_PEND_CAP): the current block,
   or the next one (kept from before, or new). */
static h2_block_t *pend_room(h2_t *h, size_t want)
{
    h2_block_t *b = h->pend;
    if (b && H2_PEND_CAP - b->len >= want)
        return b;
    h2_block_t **next = b ? &b->next : &h->blocks;
    if (!*next) {
        if (!(*next = malloc(sizeof **next)))
            return NULL;
        (*next)->next = NULL;
    }
    (*next)->len = 0;
    if (!b) {
        h->mblk = *next;
        h->mark = 0;
    }
    return h->pend = *next;
}

/* Bytes written and not yet on the batch? */
static int pend_unflushed(const h2_t *h)
{
    return h->pend && (h->mblk != h->pend || h->pend->len != h->mark);
}

/* Put what was written since the mark on the batch, by reference. */
static int pend_flush(h2_t *h)
{
    if (!h->pend)
        return 0;
    for (h2_block_t *b = h->mblk;; b = b->next) {
        size_t from = b == h->mblk ? h->mark : 0;
        if (b->len > from && gio_batch_add_buf(h->f.out, b->b + from, b->len - from, 0) < 0)
            return -1;
        if (b == h->pend)
            break;
    }
    h->mblk = h->pend;
    h->mark = h->pend->len;
    return 0;
}

/*
 * The batch has sent everything: the blocks can be written from their
 * start again.  What was written since the last flush (frames a producer's
 * call made while the batch was sending) moves to the front; if it spans
 * blocks the rewind waits for a later fill.  keep 0: nothing is open, and
 * an idle connection keeps no block.
 */
static void pend_rewind(h2_t *h, int keep)
{
    h2_block_t *b = h->pend;
    if (b && h->mblk != b)
        return;
    size_t n = b ? b->len - h->mark : 0;
    if (!n && !keep) {
        for (h2_block_t *k = h->blocks, *next; k; k = next) {
            next = k->next;
            free(k);
        }
        h->blocks = h->pend = h->mblk = NULL;
        h->mark = 0;
        return;
    }
    if (!b)
        return;
    memmove(h->blocks->b, b->b + h->mark, n);
    h->blocks->len = n;
    h->pend = h->mblk = h->blocks;
    h->mark = 0;
}

/* A frame of len payload bytes (len < H2_PEND_CAP - 9): its header is
   written, the payload is the caller's to write at the pointer returned. */
static uint8_t *out_frame(h2_t *h, size_t len, uint8_t type, uint8_t flags, uint32_t id)
{
    h2_block_t *b = pend_room(h, 9 + len);
    if (!b)
        return NULL;
    uint8_t *p = (uint8_t *)b->b + b->len;
    h2f_put_hd(p, len, type, flags, id);
    b->len += 9 + len;
    return p + 9;
}

/* Bytes that need no contiguous room (a large header block's pieces). */
static int pend_add(h2_t *h, const uint8_t *p, size_t n)
{
    while (n) {
        h2_block_t *b = pend_room(h, 1);
        if (!b)
            return -1;
        size_t k = H2_PEND_CAP - b->len < n ? H2_PEND_CAP - b->len : n;
        memcpy(b->b + b->len, p, k);
        b->len += k, p += k, n -= k;
    }
    return 0;
}

static void out_goaway(h2_t *h, int32_t last, uint32_t code)
{
    uint8_t *p = out_frame(h, 8, FR_GOAWAY, 0, 0);
    if (!p) {
        h->fatal = 1;
        return;
    }
    h2f_put32(p, (uint32_t)last);
    h2f_put32(p + 4, code);
    h->goaway_sent = 1;
    if (code != E_NO_ERROR)
        h->f.site->stats.h2_errors++;
}

static void out_window(h2_t *h, int32_t id, uint32_t inc)
{
    uint8_t *p = out_frame(h, 4, FR_WINDOW_UPDATE, 0, (uint32_t)id);
    if (p)
        h2f_put32(p, inc);
    else
        h->fatal = 1;
}

/* A connection error (RFC 9113 5.4.1): GOAWAY with the code, nothing more
   read; the frames written before it still go. */
static void conn_error(h2_t *h, uint32_t code)
{
    if (h->fatal)
        return;
    out_goaway(h, h->max_id, code);
    h->fatal = 1;
}

/*
 * Every flood defence that ends a connection ends it here: counted once by
 * kind (stats.h's H2_FLOOD_*), GOAWAY ENHANCE_YOUR_CALM, and remembered
 * against the client's address (site/peerlimits.h, peer_offence), so that
 * its next connections start with less and then are refused a while.
 */
static void flood_goaway(h2_t *h, int kind)
{
    if (!h->calm) {
        h->calm = 1;
        site_t *site = h->f.site;
        site->stats.h2_flood[kind]++;
        site->stats.offences++;
        int what = kind == H2_FLOOD_CONTINUATION ? PEER_HEADERS
                   : kind == H2_FLOOD_RESET_SENT || kind == H2_FLOOD_RAPID_RESET ? PEER_RESETS
                                                                                  : PEER_FLOOD;
        peer_offence(site->limits, h->f.peer, what, gio_now(site->loop));
    }
    conn_error(h, E_ENHANCE_YOUR_CALM);
}

/* One frame of a kind: 0, or -1 if that is past its limit (the session ends). */
static int flood_take(h2_t *h, int kind)
{
    h2_bucket_t *b = &h->flood[kind];
    int64_t now = gio_now(h->f.site->loop);
    uint64_t cap = (uint64_t)peer_budget(flood_limit[kind].burst, h->level) * 1000;
    if (now > b->at) { /* milli-frames: rate per second is rate per ms in them */
        uint64_t add = (uint64_t)(now - b->at) * peer_budget(flood_limit[kind].rate, h->level);
        b->milli = cap - b->milli < add ? cap : b->milli + add;
        b->at = now;
    }
    if (b->milli >= 1000) {
        b->milli -= 1000;
        return 0;
    }
    flood_goaway(h, kind);
    return -1;
}

/* ---- streams ---- */

/* Behind each stream, in its allocation: its first block of request fields
   (H2_CHUNK bytes), which a stream kept for reuse keeps. */
static h2_chunk_t *first_chunk(h2_stream_t *s)
{
    return (h2_chunk_t *)(s + 1);
}

static void stream_release(h2_stream_t *s)
{
    exchange_t *ex = &s->ex;
    h2_t *h = s->h2;
    if (ex->job) /* the job runs on: it must not come back to us */
        ex->job->ex = NULL;
    if (ex->file)
        fcache_release(ex->file);
    enc_gzip_release(ex->gz);
    ex_end(ex);
    for (unsigned i = 0; i < s->nparts; i++)
        if (s->parts[i].owned)
            free((void *)s->parts[i].p);
    h->held_bytes -= s->held_len;
    free(s->held);
    h->producers -= s->produced;
    h->files -= s->has_file;
    for (h2_chunk_t *k = s->chunks, *next; k; k = next) {
        next = k->next;
        h->hdr_bytes -= k->cap;
        if (k != first_chunk(s))
            free(k);
    }
}

/* A stream's memory goes back to the connection's spares (its parts array
   with it), or is freed. */
static void stream_free(h2_stream_t *s)
{
    h2_t *h = s->h2;
    stream_release(s);
    if (h->nspare < H2_SPARE && !h->fatal) {
        s->next = h->spare;
        h->spare = s;
        h->nspare++;
        return;
    }
    free(s->parts);
    free(s);
}

static void spares_free(h2_t *h)
{
    for (h2_stream_t *s = h->spare, *next; s; s = next) {
        next = s->next;
        free(s->parts);
        free(s);
    }
    h->spare = NULL;
    h->nspare = 0;
}

static h2_stream_t *stream_new(h2_t *h, int32_t id)
{
    h2_stream_t *s = h->spare;
    h2_part_t *parts = NULL;
    unsigned cap = 0;
    if (s) {
        h->spare = s->next;
        h->nspare--;
        parts = s->parts, cap = s->cap;
    } else if (!(s = malloc(sizeof *s + sizeof(h2_chunk_t) + H2_CHUNK))) {
        return NULL;
    }
    memset(s, 0, offsetof(h2_stream_t, req));
    memset(&s->req, 0, offsetof(http_request_t, headers));
    s->parts = parts, s->cap = cap;
    s->h2 = h;
    s->id = id;
    s->urgency = 3; /* RFC 9218 4.1's default */
    s->clen = -1;
    s->send_win = h->peer_window;
    s->recv_win = H2_WINDOW;
    h1_exchange_init(&s->ex, &h->f, &h2_codec, s);
    s->ex.req = &s->req;
    s->req.version = 20;
    s->begun = gio_now(h->f.site->loop);
    h->open++;
    h->pending++;
    s->next = h->all;
    h->all = s;
    return s;
}

static h2_stream_t *stream_of(exchange_t *ex)
{
    return (h2_stream_t *)ex;
}

/* The open stream id, or NULL. */
static h2_stream_t *find(const h2_t *h, int32_t id)
{
    for (h2_stream_t *s = h->all; s; s = s->next)
        if (s->id == id)
            return s->closed ? NULL : s;
    return NULL;
}

/* Did the client close stream id (END_STREAM or RST_STREAM), lately? */
static int client_closed(const h2_t *h, int32_t id)
{
    for (unsigned i = 0; i < H2_CLOSED_MEMORY; i++)
        if (h->closed_ids[i] == id)
            return 1;
    return 0;
}

static void body_ends(h2_t *h, h2_stream_t *s);

/* The stream is over: log it; its memory waits for the batch to drain. */
static void stream_close(h2_t *h, h2_stream_t *s)
{
    if (s->closed)
        return;
    if (s->peer_ended) {
        h->closed_ids[h->closed_at] = s->id;
        h->closed_at = (h->closed_at + 1) % H2_CLOSED_MEMORY;
    }
    h->open--;
    body_ends(h, s);
    if (!s->dispatched && !s->deferred)
        h->pending--;
    if (s->deferred && !s->dispatched)
        h->deferred--;
    if (s->dispatched) {
        site_t *site = s->ex.site;
        int64_t now = gio_wallclock(site->loop);
        alog_request(&site->log, now, site->cfg->log_vhost ? s->ex.vhost : NULL, h->f.peer,
                     &s->req, s->ex.status, s->body_sent, h->f.secure);
        status_count(&site->stats, now, STATS_H2, s->body_sent, s->ex.started_us);
    }
    if (s->ex.job) {
        s->ex.job->ex = NULL;
        s->ex.job = NULL;
    }
    s->closed = 1;
}

/*
 * RST_STREAM for stream id (s: it, if open, and it closes).  The streams we
 * reset are bounded ("MadeYouReset": frames that make us reset a stream
 * cost us its work, not the client), until we have said GOAWAY: then the
 * streams the client opens meanwhile are refused, no fault of its own.
 */
static void rst_stream(h2_t *h, h2_stream_t *s, int32_t id, uint32_t code)
{
    if (h->fatal)
        return;
    uint8_t *p = out_frame(h, 4, FR_RST_STREAM, 0, (uint32_t)id);
    if (!p) {
        h->fatal = 1;
        return;
    }
    h2f_put32(p, code);
    if (s)
        stream_close(h, s);
    if (!h->goaway && !h->goaway_sent)
        flood_take(h, H2_FLOOD_RESET_SENT);
}

/* Our END_STREAM is written: the stream closes if the client's side has
   ended, else (a response complete while its request is not: 413, a
   producer that did not want the whole body) RST_STREAM NO_ERROR ends it
   (RFC 9113 8.1). */
static void local_end(h2_t *h, h2_stream_t *s)
{
    s->local_ended = 1;
    if (s->remote_ended)
        stream_close(h, s);
    else
        rst_stream(h, s, s->id, E_NO_ERROR);
}

/* ---- responses ---- */

static int deflater(h2_t *h)
{
    if (h->def)
        return 0;
    if (nghttp2_hd_deflate_new(&h->def, H2_TABLE))
        return -1;
    if (h->peer_table < H2_TABLE && nghttp2_hd_deflate_change_table_size(h->def, h->peer_table))
        return -1;
    return 0;
}

/* A header block that does not fit one frame: encoded aside, then HEADERS
   and CONTINUATIONs of at most H2_FRAME_MAX (the least the client takes). */
static int out_headers_long(h2_t *h, int32_t id, const nghttp2_nv *nv, size_t n, uint8_t end,
                            size_t bound)
{
    uint8_t *tmp = malloc(bound), hd[9];
    ssize_t r = tmp ? nghttp2_hd_deflate_hd(h->def, tmp, bound, nv, n) : -1;
    for (size_t off = 0; r >= 0;) {
        size_t k = (size_t)r - off < H2_FRAME_MAX ? (size_t)r - off : H2_FRAME_MAX;
        uint8_t fl = (uint8_t)((off + k == (size_t)r ? FL_END_HEADERS : 0) | (off ? 0 : end));
        h2f_put_hd(hd, k, off ? FR_CONTINUATION : FR_HEADERS, fl, (uint32_t)id);
        if (pend_add(h, hd, 9) < 0 || pend_add(h, tmp + off, k) < 0)
            r = -1;
        if ((off += k) == (size_t)r)
            break;
    }
    free(tmp);
    return r < 0 ? -1 : 0;
}

/* A HEADERS frame of the fields nv[0..n) (end: with END_STREAM), HPACK
   writing straight into the block. */
static int out_headers(h2_t *h, int32_t id, const nghttp2_nv *nv, size_t n, uint8_t end)
{
    if (deflater(h) < 0)
        return -1;
    size_t bound = nghttp2_hd_deflate_bound(h->def, nv, n);
    if (bound > H2_FRAME_MAX)
        return out_headers_long(h, id, nv, n, end, bound);
    h2_block_t *b = pend_room(h, 9 + bound);
    if (!b)
        return -1;
    uint8_t *p = (uint8_t *)b->b + b->len;
    ssize_t r = nghttp2_hd_deflate_hd(h->def, p + 9, bound, nv, n);
    if (r < 0)
        return -1;
    h2f_put_hd(p, (size_t)r, FR_HEADERS, (uint8_t)(FL_END_HEADERS | end), (uint32_t)id);
    b->len += 9 + (size_t)r;
    return 0;
}

static int add_part(h2_stream_t *s, h2_part_t p)
{
    if (s->nparts == s->cap) {
        unsigned cap = s->cap ? 2 * s->cap : 4;
        h2_part_t *np = realloc(s->parts, cap * sizeof *np);
        if (!np)
            return -1;
        s->parts = np, s->cap = cap;
    }
    s->parts[s->nparts++] = p;
    return 0;
}

static void lower(char *d, const char *s, size_t cap)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++)
        d[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
    d[i] = 0;
}

#define NV(n, v) ((nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), 0})

/* The response's fields, in nv (at least 8 + EX_FIELDS_MAX entries; the
   strings in the caller's st, cl, hsts and names): how many. */
static size_t response_nv(h2_stream_t *s, int status, const char *ctype, uint64_t len,
                          time_t mtime, nghttp2_nv *nv, char names[][48], char *st, char *cl,
                          char *hsts)
{
    exchange_t *ex = &s->ex;
    site_t *site = ex->site;
    size_t n = 0;
    hbuf_t b = hb_init(st, 8);
    hb_num(&b, (uint64_t)status), hb_str(&b);
    nv[n++] = NV(":status", st);
    nv[n++] = NV("server", "gatling/" GATLING_VERSION);
    nv[n++] = NV("date", ex->date ? ex->date : site_date(site)); /* a stored response's own */
    if (ctype)
        nv[n++] = NV("content-type", ctype);
    if (status != 304 && status != 204 && len != EX_LEN_STREAM) {
        b = hb_init(cl, 24), hb_num(&b, len), hb_str(&b);
        nv[n++] = NV("content-length", cl);
    }
    if (mtime >= 0) /* encoded at once: the cache's string may be reused */
        nv[n++] = NV("last-modified", site_httpdate(site, mtime));
    if (ex->secure && site->cfg->hsts >= 0) {
        b = hb_init(hsts, 32);
        hb_puts(&b, "max-age=");
        hb_num(&b, (uint64_t)site->cfg->hsts);
        hb_str(&b);
        nv[n++] = NV("strict-transport-security", hsts);
    }
    for (unsigned i = 0; i < ex->nfields; i++) {
        lower(names[i], ex->fields[i].name, 48);
        if (!h2f_hop_by_hop(names[i], strlen(names[i])))
            nv[n++] = NV(names[i], ex->fields[i].value);
    }
    return n;
}

/* HEADERS for the response (encoded now: the strings need not outlive the
   call), and DATA for a body of len bytes to come (h2_fill). */
static int submit(h2_stream_t *s, int status, const char *ctype, uint64_t len, time_t mtime)
{
    exchange_t *ex = &s->ex;
    h2_t *h = s->h2;
    char st[8], cl[24], hsts[32], names[EX_FIELDS_MAX][48];
    nghttp2_nv nv[8 + EX_FIELDS_MAX];
    if (s->answered)
        return -1;
    size_t n = response_nv(s, status, ctype, len, mtime, nv, names, st, cl, hsts);
    ex->status = (uint16_t)status;
    if (len == EX_LEN_STREAM)
        s->streamed = 1;
    if (s->ex.producer && !s->produced) { /* drained() must reach it, its length known or not */
        s->produced = 1;
        h->producers++;
    }
    ex->body_len = s->streamed ? 0 : len; /* streamed: counted as it comes */
    s->body_left = ex->head_only || status == 304 || status == 204 ? 0 : len;
    s->answered = 1;
    if (h->fatal)
        return 0;
    if (out_headers(h, s->id, nv, n, s->body_left ? 0 : FL_END_STREAM) < 0)
        return -1;
    if (!s->body_left)
        local_end(h, s);
    return 0;
}

/* A producer did something: the connection runs soon (h2.h's wake). */
static void wake(h2_stream_t *s)
{
    if (s->ex.producer)
        s->h2->wake(s->h2->f.conn);
}

static int codec_head(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    h2_stream_t *s = stream_of(ex);
    wake(s);
    if (status == 101) /* no tunnel over HTTP/2 (RFC 9113 8.6) */
        status = 502, len = 0, ex->nfields = 0;
    if (s->closed)
        return 0;
    if (ex->fields_over) { /* as h1: a bare 500 instead */
        ex->nfields = 0;
        ex->fields_over = 0;
        ex->site->stats.head_overflows++;
        return ex->codec->error(ex, 500) < 0 ? -1 : EX_REPLACED;
    }
    return submit(s, status, ctype, len, mtime);
}

static int codec_error(exchange_t *ex, int status)
{
    h2_stream_t *s = stream_of(ex);
    wake(s);
    if (ex->producer)
        s->ended = 1; /* an error page is a whole response */
    if (s->closed)
        return 0;
    char *page = malloc(RESP_PAGE_MAX);
    if (!page)
        return -1;
    hbuf_t pb = hb_init(page, RESP_PAGE_MAX);
    resp_page(&pb, status);
    size_t n = hb_len(&pb);
    if (add_part(s, (h2_part_t){.p = page, .fd = -1, .owned = 1, .len = n}) < 0) {
        free(page);
        return -1;
    }
    return submit(s, status, "text/html; charset=utf-8", n, -1);
}

static int codec_body_buf(exchange_t *ex, const void *p, size_t n, int flags)
{
    h2_stream_t *s = stream_of(ex);
    int own = (flags & EX_FREE) != 0;
    if (ex->head_only || !n || s->closed) { /* closed: a reset stream's producer runs on */
        if (own)
            free((void *)p);
        return 0;
    }
    if (add_part(s, (h2_part_t){.p = p, .fd = -1, .owned = (uint8_t)own, .len = n}) == 0) {
        s->given += n;
        if (s->streamed)
            ex->body_len += n;
        if (s->given - s->body_sent > EX_STREAM_HIGH)
            s->want_drain = 1;
        wake(s);
        return 0;
    }
    if (own)
        free((void *)p);
    return -1;
}

static int codec_body_file(exchange_t *ex, int fd, uint64_t off, uint64_t len)
{
    if (ex->head_only || !len)
        return 0;
    return add_part(stream_of(ex), (h2_part_t){.fd = fd, .off = off, .len = len});
}

static int codec_misdirected(exchange_t *ex, const char *host, size_t n)
{
    h2_t *h = stream_of(ex)->h2;
    return h->f.ssl && tls_misdirected(ex->site->cfg->tls, h->f.ssl, host, n);
}

/* 103 Early Hints: an informational HEADERS frame. */
static int codec_hints(exchange_t *ex, const char *link)
{
    h2_stream_t *s = stream_of(ex);
    nghttp2_nv nv[] = {NV(":status", "103"), NV("link", link)};
    if (s->closed || s->answered || s->h2->fatal)
        return 0;
    return out_headers(s->h2, s->id, nv, 2, 0);
}

static int codec_body_end(exchange_t *ex)
{
    h2_stream_t *s = stream_of(ex);
    s->ended = 1;
    wake(s);
    return 0;
}

static void codec_body_abort(exchange_t *ex)
{
    h2_stream_t *s = stream_of(ex);
    s->ended = 1;
    if (!s->closed)
        rst_stream(s->h2, s, s->id, E_INTERNAL);
    wake(s);
}

/* A closed stream's producer is told a lot is queued: it stops reading. */
static uint64_t codec_queued(const exchange_t *ex)
{
    const h2_stream_t *s = (const h2_stream_t *)ex;
    return s->closed ? UINT64_MAX : s->given - s->body_sent;
}

static void offer_held(h2_stream_t *s);
static void codec_redispatch(exchange_t *ex);

static void codec_input_ready(exchange_t *ex)
{
    h2_stream_t *s = stream_of(ex);
    s->input_held = 0;
    if (!s->offering) /* else offer() sees it when the producer's call returns */
        offer_held(s);
    wake(s);
}

static const ex_codec_t h2_codec = {
    .head = codec_head,
    .error = codec_error,
    .body_buf = codec_body_buf,
    .body_file = codec_body_file,
    .misdirected = codec_misdirected,
    .hints = codec_hints,
    .body_end = codec_body_end,
    .body_abort = codec_body_abort,
    .queued = codec_queued,
    .input_ready = codec_input_ready,
    .redispatch = codec_redispatch,
};

/* ---- request bodies ---- */

/* n bytes of DATA are done with (dropped, or taken by a producer): the
   windows open again, by WINDOW_UPDATE once half of one is used. */
static void consume(h2_t *h, h2_stream_t *s, size_t n)
{
    h->recv_unacked += (uint32_t)n;
    if (h->recv_unacked >= H2_CONN_WINDOW / 2) {
        out_window(h, 0, h->recv_unacked);
        h->recv_win += (int32_t)h->recv_unacked;
        h->recv_unacked = 0;
    }
    if (!s || s->closed || s->remote_ended)
        return;
    s->recv_unacked += (uint32_t)n;
    if (s->recv_unacked >= H2_WINDOW / 2) {
        out_window(h, s->id, s->recv_unacked);
        s->recv_win += (int32_t)s->recv_unacked;
        s->recv_unacked = 0;
    }
}

/*
 * A producer's request body: what it takes is consumed (our WINDOW_UPDATE
 * lets the client send more: flow control is the back-pressure), what it
 * does not is held, at most a stream's window and H2_HELD_MAX for the
 * connection, and offered again at ex_input_ready.
 */
static size_t offer(h2_stream_t *s, const uint8_t *p, size_t n, int last)
{
    exchange_t *ex = &s->ex;
    if (!ex->producer && ex->job && !s->closed) { /* a job (a password check) decides who */
        s->input_held = 1;                         /* takes the body: hold it until then */
        return 0;
    }
    size_t k = n;
    if (ex->producer && !s->closed) {
        s->input_held = 1; /* an ex_input_ready during the call clears it */
        s->offering = 1;
        k = ex->producer->input(ex, (const char *)p, n, last);
        s->offering = 0;
    }
    if (k >= n) {
        k = n;
        s->input_held = 0;
        s->input_done = (uint8_t)(s->input_done | last);
    }
    if (k)
        consume(s->h2, s, k);
    return k;
}

static void offer_held(h2_stream_t *s)
{
    if (!s->held_len) {
        if (s->input_last && !s->input_done && !s->input_held)
            offer(s, (const uint8_t *)"", 0, 1);
        return;
    }
    do { /* again while the producer says ready within its own call */
        size_t k = offer(s, (uint8_t *)s->held, s->held_len, s->input_last);
        memmove(s->held, s->held + k, s->held_len - k);
        s->held_len -= k;
        s->h2->held_bytes -= k;
    } while (s->held_len && !s->input_held);
    if (!s->held_len && s->input_last && !s->input_done && !s->input_held)
        offer(s, (const uint8_t *)"", 0, 1);
}

/* DATA for a producer's stream: offered, the rest held. */
static void body_to_producer(h2_stream_t *s, const uint8_t *p, size_t n)
{
    h2_t *h = s->h2;
    size_t k = s->held_len || s->input_held ? 0 : offer(s, p, n, 0);
    if (k == n)
        return;
    char *nh = h->held_bytes + n - k <= H2_HELD_MAX ? realloc(s->held, s->held_len + n - k) : NULL;
    if (!nh) {
        consume(h, s, n - k);
        rst_stream(h, s, s->id, E_ENHANCE_YOUR_CALM);
        return;
    }
    s->held = nh;
    memcpy(s->held + s->held_len, p + k, n - k);
    s->held_len += n - k;
    h->held_bytes += n - k;
    if (!s->input_held) /* the producer was ready again within its call */
        offer_held(s);
}

/* ---- request fields ---- */

/* The connection holds too many request fields: the stream is refused
   (the client may send it again), not answered. */
static void refuse(h2_stream_t *s)
{
    if (s->refused)
        return;
    s->refused = 1;
    s->h2->f.site->stats.h2_refused++;
    rst_stream(s->h2, s, s->id, E_REFUSED_STREAM);
}

/*
 * n bytes in the stream's blocks: in the current one if they fit, else in
 * a new one twice as large (512 bytes to 4 KiB); a field of more than half
 * the first block gets a block of its own, of its size.  So a stream holds
 * about what its request needs (a few hundred bytes for most) instead of a
 * whole head's worth.  NULL: the connection's cap is reached (the stream is
 * refused) or ENOMEM.
 */
static char *room(h2_stream_t *s, size_t n)
{
    /* (the first small block is the stream's own: no malloc for most) */
    h2_chunk_t *k = s->chunks;
    if (k && k->cap - k->len >= n) {
        k->len += n;
        return k->b + k->len - n;
    }
    int own = n > H2_CHUNK / 2, first = !own && !s->first_used;
    size_t cap = own ? n : !k || first ? H2_CHUNK
                                       : k->cap < H2_CHUNK_MAX / 2 ? 2 * k->cap : H2_CHUNK_MAX;
    if (s->h2->hdr_bytes + cap > H2_CONN_HDR_CAP ||
        !(k = first ? first_chunk(s) : malloc(sizeof *k + cap))) {
        refuse(s);
        return NULL;
    }
    k->len = n, k->cap = cap;
    s->h2->hdr_bytes += cap;
    s->first_used |= (uint8_t)first;
    if (own && s->chunks) { /* behind the current block, which keeps its room */
        k->next = s->chunks->next;
        s->chunks->next = k;
    } else {
        k->next = s->chunks;
        s->chunks = k;
    }
    return k->b;
}

/* Request fields: the names and values are kept in the stream's blocks. */
static const char *keep(h2_stream_t *s, const uint8_t *p, size_t n)
{
    if (n + 1 > H2_HDR_CAP - s->hdrlen) {
        s->bad = 1; /* over what an HTTP/1.1 head may hold: 431 */
        return NULL;
    }
    char *d = room(s, n + 1);
    if (!d)
        return NULL;
    memcpy(d, p, n);
    d[n] = 0;
    s->hdrlen += n + 1;
    return d;
}

/* A request field kept in the request (the checks are made). */
static void field_keep(h2_stream_t *s, const uint8_t *name, size_t nlen, const uint8_t *value,
                       size_t vlen)
{
    http_request_t *req = &s->req;
    int authority = nlen == 10 && !memcmp(name, ":authority", 10);
    int host = authority || (nlen == 4 && !memcmp(name, "host", 4));
    if (host && http_header(req, "Host")) /* RFC 9113 8.3.1: :authority first, one Host */
        return;
    if (nlen == 8 && !memcmp(name, "priority", 8))
        h2f_priority(value, vlen, &s->urgency, &s->incremental);
    const char *v = keep(s, value, vlen);
    if (!v)
        return;
    http_str_t val = {v, vlen};
    if (nlen == 7 && !memcmp(name, ":method", 7))
        req->method = val;
    else if (nlen == 5 && !memcmp(name, ":path", 5))
        req->target = val;
    else if (name[0] == ':' && !authority)
        return; /* :scheme */
    else if (req->nheaders == HTTP_MAX_HEADERS)
        s->bad = 1;
    else {
        const char *k = authority ? "host" : keep(s, name, nlen);
        if (k)
            req->headers[req->nheaders++] = (http_header_t){{k, authority ? 4 : nlen}, val};
    }
}

/* The content-length field: digits, and all of them the same (8.1.1). */
static int content_length(h2_stream_t *s, const nghttp2_nv *nv)
{
    uint64_t v;
    if (nv->namelen != 14 || memcmp(nv->name, "content-length", 14))
        return 0;
    if (h2f_content_length(nv->value, nv->valuelen, &v) < 0)
        return -1;
    if (s->clen >= 0 && (uint64_t)s->clen != v)
        return -1;
    s->clen = (int64_t)v;
    return 0;
}

/* One field of the header block being read. */
static void on_field(h2_t *h, const nghttp2_nv *nv)
{
    h2_block_in_t *in = &h->in;
    h2_stream_t *s = in->s;
    if (!s || in->malformed)
        return;
    if (!h2f_field_ok(&in->fs, nv->name, nv->namelen, nv->value, nv->valuelen) ||
        (!in->fs.trailer && content_length(s, nv) < 0)) {
        in->malformed = 1;
        return;
    }
    if (!in->fs.trailer && !s->bad && !s->refused && !s->closed)
        field_keep(s, nv->name, nv->namelen, nv->value, nv->valuelen);
}

/* ---- dispatch ---- */

static void job_done(job_t *j);
static void dispatch_again(h2_stream_t *s);

/* A stream that holds a file counts towards H2_FILES_MAX until it is freed. */
static void count_file(h2_stream_t *s)
{
    if (!s->has_file && s->ex.file) {
        s->has_file = 1;
        s->h2->files++;
    }
}

/* The request is complete: the router answers it (or a job is sent off). */
/* What every request goes through before it is answered: the counts, -R,
   -A, the header list's verdict, the log line.  0: answer it. */
static int dispatch_begin(h2_t *h, h2_stream_t *s)
{
    exchange_t *ex = &s->ex;
    site_t *site = ex->site;
    h->pending -= !s->deferred;
    s->dispatched = 1;
    h->requests++;
    if (s->id > h->last_dispatched)
        h->last_dispatched = s->id;
    unsigned max = (unsigned)site->cfg->max_requests; /* -R: the last stream of the connection */
    if (max && h->requests >= max && !h->goaway) {
        site->stats.max_requests++;
        h2_goaway(h);
    }
    if (limits_request(site->limits, h->f.peer, gio_now(site->loop)) != LIMIT_OK) {
        /* -A: HTTP/1.1 tarpits the connection; here it ends with the streams it has */
        site->stats.rate_limited++;
        h->calm = 1; /* not a flood */
        conn_error(h, E_ENHANCE_YOUR_CALM);
        return -1;
    }
    if (s->bad) {
        ex_error(ex, 431, NULL, NULL);
        return -1;
    }
    ex->head_only = s->req.method.n == 4 && !memcmp(s->req.method.p, "HEAD", 4);
    /* the access log's request field, as nginx writes it */
    const http_str_t *auth = s->req.target.n ? NULL : http_header(&s->req, "Host"); /* CONNECT */
    http_str_t target = auth ? *auth : s->req.target;
    size_t n = s->req.method.n + target.n + sizeof " HTTP/2.0";
    char *line = room(s, n);
    if (!line)
        return -1; /* refused */
    hbuf_t b = hb_init(line, n);
    hb_put(&b, s->req.method.p, s->req.method.n);
    hb_puts(&b, " ");
    hb_put(&b, target.p, target.n);
    hb_puts(&b, " HTTP/2.0");
    if (!b.over)
        s->req.line = (http_str_t){line, hb_len(&b)};
    return 0;
}

static void dispatch(h2_t *h, h2_stream_t *s)
{
    exchange_t *ex = &s->ex;
    site_t *site = ex->site;
    if (dispatch_begin(h, s) < 0)
        return;
    if (router_dispatch(ex) < 0) {
        rst_stream(h, s, s->id, E_INTERNAL);
        return;
    }
    count_file(s);
    if (!ex->job)
        return;
    ex_job_t *xj = ex->job;
    xj->ex = ex;
    xj->job.done = job_done;
    if (jobs_submit(site->jobs, &xj->job) == 0)
        return;
    ex->job = NULL; /* the pool's queue is full: shed this request, not the loop */
    xj->job.cancelled = 1;
    xj->finish(xj, NULL);
    free(xj);
    site->stats.busy++;
    ex_error(ex, 503, "Retry-After", "1");
}

/* A job for a stream's exchange is done (on the loop thread): dispatch again. */
static void job_done(job_t *j)
{
    ex_job_t *xj = (ex_job_t *)j;
    exchange_t *ex = xj->ex;
    h2_stream_t *s = ex ? stream_of(ex) : NULL;
    if (s) {
        ex->job = NULL;
        ex->nfields = 0; /* the answer starts afresh */
        ex->fields_over = 0;
    }
    int cancelled = j->cancelled; /* j is xj's, freed here */
    xj->finish(xj, cancelled ? NULL : ex);
    free(xj);
    if (!s)
        return;
    if (cancelled) {
        rst_stream(s->h2, s, s->id, E_REFUSED_STREAM);
        s->h2->wake(s->h2->f.conn);
        return;
    }
    dispatch_again(s);
}

/* After a job, or a local redirect: the router answers the stream afresh. */
static void dispatch_again(h2_stream_t *s)
{
    exchange_t *ex = &s->ex;
    h2_t *h = s->h2;
    if (router_dispatch(ex) < 0)
        rst_stream(h, s, s->id, E_INTERNAL);
    else if (count_file(s), ex->job) { /* a second job (gzip after a password): send it too */
        ex->job->ex = ex;
        ex->job->job.done = job_done;
        if (jobs_submit(ex->site->jobs, &ex->job->job) < 0) {
            ex_job_t *x2 = ex->job;
            ex->job = NULL;
            x2->job.cancelled = 1;
            x2->finish(x2, NULL);
            free(x2);
            ex_error(ex, 503, "Retry-After", "1");
        }
    }
    if (s->early && !ex->job) { /* the body held for the job: to its taker */
        s->input_held = 0;
        offer_held(s);
    }
    h->wake(h->f.conn);
}

/* A local redirect (ex_redirect), from a producer's call: its stream is
   answered again at once, as after a job; a reset stream waits for sweep. */
static void codec_redispatch(exchange_t *ex)
{
    h2_stream_t *s = stream_of(ex);
    if (s->closed)
        return;
    dispatch_again(s);
}

/* A request answered before its body ended (413): the rest is not wanted
   (RFC 9113 8.1: RST_STREAM with NO_ERROR once the response is out). */
static void body_ends(h2_t *h, h2_stream_t *s)
{
    if (s->in_body)
        s->in_body = 0, h->bodies--;
}

static void answer_early(h2_t *h, h2_stream_t *s, int status)
{
    body_ends(h, s);
    if (dispatch_begin(h, s) == 0) /* counted and logged as any request */
        ex_error(&s->ex, status, NULL, NULL);
}

/* A request head with a body to come: 413 at once for a Content-Length over
   the limit, and 100 (Continue) when asked for, as HTTP/1.1 answers. */
static void body_begins(h2_t *h, h2_stream_t *s)
{
    const http_str_t *cl = http_header(&s->req, "Content-Length");
    unsigned long long len = 0;
    s->in_body = 1, h->bodies++;
    h->headed = 1;
    int known = cl && cl->n && scan_ulonglong(cl->p, &len) == cl->n;
    s->ex.req_len = known ? (int64_t)len : -1;
    if (!s->bad && !s->refused && router_streams(&s->ex)) { /* a producer takes it as it comes */
        s->early = 1;
        s->produced = 1;
        h->producers++;
    } else if (known && len > H1_BODY_MAX) {
        answer_early(h, s, 413);
        return;
    }
    const http_str_t *ex = http_header(&s->req, "Expect");
    if (ex && ex->n == 12 && case_equalb(ex->p, 12, "100-continue")) {
        nghttp2_nv cont[] = {NV(":status", "100")};
        if (out_headers(h, s->id, cont, 1, 0) < 0)
            h->fatal = 1;
    }
    if (s->early)
        dispatch(h, s);
}

/*
 * A request's HEADERS or DATA has been read: END_STREAM ends its body (a
 * producer hears it once it took the rest); a complete request without a
 * producer is answered now (its body was dropped, as HTTP/1.1 drops it).
 */
static void request_progress(h2_t *h, h2_stream_t *s, int headers, int end)
{
    if (end) {
        s->peer_ended = s->remote_ended = 1;
        if (s->early) {
            body_ends(h, s);
            s->input_last = 1;
            offer_held(s);
        }
        if (s->local_ended) {
            stream_close(h, s);
            return;
        }
    }
    if (s->dispatched || s->deferred || s->refused || s->closed)
        return;
    if (!end) {
        if (headers && !s->in_body)
            body_begins(h, s);
        return;
    }
    body_ends(h, s);
    if (h->goaway && s->id > h->last_id) { /* read with the one that made us say GOAWAY */
        rst_stream(h, s, s->id, E_REFUSED_STREAM);
    } else if (h->files >= H2_FILES_MAX) { /* answered when a file is let go (sweep) */
        s->deferred = 1;
        h->pending--;
        h->deferred++;
        h->f.site->stats.h2_file_waits++;
    } else {
        dispatch(h, s);
    }
}

/* ---- frames in ---- */

/* Decode a piece of the header block (final: its last). */
static int inflate(h2_t *h, const uint8_t *p, size_t n, int final)
{
    if (!h->inf && nghttp2_hd_inflate_new(&h->inf)) {
        h->fatal = 1;
        return -1;
    }
    for (;;) {
        nghttp2_nv nv;
        int fl = 0;
        ssize_t r = nghttp2_hd_inflate_hd2(h->inf, &nv, &fl, p, n, final);
        if (r < 0) {
            conn_error(h, E_COMPRESSION);
            return -1;
        }
        p += r, n -= (size_t)r;
        if (fl & NGHTTP2_HD_INFLATE_EMIT)
            on_field(h, &nv);
        if (fl & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(h->inf);
            return 0;
        }
        if (!(fl & NGHTTP2_HD_INFLATE_EMIT) && !n)
            return 0;
    }
}

/* The header block is complete: the request is checked (8.3.1), a trailer
   section ends the body. */
static void block_done(h2_t *h)
{
    h2_block_in_t in = h->in;
    h->in.id = 0;
    h2_stream_t *s = in.s;
    if (!s || s->closed)
        return;
    if (!in.malformed && !h2f_fields_complete(&in.fs))
        in.malformed = 1; /* 8.3.1 */
    if (!in.malformed && in.end && s->clen >= 0 && (uint64_t)s->clen != s->data_in)
        in.malformed = 1;
    if (in.malformed) {
        rst_stream(h, s, s->id, E_PROTOCOL);
        return;
    }
    request_progress(h, s, !in.fs.trailer, in.end);
}

/* Strip a frame's padding (and HEADERS' priority): the fragment, or -1. */
static int unpad(h2_t *h, const uint8_t **p, uint32_t *len, uint8_t flags, int prio)
{
    uint32_t pad = 0, skip = 0;
    if (flags & FL_PADDED) {
        if (*len < 1)
            return conn_error(h, E_FRAME_SIZE), -1;
        pad = (*p)[0], skip = 1;
    }
    if (prio)
        skip += 5;
    if (skip > *len || pad > *len - skip)
        return conn_error(h, E_PROTOCOL), -1;
    *p += skip;
    *len -= skip + pad;
    return 0;
}

/* A HEADERS frame on a stream that is not open (RFC 9113 5.1): a new
   request, or an error.  The stream its fields go to, or NULL. */
static h2_stream_t *headers_new(h2_t *h, int32_t id)
{
    if (id <= h->max_id) { /* 5.1.1: ids only grow; a closed stream takes none */
        conn_error(h, client_closed(h, id) ? E_STREAM_CLOSED : E_PROTOCOL);
        return NULL;
    }
    h->max_id = id;
    if ((h->goaway && id > h->last_id) || h->open >= peer_budget(H2_MAX_STREAMS, h->level)) {
        /* sent with the one that made us say GOAWAY, or past 5.1.2's cap */
        rst_stream(h, NULL, id, E_REFUSED_STREAM);
        return NULL;
    }
    h2_stream_t *s = stream_new(h, id);
    if (!s)
        rst_stream(h, NULL, id, E_REFUSED_STREAM);
    return s;
}

static void on_headers(h2_t *h, const uint8_t *p, uint32_t len, uint8_t flags, int32_t id)
{
    if (!id || !(id & 1)) /* 5.1.1: a client's streams are odd */
        return conn_error(h, E_PROTOCOL);
    if (unpad(h, &p, &len, flags, flags & FL_PRIORITY) < 0)
        return;
    h2_stream_t *s = find(h, id);
    h->in = (h2_block_in_t){.id = id, .end = flags & FL_END_STREAM};
    if (s && s->remote_ended) { /* half-closed (remote): 5.1 */
        rst_stream(h, s, id, E_STREAM_CLOSED);
        s = NULL;
    } else if (s) { /* a trailer section: it must end the stream (8.1) */
        h->in.fs.trailer = 1;
        if (!(flags & FL_END_STREAM)) {
            rst_stream(h, s, id, E_PROTOCOL);
            s = NULL;
        }
    } else if (!(s = headers_new(h, id))) {
        if (h->fatal)
            return;
    } else if ((flags & FL_PRIORITY) && h2f_be31(p - 5) == (uint32_t)id) {
        rst_stream(h, s, id, E_PROTOCOL); /* 5.3.1: it depends on itself */
        s = NULL;
    }
    h->in.s = s;
    if (inflate(h, p, len, flags & FL_END_HEADERS) < 0)
        return;
    if (flags & FL_END_HEADERS)
        block_done(h);
}

static void on_continuation(h2_t *h, const uint8_t *p, uint32_t len, uint8_t flags)
{
    if (++h->in.conts > H2_MAX_CONTINUATIONS) /* CVE-2024-28182 */
        return flood_goaway(h, H2_FLOOD_CONTINUATION);
    if (inflate(h, p, len, flags & FL_END_HEADERS) < 0)
        return;
    if (flags & FL_END_HEADERS)
        block_done(h);
}

/* A DATA frame's payload for stream s. */
static void data_chunk(h2_t *h, h2_stream_t *s, const uint8_t *p, size_t n)
{
    h->body_bytes += n;
    if (s->early) {
        body_to_producer(s, p, n);
        return;
    }
    consume(h, s, n); /* dropped: the window opens at once */
    if (s->in_body && (s->body_got += n) > H1_BODY_MAX)
        answer_early(h, s, 413);
}

/* DATA: flow control, then the request body (a producer's, or dropped). */
static void on_data(h2_t *h, const uint8_t *p, uint32_t len, uint8_t flags, int32_t id)
{
    uint32_t whole = len;
    if (!id)
        return conn_error(h, E_PROTOCOL);
    if (unpad(h, &p, &len, flags, 0) < 0)
        return;
    if ((int64_t)whole > h->recv_win)
        return conn_error(h, E_FLOW_CONTROL);
    h->recv_win -= (int32_t)whole;
    h2_stream_t *s = find(h, id);
    if (!s) {
        if (id > h->max_id) /* idle: 5.1 */
            return conn_error(h, E_PROTOCOL);
        if (client_closed(h, id))
            return conn_error(h, E_STREAM_CLOSED);
        consume(h, NULL, whole); /* one we reset: it may have been in flight */
        return;
    }
    if (s->remote_ended) {
        consume(h, NULL, whole);
        return rst_stream(h, s, id, E_STREAM_CLOSED);
    }
    if ((int64_t)whole > s->recv_win) {
        consume(h, NULL, whole);
        return rst_stream(h, s, id, E_FLOW_CONTROL);
    }
    s->recv_win -= (int32_t)whole;
    s->data_in += len;
    int end = flags & FL_END_STREAM;
    if (s->clen >= 0 && (s->data_in > (uint64_t)s->clen ||
                         (end && s->data_in != (uint64_t)s->clen))) {
        consume(h, NULL, whole);
        return rst_stream(h, s, id, E_PROTOCOL); /* 8.1.1 */
    }
    consume(h, s, whole - len); /* the padding */
    data_chunk(h, s, p, len);
    if (!s->closed)
        request_progress(h, s, 0, end);
}

/* SETTINGS_INITIAL_WINDOW_SIZE changed: every stream's window by the
   difference (6.9.2), none past 2^31-1. */
static int new_window(h2_t *h, uint32_t v)
{
    int64_t delta = (int64_t)v - h->peer_window;
    h->peer_window = v;
    for (h2_stream_t *s = h->all; s; s = s->next)
        if (!s->closed && (s->send_win += delta) > H2_WINDOW_MAX)
            return -1;
    return 0;
}

static void on_settings(h2_t *h, const uint8_t *p, uint32_t len, uint8_t flags, int32_t id)
{
    if (id)
        return conn_error(h, E_PROTOCOL);
    if (flags & FL_ACK)
        return len ? conn_error(h, E_FRAME_SIZE) : (void)0;
    if (len % 6)
        return conn_error(h, E_FRAME_SIZE);
    if (len / 6 > H2_MAX_SETTINGS)
        return flood_goaway(h, H2_FLOOD_SETTINGS);
    for (uint32_t i = 0; i < len; i += 6) {
        uint16_t k;
        uint32_t v, bad;
        h2f_setting(p + i, &k, &v);
        if ((bad = h2f_setting_check(k, v)))
            return conn_error(h, bad);
        if (k == SET_HEADER_TABLE_SIZE) {
            h->peer_table = v < H2_TABLE ? v : H2_TABLE;
            if (h->def && nghttp2_hd_deflate_change_table_size(h->def, h->peer_table))
                return conn_error(h, E_INTERNAL);
        } else if (k == SET_INITIAL_WINDOW_SIZE && new_window(h, v) < 0) {
            return conn_error(h, E_FLOW_CONTROL);
        }
    }
    if (!out_frame(h, 0, FR_SETTINGS, FL_ACK, 0))
        h->fatal = 1;
}

static void on_ping(h2_t *h, const uint8_t *p, uint32_t len, uint8_t flags, int32_t id)
{
    if (id)
        return conn_error(h, E_PROTOCOL);
    if (len != 8)
        return conn_error(h, E_FRAME_SIZE);
    if (flags & FL_ACK)
        return;
    uint8_t *q = out_frame(h, 8, FR_PING, FL_ACK, 0);
    if (!q)
        h->fatal = 1;
    else
        memcpy(q, p, 8);
}

static void on_rst(h2_t *h, uint32_t len, int32_t id)
{
    if (len != 4)
        return conn_error(h, E_FRAME_SIZE);
    if (!id || id > h->max_id) /* on an idle stream: 6.4 */
        return conn_error(h, E_PROTOCOL);
    h2_stream_t *s = find(h, id);
    if (s) {
        s->peer_ended = 1;
        stream_close(h, s);
    }
}

static void on_window(h2_t *h, const uint8_t *p, uint32_t len, int32_t id)
{
    if (len != 4)
        return conn_error(h, E_FRAME_SIZE);
    uint32_t inc = h2f_be31(p);
    if (!id) {
        if (!inc || h->send_win + inc > H2_WINDOW_MAX)
            return conn_error(h, inc ? E_FLOW_CONTROL : E_PROTOCOL);
        h->send_win += inc;
        return;
    }
    if (id > h->max_id)
        return conn_error(h, E_PROTOCOL);
    h2_stream_t *s = find(h, id);
    if (!s)
        return; /* closed: it may have been in flight */
    if (!inc || s->send_win + inc > H2_WINDOW_MAX)
        return rst_stream(h, s, id, inc ? E_FLOW_CONTROL : E_PROTOCOL);
    s->send_win += inc;
}

/* PRIORITY (RFC 9113 6.3): its signal is RFC 7540's, not used; its checks
   stay.  PRIORITY_UPDATE (RFC 9218 7.1): an open stream's new priority. */
static void on_priority(h2_t *h, const uint8_t *p, uint32_t len, uint8_t type, int32_t id)
{
    if (type == FR_PRIORITY) {
        if (!id)
            return conn_error(h, E_PROTOCOL);
        if (len != 5)
            return rst_stream(h, find(h, id), id, E_FRAME_SIZE);
        if (h2f_be31(p) == (uint32_t)id) /* 5.3.1 */
            return conn_error(h, E_PROTOCOL);
        return;
    }
    if (id)
        return conn_error(h, E_PROTOCOL);
    if (len < 4)
        return conn_error(h, E_FRAME_SIZE);
    if (!h2f_be31(p))
        return conn_error(h, E_PROTOCOL);
    h2_stream_t *s = find(h, (int32_t)h2f_be31(p));
    if (s) {
        s->urgency = 3, s->incremental = 0;
        h2f_priority(p + 4, len - 4, &s->urgency, &s->incremental);
    }
}

/* A frame read whole (h->hd its header, p its payload). */
static void frame_in(h2_t *h, const uint8_t *p)
{
    h2_frame_hd_t hd = h2f_hd(h->hd);
    uint32_t len = hd.len;
    uint8_t type = hd.type, flags = hd.flags;
    int32_t id = hd.id;
    int kind = h2f_flood_kind(p, len, type, flags);
    if (kind >= 0 && flood_take(h, kind) < 0)
        return;
    switch (type) {
    case FR_DATA: return on_data(h, p, len, flags, id);
    case FR_HEADERS: return on_headers(h, p, len, flags, id);
    case FR_PRIORITY:
    case FR_PRIORITY_UPDATE: return on_priority(h, p, len, type, id);
    case FR_RST_STREAM: return on_rst(h, len, id);
    case FR_SETTINGS: return on_settings(h, p, len, flags, id);
    case FR_PUSH_PROMISE: return conn_error(h, E_PROTOCOL); /* 8.4: a client pushes none */
    case FR_PING: return on_ping(h, p, len, flags, id);
    case FR_GOAWAY:
        if (id)
            return conn_error(h, E_PROTOCOL);
        if (len < 8)
            return conn_error(h, E_FRAME_SIZE);
        h->peer_goaway = 1;
        return;
    case FR_WINDOW_UPDATE: return on_window(h, p, len, id);
    case FR_CONTINUATION: return on_continuation(h, p, len, flags);
    default: return; /* 5.5: extensions we do not know are ignored */
    }
}

/* A frame header is read: the checks that need no payload.  0: read it. */
static int frame_begin(h2_t *h)
{
    h2_frame_hd_t hd = h2f_hd(h->hd);
    uint32_t len = hd.len;
    uint8_t type = hd.type;
    int32_t id = hd.id;
    if (len > H2_FRAME_MAX) /* 4.2 */
        return conn_error(h, E_FRAME_SIZE), -1;
    if (h->in.id ? type != FR_CONTINUATION || id != h->in.id : type == FR_CONTINUATION)
        return conn_error(h, E_PROTOCOL), -1; /* 6.10: a header block is one piece */
    if (!h->settings_in && (type != FR_SETTINGS || (h->hd[4] & FL_ACK)))
        return conn_error(h, E_PROTOCOL), -1; /* 3.4: the preface ends with SETTINGS */
    h->settings_in = 1;
    h->frame_left = len;
    h->fgot = 0;
    return 0;
}

/* The client's preface: a mismatch ends the session.  Bytes taken. */
static size_t preface_in(h2_t *h, const uint8_t *p, size_t n)
{
    size_t at = H2_PREFACE_LEN - h->frame_left;
    size_t k = n < h->frame_left ? n : h->frame_left;
    if (memcmp(p, &H2_PREFACE[at], k)) {
        conn_error(h, E_PROTOCOL);
        return n;
    }
    if (!(h->frame_left -= (uint32_t)k))
        h->preface = 0;
    return k;
}

/* Payload bytes: the frame at once if it is all here, else gathered in
   fbuf.  Bytes taken. */
static size_t payload_in(h2_t *h, const uint8_t *p, size_t n)
{
    if (!h->fgot && n >= h->frame_left) {
        size_t k = h->frame_left;
        h->frame_left = 0, h->hd_have = 0;
        frame_in(h, p);
        return k;
    }
    if (!h->fbuf && !(h->fbuf = malloc(H2_FRAME_MAX))) {
        h->fatal = 1;
        return n;
    }
    size_t k = n < h->frame_left ? n : h->frame_left;
    memcpy(h->fbuf + h->fgot, p, k);
    h->fgot += (uint32_t)k;
    if (!(h->frame_left -= (uint32_t)k)) {
        h->hd_have = 0;
        frame_in(h, h->fbuf);
    }
    return k;
}

int h2_recv(h2_t *h, const uint8_t *p, size_t n)
{
    if (gio_batch_done(h->f.out))
        pend_rewind(h, 1);
    while (n && !h->fatal) {
        size_t k;
        if (h->preface) {
            k = preface_in(h, p, n);
        } else if (h->hd_have < 9) {
            if (!h->hd_have)
                h->frame_since = gio_now(h->f.site->loop);
            k = 9u - h->hd_have < n ? 9u - h->hd_have : n;
            memcpy(h->hd + h->hd_have, p, k);
            h->hd_have = (uint8_t)(h->hd_have + k);
            if (h->hd_have == 9 && frame_begin(h) == 0 && !h->frame_left) {
                h->hd_have = 0;
                frame_in(h, p);
            }
        } else {
            k = payload_in(h, p, n);
        }
        p += k, n -= k;
    }
    return h->fatal ? -1 : 0;
}

/* ---- frames out: DATA, by priority ---- */

/* Has the stream DATA to send now (END_STREAM alone needs no window)? */
static int ready(const h2_t *h, const h2_stream_t *s)
{
    if (s->closed || !s->answered || s->local_ended)
        return 0;
    if (!s->body_left || (s->streamed && s->ended && s->cur >= s->nparts))
        return 1;
    return s->cur < s->nparts && s->send_win > 0 && h->send_win > 0;
}

/*
 * RFC 9218 4: the lowest urgency first; within one, the streams that are not
 * incremental one at a time in the order they were opened, then the
 * incremental ones in turns (the one served longest ago first).
 */
static h2_stream_t *pick(const h2_t *h)
{
    h2_stream_t *best = NULL;
    for (h2_stream_t *s = h->all; s; s = s->next) {
        if (!ready(h, s))
            continue;
        if (!best || s->urgency < best->urgency)
            best = s;
        else if (s->urgency > best->urgency)
            continue;
        else if (s->incremental != best->incremental)
            best = s->incremental ? best : s;
        else if (s->incremental ? (int32_t)(s->seq - best->seq) < 0 : s->id < best->id)
            best = s;
    }
    return best;
}

/* One DATA frame of s: its header into the block, the body by reference
   (a file range goes by sendfile on plain connections). */
static int send_data(h2_t *h, h2_stream_t *s)
{
    uint8_t hd[9];
    if (!s->body_left || s->cur >= s->nparts) { /* END_STREAM alone */
        h2f_put_hd(hd, 0, FR_DATA, FL_END_STREAM, (uint32_t)s->id);
        if (pend_add(h, hd, 9) < 0)
            return -1;
        local_end(h, s);
        return 0;
    }
    h2_part_t *p = &s->parts[s->cur];
    uint64_t n = p->len < s->body_left ? p->len : s->body_left;
    uint64_t max = h->f.ssl ? H2_DATA_TLS : H2_FRAME_MAX;
    max = (uint64_t)s->send_win < max ? (uint64_t)s->send_win : max;
    max = (uint64_t)h->send_win < max ? (uint64_t)h->send_win : max;
    n = n < max ? n : max;
    int end = n == s->body_left || (s->streamed && s->ended && s->cur + 1 == s->nparts &&
                                    n == p->len);
    h2f_put_hd(hd, (size_t)n, FR_DATA, end ? FL_END_STREAM : 0, (uint32_t)s->id);
    if (pend_add(h, hd, 9) < 0 || pend_flush(h) < 0)
        return -1;
    int r = p->p ? gio_batch_add_buf(h->f.out, p->p + p->off, (size_t)n, 0)
                 : gio_batch_add_file(h->f.out, p->fd, p->off, n, 0);
    if (r < 0)
        return -1;
    p->off += n, p->len -= n;
    s->body_left -= n;
    s->body_sent += n;
    s->send_win -= (int64_t)n;
    h->send_win -= (int64_t)n;
    if (!p->len)
        s->cur++;
    if (s->incremental)
        s->seq = ++h->seq;
    if (end)
        local_end(h, s);
    return 0;
}

/* The parts of s sent whole: the batch, done, holds no reference to them
   any more.  A streamed body's memory is what is queued, not all it sent. */
static void release_sent(h2_stream_t *s)
{
    unsigned k = s->cur;
    if (!k)
        return;
    for (unsigned i = 0; i < k; i++)
        if (s->parts[i].owned)
            free((void *)s->parts[i].p);
    memmove(s->parts, s->parts + k, (s->nparts - k) * sizeof *s->parts);
    s->nparts -= k;
    s->cur = 0;
}

/* The streams that closed while the batch held their bytes: free them now;
   the others' parts that were sent. */
static void sweep(h2_t *h)
{
    for (h2_stream_t **pp = &h->all, *s; (s = *pp);) {
        if (s->closed) {
            *pp = s->next;
            stream_free(s);
        } else {
            release_sent(s);
            pp = &s->next;
        }
    }
    while (h->deferred && h->files < H2_FILES_MAX && !h->fatal) { /* the oldest one next */
        h2_stream_t *first = NULL;
        for (h2_stream_t *s = h->all; s; s = s->next)
            if (s->deferred && !s->dispatched && !s->closed && (!first || s->id < first->id))
                first = s;
        if (!first)
            break;
        h->deferred--;
        dispatch(h, first);
    }
}

/* Producers that stopped above EX_STREAM_HIGH hear that their queue fell
   below EX_STREAM_LOW (they may hand over more at once: the next fill). */
static void drained(h2_t *h)
{
    for (h2_stream_t *s = h->producers ? h->all : NULL; s; s = s->next)
        if (s->want_drain && !s->closed && s->given - s->body_sent < EX_STREAM_LOW) {
            s->want_drain = 0;
            if (s->ex.producer && !s->ended)
                s->ex.producer->drained(&s->ex);
        }
}

static size_t unflushed_bytes(const h2_t *h)
{
    size_t n = 0;
    for (h2_block_t *b = h->pend ? h->mblk : NULL;; b = b->next) {
        n += b->len - (b == h->mblk ? h->mark : 0);
        if (b == h->pend)
            return n;
    }
    return n;
}

long h2_fill(h2_t *h, size_t max)
{
    if (!gio_batch_done(h->f.out))
        return 0;
    sweep(h); /* (the batch keeps counting bytes_sent: conn.c's -B window reads it) */
    pend_rewind(h, 1);
    while (!h->fatal && h->f.out->bytes_left + (h->pend ? unflushed_bytes(h) : 0) < max) {
        h2_stream_t *s = pick(h);
        if (!s)
            break;
        if (send_data(h, s) < 0)
            return -1;
    }
    if (pend_flush(h) < 0)
        return -1;
    if (!h->f.out->bytes_left && !h->all) { /* idle: it keeps no block, no spare stream */
        pend_rewind(h, 0);
        spares_free(h);
        if (h->hd_have < 9) { /* no frame is being gathered in it */
            free(h->fbuf);
            h->fbuf = NULL;
        }
    }
    drained(h);
    return (long)h->f.out->bytes_left;
}

h2_t *h2_new(const h1_conn_t *f, void (*wake)(void *conn))
{
    h2_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->f = *f;
    h->wake = wake;
    h->started = h->frame_since = gio_now(f->site->loop);
    h->frame_left = H2_PREFACE_LEN; /* the client's preface comes first */
    h->preface = 1;
    h->send_win = H2_DEFAULT_WINDOW;
    h->recv_win = H2_CONN_WINDOW;
    h->peer_window = H2_DEFAULT_WINDOW;
    h->peer_table = H2_TABLE;
    /* an address a flood defence ended lately gets less (--flood-memory) */
    if ((h->level = (uint8_t)peer_allowance(f->site->limits, f->peer, h->started)))
        f->site->stats.offender_reduced++;
    for (int k = 0; k < H2_FLOOD_KINDS; k++)
        h->flood[k] =
            (h2_bucket_t){(uint64_t)peer_budget(flood_limit[k].burst, h->level) * 1000, h->started};
    /* RFC 9218: urgency and incremental (the priority field and
       PRIORITY_UPDATE) order the streams' DATA (pick) */
    const uint32_t set[][2] = {
        {SET_MAX_CONCURRENT_STREAMS, peer_budget(H2_MAX_STREAMS, h->level)},
        {SET_INITIAL_WINDOW_SIZE, H2_WINDOW},
        {SET_MAX_HEADER_LIST_SIZE, H2_HDR_CAP},
        {SET_ENABLE_PUSH, 0},
        {SET_NO_RFC7540_PRIORITIES, 1},
    };
    size_t n = sizeof set / sizeof set[0];
    uint8_t *p = out_frame(h, 6 * n, FR_SETTINGS, 0, 0);
    if (!p) {
        free(h);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        h2f_put_setting(p + 6 * i, (uint16_t)set[i][0], set[i][1]);
    out_window(h, 0, H2_CONN_WINDOW - H2_DEFAULT_WINDOW);
    h->recv_win = H2_CONN_WINDOW;
    return h;
}

void h2_free(h2_t *h)
{
    if (!h)
        return;
    h->fatal = 1; /* no spares kept */
    for (h2_stream_t *s = h->all, *next; s; s = next) {
        next = s->next;
        stream_free(s);
    }
    spares_free(h);
    pend_rewind(h, 0);
    for (h2_block_t *k = h->blocks, *next; k; k = next) { /* (a rewind that waited) */
        next = k->next;
        free(k);
    }
    if (h->def)
        nghttp2_hd_deflate_del(h->def);
    if (h->inf)
        nghttp2_hd_inflate_del(h->inf);
    free(h->fbuf);
    free(h);
}

int h2_want_read(const h2_t *h)
{
    return !h->fatal && !((h->goaway_sent || h->peer_goaway) && !h->open);
}

int h2_done(const h2_t *h)
{
    return !h2_want_read(h) && !pend_unflushed(h);
}

unsigned h2_streams(const h2_t *h)
{
    return h->open;
}

unsigned h2_waiting(const h2_t *h)
{
    unsigned n = 0;
    for (const h2_stream_t *s = h->producers ? h->all : NULL; s; s = s->next)
        n += !s->closed && s->ex.producer && !s->ended && s->given == s->body_sent &&
             !s->in_body;
    return n;
}

unsigned h2_bodies(const h2_t *h)
{
    return h->bodies;
}

uint64_t h2_body_bytes(const h2_t *h)
{
    return h->body_bytes;
}

int64_t h2_head_since(const h2_t *h)
{
    int64_t t = h->requests || h->headed ? 0 : h->started; /* the first head: from the preface on */
    if ((h->hd_have || h->frame_left || h->in.id) && (!t || h->frame_since < t))
        t = h->frame_since; /* a frame (or the preface) begun and not complete */
    if (h->pending)
        for (const h2_stream_t *s = h->all; s; s = s->next)
            if (!s->dispatched && !s->deferred && !s->closed && !s->in_body &&
                (!t || s->begun < t))
                t = s->begun;
    return t;
}

void h2_goaway(h2_t *h)
{
    if (h->goaway)
        return;
    h->goaway = 1;
    h->last_id = h->max_id;
    if (!h->fatal)
        out_goaway(h, h->last_id, E_NO_ERROR);
}

size_t h2_expire(h2_t *h, char *buf, size_t cap)
{
    if (!gio_batch_done(h->f.out))
        return 0; /* a frame is on its way: more bytes would land inside it */
    /* NO_ERROR: the client may send the stream cut off again */
    return h2f_goaway((uint8_t *)buf, cap, h->last_dispatched, E_NO_ERROR);
}
