/* The HTTP/2 codec's output blocks, control frames and flood limits: see h2_int.h. */
#include "h2_int.h"
#include "http/hbuf.h"
#include "site/peerlimits.h"

#include <stdlib.h>
#include <string.h>

/*
 * The floods (stats.h's H2_FLOOD_*): per connection, a bucket of burst
 * frames refilled at rate a second; a frame finding it empty ends the
 * session with ENHANCE_YOUR_CALM, counted by kind.  A browser sends a few of
 * each per connection.  A WINDOW_UPDATE counts only when it buys nothing
 * (h2.c's window_bought): one that gives back what our DATA took is the
 * ordinary answer to it, however small and however many (a gRPC client
 * sends one per message it reads).  A PING is free once after our DATA (a
 * gRPC client measures the bandwidth with a PING after the DATA it reads:
 * grpc-go once per round trip while it reads); a client's RST_STREAM for a
 * stream open over a second is not counted (h2.c's old_stream); a stream
 * we reset for our own reasons (a response complete before its request, a
 * backend that failed, a stream turned away) is no client's flood.
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

/* ---- output: frames into the blocks, the blocks onto the batch ---- */

/* The process's spare block (its one loop's, as h2_stream.c's spare
   streams): the block of the last connection that went idle, for the next
   one that writes.  A connection idles between its requests when they come
   one at a time, and each then cost a malloc and a free of 16 KiB; one
   block at most is kept, and h2_pend_spare_free lets it go. */
static h2_block_t *spare_block;

static h2_block_t *block_new(void)
{
    h2_block_t *b = spare_block;
    spare_block = NULL;
    return b ? b : malloc(sizeof *b);
}

static void block_free(h2_block_t *b)
{
    if (spare_block)
        free(b);
    else
        spare_block = b;
}

void h2_pend_spare_free(void)
{
    free(spare_block);
    spare_block = NULL;
}

/* Room for want contiguous bytes (want <= H2_PEND_CAP): the current block,
   or the next one (kept from before, or new). */
h2_block_t *h2_pend_room(h2_t *h, size_t want)
{
    h2_block_t *b = h->pend;
    if (b && H2_PEND_CAP - b->len >= want)
        return b;
    h2_block_t **next = b ? &b->next : &h->blocks;
    if (!*next) {
        if (!(*next = block_new()))
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
int h2_pend_unflushed(const h2_t *h)
{
    return h->pend && (h->mblk != h->pend || h->pend->len != h->mark);
}

/* Put what was written since the mark on the batch, by reference. */
int h2_pend_flush(h2_t *h)
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
 * blocks the rewind waits for a later fill.  hold 0: nothing is open, and
 * an idle connection keeps no block.
 */
void h2_pend_rewind(h2_t *h, int hold)
{
    h2_block_t *b = h->pend;
    if (b && h->mblk != b)
        return;
    size_t n = b ? b->len - h->mark : 0;
    if (!n && !hold) {
        for (h2_block_t *k = h->blocks, *next; k; k = next) {
            next = k->next;
            block_free(k);
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
uint8_t *h2_out_frame(h2_t *h, size_t len, uint8_t type, uint8_t flags, uint32_t id)
{
    h2_block_t *b = h2_pend_room(h, 9 + len);
    if (!b)
        return NULL;
    uint8_t *p = (uint8_t *)b->b + b->len;
    h2f_put_hd(p, len, type, flags, id);
    b->len += 9 + len;
    return p + 9;
}

/* Bytes that need no contiguous room (a large header block's pieces). */
int h2_pend_add(h2_t *h, const uint8_t *p, size_t n)
{
    while (n) {
        h2_block_t *b = h2_pend_room(h, 1);
        if (!b)
            return -1;
        size_t k = H2_PEND_CAP - b->len < n ? H2_PEND_CAP - b->len : n;
        memcpy(b->b + b->len, p, k);
        b->len += k, p += k, n -= k;
    }
    return 0;
}

/* A GOAWAY frame: 0, or -1 (the session ends). */
static int out_goaway_frame(h2_t *h, int32_t last, uint32_t code)
{
    uint8_t *p = h2_out_frame(h, 8, FR_GOAWAY, 0, 0);
    if (!p) {
        h->fatal = 1;
        return -1;
    }
    h2f_put32(p, (uint32_t)last);
    h2f_put32(p + 4, code);
    return 0;
}

static void out_goaway(h2_t *h, int32_t last, uint32_t code)
{
    if (out_goaway_frame(h, last, code) < 0)
        return;
    h->goaway_sent = 1;
    if (code != E_NO_ERROR)
        h->f.site->stats.h2_errors++;
}

/* WINDOW_UPDATE: stream id (0: the connection) may send inc bytes more. */
void h2_out_window(h2_t *h, int32_t id, uint32_t inc)
{
    uint8_t *p = h2_out_frame(h, 4, FR_WINDOW_UPDATE, 0, (uint32_t)id);
    if (p)
        h2f_put32(p, inc);
    else
        h->fatal = 1;
}

/* A connection error (RFC 9113 5.4.1): GOAWAY with the code, nothing more
   read; the frames written before it still go. */
void h2_conn_error(h2_t *h, uint32_t code)
{
    if (h->fatal)
        return;
    out_goaway(h, h->max_id, code);
    h->fatal = 1;
}

/* The error log's line for a flood of kind that ended the session: n
   frames counted since the session began (bucket: its bucket ran out),
   or, without a bucket, n in one frame or header block past its cap. */
static void flood_log(h2_t *h, int kind, uint64_t n, int bucket)
{
    static const char *const what[H2_FLOOD_KINDS] = {
        [H2_FLOOD_SETTINGS] = "SETTINGS frames",
        [H2_FLOOD_PING] = "PING frames",
        [H2_FLOOD_WINDOW] = "WINDOW_UPDATEs beyond what our DATA took",
        [H2_FLOOD_EMPTY_DATA] = "empty DATA frames",
        [H2_FLOOD_OTHER] = "PRIORITY, PRIORITY_UPDATE or unknown frames",
        [H2_FLOOD_RESET_SENT] = "streams we had to reset",
        [H2_FLOOD_RAPID_RESET] = "RST_STREAM frames",
        [H2_FLOOD_CONTINUATION] = "CONTINUATION frames in one header block",
    };
    site_t *site = h->f.site;
    char d[200];
    hbuf_t b = hb_init(d, sizeof d);
    int entries = !bucket && kind == H2_FLOOD_SETTINGS;
    hb_puts(&b, entries ? "entries in one SETTINGS frame" : what[kind]);
    hb_puts(&b, ": ");
    hb_num(&b, n);
    hb_puts(&b, " in ");
    hb_num(&b, (uint64_t)(gio_now(site->loop) - h->started));
    hb_puts(&b, " ms");
    if (bucket) {
        hb_puts(&b, " (allowed ");
        hb_num(&b, peer_budget(flood_limit[kind].burst, h->level));
        hb_puts(&b, ", then ");
        hb_num(&b, peer_budget(flood_limit[kind].rate, h->level));
        hb_puts(&b, " a second)");
    }
    if (kind == H2_FLOOD_WINDOW) {
        hb_puts(&b, ", ");
        hb_num(&b, h->window_free);
        hb_puts(&b, " more gave back what it took");
    }
    const char *t = hb_str(&b); /* 200 bytes hold the longest */
    site_event(site, "HTTP/2 flood, GOAWAY ENHANCE_YOUR_CALM", h->f.peer, t ? t : what[kind]);
}

/*
 * Every flood defence that ends a connection ends it here: counted once by
 * kind (stats.h's H2_FLOOD_*), GOAWAY ENHANCE_YOUR_CALM, and remembered
 * against the client's address (site/peerlimits.h, peer_offence), so that
 * its next connections start with less and then are refused a while.
 */
void h2_flood_goaway(h2_t *h, int kind, uint64_t n, int bucket)
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
        flood_log(h, kind, n, bucket);
    }
    h2_conn_error(h, E_ENHANCE_YOUR_CALM);
}

/* One frame of a kind: 0, or -1 if that is past its limit (the session ends). */
int h2_flood_take(h2_t *h, int kind)
{
    h2_bucket_t *b = &h->flood[kind];
    int64_t now = gio_now(h->f.site->loop);
    uint64_t cap = (uint64_t)peer_budget(flood_limit[kind].burst, h->level) * 1000;
    if (now > b->at) { /* milli-frames: rate per second is rate per ms in them */
        uint64_t add = (uint64_t)(now - b->at) * peer_budget(flood_limit[kind].rate, h->level);
        b->milli = cap - b->milli < add ? cap : b->milli + add;
        b->at = now;
    }
    h->counted[kind]++;
    if (b->milli >= 1000) {
        b->milli -= 1000;
        return 0;
    }
    h2_flood_goaway(h, kind, h->counted[kind], 1);
    return -1;
}

/* The flood buckets full, scaled by the address's allowance (h->level). */
void h2_floods_init(h2_t *h, int64_t now)
{
    for (int k = 0; k < H2_FLOOD_KINDS; k++)
        h->flood[k] = (h2_bucket_t){(uint64_t)peer_budget(flood_limit[k].burst, h->level) * 1000,
                                    now};
}

/*
 * Shutting down (h2.h's h2_goaway, which streams call too, defined here):
 * RFC 9113 6.8's graceful shutdown, as h2o does it.  First GOAWAY 2^31-1,
 * NO_ERROR, and a PING: every stream the client sent before it read the
 * GOAWAY is still answered.  Its PING's answer comes after all of those
 * (h2_goaway_final, from on_ping): then GOAWAY with the last stream the
 * client opened, and streams after it are refused.  A client that never
 * answers the PING gets no more than one window of streams before that.
 */
void h2_goaway(h2_t *h)
{
    if (h->goaway)
        return;
    h->goaway = 1;
    h->last_id = INT32_MAX; /* until the second GOAWAY */
    if (h->fatal || out_goaway_frame(h, INT32_MAX, E_NO_ERROR) < 0)
        return;
    uint8_t *p = h2_out_frame(h, 8, FR_PING, 0, 0);
    if (!p)
        h->fatal = 1;
    else
        memcpy(p, H2_GOAWAY_PING, 8);
}

void h2_goaway_final(h2_t *h)
{
    if (!h->goaway || h->goaway_sent)
        return;
    h->last_id = h->max_id;
    if (!h->fatal)
        out_goaway(h, h->last_id, E_NO_ERROR);
}
