/*
 * stream_body.c — what an HTTP/2 and an HTTP/3 stream do alike for their
 * exchange (stream_body.h): the head (101 -> 502, a head whose fields did
 * not fit -> a bare 500), the error page, the response body's parts queued
 * for the codec to frame, a producer's back-pressure, its request body
 * offered as it comes (the codec's flow control opens as it takes it, the
 * rest held), and dispatch to the router and the job pool.
 */
#include "stream_body.h"
#include "codec.h"
#include "route/router.h"
#include "http/hbuf.h"
#include "http/response.h"
#include "site/encoding.h"
#include "site/fcache.h"
#include "site/site.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- the response ---------------------------------------------------------------- */

/* The request's blocks go but the first (the stream's own), and their count. */
static void fields_free(sbody_t *b)
{
    for (sb_chunk_t *k = b->fields, *next; k; k = next) {
        next = k->next;
        b->c->fields_bytes -= k->cap;
        if (k != b->first)
            free(k);
    }
    b->fields = NULL;
}

void sb_release(sbody_t *b)
{
    exchange_t *ex = sb_ex(b);
    if (ex->job) /* the job runs on: it must not come back to us */
        ex->job->ex = NULL;
    if (ex->file)
        fcache_release(ex->file);
    enc_gzip_release(ex->gz);
    ex_end(ex);
    for (unsigned i = 0; i < b->nparts; i++)
        if (b->parts[i].owned)
            free((void *)b->parts[i].p);
    b->c->drainers -= b->want_drain;
    b->c->held_bytes -= b->held_len;
    free(b->held);
    free(b->trailers);
    b->trailers = NULL, b->ntrailers = 0;
    fields_free(b);
}

/* A piece of the body at the end of the list.  0, or -1 on ENOMEM (the
   piece is the caller's). */
static int add_part(sbody_t *b, sb_part_t p)
{
    if (b->nparts == b->cap) {
        unsigned cap = b->cap ? 2 * b->cap : 4;
        sb_part_t *np = realloc(b->parts, cap * sizeof *np);
        if (!np)
            return -1;
        b->parts = np, b->cap = cap;
    }
    b->parts[b->nparts++] = p;
    return 0;
}

/* A part came (or the end): a data reader that waited for it goes on. */
static void comes(sbody_t *b)
{
    if (b->waits && !b->closed) {
        b->waits = 0;
        b->ops->resume(sb_ex(b));
    }
    sb_wake(b);
}

int sb_codec_head(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    sbody_t *b = sb_of(ex);
    sb_wake(b);
    if (status == 101) /* no tunnel over HTTP/2 (RFC 9113 8.6) or HTTP/3 */
        status = 502, len = 0, ex->nfields = 0;
    if (b->closed)
        return 0;
    if (ex->fields_over) { /* as h1: a bare 500 instead */
        ex->nfields = 0;
        ex->fields_over = 0;
        ex->site->stats.head_overflows++;
        return ex->codec->error(ex, 500) < 0 ? -1 : EX_REPLACED;
    }
    return b->ops->submit(ex, status, ctype, len, mtime);
}

int sb_codec_error(exchange_t *ex, int status)
{
    sbody_t *b = sb_of(ex);
    sb_wake(b);
    if (ex->producer)
        b->ended = 1; /* an error page is a whole response */
    if (b->closed)
        return 0;
    size_t n = 0;
    char *page = codec_error_page(ex, status, &n); /* the site's own, else ours */
    if (!page) {
        if (!(page = malloc(RESP_PAGE_MAX)))
            return -1;
        hbuf_t pb = hb_init(page, RESP_PAGE_MAX);
        resp_page(&pb, status);
        n = hb_len(&pb);
    }
    if (add_part(b, (sb_part_t){.p = page, .fd = -1, .owned = 1, .len = n}) < 0) {
        free(page);
        return -1;
    }
    b->given += n;
    return b->ops->submit(ex, status, "text/html; charset=utf-8", n, -1);
}

int sb_codec_body_buf(exchange_t *ex, const void *p, size_t n, int flags)
{
    sbody_t *b = sb_of(ex);
    int own = (flags & EX_FREE) != 0;
    if (ex->head_only || !n || b->closed) { /* closed: a reset stream's producer runs on */
        if (own)
            free((void *)p);
        return 0;
    }
    if (add_part(b, (sb_part_t){.p = p, .fd = -1, .owned = (uint8_t)own, .len = n}) < 0) {
        if (own)
            free((void *)p);
        return -1;
    }
    b->given += n;
    if (b->streamed)
        ex->body_len += n;
    if (b->given - b->body_sent > ex_stream_high(ex) && !b->want_drain) {
        b->want_drain = 1;
        b->c->drainers++;
    }
    comes(b);
    return 0;
}

int sb_codec_body_file(exchange_t *ex, int fd, uint64_t off, uint64_t len)
{
    sbody_t *b = sb_of(ex);
    if (ex->head_only || !len || b->closed)
        return 0;
    if (add_part(b, (sb_part_t){.fd = fd, .off = off, .len = len}) < 0)
        return -1;
    b->given += len;
    comes(b);
    return 0;
}

int sb_codec_body_end(exchange_t *ex)
{
    sbody_t *b = sb_of(ex);
    b->ended = 1;
    comes(b); /* a reader that waited for more sees the end */
    return 0;
}

/* The trailer section in one block (the table, then the names in lower
   case and the values), sent by the codec once the body is out. */
int sb_codec_trailers(exchange_t *ex, const ex_field_t *f, int n)
{
    sbody_t *b = sb_of(ex);
    size_t size = (size_t)n * sizeof(http_field_t);
    for (int i = 0; i < n; i++)
        size += strlen(f[i].name) + strlen(f[i].value) + 2;
    http_field_t *t = n > 0 && !b->closed && !b->trailers ? malloc(size) : NULL;
    if (t) {
        char *q = (char *)(t + n);
        for (int i = 0; i < n; i++) {
            size_t nl = strlen(f[i].name), vl = strlen(f[i].value);
            t[i] = (http_field_t){q, q + nl + 1, nl, vl};
            for (size_t k = 0; k <= nl; k++)
                q[k] = (char)tolower((unsigned char)f[i].name[k]);
            memcpy(q + nl + 1, f[i].value, vl + 1);
            q += nl + vl + 2;
        }
        b->trailers = t, b->ntrailers = (size_t)n;
    }
    return sb_codec_body_end(ex);
}

void sb_codec_body_abort(exchange_t *ex)
{
    sbody_t *b = sb_of(ex);
    b->ended = 1;
    if (!b->closed)
        b->ops->reset(ex, SB_INTERNAL);
    b->c->wake(b->c->conn);
}

/* A closed stream's producer is told a lot is queued: it stops reading. */
uint64_t sb_codec_queued(const exchange_t *ex)
{
    const sbody_t *b = &((const sb_stream_t *)ex)->sb;
    return b->closed ? UINT64_MAX : b->given - b->body_sent;
}

void sb_drained(sbody_t *b)
{
    if (!b->want_drain || b->closed || b->given - b->body_sent >= EX_STREAM_LOW)
        return;
    b->want_drain = 0;
    b->c->drainers--;
    exchange_t *ex = sb_ex(b);
    if (ex->producer && !b->ended)
        ex->producer->drained(ex);
}

/* ---- the request body ------------------------------------------------------------ */

/*
 * A producer's request body: what it takes is consumed (the codec's flow
 * control lets the client send more: that is the back-pressure), what it
 * does not is held, at most a stream's window and SB_HELD_MAX for the
 * connection, and offered again at ex_input_ready.
 */
static size_t offer(sbody_t *b, const uint8_t *p, size_t n, int last)
{
    exchange_t *ex = sb_ex(b);
    if (!ex->producer && ex->job && !b->closed) { /* a job (a password check) decides who */
        b->input_held = 1;                         /* takes the body: hold it until then */
        return 0;
    }
    size_t k = n;
    if (ex->producer && !b->closed) {
        b->input_held = 1; /* an ex_input_ready during the call clears it */
        b->offering = 1;
        k = ex->producer->input(ex, (const char *)p, n, last);
        b->offering = 0;
    }
    if (k >= n) {
        k = n;
        b->input_held = 0;
        b->input_done = (uint8_t)(b->input_done | last);
    }
    if (k)
        b->ops->consume(ex, k);
    return k;
}

void sb_offer_held(sbody_t *b)
{
    while (b->held_len && !b->input_held) { /* again while the producer says ready in its call */
        size_t k = offer(b, (uint8_t *)b->held, b->held_len, b->input_last);
        memmove(b->held, b->held + k, b->held_len - k);
        b->held_len -= k;
        b->c->held_bytes -= k;
        if (!k)
            break;
    }
    if (!b->held_len && b->input_last && !b->input_done && !b->input_held)
        offer(b, (const uint8_t *)"", 0, 1);
}

void sb_body_to_producer(sbody_t *b, const uint8_t *p, size_t n)
{
    sb_conn_t *c = b->c;
    size_t k = b->held_len || b->input_held ? 0 : offer(b, p, n, 0);
    if (k == n)
        return;
    char *nh = c->held_bytes + n - k <= SB_HELD_MAX ? realloc(b->held, b->held_len + n - k) : NULL;
    if (!nh) {
        b->ops->consume(sb_ex(b), n - k);
        b->ops->reset(sb_ex(b), SB_CALM);
        return;
    }
    b->held = nh;
    memcpy(b->held + b->held_len, p + k, n - k);
    b->held_len += n - k;
    c->held_bytes += n - k;
    if (!b->input_held) /* the producer was ready again within its call */
        sb_offer_held(b);
}

void sb_codec_input_ready(exchange_t *ex)
{
    sbody_t *b = sb_of(ex);
    b->input_held = 0;
    if (!b->offering) /* else offer() sees it when the producer's call returns */
        sb_offer_held(b);
    sb_wake(b);
}

/* ---- spare streams --------------------------------------------------------------- */

sb_stream_t *sb_pool_take(sb_pool_t *p, size_t size, size_t req_off)
{
    sb_stream_t *s = p->spare;
    sb_part_t *parts = NULL;
    unsigned cap = 0;
    if (s) {
        p->spare = s->sb.spare_next, p->nspare--;
        parts = s->sb.parts, cap = s->sb.cap;
    } else if (!(s = malloc(size + sizeof(sb_chunk_t) + SB_CHUNK))) {
        return NULL;
    }
    memset(&s->sb, 0, req_off - offsetof(sb_stream_t, sb));
    memset((char *)s + req_off, 0, offsetof(http_request_t, headers));
    s->sb.parts = parts, s->sb.cap = cap;
    s->sb.first = (sb_chunk_t *)((char *)s + size);
    p->takes++;
    if (++p->live > p->peak)
        p->peak = p->live;
    return s;
}

void sb_pool_give(sb_pool_t *p, sb_stream_t *s)
{
    p->live--;
    if (p->nspare < p->max && p->nspare < (p->linger ? p->peak : p->live)) {
        s->sb.spare_next = p->spare;
        p->spare = s;
        p->nspare++;
        return;
    }
    free(s->sb.parts);
    free(s);
    if (!p->live && !p->linger) /* no stream anywhere: none kept */
        sb_pool_empty(p);
}

void sb_pool_empty(sb_pool_t *p)
{
    for (sb_stream_t *s = p->spare, *next; s; s = next) {
        next = s->sb.spare_next;
        free(s->sb.parts);
        free(s);
    }
    p->spare = NULL;
    p->nspare = 0;
    p->peak = p->live;
}

/* ---- the request's fields -------------------------------------------------------- */

char *sb_room(sbody_t *b, size_t n)
{
    sb_chunk_t *k = b->fields;
    if (k && k->cap - k->len >= n) {
        k->len += n;
        return k->b + k->len - n;
    }
    int own = n > SB_CHUNK / 2, use_first = !own && !b->first_used;
    size_t cap = own ? n : !k || use_first ? SB_CHUNK
                                           : k->cap < SB_CHUNK_MAX / 2 ? 2 * k->cap : SB_CHUNK_MAX;
    if (b->c->fields_bytes + cap > SB_CONN_FIELDS_MAX)
        return NULL;
    if (!(k = use_first ? b->first : malloc(sizeof *k + cap)))
        return NULL;
    k->len = n, k->cap = cap;
    b->c->fields_bytes += cap;
    b->first_used |= (uint8_t)use_first;
    if (own && b->fields) { /* behind the current block, which keeps its room */
        k->next = b->fields->next;
        b->fields->next = k;
    } else {
        k->next = b->fields;
        b->fields = k;
    }
    return k->b;
}

/* ---- dispatch -------------------------------------------------------------------- */

static http_str_t line_target(const http_request_t *req)
{
    const http_str_t *auth = req->target.n ? NULL : http_header(req, "Host"); /* CONNECT */
    return auth ? *auth : req->target;
}

size_t sb_line_size(const http_request_t *req)
{
    return req->method.n + line_target(req).n + sizeof " HTTP/x.y";
}

void sb_line(http_request_t *req, char *line, size_t n, const char *version)
{
    http_str_t target = line_target(req);
    hbuf_t b = hb_init(line, n);
    hb_put(&b, req->method.p, req->method.n);
    hb_puts(&b, " ");
    hb_put(&b, target.p, target.n);
    hb_puts(&b, " ");
    hb_puts(&b, version);
    if (!b.over)
        req->line = (http_str_t){line, hb_len(&b)};
}

/* A stream's job is back (codec_job_send): dispatch again. */
static void job_back(exchange_t *ex, int cancelled)
{
    sbody_t *b = sb_of(ex);
    if (cancelled) {
        b->ops->reset(ex, SB_REFUSED);
        b->c->wake(b->c->conn);
        return;
    }
    sb_dispatch_again(b);
}

void sb_dispatch(sbody_t *b)
{
    exchange_t *ex = sb_ex(b);
    if (router_dispatch(ex) < 0) {
        b->ops->reset(ex, SB_INTERNAL);
        return;
    }
    if (b->ops->routed)
        b->ops->routed(ex);
    /* a job (a second one after a job: gzip after a password); a full queue: 503 */
    if (ex->job && codec_job_send(ex, job_back) < 0)
        ex_error(ex, 503, "Retry-After", "1");
}

void sb_dispatch_again(sbody_t *b)
{
    exchange_t *ex = sb_ex(b);
    sb_dispatch(b);
    if (b->early && !ex->job) { /* the body held for the job: to its taker */
        b->input_held = 0;
        sb_offer_held(b);
    }
    b->c->wake(b->c->conn);
}

/* A local redirect (ex_redirect), from a producer's call: its stream is
   answered again at once, as after a job; a reset stream waits for its end. */
void sb_codec_redispatch(exchange_t *ex)
{
    sbody_t *b = sb_of(ex);
    if (!b->closed)
        sb_dispatch_again(b);
}

/* ---- the response's head --------------------------------------------------------- */

/* w's bytes in lower case ('A' to 'Z' gain 0x20, every other byte stays):
   in each byte b, bit 7 of (b & 0x7f) + 0x3f says b >= 'A', of
   (b & 0x7f) + 0x25 says b > 'Z' (no sum carries into the next byte); a
   byte with bit 7 set is no letter. */
static uint64_t lower8(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101u;
    uint64_t low7 = w & 0x7f * ones;
    return w | (((low7 + 0x3f * ones) ^ (low7 + 0x25 * ones)) & ~w & 0x80 * ones) >> 2;
}

/* Words read and written where they fall (any alignment), for lower_copy. */
typedef uint64_t __attribute__((may_alias, aligned(1))) word8_t;
typedef uint32_t __attribute__((may_alias, aligned(1))) word4_t;

/* n bytes of s into d in lower case (RFC 9113 8.2.1, RFC 9114 4.2), a word
   at a time; the last word may overlap the one before (the same bytes). */
static void lower_copy(char *d, const char *s, size_t n)
{
    if (n >= 8) {
        for (size_t i = 0;; i += 8) {
            if (i + 8 > n)
                i = n - 8;
            *(word8_t *)(d + i) = lower8(*(const word8_t *)(s + i));
            if (i + 8 == n)
                return;
        }
    }
    if (n >= 4) {
        uint32_t a = (uint32_t)lower8(*(const word4_t *)s);
        uint32_t b = (uint32_t)lower8(*(const word4_t *)(s + n - 4));
        *(word4_t *)d = a;
        *(word4_t *)(d + n - 4) = b;
        return;
    }
    for (size_t i = 0; i < n; i++)
        d[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
}

size_t sb_head_fields(const exchange_t *ex, int status, const char *ctype, uint64_t len,
                      time_t mtime, const char *drop, sb_head_strs_t *strs)
{
    head_t hd;
    codec_head_facts(&hd, ex, status, ctype, len, mtime);
    head_fields_t *t = &strs->t;
    head_build(&hd, t);
    size_t n = t->handler, dn = drop ? strlen(drop) : 0, room = sizeof strs->names;
    char *low = strs->names;
    for (unsigned i = t->handler; i < t->n; i++) { /* the handler's: n <= i */
        size_t k = t->low[i].nlen;
        if (k >= room)
            return 0; /* the handler's names past SB_HEAD_NAMES in all */
        lower_copy(low, t->name[i], k);
        low[k] = 0;
        if (resp_conn_specific(low, k) || (k == dn && !memcmp(low, drop, k)))
            continue; /* the handler's connection-specific fields, the codec's drop */
        t->low[n++] = (http_field_t){low, t->low[i].value, k, t->low[i].vlen};
        low += k + 1;
        room -= k + 1;
    }
    return n;
}
