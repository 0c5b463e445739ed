/* The HTTP/2 codec's session: see h2.h, and h2_int.h for how it is cut. */
#include "h2.h"
#include "h2_int.h"
#include "codec/admit.h"
#include "site/peerlimits.h"

#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int h2_preface(const char *p, size_t n)
{
    size_t k = n < H2_PREFACE_LEN ? n : H2_PREFACE_LEN;
    if (memcmp(p, H2_PREFACE, k))
        return -1;
    return n >= H2_PREFACE_LEN;
}

/* A request field kept in the request (the checks are made): 0, or -1 for
   a malformed request (RFC 9113 8.3.1: a host beside :authority naming
   another, or a second host naming another). */
static int field_keep(h2_stream_t *s, const uint8_t *name, size_t nlen, const uint8_t *value,
                      size_t vlen)
{
    http_request_t *req = &s->req;
    int authority = nlen == 10 && !memcmp(name, ":authority", 10);
    int host = authority || (nlen == 4 && !memcmp(name, "host", 4));
    const http_str_t *had = host ? http_header(req, "Host") : NULL;
    if (had) /* :authority first, one Host: the same name, or malformed */
        return had->n == vlen && !strncasecmp(had->p, (const char *)value, vlen) ? 0 : -1;
    if (nlen == 8 && !memcmp(name, "priority", 8))
        h2f_priority(value, vlen, &s->urgency, &s->incremental);
    int method = nlen == 7 && !memcmp(name, ":method", 7);
    int path = nlen == 5 && !memcmp(name, ":path", 5);
    if (name[0] == ':' && !authority && !method && !path)
        return 0; /* :scheme, not kept */
    const char *v = admit_keep(&s->sb, value, vlen);
    if (!v)
        return 0;
    http_str_t val = {v, vlen};
    if (method)
        req->method = val;
    else if (path)
        req->target = val;
    else if (req->nheaders == HTTP_MAX_HEADERS)
        s->sb.bad = 1;
    else {
        const char *k = authority ? "host" : admit_keep(&s->sb, name, nlen);
        if (k)
            req->headers[req->nheaders++] = (http_header_t){{k, authority ? 4 : nlen}, val};
    }
    return 0;
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
    if (!in->fs.trailer && !s->sb.bad && !s->sb.refused && !s->sb.closed &&
        field_keep(s, nv->name, nv->namelen, nv->value, nv->valuelen) < 0)
        in->malformed = 1;
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
            h2_conn_error(h, E_COMPRESSION);
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
    if (!s || s->sb.closed)
        return;
    if (!in.malformed && !h2f_fields_complete(&in.fs))
        in.malformed = 1; /* 8.3.1 */
    if (!in.malformed && in.end && s->clen >= 0 && (uint64_t)s->clen != s->data_in)
        in.malformed = 1;
    if (in.malformed) {
        h2_rst_stream(h, s, s->id, E_PROTOCOL);
        return;
    }
    h2_request_progress(h, s, !in.fs.trailer, in.end);
}

/* Strip a frame's padding (and HEADERS' priority): the fragment, or -1. */
static int unpad(h2_t *h, const uint8_t **p, uint32_t *len, uint8_t flags, int prio)
{
    uint32_t pad = 0, skip = 0;
    if (flags & FL_PADDED) {
        if (*len < 1)
            return h2_conn_error(h, E_FRAME_SIZE), -1;
        pad = (*p)[0], skip = 1;
    }
    if (prio)
        skip += 5;
    if (skip > *len || pad > *len - skip)
        return h2_conn_error(h, E_PROTOCOL), -1;
    *p += skip;
    *len -= skip + pad;
    return 0;
}

/* A HEADERS frame on a stream that is not open (RFC 9113 5.1): a new
   request, or an error.  The stream its fields go to, or NULL. */
static h2_stream_t *headers_new(h2_t *h, int32_t id)
{
    if (id <= h->max_id) { /* 5.1.1: ids only grow; a closed stream takes none */
        h2_conn_error(h, h2_client_closed(h, id) ? E_STREAM_CLOSED : E_PROTOCOL);
        return NULL;
    }
    if (h->goaway && !h->goaway_sent &&
        ++h->after_goaway > peer_budget(H2_MAX_STREAMS, h->level))
        h2_goaway_final(h); /* its PING unanswered: a window's worth is enough */
    h->max_id = id;
    if ((h->goaway && id > h->last_id) || h->open >= peer_budget(H2_MAX_STREAMS, h->level)) {
        /* sent with the one that made us say GOAWAY, or past 5.1.2's cap */
        h2_rst_stream(h, NULL, id, E_REFUSED_STREAM);
        return NULL;
    }
    h2_stream_t *s = h2_stream_new(h, id);
    if (!s)
        h2_rst_stream(h, NULL, id, E_REFUSED_STREAM);
    return s;
}

static void on_headers(h2_t *h, const uint8_t *p, uint32_t len, uint8_t flags, int32_t id)
{
    if (!id || !(id & 1)) /* 5.1.1: a client's streams are odd */
        return h2_conn_error(h, E_PROTOCOL);
    if (unpad(h, &p, &len, flags, flags & FL_PRIORITY) < 0)
        return;
    h2_stream_t *s = h2_find(h, id);
    h->in = (h2_block_in_t){.id = id, .end = flags & FL_END_STREAM};
    if (s && s->remote_ended) { /* half-closed (remote): 5.1 */
        h2_rst_stream(h, s, id, E_STREAM_CLOSED);
        s = NULL;
    } else if (s) { /* a trailer section: it must end the stream (8.1) */
        h->in.fs.trailer = 1;
        if (!(flags & FL_END_STREAM)) {
            h2_rst_stream(h, s, id, E_PROTOCOL);
            s = NULL;
        }
    } else if (!(s = headers_new(h, id))) {
        if (h->fatal)
            return;
    } else if ((flags & FL_PRIORITY) && h2f_be31(p - 5) == (uint32_t)id) {
        h2_rst_stream(h, s, id, E_PROTOCOL); /* 5.3.1: it depends on itself */
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
        return h2_flood_goaway(h, H2_FLOOD_CONTINUATION, h->in.conts, 0);
    if (inflate(h, p, len, flags & FL_END_HEADERS) < 0)
        return;
    if (flags & FL_END_HEADERS)
        block_done(h);
}

/* A DATA frame's payload for stream s. */
static void data_chunk(h2_t *h, h2_stream_t *s, const uint8_t *p, size_t n)
{
    h->body_bytes += n;
    if (s->sb.early) {
        sb_body_to_producer(&s->sb, p, n);
        return;
    }
    h2_consume(h, s, n); /* dropped: the window opens at once */
    if (s->in_body && (s->body_got += n) > CODEC_BODY_MAX)
        h2_answer_early(h, s, 413);
}

/* DATA: flow control, then the request body (a producer's, or dropped). */
static void on_data(h2_t *h, const uint8_t *p, uint32_t len, uint8_t flags, int32_t id)
{
    uint32_t whole = len;
    if (!id)
        return h2_conn_error(h, E_PROTOCOL);
    if (unpad(h, &p, &len, flags, 0) < 0)
        return;
    if ((int64_t)whole > h->recv_win)
        return h2_conn_error(h, E_FLOW_CONTROL);
    h->recv_win -= (int32_t)whole;
    h2_stream_t *s = h2_find(h, id);
    if (!s) {
        if (id > h->max_id) /* idle: 5.1 */
            return h2_conn_error(h, E_PROTOCOL);
        if (h2_client_closed(h, id))
            return h2_conn_error(h, E_STREAM_CLOSED);
        h2_consume(h, NULL, whole); /* one we reset: it may have been in flight */
        return;
    }
    if (s->remote_ended) {
        h2_consume(h, NULL, whole);
        return h2_rst_stream(h, s, id, E_STREAM_CLOSED);
    }
    if ((int64_t)whole > s->recv_win) {
        h2_consume(h, NULL, whole);
        return h2_rst_stream(h, s, id, E_FLOW_CONTROL);
    }
    s->recv_win -= (int32_t)whole;
    s->data_in += len;
    int end = flags & FL_END_STREAM;
    if (s->clen >= 0 && (s->data_in > (uint64_t)s->clen ||
                         (end && s->data_in != (uint64_t)s->clen))) {
        h2_consume(h, NULL, whole);
        return h2_rst_stream(h, s, id, E_PROTOCOL); /* 8.1.1 */
    }
    h2_consume(h, s, whole - len); /* the padding */
    data_chunk(h, s, p, len);
    if (!s->sb.closed)
        h2_request_progress(h, s, 0, end);
}

/* SETTINGS_INITIAL_WINDOW_SIZE changed: every stream's window by the
   difference (6.9.2), none past 2^31-1. */
static int new_window(h2_t *h, uint32_t v)
{
    int64_t delta = (int64_t)v - h->peer_window;
    h->peer_window = v;
    for (h2_stream_t *s = h->all; s; s = s->next)
        if (!s->sb.closed && (s->send_win += delta) > H2_WINDOW_MAX)
            return -1;
    return 0;
}

static void on_settings(h2_t *h, const uint8_t *p, uint32_t len, uint8_t flags, int32_t id)
{
    if (id)
        return h2_conn_error(h, E_PROTOCOL);
    if (flags & FL_ACK)
        return len ? h2_conn_error(h, E_FRAME_SIZE) : (void)0;
    if (len % 6)
        return h2_conn_error(h, E_FRAME_SIZE);
    if (len / 6 > H2_MAX_SETTINGS)
        return h2_flood_goaway(h, H2_FLOOD_SETTINGS, len / 6, 0);
    for (uint32_t i = 0; i < len; i += 6) {
        uint16_t k;
        uint32_t v, bad;
        h2f_setting(p + i, &k, &v);
        if ((bad = h2f_setting_check(k, v)))
            return h2_conn_error(h, bad);
        if (k == SET_HEADER_TABLE_SIZE) {
            h->peer_table = v < H2_TABLE ? v : H2_TABLE;
            if (h->enc)
                h2e_peer_table(h->enc, h->peer_table);
        } else if (k == SET_INITIAL_WINDOW_SIZE && new_window(h, v) < 0) {
            return h2_conn_error(h, E_FLOW_CONTROL);
        }
    }
    if (!h2_out_frame(h, 0, FR_SETTINGS, FL_ACK, 0))
        h->fatal = 1;
}

static void on_ping(h2_t *h, const uint8_t *p, uint32_t len, uint8_t flags, int32_t id)
{
    if (id)
        return h2_conn_error(h, E_PROTOCOL);
    if (len != 8)
        return h2_conn_error(h, E_FRAME_SIZE);
    if (flags & FL_ACK) {
        if (!memcmp(p, H2_GOAWAY_PING, 8))
            h2_goaway_final(h); /* the client read the first GOAWAY */
        return;
    }
    uint8_t *q = h2_out_frame(h, 8, FR_PING, FL_ACK, 0);
    if (!q)
        h->fatal = 1;
    else
        memcpy(q, p, 8);
}

static void on_rst(h2_t *h, uint32_t len, int32_t id)
{
    if (len != 4)
        return h2_conn_error(h, E_FRAME_SIZE);
    if (!id || id > h->max_id) /* on an idle stream: 6.4 */
        return h2_conn_error(h, E_PROTOCOL);
    h2_stream_t *s = h2_find(h, id);
    if (s) {
        s->peer_ended = 1;
        h2_stream_close(h, s);
    }
}

/*
 * What a WINDOW_UPDATE of inc buys, against owed (the bytes our DATA took
 * from its window and not yet given back).  Up to owed it is the ordinary
 * answer to our DATA, however small and however many come (a gRPC client
 * sends one per message it reads, nghttp2 and nginx count none): free.
 * Beyond it, it opens the window wider than our sending used (a client's
 * first, a gRPC client's 5 bytes for a stream's first message prefix, its
 * window growing with the bandwidth it measures): a few a stream are free
 * (fresh), the others count towards H2_FLOOD_WINDOW, whose bucket a
 * client sending 1-byte increments that buy nothing empties.  0, or -1:
 * the session ended.
 */
static int window_bought(h2_t *h, uint64_t *owed, uint32_t inc)
{
    if (inc <= *owed) {
        *owed -= inc;
        h->window_free++;
        return 0;
    }
    *owed = 0;
    if (h->fresh) {
        h->fresh--;
        return 0;
    }
    return h2_flood_take(h, H2_FLOOD_WINDOW);
}

static void on_window(h2_t *h, const uint8_t *p, uint32_t len, int32_t id)
{
    if (len != 4)
        return h2_conn_error(h, E_FRAME_SIZE);
    uint32_t inc = h2f_be31(p);
    if (!id) {
        if (!inc || h->send_win + inc > H2_WINDOW_MAX)
            return h2_conn_error(h, inc ? E_FLOW_CONTROL : E_PROTOCOL);
        if (window_bought(h, &h->owed, inc) < 0)
            return;
        h->send_win += inc;
        return;
    }
    if (id > h->max_id)
        return h2_conn_error(h, E_PROTOCOL);
    h2_stream_t *s = h2_find(h, id);
    if (!s) { /* closed: it may have been in flight, for DATA a closed stream took */
        window_bought(h, &h->closed_owed, inc);
        return;
    }
    if (window_bought(h, &s->owed, inc) < 0)
        return;
    if (!inc || s->send_win + inc > H2_WINDOW_MAX)
        return h2_rst_stream(h, s, id, inc ? E_FLOW_CONTROL : E_PROTOCOL);
    s->send_win += inc;
}

/* PRIORITY (RFC 9113 6.3): its signal is RFC 7540's, not used; its checks
   stay.  PRIORITY_UPDATE (RFC 9218 7.1): an open stream's new priority. */
static void on_priority(h2_t *h, const uint8_t *p, uint32_t len, uint8_t type, int32_t id)
{
    if (type == FR_PRIORITY) {
        if (!id)
            return h2_conn_error(h, E_PROTOCOL);
        if (len != 5)
            return h2_rst_stream(h, h2_find(h, id), id, E_FRAME_SIZE);
        if (h2f_be31(p) == (uint32_t)id) /* 5.3.1 */
            return h2_conn_error(h, E_PROTOCOL);
        return;
    }
    if (id)
        return h2_conn_error(h, E_PROTOCOL);
    if (len < 4)
        return h2_conn_error(h, E_FRAME_SIZE);
    if (!h2f_be31(p))
        return h2_conn_error(h, E_PROTOCOL);
    h2_stream_t *s = h2_find(h, (int32_t)h2f_be31(p));
    if (s) {
        s->urgency = 3, s->incremental = 0;
        h2f_priority(p + 4, len - 4, &s->urgency, &s->incremental);
    }
}

/* Is stream id open and older than H2_RESET_YOUNG?  A client that resets
   it (a call past its deadline, cancelled) made us do what any request
   does, not the rapid reset's (CVE-2023-44487) work for nothing. */
static int old_stream(const h2_t *h, int32_t id)
{
    const h2_stream_t *s = h2_find(h, id);
    return s && gio_now(h->f.site->loop) - s->begun >= H2_RESET_YOUNG;
}

/* A frame read whole (h->hd its header, p its payload). */
static void frame_in(h2_t *h, const uint8_t *p)
{
    h2_frame_hd_t hd = h2f_hd(h->hd);
    uint32_t len = hd.len;
    uint8_t type = hd.type, flags = hd.flags;
    int32_t id = hd.id;
    int kind = h2f_flood_kind(p, len, type, flags); /* WINDOW_UPDATE: on_window's */
    if (kind == H2_FLOOD_PING && h->ping_free) /* one after our DATA: a BDP ping */
        h->ping_free = 0, kind = -1;
    if (kind == H2_FLOOD_RAPID_RESET && old_stream(h, id))
        kind = -1;
    if (kind >= 0 && h2_flood_take(h, kind) < 0)
        return;
    switch (type) {
    case FR_DATA: return on_data(h, p, len, flags, id);
    case FR_HEADERS: return on_headers(h, p, len, flags, id);
    case FR_PRIORITY:
    case FR_PRIORITY_UPDATE: return on_priority(h, p, len, type, id);
    case FR_RST_STREAM: return on_rst(h, len, id);
    case FR_SETTINGS: return on_settings(h, p, len, flags, id);
    case FR_PUSH_PROMISE: return h2_conn_error(h, E_PROTOCOL); /* 8.4: a client pushes none */
    case FR_PING: return on_ping(h, p, len, flags, id);
    case FR_GOAWAY:
        if (id)
            return h2_conn_error(h, E_PROTOCOL);
        if (len < 8)
            return h2_conn_error(h, E_FRAME_SIZE);
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
        return h2_conn_error(h, E_FRAME_SIZE), -1;
    if (h->in.id ? type != FR_CONTINUATION || id != h->in.id : type == FR_CONTINUATION)
        return h2_conn_error(h, E_PROTOCOL), -1; /* 6.10: a header block is one piece */
    if (!h->settings_in && (type != FR_SETTINGS || (h->hd[4] & FL_ACK)))
        return h2_conn_error(h, E_PROTOCOL), -1; /* 3.4: the preface ends with SETTINGS */
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
        h2_conn_error(h, E_PROTOCOL);
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
        h2_pend_rewind(h, 1);
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

long h2_fill(h2_t *h, size_t max)
{
    if (!gio_batch_done(h->f.out))
        return 0;
    h2_sweep(h); /* (the batch keeps counting bytes_sent: conn.c's -B window reads it) */
    h2_pend_rewind(h, 1);
    while (!h->fatal && h->f.out->bytes_left + (h->pend ? h2_unflushed_bytes(h) : 0) < max) {
        h2_stream_t *s = h2_pick(h);
        if (!s)
            break;
        if (h2_send_data(h, s) < 0)
            return -1;
    }
    if (h2_pend_flush(h) < 0)
        return -1;
    if (!h->f.out->bytes_left && !h->all) { /* idle: it keeps no block (nor stream) */
        h2_pend_rewind(h, 0);
        if (h->hd_have < 9) { /* no frame is being gathered in it */
            free(h->fbuf);
            h->fbuf = NULL;
        }
    }
    h2_drained(h);
    return (long)h->f.out->bytes_left;
}

h2_t *h2_new(const codec_conn_t *f, void (*wake)(void *conn))
{
    h2_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->f = *f;
    h->wake = wake;
    h->sc = (sb_conn_t){.wake = wake, .conn = f->conn};
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
    h2_floods_init(h, h->started);
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
    uint8_t *p = h2_out_frame(h, 6 * n, FR_SETTINGS, 0, 0);
    if (!p) {
        free(h);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        h2f_put_setting(p + 6 * i, (uint16_t)set[i][0], set[i][1]);
    h2_out_window(h, 0, H2_CONN_WINDOW - H2_DEFAULT_WINDOW);
    h->recv_win = H2_CONN_WINDOW;
    return h;
}

void h2_free(h2_t *h)
{
    if (!h)
        return;
    h->fatal = 1; /* nothing more is sent */
    for (h2_stream_t *s = h->all, *next; s; s = next) {
        next = s->next;
        h2_stream_free(s);
    }
    h2_pend_rewind(h, 0);
    for (h2_block_t *k = h->blocks, *next; k; k = next) { /* (a rewind that waited) */
        next = k->next;
        free(k);
    }
    free(h->enc);
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
    return !h2_want_read(h) && !h2_pend_unflushed(h);
}

/* Streams that wait only for their producer (h2_report_t's waiting). */
static unsigned waiting(const h2_t *h)
{
    unsigned n = 0;
    for (const h2_stream_t *s = h->producers ? h->all : NULL; s; s = s->next)
        n += !s->sb.closed && s->ex.producer && !s->sb.ended && s->sb.given == s->sb.body_sent &&
             (!s->in_body || s->ex.self_paced);
    return n;
}

/* Since when a request head has been incomplete (h2_report_t's head_since). */
static int64_t head_since(const h2_t *h)
{
    /* the first head: from the preface on */
    int64_t t = h->sc.requests || h->headed ? 0 : h->started;
    if ((h->hd_have || h->frame_left || h->in.id) && (!t || h->frame_since < t))
        t = h->frame_since; /* a frame (or the preface) begun and not complete */
    if (h->pending)
        for (const h2_stream_t *s = h->all; s; s = s->next)
            if (!s->dispatched && !s->deferred && !s->sb.closed && !s->in_body &&
                (!t || s->begun < t))
                t = s->begun;
    return t;
}

void h2_report(const h2_t *h, h2_report_t *r)
{
    *r = (h2_report_t){.streams = h->open,
                       .waiting = waiting(h),
                       .bodies = h->bodies,
                       .want_read = (uint8_t)h2_want_read(h),
                       .goaway_wait = h->goaway && !h->goaway_sent && !h->fatal,
                       .body_bytes = h->body_bytes,
                       .head_since = head_since(h)};
}

size_t h2_expire(h2_t *h, char *buf, size_t cap)
{
    if (!gio_batch_done(h->f.out))
        return 0; /* a frame is on its way: more bytes would land inside it */
    /* NO_ERROR: the client may send the stream cut off again */
    return h2f_goaway((uint8_t *)buf, cap, h->last_dispatched, E_NO_ERROR);
}
