/* The HTTP/2 codec: see h2.h. */
#include "h2.h"
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
#include <sys/mman.h>

#define H2_MAX_STREAMS 100
#define H2_WINDOW (1 << 20)            /* a stream's receive window */
#define H2_CONN_WINDOW (16 << 20)      /* the connection's */
#define H2_DATA_MAX (16384 - 9)        /* one DATA frame = one TLS record */
#define H2_HDR_CAP HTTP_MAX_HEAD       /* a request's header list, as for HTTP/1.1 */
#define H2_PEND_CAP 16384              /* frames are copied into blocks this large */
#define H2_CHUNK 512                   /* a stream's first block of request fields */
#define H2_CHUNK_MAX 4096              /* ... and the largest one shared by fields */
#define H2_FILES_MAX 32                /* streams holding an open file, per connection */
#define H2_CONN_HDR_CAP (256 * 1024)   /* request fields held by all of a connection's streams */
#define H2_RESET_BURST 200             /* rapid reset (CVE-2023-44487): streams reset */
#define H2_RESET_RATE 50               /* ... per second after the burst (nghttp2's: twice) */
#define H2_CLOSED_MEMORY 64            /* streams the client closed, remembered (RFC 9113 5.1) */
#define H2_MAX_SETTINGS 32             /* entries in one SETTINGS frame (nghttp2 checks) */
#define H2_WINDOW_SMALL 1024           /* a WINDOW_UPDATE opening less counts towards a flood */
#define H2_HELD_MAX (4 << 20)          /* request body bytes a connection holds for producers */

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

/* A block of frame bytes.  nghttp2 reuses its buffer, so what mem_send gives
   is copied here and the batch points into it; the blocks are rewritten once
   the batch has sent everything (h2_fill runs only then). */
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
    uint8_t in_body;  /* its head is complete, its body still coming (dropped, as HTTP/1.1's) */
    uint64_t body_got; /* request body bytes: at most H1_BODY_MAX, as for HTTP/1.1 */
    /* a producer's stream (exchange.h) */
    uint8_t early;       /* dispatched at its HEADERS: its body goes to the producer */
    uint8_t streamed;    /* its head said no length (EX_LEN_STREAM) */
    uint8_t produced;    /* counted in h2_t's producers (early, or answered by a producer) */
    uint8_t ended;       /* ex_body_end (or abort) was called */
    uint8_t data_waits;  /* read_body found no part yet: resume the data when one comes */
    uint8_t want_drain;  /* more than EX_STREAM_HIGH was queued: tell the producer below LOW */
    uint8_t input_held;  /* input() took less than offered: the rest is in held */
    uint8_t input_last;  /* the client ended the body: tell input() once held is empty */
    uint8_t input_done;  /* input() was told */
    uint8_t offering;    /* inside the producer's input() */
    uint64_t given;      /* body bytes handed over (queued: given - body_sent) */
    char *held;          /* request body bytes the producer has not taken yet */
    size_t held_len;
    int64_t begun; /* gio_now() when its HEADERS came: the -s deadline of an incomplete request */
    struct h2_stream *next; /* the session's list of streams */
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

struct h2 {
    nghttp2_session *ng;
    h1_conn_t f;
    void (*wake)(void *conn);
    h2_stream_t *all; /* every stream; the closed ones are freed once the batch is empty */
    void *big;          /* nghttp2's frame buffer, mapped (see mem_malloc) */
    size_t big_len;
    h2_block_t *blocks; /* frame bytes: the first block, kept while streams are open */
    h2_block_t *pend;   /* ... the one being filled */
    size_t mark;        /* ... where its bytes not yet on the batch begin */
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
    uint8_t pl[5]; /* ... and the first bytes of its payload */
    uint8_t pl_have;
    uint8_t preface; /* what is being read is the client's preface */
    uint8_t calm;    /* a flood ended the session (counted once) */
    uint8_t level;   /* its address's recent offences: budgets / 2^level (peer_allowance) */
    uint8_t goaway_sent;
    h2_bucket_t flood[H2_FLOOD_KINDS];
    uint32_t refuse; /* an error code: the frame just read ends the session */
    uint8_t data_hd; /* the input handed to nghttp2 ends with a DATA frame's header */
    int32_t closed_ids[H2_CLOSED_MEMORY]; /* streams the client closed, newest at closed_at */
    unsigned closed_at;
    int64_t frame_since; /* gio_now() at the first byte of the frame being read */
    int64_t started;     /* the session's start */
    uint8_t goaway;
    int fatal;
    int32_t max_id;          /* the highest stream a client's HEADERS opened */
    int32_t last_id;         /* after GOAWAY: the last stream that is answered */
    int32_t last_dispatched; /* the highest stream handed to the router */
};

static const ex_codec_t h2_codec;

int h2_preface(const char *p, size_t n)
{
    size_t k = n < H2_PREFACE_LEN ? n : H2_PREFACE_LEN;
    if (memcmp(p, H2_PREFACE, k))
        return -1;
    return n >= H2_PREFACE_LEN;
}

/*
 * A flood defence ends the session: counted once by kind, and remembered
 * against the client's address (site/peerlimits.h, peer_offence), so that
 * its next connections start with less and then are refused a while.
 */
static void flood_ended(h2_t *h, int kind)
{
    if (h->calm)
        return;
    h->calm = 1;
    site_t *site = h->f.site;
    site->stats.h2_flood[kind]++;
    site->stats.offences++;
    int what = kind == H2_FLOOD_CONTINUATION ? PEER_HEADERS
               : kind == H2_FLOOD_RESET_SENT || kind == H2_FLOOD_RAPID_RESET ? PEER_RESETS
                                                                              : PEER_FLOOD;
    peer_offence(site->limits, h->f.peer, what, gio_now(site->loop));
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
    flood_ended(h, kind);
    return -1;
}

/* Frame bytes go through the blocks: put what was copied since the mark on
   the batch, by reference. */
static int pend_flush(h2_t *h)
{
    h2_block_t *b = h->pend;
    if (!b || b->len == h->mark)
        return 0;
    if (gio_batch_add_buf(h->f.out, b->b + h->mark, b->len - h->mark, 0) < 0)
        return -1;
    h->mark = b->len;
    return 0;
}

/* Room in the current block, the next one when it is (nearly) full. */
static h2_block_t *pend_room(h2_t *h, size_t want)
{
    h2_block_t *b = h->pend;
    if (b && H2_PEND_CAP - b->len >= want)
        return b;
    if (pend_flush(h) < 0)
        return NULL;
    h2_block_t **next = b ? &b->next : &h->blocks;
    if (!*next) {
        if (!(*next = malloc(sizeof **next)))
            return NULL;
        (*next)->next = NULL;
    }
    (*next)->len = 0;
    h->mark = 0;
    return h->pend = *next;
}

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

/* The batch is empty: the blocks can be rewritten, or freed when nothing is
   open (an idle connection keeps none). */
static void pend_reset(h2_t *h, int keep)
{
    h->pend = NULL;
    h->mark = 0;
    if (keep)
        return;
    for (h2_block_t *b = h->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    h->blocks = NULL;
}

static void stream_free(h2_stream_t *s)
{
    exchange_t *ex = &s->ex;
    if (ex->job) /* the job runs on: it must not come back to us */
        ex->job->ex = NULL;
    if (ex->file)
        fcache_release(ex->file);
    enc_gzip_release(ex->gz);
    ex_end(ex);
    for (unsigned i = 0; i < s->nparts; i++)
        if (s->parts[i].owned)
            free((void *)s->parts[i].p);
    free(s->parts);
    s->h2->held_bytes -= s->held_len;
    free(s->held);
    s->h2->producers -= s->produced;
    s->h2->files -= s->has_file;
    for (h2_chunk_t *k = s->chunks, *next; k; k = next) {
        next = k->next;
        s->h2->hdr_bytes -= k->cap;
        free(k);
    }
    free(s);
}

static h2_stream_t *stream_of(exchange_t *ex)
{
    return (h2_stream_t *)ex;
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

/* The data provider: how much of the current part goes in the next frame;
   the bytes themselves go in send_data (NO_COPY). */
static ssize_t read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)ng, (void)id, (void)buf, (void)user;
    h2_stream_t *s = src->ptr;
    if (!s->body_left || (s->streamed && s->ended && s->cur >= s->nparts)) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return 0;
    }
    if (s->cur >= s->nparts) { /* a producer's next piece has not come */
        s->data_waits = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    h2_part_t *p = &s->parts[s->cur];
    size_t n = p->len < length ? (size_t)p->len : length;
    if (n > s->body_left)
        n = (size_t)s->body_left;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (n == s->body_left || (s->streamed && s->ended && s->cur + 1 == s->nparts && n == p->len))
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* A DATA frame: its header, then the part's bytes by reference. */
static int send_data(nghttp2_session *ng, nghttp2_frame *fr, const uint8_t *framehd,
                     size_t length, nghttp2_data_source *src, void *user)
{
    (void)ng;
    h2_t *h = user;
    h2_stream_t *s = src->ptr;
    h2_part_t *p = &s->parts[s->cur];
    if (fr->data.padlen || !pend_room(h, 9) || pend_add(h, framehd, 9) < 0 ||
        pend_flush(h) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    int r = p->p ? gio_batch_add_buf(h->f.out, p->p + p->off, length, 0)
                 : gio_batch_add_file(h->f.out, p->fd, p->off, length, 0);
    if (r < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    p->off += length, p->len -= length;
    s->body_left -= length;
    s->body_sent += length;
    if (!p->len)
        s->cur++;
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

/* Connection-specific fields have no place in HTTP/2 (RFC 9113 8.2.2). */
static int hop_by_hop(const char *n)
{
    return !strcmp(n, "connection") || !strcmp(n, "keep-alive") ||
           !strcmp(n, "transfer-encoding") || !strcmp(n, "upgrade");
}

/* HEADERS for the response, and DATA for a body of len bytes. */
static int submit(h2_stream_t *s, int status, const char *ctype, uint64_t len, time_t mtime)
{
    exchange_t *ex = &s->ex;
    site_t *site = ex->site;
    char st[8], cl[24], hsts[32], names[EX_FIELDS_MAX][48];
    nghttp2_nv nv[8 + EX_FIELDS_MAX];
    size_t n = 0;
    hbuf_t b = hb_init(st, sizeof st);
    hb_num(&b, (uint64_t)status), hb_str(&b);
    nv[n++] = NV(":status", st);
    nv[n++] = NV("server", "gatling/" GATLING_VERSION);
    nv[n++] = NV("date", ex->date ? ex->date : site_date(site)); /* a stored response's own */
    if (ctype)
        nv[n++] = NV("content-type", ctype);
    if (status != 304 && status != 204 && len != EX_LEN_STREAM) {
        b = hb_init(cl, sizeof cl), hb_num(&b, len), hb_str(&b);
        nv[n++] = NV("content-length", cl);
    }
    if (mtime >= 0) /* nghttp2 copies the value: the cache's string may be reused */
        nv[n++] = NV("last-modified", site_httpdate(site, mtime));
    if (ex->secure && site->cfg->hsts >= 0) {
        b = hb_init(hsts, sizeof hsts);
        hb_puts(&b, "max-age=");
        hb_num(&b, (uint64_t)site->cfg->hsts);
        hb_str(&b);
        nv[n++] = NV("strict-transport-security", hsts);
    }
    for (unsigned i = 0; i < ex->nfields; i++) {
        lower(names[i], ex->fields[i].name, sizeof names[i]);
        if (!hop_by_hop(names[i]))
            nv[n++] = NV(names[i], ex->fields[i].value);
    }
    ex->status = (uint16_t)status;
    if (len == EX_LEN_STREAM)
        s->streamed = 1;
    if (s->ex.producer && !s->produced) { /* drained() must reach it, its length known or not */
        s->produced = 1;
        s->h2->producers++;
    }
    ex->body_len = s->streamed ? 0 : len; /* streamed: counted as it comes */
    s->body_left = ex->head_only || status == 304 || status == 204 ? 0 : len;
    s->answered = 1;
    nghttp2_data_provider dp = {.source.ptr = s, .read_callback = read_body};
    int r = nghttp2_submit_response(s->h2->ng, s->id, nv, n, s->body_left ? &dp : NULL);
    return r == 0 ? 0 : -1;
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

/* A part came: the data provider that waited for it goes on. */
static void data_comes(h2_stream_t *s)
{
    if (s->data_waits && !s->closed) {
        s->data_waits = 0;
        nghttp2_session_resume_data(s->h2->ng, s->id);
    }
    wake(s);
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
        data_comes(s);
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

/* 103 Early Hints: an informational HEADERS frame (nghttp2 copies the fields). */
static int codec_hints(exchange_t *ex, const char *link)
{
    h2_stream_t *s = stream_of(ex);
    nghttp2_nv nv[] = {
        {(uint8_t *)":status", (uint8_t *)"103", 7, 3, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"link", (uint8_t *)(uintptr_t)link, 4, strlen(link), NGHTTP2_NV_FLAG_NONE}};
    int r = nghttp2_submit_headers(s->h2->ng, NGHTTP2_FLAG_NONE, s->id, NULL, nv, 2, NULL);
    return r == NGHTTP2_ERR_NOMEM ? -1 : 0;
}

static int codec_body_end(exchange_t *ex)
{
    h2_stream_t *s = stream_of(ex);
    s->ended = 1;
    data_comes(s);
    return 0;
}

static void codec_body_abort(exchange_t *ex)
{
    h2_stream_t *s = stream_of(ex);
    s->ended = 1;
    if (!s->closed)
        nghttp2_submit_rst_stream(s->h2->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
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
        nghttp2_session_consume(s->h2->ng, s->id, k);
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
        nghttp2_session_consume(h->ng, s->id, n - k);
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_ENHANCE_YOUR_CALM);
        return;
    }
    s->held = nh;
    memcpy(s->held + s->held_len, p + k, n - k);
    s->held_len += n - k;
    h->held_bytes += n - k;
    if (!s->input_held) /* the producer was ready again within its call */
        offer_held(s);
}

/* The connection holds too many request fields: the stream is refused
   (the client may send it again), not answered. */
static void refuse(h2_stream_t *s)
{
    if (s->refused)
        return;
    s->refused = 1;
    s->h2->f.site->stats.h2_refused++;
    nghttp2_submit_rst_stream(s->h2->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
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
    h2_chunk_t *k = s->chunks;
    if (k && k->cap - k->len >= n) {
        k->len += n;
        return k->b + k->len - n;
    }
    int own = n > H2_CHUNK / 2;
    size_t cap = own ? n : !k ? H2_CHUNK : k->cap < H2_CHUNK_MAX / 2 ? 2 * k->cap : H2_CHUNK_MAX;
    if (s->h2->hdr_bytes + cap > H2_CONN_HDR_CAP || !(k = malloc(sizeof *k + cap))) {
        refuse(s);
        return NULL;
    }
    k->len = n, k->cap = cap;
    s->h2->hdr_bytes += cap;
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

static uint32_t be31(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]) & 0x7fffffff;
}

/* Did the client close stream id (END_STREAM or RST_STREAM), lately? */
static int client_closed(const h2_t *h, int32_t id)
{
    for (unsigned i = 0; i < H2_CLOSED_MEMORY; i++)
        if (h->closed_ids[i] == id)
            return 1;
    return 0;
}

/*
 * RFC 9113 5.1.1: a HEADERS that would open a stream numbered below one
 * opened already is a connection error; 5.1: DATA on a stream the client
 * has closed is STREAM_CLOSED (check_data).  With SETTINGS_NO_RFC7540_PRIORITIES
 * nghttp2 1.52 keeps no closed streams, so it ignores both once it has
 * forgotten the stream: we remember the last H2_CLOSED_MEMORY streams the
 * client closed.  A stream we reset is not among them: the client's DATA
 * may be in flight.
 */
static int on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *user)
{
    h2_t *h = user;
    if (!(hd->stream_id & 1))
        return 0;
    if (hd->type != NGHTTP2_HEADERS)
        return 0;
    if (hd->stream_id <= h->max_id && !nghttp2_session_find_stream(ng, hd->stream_id))
        nghttp2_session_terminate_session(ng, NGHTTP2_PROTOCOL_ERROR);
    else if (hd->stream_id > h->max_id)
        h->max_id = hd->stream_id;
    return 0;
}

/* The header of a DATA frame has been handed to nghttp2 (which calls no
   callback for DATA it ignores): on a stream the client closed, the
   session ends (on_begin_frame). */
static void check_data(h2_t *h)
{
    int32_t id = (int32_t)be31(h->hd + 5);
    if ((id & 1) && id <= h->max_id && !nghttp2_session_find_stream(h->ng, id) &&
        client_closed(h, id))
        h->refuse = NGHTTP2_STREAM_CLOSED;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *fr, void *user)
{
    h2_t *h = user;
    if (fr->hd.type != NGHTTP2_HEADERS || fr->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    /* a stream's block is large (its header list): not more than the peer may open */
    h2_stream_t *s = malloc(sizeof *s);
    if (!s)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    memset(s, 0, offsetof(h2_stream_t, req));
    memset(&s->req, 0, offsetof(http_request_t, headers));
    s->h2 = h;
    s->id = fr->hd.stream_id;
    h1_exchange_init(&s->ex, &h->f, &h2_codec, s);
    s->ex.req = &s->req;
    s->req.version = 20;
    s->begun = gio_now(h->f.site->loop);
    h->open++;
    h->pending++;
    s->next = h->all;
    h->all = s;
    nghttp2_session_set_stream_user_data(ng, s->id, s);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *fr, const uint8_t *name,
                     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    (void)flags, (void)user;
    h2_stream_t *s = nghttp2_session_get_stream_user_data(ng, fr->hd.stream_id);
    /* trailers are not the request's fields (nor are they used) */
    if (!s || fr->hd.type != NGHTTP2_HEADERS || fr->headers.cat != NGHTTP2_HCAT_REQUEST ||
        s->bad || s->refused)
        return 0;
    http_request_t *req = &s->req;
    int host = (nlen == 10 && !memcmp(name, ":authority", 10)) ||
               (nlen == 4 && !memcmp(name, "host", 4));
    if (host && http_header(req, "Host")) /* RFC 9113 8.3.1: :authority first, one Host */
        return 0;
    const char *v = keep(s, value, vlen);
    if (!v)
        return 0;
    http_str_t val = {v, vlen};
    if (nlen == 7 && !memcmp(name, ":method", 7))
        req->method = val;
    else if (nlen == 5 && !memcmp(name, ":path", 5))
        req->target = val;
    else if (name[0] == ':' && !(nlen == 10 && !memcmp(name, ":authority", 10)))
        return 0; /* :scheme; nghttp2 checked the set */
    else if (req->nheaders == HTTP_MAX_HEADERS)
        s->bad = 1;
    else {
        const char *n = name[0] == ':' ? "host" : keep(s, name, nlen);
        if (n)
            req->headers[req->nheaders++] = (http_header_t){{n, name[0] == ':' ? 4 : nlen}, val};
    }
    return 0;
}

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
        nghttp2_session_terminate_session(h->ng, NGHTTP2_ENHANCE_YOUR_CALM);
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
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
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
        nghttp2_submit_rst_stream(s->h2->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
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
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
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
        static const nghttp2_nv cont[] = {
            {(uint8_t *)":status", (uint8_t *)"100", 7, 3, NGHTTP2_NV_FLAG_NONE}};
        nghttp2_submit_headers(h->ng, NGHTTP2_FLAG_NONE, s->id, NULL, cont, 1, NULL);
    }
    if (s->early)
        dispatch(h, s);
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *p,
                         size_t n, void *user)
{
    (void)flags;
    h2_t *h = user;
    h->body_bytes += n;
    h2_stream_t *s = nghttp2_session_get_stream_user_data(ng, id);
    if (s && s->early) {
        body_to_producer(s, p, n);
        return 0;
    }
    nghttp2_session_consume(ng, id, n); /* dropped: the window opens at once */
    if (s && s->in_body && (s->body_got += n) > H1_BODY_MAX)
        answer_early(h, s, 413);
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *fr, void *user)
{
    h2_t *h = user;
    h2_stream_t *s = nghttp2_session_get_stream_user_data(ng, fr->hd.stream_id);
    if (s && fr->hd.type == NGHTTP2_RST_STREAM)
        s->peer_ended = 1;
    if ((fr->hd.type != NGHTTP2_HEADERS && fr->hd.type != NGHTTP2_DATA) || !s)
        return 0;
    if (fr->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        s->peer_ended = 1;
        if (s->early) { /* the producer hears the end once it took the rest */
            body_ends(h, s);
            s->input_last = 1;
            offer_held(s);
        }
    }
    if (s->dispatched || s->deferred || s->refused)
        return 0;
    if (!(fr->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        if (fr->hd.type == NGHTTP2_HEADERS && !s->in_body)
            body_begins(h, s);
        return 0;
    }
    body_ends(h, s);
    if (h->goaway && s->id > h->last_id) { /* read with the one that made us say GOAWAY */
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
    } else if (h->files >= H2_FILES_MAX) { /* answered when a file is let go (sweep) */
        s->deferred = 1;
        h->pending--;
        h->deferred++;
        h->f.site->stats.h2_file_waits++;
    } else {
        dispatch(h, s); /* the request body was dropped, as HTTP/1.1 drops it */
    }
    return 0;
}

/* The stream is over: log it; its memory waits for the batch to drain. */
static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
    (void)code;
    h2_t *h = user;
    h2_stream_t *s = nghttp2_session_get_stream_user_data(ng, id);
    if (!s)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    if (s->peer_ended) {
        h->closed_ids[h->closed_at] = id;
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
    return 0;
}

/*
 * Count the sessions we end with an error.  The streams we reset are
 * bounded ("MadeYouReset": frames that make us reset a stream cost us its
 * work, not the client), until a GOAWAY has gone: then nghttp2 refuses the
 * streams the client opens meanwhile, which is no fault of the client's.
 */
static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *fr, void *user)
{
    h2_t *h = user;
    if (fr->hd.type == NGHTTP2_RST_STREAM && !h->goaway_sent &&
        flood_take(h, H2_FLOOD_RESET_SENT) < 0)
        nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
    /* a response complete while its request is not (answer_early, a
       producer that did not want the whole body): end the stream */
    if ((fr->hd.type == NGHTTP2_DATA || fr->hd.type == NGHTTP2_HEADERS) &&
        (fr->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        nghttp2_session_get_stream_remote_close(ng, fr->hd.stream_id) == 0)
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, fr->hd.stream_id, NGHTTP2_NO_ERROR);
    if (fr->hd.type != NGHTTP2_GOAWAY)
        return 0;
    h->goaway_sent = 1;
    if (fr->goaway.error_code != NGHTTP2_NO_ERROR)
        h->f.site->stats.h2_errors++;
    return 0;
}

/* A DATA frame carries no more than one TLS record holds. */
static ssize_t frame_len(nghttp2_session *ng, uint8_t type, int32_t id, int32_t swin,
                         int32_t cwin, uint32_t rmax, void *user)
{
    (void)ng, (void)type, (void)id, (void)user;
    ssize_t n = swin < cwin ? swin : cwin;
    if (n > (ssize_t)rmax)
        n = rmax;
    return n > H2_DATA_MAX ? H2_DATA_MAX : n;
}

static nghttp2_session_callbacks *callbacks(void)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb))
        return NULL;
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_send_data_callback(cb, send_data);
    nghttp2_session_callbacks_set_data_source_read_length_callback(cb, frame_len);
    return cb;
}

/*
 * The defences nghttp2 has: a header list no larger than an HTTP/1.1 head
 * (HPACK bombs; CONTINUATION floods are bounded by nghttp2's own cap on
 * CONTINUATION frames, CVE-2024-28182, in Debian's 1.52.0-1+deb12u3), a
 * rate of stream resets past which the session ends (rapid reset,
 * CVE-2023-44487, fixed in the same build; ours, H2_FLOOD_RAPID_RESET, is
 * tighter and answers ENHANCE_YOUR_CALM where nghttp2 says INTERNAL_ERROR),
 * bounded SETTINGS entries and queued PING/SETTINGS acks (a client that
 * does not read them; one that does meets flood_limit first).
 */
static nghttp2_option *options(void)
{
    nghttp2_option *o;
    if (nghttp2_option_new(&o))
        return NULL;
    nghttp2_option_set_stream_reset_rate_limit(o, 2 * H2_RESET_BURST, 2 * H2_RESET_RATE);
    nghttp2_option_set_max_settings(o, H2_MAX_SETTINGS);
    nghttp2_option_set_max_outbound_ack(o, 1000);
    nghttp2_option_set_max_continuations(o, 8);
    nghttp2_option_set_builtin_recv_extension_type(o, NGHTTP2_PRIORITY_UPDATE);
    /* request bodies are consumed as they are taken: a producer's by what
       it takes (back-pressure), a dropped one at once (on_data_chunk) */
    nghttp2_option_set_no_auto_window_update(o, 1);
    return o;
}

/* nghttp2 allocates a frame buffer of 16 KiB for the session's life, though
   an idle connection writes only its first bytes (SETTINGS, acks) and DATA
   goes out by reference: it is mapped instead of malloc()ed, so that its
   pages never written take no memory (12 KiB of an idle connection's 40). */
#define H2_BIG 16384

static void *mem_malloc(size_t n, void *user)
{
    h2_t *h = user;
    if (n >= H2_BIG && !h->big) {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            h->big = p, h->big_len = n;
            return p;
        }
    }
    return malloc(n);
}

static void mem_free(void *p, void *user)
{
    h2_t *h = user;
    if (p && p == h->big) {
        munmap(p, h->big_len);
        h->big = NULL;
        return;
    }
    free(p);
}

static void *mem_calloc(size_t k, size_t n, void *user)
{
    (void)user;
    return calloc(k, n);
}

static void *mem_realloc(void *p, size_t n, void *user)
{
    h2_t *h = user;
    if (!p) /* (how nghttp2 1.52 allocates the frame buffer) */
        return mem_malloc(n, h);
    if (p != h->big)
        return realloc(p, n);
    void *q = malloc(n);
    if (q) {
        memcpy(q, p, n < h->big_len ? n : h->big_len);
        mem_free(p, h);
    }
    return q;
}

h2_t *h2_new(const h1_conn_t *f, void (*wake)(void *conn))
{
    h2_t *h = calloc(1, sizeof *h);
    nghttp2_session_callbacks *cb = callbacks();
    nghttp2_option *o = options();
    nghttp2_mem mem = {h, mem_malloc, mem_free, mem_calloc, mem_realloc};
    if (!h || !cb || !o || nghttp2_session_server_new3(&h->ng, cb, h, o, &mem)) {
        nghttp2_session_callbacks_del(cb);
        nghttp2_option_del(o);
        free(h);
        return NULL;
    }
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(o);
    h->f = *f;
    h->wake = wake;
    h->started = h->frame_since = gio_now(f->site->loop);
    h->frame_left = H2_PREFACE_LEN; /* the client's preface comes first */
    h->preface = 1;
    /* an address a flood defence ended lately gets less (--flood-memory) */
    if ((h->level = (uint8_t)peer_allowance(f->site->limits, f->peer, h->started)))
        f->site->stats.offender_reduced++;
    for (int k = 0; k < H2_FLOOD_KINDS; k++)
        h->flood[k] =
            (h2_bucket_t){(uint64_t)peer_budget(flood_limit[k].burst, h->level) * 1000, h->started};
    nghttp2_settings_entry set[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, peer_budget(H2_MAX_STREAMS, h->level)},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, H2_HDR_CAP},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        /* RFC 9218: urgency and incremental (the priority field and
           PRIORITY_UPDATE) order the streams' DATA, as nghttp2 schedules it;
           the checks of RFC 7540 priorities it drops are ours (track_frames,
           on_begin_frame) */
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    if (nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, set, sizeof set / sizeof set[0]) ||
        nghttp2_session_set_local_window_size(h->ng, NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW)) {
        h2_free(h);
        return NULL;
    }
    return h;
}

void h2_free(h2_t *h)
{
    if (!h)
        return;
    nghttp2_session_del(h->ng); /* calls no stream-close callbacks */
    for (h2_stream_t *s = h->all, *next; s; s = next) {
        next = s->next;
        stream_free(s);
    }
    pend_reset(h, 0);
    free(h);
}

/*
 * A frame has been read whole (h->hd, and h->pl its first payload bytes),
 * not yet by nghttp2: the checks nghttp2 1.52 does not make, which set
 * h->refuse.  A PRIORITY frame (RFC 9113 6.3) on stream 0, or one making its
 * stream depend on itself (5.3.1), is a PROTOCOL_ERROR that nghttp2 no
 * longer sees with RFC 7540 priorities off (it drops their payload unread);
 * and the floods.
 */
static void frame_done(h2_t *h)
{
    uint32_t len = (uint32_t)h->hd[0] << 16 | h->hd[1] << 8 | h->hd[2];
    uint32_t id = be31(h->hd + 5);
    uint8_t type = h->hd[3], flags = h->hd[4];
    int kind = -1;
    if (h->preface) {
        h->preface = 0;
        return;
    }
    switch (type) {
    case NGHTTP2_DATA: { /* with padding only, it is empty too */
        uint32_t pad = flags & NGHTTP2_FLAG_PADDED ? (len ? h->pl[0] + 1u : 1u) : 0;
        if (len <= pad && !(flags & NGHTTP2_FLAG_END_STREAM))
            kind = H2_FLOOD_EMPTY_DATA;
        break;
    }
    case NGHTTP2_PRIORITY:
        if (len == 5 && (id == 0 || be31(h->pl) == id)) { /* else nghttp2's FRAME_SIZE_ERROR */
            h->refuse = NGHTTP2_PROTOCOL_ERROR;
            return;
        }
        kind = H2_FLOOD_OTHER;
        break;
    case NGHTTP2_SETTINGS:
        if (len / 6 > H2_MAX_SETTINGS) /* nghttp2 ends it: count it here */
            flood_ended(h, H2_FLOOD_SETTINGS);
        kind = flags & NGHTTP2_FLAG_ACK ? -1 : H2_FLOOD_SETTINGS;
        break;
    case NGHTTP2_PING: kind = flags & NGHTTP2_FLAG_ACK ? -1 : H2_FLOOD_PING; break;
    case NGHTTP2_WINDOW_UPDATE:
        if (len == 4 && be31(h->pl) < H2_WINDOW_SMALL)
            kind = H2_FLOOD_WINDOW;
        break;
    case NGHTTP2_RST_STREAM: kind = H2_FLOOD_RAPID_RESET; break;
    case NGHTTP2_HEADERS:
    case NGHTTP2_PUSH_PROMISE:
    case NGHTTP2_GOAWAY:
    case NGHTTP2_CONTINUATION: break;
    default: kind = H2_FLOOD_OTHER; /* PRIORITY_UPDATE, and what we do not know */
    }
    if (kind >= 0 && flood_take(h, kind) < 0)
        h->refuse = NGHTTP2_ENHANCE_YOUR_CALM;
}

/*
 * Where the input stands in its frames: a frame begun and not yet complete
 * is part of a request head for the -s deadline (h2_head_since); a frame
 * read whole is checked (frame_done).  Returns how many of the n bytes to
 * hand nghttp2: all, or up to the end of the frame that ends the session
 * (h->refuse), or of a DATA frame's header (h2_recv's check_data).
 */
static size_t track_frames(h2_t *h, const uint8_t *p, size_t n)
{
    const uint8_t *start = p;
    while (n && !h->refuse) {
        if (h->frame_left) {
            size_t k = n < h->frame_left ? n : h->frame_left;
            for (size_t i = 0; i < k && h->pl_have < sizeof h->pl; i++)
                h->pl[h->pl_have++] = p[i];
            h->frame_left -= (uint32_t)k, p += k, n -= k;
            if (!h->frame_left)
                frame_done(h);
            continue;
        }
        if (!h->hd_have)
            h->frame_since = gio_now(h->f.site->loop);
        h->hd[h->hd_have] = *p;
        p++, n--;
        if (++h->hd_have == 9) {
            h->hd_have = 0;
            h->pl_have = 0;
            h->frame_left = (uint32_t)h->hd[0] << 16 | h->hd[1] << 8 | h->hd[2];
            if (!h->frame_left)
                frame_done(h);
            if (h->hd[3] == NGHTTP2_DATA) {
                h->data_hd = 1; /* h2_recv calls check_data once nghttp2 has it */
                break;
            }
        }
    }
    return (size_t)(p - start);
}

int h2_recv(h2_t *h, const uint8_t *p, size_t n)
{
    while (n && !h->fatal) {
        size_t k = track_frames(h, p, n);
        ssize_t r = nghttp2_session_mem_recv(h->ng, p, k);
        if (r >= 0 && h->data_hd)
            check_data(h);
        h->data_hd = 0;
        if (r >= 0 && h->refuse) {
            nghttp2_session_terminate_session(h->ng, (uint32_t)h->refuse);
            r = -1;
        }
        if (r == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS && !h->calm) {
            flood_ended(h, H2_FLOOD_CONTINUATION); /* nghttp2 says so to no one: we do */
            nghttp2_session_terminate_session(h->ng, NGHTTP2_ENHANCE_YOUR_CALM);
        }
        if (r < 0) {
            /* a protocol error: nghttp2 queued GOAWAY where it could */
            h->fatal = 1;
            return -1;
        }
        p += k, n -= k;
    }
    return h->fatal ? -1 : 0;
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
    while (h->deferred && h->files < H2_FILES_MAX) { /* the oldest deferred stream next */
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

long h2_fill(h2_t *h, size_t max)
{
    if (!gio_batch_done(h->f.out))
        return 0;
    sweep(h); /* (the batch keeps counting bytes_sent: conn.c's -B window reads it) */
    pend_reset(h, 1);
    while (h->f.out->bytes_left + (h->pend ? h->pend->len - h->mark : 0) < max) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(h->ng, &p);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        if (pend_add(h, p, (size_t)n) < 0)
            return -1;
    }
    if (pend_flush(h) < 0)
        return -1;
    if (!h->f.out->bytes_left && !h->all)
        pend_reset(h, 0);
    drained(h);
    return (long)h->f.out->bytes_left;
}

int h2_want_read(const h2_t *h)
{
    return !h->fatal && nghttp2_session_want_read(h->ng);
}

int h2_done(const h2_t *h)
{
    return h->fatal ? !nghttp2_session_want_write(h->ng)
                    : !nghttp2_session_want_read(h->ng) && !nghttp2_session_want_write(h->ng);
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
    if ((h->hd_have || h->frame_left) && (!t || h->frame_since < t))
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
    h->last_id = nghttp2_session_get_last_proc_stream_id(h->ng);
    nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE, h->last_id, NGHTTP2_NO_ERROR, NULL, 0);
}

size_t h2_expire(h2_t *h, char *buf, size_t cap)
{
    if (cap < 17 || !gio_batch_done(h->f.out) || (h->pend && h->pend->len != h->mark))
        return 0; /* a frame is on its way: more bytes would land inside it */
    static const char hd[9] = {0, 0, 8, NGHTTP2_GOAWAY, 0, 0, 0, 0, 0};
    uint32_t id = (uint32_t)h->last_dispatched;
    memcpy(buf, hd, sizeof hd);
    for (int i = 0; i < 4; i++) {
        buf[9 + i] = (char)(id >> (24 - 8 * i));
        buf[13 + i] = 0; /* NO_ERROR: the client may send the stream again */
    }
    return 17;
}
