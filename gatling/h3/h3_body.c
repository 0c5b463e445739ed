/*
 * h3_body.c — the bodies of an HTTP/3 stream (h3_int.h).  A response's
 * pieces (parts: buffers as the handler gave them, file ranges) go to
 * nghttp3 as DATA vectors when it asks (h3_read_data): a buffer as it is, a
 * file range read into blocks of H3_READ_BLOCK bytes, since every byte is
 * encrypted in user space; what nghttp3 was given stays until the client
 * acknowledged it (h3_on_acked), at most H3_UNACKED_MAX per stream.  The
 * parts are queued by stream_body.c (the stream's sbody_t), as for HTTP/2.
 */
#ifdef HAVE_H3
#include "h3_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the response body ----------------------------------------------------------- */

/* The next vector of the body: a part's own bytes, or a block read from its
   file.  1, 0 (nothing now), -1 (a read failed: the stream is reset). */
static int next_vec(h3_stream_t *s, nghttp3_vec *v)
{
    while (s->sb.cur < s->sb.nparts && s->cur_off >= s->sb.parts[s->sb.cur].len)
        s->sb.cur++, s->cur_off = 0;
    if (s->sb.cur >= s->sb.nparts || (!s->sb.streamed && !s->sb.body_left))
        return 0;
    sb_part_t *pt = &s->sb.parts[s->sb.cur];
    uint64_t n = pt->len - s->cur_off;
    if (!s->sb.streamed && n > s->sb.body_left)
        n = s->sb.body_left;
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
        x->end = s->sb.body_sent + n;
        *s->sent_tail = x;
        s->sent_tail = &x->next;
    }
    v->len = (size_t)n;
    s->unacked += n, s->cur_off += n, s->sb.body_sent += n;
    if (!s->sb.streamed)
        s->sb.body_left -= n;
    return 1;
}

/* The trailer section after the body (nghttp3 copies it): 0, or -1 (the
   body then ends without it). */
static int trailers(nghttp3_conn *ng, h3_stream_t *s)
{
    nghttp3_nv nv[EX_FIELDS_MAX];
    size_t n = s->sb.ntrailers < EX_FIELDS_MAX ? s->sb.ntrailers : EX_FIELDS_MAX;
    for (size_t i = 0; i < n; i++) {
        const http_field_t *f = &s->sb.trailers[i];
        nv[i] = (nghttp3_nv){(uint8_t *)f->name, (uint8_t *)f->value, f->nlen, f->vlen, 0};
    }
    return nghttp3_conn_submit_trailers(ng, s->id, nv, n) == 0 ? 0 : -1;
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
    int all = s->sb.cur >= s->sb.nparts || (s->sb.cur == s->sb.nparts - 1 &&
                                      s->cur_off >= s->sb.parts[s->sb.cur].len);
    if (s->sb.streamed ? s->sb.ended && all : !s->sb.body_left) {
        *pflags |= NGHTTP3_DATA_FLAG_EOF;
        if (s->sb.trailers && trailers(ng, s) == 0)
            *pflags |= NGHTTP3_DATA_FLAG_NO_END_STREAM;
    } else if (!k) {
        s->sb.waits = 1;
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
    uint64_t acked = s->sb.body_sent - s->unacked; /* the body up to here is acknowledged */
    while (s->sent && s->sent->end <= acked) {
        h3_sent_t *x = s->sent;
        s->sent = x->next;
        free(x->b);
        free(x);
    }
    if (!s->sent)
        s->sent_tail = &s->sent;
    if (s->sb.waits && s->unacked < H3_UNACKED_MAX / 2) {
        s->sb.waits = 0;
        nghttp3_conn_resume_stream(ng, id);
    }
    return 0;
}

#endif
