/* The HTTP/2 codec's streams, exchanges and DATA scheduling: see h2_int.h
   (what is alike over HTTP/3 is stream_body.c's: this file gives it h2_sb_ops). */
#include "h2_int.h"
#include "codec/admit.h"
#include "http/response.h"
#include "site/encoding.h"
#include "site/peerlimits.h"

#include <stdlib.h>
#include <string.h>

static const ex_codec_t h2_codec;
static const sb_ops_t h2_sb_ops;
SB_CHECK_LAYOUT(h2_stream_t);

/* ---- streams ---- */

static void stream_release(h2_stream_t *s)
{
    h2_t *h = s->h2;
    sb_release(&s->sb);
    h->producers -= s->produced;
    h->files -= s->has_file;
}

/* The process's spare streams (stream_body.h): its one event loop's, and
   that loop's timer that frees them once none was taken for a while (and
   h2_out.c's spare block with them). */
static sb_pool_t spares = {.max = H2_POOL_MAX, .linger = 1};
static int64_t spares_taken_at; /* gio_now() of the last stream begun */
static gio_timer_t spares_timer;

static void spares_linger(gio_loop_t *l, void *arg)
{
    (void)arg;
    int64_t quiet = spares_taken_at + H2_SPARES_LINGER;
    if (!spares.nspare || gio_now(l) >= quiet) {
        sb_pool_empty(&spares);
        h2_pend_spare_free();
    } else {
        gio_timer_set(l, &spares_timer, quiet, spares_linger, NULL);
    }
}

void h2_stream_free(h2_stream_t *s)
{
    gio_loop_t *l = s->h2->f.site->loop;
    stream_release(s);
    sb_pool_give(&spares, (sb_stream_t *)s);
    if (spares.nspare && !gio_timer_armed(&spares_timer))
        gio_timer_set(l, &spares_timer, spares_taken_at + H2_SPARES_LINGER, spares_linger, NULL);
}

/* A stream for id (a spare one, or new) at the list's end, or NULL on ENOMEM. */
h2_stream_t *h2_stream_new(h2_t *h, int32_t id)
{
    h2_stream_t *s = (h2_stream_t *)sb_pool_take(&spares, sizeof *s, offsetof(h2_stream_t, req));
    if (!s)
        return NULL;
    s->sb.ops = &h2_sb_ops;
    s->sb.c = &h->sc;
    s->h2 = h;
    s->id = id;
    s->urgency = 3; /* RFC 9218 4.1's default */
    s->clen = -1;
    s->send_win = h->peer_window;
    s->recv_win = H2_WINDOW;
    codec_exchange_init(&s->ex, &h->f, &h2_codec, s);
    s->ex.req = &s->req;
    s->req.version = 20;
    s->begun = spares_taken_at = gio_now(h->f.site->loop);
    h->open++;
    h->pending++;
    if (h->fresh < H2_FRESH_MAX) /* a gRPC client opens 5 bytes on a new stream */
        h->fresh += 2;
    s->next = h->all;
    h->all = s;
    return s;
}

static h2_stream_t *stream_of(exchange_t *ex)
{
    return (h2_stream_t *)ex;
}

/* The open stream id, or NULL. */
h2_stream_t *h2_find(const h2_t *h, int32_t id)
{
    for (h2_stream_t *s = h->all; s; s = s->next)
        if (s->id == id)
            return s->sb.closed ? NULL : s;
    return NULL;
}

/* Did the client close stream id (END_STREAM or RST_STREAM), lately? */
int h2_client_closed(const h2_t *h, int32_t id)
{
    for (unsigned i = 0; i < H2_CLOSED_MEMORY; i++)
        if (h->closed_ids[i] == id)
            return 1;
    return 0;
}

static void body_ends(h2_t *h, h2_stream_t *s);

/* The stream is over: log it; its memory waits for the batch to drain. */
void h2_stream_close(h2_t *h, h2_stream_t *s)
{
    if (s->sb.closed)
        return;
    if (s->peer_ended) {
        h->closed_ids[h->closed_at] = s->id;
        h->closed_at = (h->closed_at + 1) % H2_CLOSED_MEMORY;
    }
    h->open--;
    h->closed_owed += s->owed; /* its late WINDOW_UPDATEs */
    s->owed = 0;
    body_ends(h, s);
    if (!s->dispatched && !s->deferred)
        h->pending--;
    if (s->deferred && !s->dispatched)
        h->deferred--;
    if (s->dispatched)
        admit_log(&s->sb);
    if (s->ex.job) {
        s->ex.job->ex = NULL;
        s->ex.job = NULL;
    }
    s->sb.closed = 1;
}

/* RST_STREAM for stream id (s: it, if open, and it closes); fault: the
   client's frames made us reset it, counted (h2_rst_stream). */
static void rst_out(h2_t *h, h2_stream_t *s, int32_t id, uint32_t code, int fault)
{
    if (h->fatal)
        return;
    uint8_t *p = h2_out_frame(h, 4, FR_RST_STREAM, 0, (uint32_t)id);
    if (!p) {
        h->fatal = 1;
        return;
    }
    h2f_put32(p, code);
    if (s)
        h2_stream_close(h, s);
    if (fault && !h->goaway && !h->goaway_sent)
        h2_flood_take(h, H2_FLOOD_RESET_SENT);
}

/*
 * RST_STREAM for stream id (s: it, if open, and it closes).  The streams we
 * reset are bounded ("MadeYouReset": frames that make us reset a stream
 * cost us its work, not the client), until we have said GOAWAY: then the
 * streams the client opens meanwhile are refused, no fault of its own.
 * NO_ERROR (a response complete before its request, RFC 9113 8.1) is none
 * of the client's doing: not counted.
 */
void h2_rst_stream(h2_t *h, h2_stream_t *s, int32_t id, uint32_t code)
{
    rst_out(h, s, id, code, code != E_NO_ERROR);
}

/* Our END_STREAM is written: the stream closes if the client's side has
   ended, else (a response complete while its request is not: 413, a
   producer that did not want the whole body) RST_STREAM NO_ERROR ends it
   (RFC 9113 8.1). */
static void local_end(h2_t *h, h2_stream_t *s)
{
    s->local_ended = 1;
    if (s->remote_ended)
        h2_stream_close(h, s);
    else
        h2_rst_stream(h, s, s->id, E_NO_ERROR);
}

/* ---- responses ---- */

static int encoder(h2_t *h)
{
    if (h->enc)
        return 0;
    if (!(h->enc = malloc(sizeof *h->enc)))
        return -1;
    h2e_init(h->enc, h->peer_table);
    return 0;
}

/* A header block that does not fit one frame: encoded aside, then HEADERS
   and CONTINUATIONs of at most H2_FRAME_MAX (the least the client takes). */
static int out_headers_long(h2_t *h, int32_t id, const h2_field_t *nv, size_t n, uint8_t end,
                            size_t bound)
{
    uint8_t *tmp = malloc(bound), hd[9];
    long r = tmp ? h2e_encode(h->enc, tmp, bound, nv, n) : -1;
    for (size_t off = 0; r >= 0;) {
        size_t k = (size_t)r - off < H2_FRAME_MAX ? (size_t)r - off : H2_FRAME_MAX;
        uint8_t fl = (uint8_t)((off + k == (size_t)r ? FL_END_HEADERS : 0) | (off ? 0 : end));
        h2f_put_hd(hd, k, off ? FR_CONTINUATION : FR_HEADERS, fl, (uint32_t)id);
        if (h2_pend_add(h, hd, 9) < 0 || h2_pend_add(h, tmp + off, k) < 0)
            r = -1;
        if ((off += k) == (size_t)r)
            break;
    }
    free(tmp);
    return r < 0 ? -1 : 0;
}

/* A HEADERS frame of the fields nv[0..n) (end: with END_STREAM), HPACK
   writing straight into the block. */
static int out_headers(h2_t *h, int32_t id, const h2_field_t *nv, size_t n, uint8_t end)
{
    if (encoder(h) < 0)
        return -1;
    size_t bound = h2e_bound(nv, n);
    if (bound > H2_FRAME_MAX)
        return out_headers_long(h, id, nv, n, end, bound);
    h2_block_t *b = h2_pend_room(h, 9 + bound);
    if (!b)
        return -1;
    uint8_t *p = (uint8_t *)b->b + b->len;
    long r = h2e_encode(h->enc, p + 9, bound, nv, n);
    if (r < 0)
        return -1;
    h2f_put_hd(p, (size_t)r, FR_HEADERS, (uint8_t)(FL_END_HEADERS | end), (uint32_t)id);
    b->len += 9 + (size_t)r;
    return 0;
}

/* HEADERS for the response (encoded now: the strings need not outlive the
   call), and DATA for a body of len bytes to come (h2_fill). */
static int submit(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    h2_stream_t *s = stream_of(ex);
    h2_t *h = s->h2;
    sb_head_strs_t strs;
    if (s->answered)
        return -1;
    size_t n = sb_head_fields(ex, status, ctype, len, mtime, NULL, &strs);
    const h2_field_t *nv = strs.t.low;
    if (!n)
        return -1;
    ex->status = (uint16_t)status;
    if (len == EX_LEN_STREAM)
        s->sb.streamed = 1;
    if (s->ex.producer && !s->produced) { /* drained() must reach it, its length known or not */
        s->produced = 1;
        h->producers++;
    }
    ex->body_len = s->sb.streamed ? 0 : len; /* streamed: counted as it comes */
    s->sb.body_left = head_has_body(ex->head_only, status) ? len : 0;
    s->answered = 1;
    if (h->fatal)
        return 0;
    if (out_headers(h, s->id, nv, n, s->sb.body_left ? 0 : FL_END_STREAM) < 0)
        return -1;
    if (!s->sb.body_left)
        local_end(h, s);
    return 0;
}
/* An informational head (100, 103): a HEADERS frame without END_STREAM. */
static int op_info(exchange_t *ex, const http_field_t *f, size_t n)
{
    h2_stream_t *s = stream_of(ex);
    if (s->answered || s->h2->fatal)
        return 0;
    return out_headers(s->h2, s->id, f, n, 0);
}

/* -R: this stream is the connection's last. */
static int op_last(exchange_t *ex)
{
    h2_t *h = stream_of(ex)->h2;
    if (h->goaway)
        return 0;
    h2_goaway(h);
    return 1;
}

static void op_turned_away(exchange_t *ex, int why)
{
    h2_t *h = stream_of(ex)->h2;
    if (why == SB_NO_ROOM) {
        h->f.site->stats.h2_refused++;
    } else if (why == SB_RATE_LIMITED) { /* -A: the connection ends with the streams it has */
        h->calm = 1;                     /* not a flood */
        h2_conn_error(h, E_ENHANCE_YOUR_CALM);
    }
}

static void op_log_facts(exchange_t *ex, alog_facts_t *out)
{
    codec_log_facts(out, ex, stream_of(ex)->h2->f.ssl, "h2");
}

static void op_reset(exchange_t *ex, int why)
{
    static const uint32_t code[] = {[SB_INTERNAL] = E_INTERNAL,
                                    [SB_CALM] = E_ENHANCE_YOUR_CALM,
                                    [SB_REFUSED] = E_REFUSED_STREAM};
    h2_stream_t *s = stream_of(ex);
    /* a producer that failed (a backend gone: INTERNAL) or a stream turned
       away (REFUSED) is no flood of the client's; a body it sends faster
       than its producer takes (CALM) is */
    rst_out(s->h2, s, s->id, code[why], why == SB_CALM);
}

static void op_consume(exchange_t *ex, size_t n)
{
    h2_stream_t *s = stream_of(ex);
    h2_consume(s->h2, s, n);
}

static void count_file(exchange_t *ex);

static const sb_ops_t h2_sb_ops = {
    .submit = submit,
    .reset = op_reset,
    .consume = op_consume,
    .routed = count_file,
    .last = op_last,
    .turned_away = op_turned_away,
    .info = op_info,
    .log_facts = op_log_facts,
    .version = "HTTP/2.0",
    .stats_kind = STATS_H2,
};

static const ex_codec_t h2_codec = {
    SB_CODEC_OPS,
    .hints = admit_codec_hints,
};

/* ---- request bodies ---- */

/* n bytes of DATA are done with (dropped, or taken by a producer): the
   windows open again, by WINDOW_UPDATE once half of one is used. */
void h2_consume(h2_t *h, h2_stream_t *s, size_t n)
{
    h->recv_unacked += (uint32_t)n;
    if (h->recv_unacked >= H2_CONN_WINDOW / 2) {
        h2_out_window(h, 0, h->recv_unacked);
        h->recv_win += (int32_t)h->recv_unacked;
        h->recv_unacked = 0;
    }
    if (!s || s->sb.closed || s->remote_ended)
        return;
    s->recv_unacked += (uint32_t)n;
    if (s->recv_unacked >= H2_WINDOW / 2) {
        h2_out_window(h, s->id, s->recv_unacked);
        s->recv_win += (int32_t)s->recv_unacked;
        s->recv_unacked = 0;
    }
}

/* ---- dispatch ---- */

/* A stream that holds a file counts towards H2_FILES_MAX until it is freed. */
static void count_file(exchange_t *ex)
{
    h2_stream_t *s = stream_of(ex);
    if (!s->has_file && s->ex.file) {
        s->has_file = 1;
        s->h2->files++;
    }
}

/* What every request goes through before it is answered (admit_request:
   the counts, -R, -A, 431, HEAD, the log line).  0: answer it. */
static int dispatch_begin(h2_t *h, h2_stream_t *s)
{
    h->pending -= !s->deferred;
    s->dispatched = 1;
    if (s->id > h->last_dispatched)
        h->last_dispatched = s->id;
    return admit_request(&s->sb, &s->req);
}

static void dispatch(h2_t *h, h2_stream_t *s)
{
    if (dispatch_begin(h, s) == 0)
        sb_dispatch(&s->sb);
}

/* A request answered before its body ended (413): the rest is not wanted
   (RFC 9113 8.1: RST_STREAM with NO_ERROR once the response is out). */
static void body_ends(h2_t *h, h2_stream_t *s)
{
    if (s->in_body)
        s->in_body = 0, h->bodies--;
}

/* A stream answered with status (413) before its request body has come:
   counted and logged as any request; the rest of the body is dropped. */
void h2_answer_early(h2_t *h, h2_stream_t *s, int status)
{
    body_ends(h, s);
    if (dispatch_begin(h, s) == 0) /* counted and logged as any request */
        ex_error(&s->ex, status, NULL, NULL);
}

/* A request head with a body to come: 413 at once for a Content-Length over
   the limit, and 100 (Continue) when asked for, as HTTP/1.1 answers. */
static void body_begins(h2_t *h, h2_stream_t *s)
{
    s->in_body = 1, h->bodies++;
    h->headed = 1;
    int r = admit_body(&s->sb);
    if (r == ADMIT_TOO_LARGE) {
        h2_answer_early(h, s, 413);
        return;
    }
    if (r == ADMIT_EARLY) { /* a producer takes it as it comes */
        s->produced = 1;
        h->producers++;
    }
    if (admit_continue(&s->sb) < 0)
        h->fatal = 1;
    if (s->sb.early)
        dispatch(h, s);
}

/*
 * A request whose head came in TLS early data, before the handshake
 * completed (codec_conn_t's early): marked (ex->early_data: Early-Data: 1
 * to a backend, the log's early_data); one safe to replay (codec_early_safe:
 * GET or HEAD, ended by its HEADERS, no Authorization) is answered at once
 * (0.5-RTT), any other 425 Too Early (RFC 8470 5.2: the client sends it
 * again after the handshake).  1 when it was answered.
 */
static int early_request(h2_t *h, h2_stream_t *s, int end)
{
    if (!h->f.early || !*h->f.early)
        return 0;
    status_counters_t *st = &h->f.site->stats;
    s->ex.early_data = 1;
    if (end && codec_early_safe(&s->ex)) {
        st->early_requests++;
        return 0;
    }
    st->early_425++;
    h2_answer_early(h, s, 425); /* a body to come is dropped, as after a 413 */
    return 1;
}

/*
 * A request's HEADERS or DATA has been read: END_STREAM ends its body (a
 * producer hears it once it took the rest); a complete request without a
 * producer is answered now (its body was dropped, as HTTP/1.1 drops it).
 */
void h2_request_progress(h2_t *h, h2_stream_t *s, int headers, int end)
{
    if (end) {
        s->peer_ended = s->remote_ended = 1;
        if (s->sb.early) {
            body_ends(h, s);
            s->sb.input_last = 1;
            sb_offer_held(&s->sb);
        }
        if (s->local_ended) {
            h2_stream_close(h, s);
            return;
        }
    }
    if (s->dispatched || s->deferred || s->sb.refused || s->sb.closed)
        return;
    if (headers && early_request(h, s, end))
        return;
    if (!end) {
        if (headers && !s->in_body)
            body_begins(h, s);
        return;
    }
    body_ends(h, s);
    if (h->goaway && s->id > h->last_id) { /* read with the one that made us say GOAWAY */
        h2_rst_stream(h, s, s->id, E_REFUSED_STREAM);
    } else if (h->files >= H2_FILES_MAX) { /* answered when a file is let go (sweep) */
        s->deferred = 1;
        h->pending--;
        h->deferred++;
        h->f.site->stats.h2_file_waits++;
    } else {
        dispatch(h, s);
    }
}

/* ---- frames out: DATA, by priority ---- */

/* Has the stream DATA to send now (END_STREAM alone needs no window)? */
static int ready(const h2_t *h, const h2_stream_t *s)
{
    if (s->sb.closed || !s->answered || s->local_ended)
        return 0;
    if (!s->sb.body_left || (s->sb.streamed && s->sb.ended && s->sb.cur >= s->sb.nparts))
        return 1;
    return s->sb.cur < s->sb.nparts && s->send_win > 0 && h->send_win > 0;
}

/*
 * RFC 9218 4: the lowest urgency first; within one, the streams that are not
 * incremental one at a time in the order they were opened, then the
 * incremental ones in turns (the one served longest ago first).
 */
h2_stream_t *h2_pick(const h2_t *h)
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
int h2_send_data(h2_t *h, h2_stream_t *s)
{
    uint8_t hd[9];
    if (!s->sb.body_left || s->sb.cur >= s->sb.nparts) { /* END_STREAM alone, or trailers */
        h2f_put_hd(hd, 0, FR_DATA, FL_END_STREAM, (uint32_t)s->id);
        if (s->sb.trailers ? out_headers(h, s->id, s->sb.trailers, s->sb.ntrailers,
                                         FL_END_STREAM) < 0
                           : h2_pend_add(h, hd, 9) < 0)
            return -1;
        local_end(h, s);
        return 0;
    }
    sb_part_t *p = &s->sb.parts[s->sb.cur];
    uint64_t n = p->len < s->sb.body_left ? p->len : s->sb.body_left;
    uint64_t max = h->f.ssl ? H2_DATA_TLS : H2_FRAME_MAX;
    max = (uint64_t)s->send_win < max ? (uint64_t)s->send_win : max;
    max = (uint64_t)h->send_win < max ? (uint64_t)h->send_win : max;
    n = n < max ? n : max;
    int end = !s->sb.trailers && (n == s->sb.body_left || (s->sb.streamed && s->sb.ended &&
                                                             s->sb.cur + 1 == s->sb.nparts &&
                                                             n == p->len));
    h2f_put_hd(hd, (size_t)n, FR_DATA, end ? FL_END_STREAM : 0, (uint32_t)s->id);
    if (h2_pend_add(h, hd, 9) < 0 || h2_pend_flush(h) < 0)
        return -1;
    int r = p->p ? gio_batch_add_buf(h->f.out, p->p + p->off, (size_t)n, 0)
                 : gio_batch_add_file(h->f.out, p->fd, p->off, n, 0);
    if (r < 0)
        return -1;
    p->off += n, p->len -= n;
    s->sb.body_left -= n;
    s->sb.body_sent += n;
    s->send_win -= (int64_t)n;
    h->send_win -= (int64_t)n;
    s->owed += n, h->owed += n; /* the WINDOW_UPDATEs that give it back are free */
    h->ping_free = 1;
    if (!p->len)
        s->sb.cur++;
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
    unsigned k = s->sb.cur;
    if (!k)
        return;
    for (unsigned i = 0; i < k; i++)
        if (s->sb.parts[i].owned)
            free((void *)s->sb.parts[i].p);
    memmove(s->sb.parts, s->sb.parts + k, (s->sb.nparts - k) * sizeof *s->sb.parts);
    s->sb.nparts -= k;
    s->sb.cur = 0;
}

/* The streams that closed while the batch held their bytes: free them now;
   the others' parts that were sent. */
void h2_sweep(h2_t *h)
{
    for (h2_stream_t **pp = &h->all, *s; (s = *pp);) {
        if (s->sb.closed) {
            *pp = s->next;
            h2_stream_free(s);
        } else {
            release_sent(s);
            pp = &s->next;
        }
    }
    while (h->deferred && h->files < H2_FILES_MAX && !h->fatal) { /* the oldest one next */
        h2_stream_t *first = NULL;
        for (h2_stream_t *s = h->all; s; s = s->next)
            if (s->deferred && !s->dispatched && !s->sb.closed && (!first || s->id < first->id))
                first = s;
        if (!first)
            break;
        h->deferred--;
        dispatch(h, first);
    }
}

/* Producers that stopped above EX_STREAM_HIGH hear that their queue fell
   below EX_STREAM_LOW (they may hand over more at once: the next fill). */
void h2_drained(h2_t *h)
{
    for (h2_stream_t *s = h->sc.drainers ? h->all : NULL; s; s = s->next)
        sb_drained(&s->sb);
}

/* Bytes written into the blocks and not yet on the batch. */
size_t h2_unflushed_bytes(const h2_t *h)
{
    size_t n = 0;
    for (h2_block_t *b = h->pend ? h->mblk : NULL;; b = b->next) {
        n += b->len - (b == h->mblk ? h->mark : 0);
        if (b == h->pend)
            return n;
    }
    return n;
}
