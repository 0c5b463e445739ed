/*
 * h3_body.c — the bodies of an HTTP/3 stream (h3_int.h).  A response's
 * pieces (parts: buffers as the handler gave them, file ranges) go to
 * nghttp3 as DATA vectors when it asks (h3_read_data): a buffer as it is, a
 * file range read into blocks of H3_READ_BLOCK bytes, since every byte is
 * encrypted in user space; what nghttp3 was given stays until the client
 * acknowledged it (h3_on_acked), at most H3_UNACKED_MAX per stream.  A
 * producer's request body is offered to it as it comes, consumed (the
 * client's flow control window opens) as it takes it, the rest held.
 */
#ifdef HAVE_H3
#include "h3_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define H3_HELD_MAX (4 << 20)      /* request body bytes a connection holds for producers */

/* ---- the response body ----------------------------------------------------------- */

/* A piece of the body at the end of the stream's list (h3_int.h). */
int h3_add_part(h3_stream_t *s, h3_part_t p)
{
    if (s->nparts == s->cap) {
        unsigned cap = s->cap ? 2 * s->cap : 4;
        h3_part_t *np = realloc(s->parts, cap * sizeof *np);
        if (!np)
            return -1;
        s->parts = np, s->cap = cap;
    }
    s->parts[s->nparts++] = p;
    return 0;
}

/* The next vector of the body: a part's own bytes, or a block read from its
   file.  1, 0 (nothing now), -1 (a read failed: the stream is reset). */
static int next_vec(h3_stream_t *s, nghttp3_vec *v)
{
    while (s->cur < s->nparts && s->cur_off >= s->parts[s->cur].len)
        s->cur++, s->cur_off = 0;
    if (s->cur >= s->nparts || (!s->streamed && !s->body_left))
        return 0;
    h3_part_t *pt = &s->parts[s->cur];
    uint64_t n = pt->len - s->cur_off;
    if (!s->streamed && n > s->body_left)
        n = s->body_left;
    if (pt->p) {
        v->base = (uint8_t *)(uintptr_t)(pt->p + s->cur_off);
    } else {
        n = n > H3_READ_BLOCK ? H3_READ_BLOCK : n;
        h3_sent_t *x = malloc(sizeof *x);
        char *b = x ? malloc(n) : NULL;
        ssize_t r = b ? pread(pt->fd, b, n, (off_t)(pt->off + s->cur_off)) : -1;
        if (r <= 0) {
            free(b);
            free(x);
            return -1;
        }
        x->b = b;
        n = (uint64_t)r;
        v->base = (uint8_t *)x->b;
        x->next = NULL;
        x->end = s->body_sent + n;
        *s->sent_tail = x;
        s->sent_tail = &x->next;
    }
    v->len = (size_t)n;
    s->unacked += n, s->cur_off += n, s->body_sent += n;
    if (!s->streamed)
        s->body_left -= n;
    return 1;
}

/* nghttp3 asks for DATA: vectors until H3_UNACKED_MAX is out unacknowledged. */
nghttp3_ssize h3_read_data(nghttp3_conn *ng, int64_t id, nghttp3_vec *vec, size_t veccnt,
                           uint32_t *pflags, void *user, void *stream_user)
{
    (void)ng, (void)id, (void)user;
    h3_stream_t *s = stream_user;
    size_t k = 0;
    int r = 1;
    while (k < veccnt && s->unacked < H3_UNACKED_MAX && (r = next_vec(s, &vec[k])) > 0)
        k++;
    if (r < 0) {
        stream_abort(s, NGHTTP3_H3_INTERNAL_ERROR);
        return NGHTTP3_ERR_WOULDBLOCK;
    }
    int all = s->cur >= s->nparts || (s->cur == s->nparts - 1 &&
                                      s->cur_off >= s->parts[s->cur].len);
    if (s->streamed ? s->ended && all : !s->body_left)
        *pflags |= NGHTTP3_DATA_FLAG_EOF;
    else if (!k) {
        s->data_waits = 1;
        return NGHTTP3_ERR_WOULDBLOCK;
    }
    return (nghttp3_ssize)k;
}

/* DATA the client acknowledged: what we read for it can go; a reader that
   waited for room goes on. */
int h3_on_acked(nghttp3_conn *ng, int64_t id, uint64_t n, void *user, void *stream_user)
{
    (void)user;
    h3_stream_t *s = stream_user;
    if (!s)
        return 0;
    n = n < s->unacked ? n : s->unacked;
    s->unacked -= n;
    uint64_t acked = s->body_sent - s->unacked; /* the body up to here is acknowledged */
    while (s->sent && s->sent->end <= acked) {
        h3_sent_t *x = s->sent;
        s->sent = x->next;
        free(x->b);
        free(x);
    }
    if (!s->sent)
        s->sent_tail = &s->sent;
    if (s->data_waits && s->unacked < H3_UNACKED_MAX / 2) {
        s->data_waits = 0;
        nghttp3_conn_resume_stream(ng, id);
    }
    return 0;
}

/* ---- the request body ------------------------------------------------------------ */

/* A producer's request body: what it takes is consumed, the rest held (at
   most the stream's window and H3_HELD_MAX) and offered at ex_input_ready. */
static size_t offer(h3_stream_t *s, const uint8_t *p, size_t n, int last)
{
    exchange_t *ex = &s->ex;
    if (!ex->producer && ex->job && !s->closed) { /* a job decides who takes the body */
        s->input_held = 1;
        return 0;
    }
    size_t k = n;
    if (ex->producer && !s->closed) {
        s->input_held = 1;
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
        consume(s->h3, s->id, k);
    return k;
}

void h3_offer_held(h3_stream_t *s)
{
    while (s->held_len && !s->input_held) {
        size_t k = offer(s, (uint8_t *)s->held, s->held_len, s->input_last);
        memmove(s->held, s->held + k, s->held_len - k);
        s->held_len -= k;
        s->h3->held_bytes -= k;
        if (!k)
            break;
    }
    if (!s->held_len && s->input_last && !s->input_done && !s->input_held)
        offer(s, (const uint8_t *)"", 0, 1);
}

void h3_body_to_producer(h3_stream_t *s, const uint8_t *p, size_t n)
{
    h3_t *h = s->h3;
    size_t k = s->held_len || s->input_held ? 0 : offer(s, p, n, 0);
    if (k == n)
        return;
    char *nh = h->held_bytes + n - k <= H3_HELD_MAX ? realloc(s->held, s->held_len + n - k) : NULL;
    if (!nh) {
        consume(h, s->id, n - k);
        stream_abort(s, NGHTTP3_H3_EXCESSIVE_LOAD);
        return;
    }
    s->held = nh;
    memcpy(s->held + s->held_len, p + k, n - k);
    s->held_len += n - k;
    h->held_bytes += n - k;
    if (!s->input_held)
        h3_offer_held(s);
}
#endif
