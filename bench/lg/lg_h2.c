/* The load generators' HTTP/2 client session: see lg_h2.h. */
#include "lg_h2.h"
#include "lg.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>

#define WINDOW ((1 << 30) - 1) /* receive window of the connection and of each stream */
#define FILL_MAX 65536         /* bytes moved into a batch per lg_h2_fill() */
#define NONE UINT32_MAX

struct lg_h2_req {
    nghttp2_nv *nv;
    size_t nnv;
    char *store; /* the names and values nv points into */
};

enum { S_FREE, S_OPEN, S_ENDED };

typedef struct slot {
    int64_t t;
    uint64_t body;
    int32_t id;
    uint16_t status;
    uint8_t state;
    uint8_t begun, peer_rst;
    int8_t kind;
    uint32_t next; /* the free stack or the ended queue */
} slot_t;

struct lg_h2 {
    nghttp2_session *ng;
    slot_t *slot;
    unsigned nslot, nfree;
    uint32_t free_top, end_head, end_tail;
    int received; /* some bytes have arrived */
    int goaway;   /* the server sent GOAWAY */
    uint32_t goaway_code;
    int32_t last_id;
    char *obuf;
    size_t ocap;
};

/* ---- requests ---- */

static const char *const forbidden[] = {"connection", "keep-alive", "proxy-connection",
                                        "transfer-encoding", "upgrade"};

static void nv_set(nghttp2_nv *nv, char *name, size_t nlen, char *value, size_t vlen)
{
    nv->name = (uint8_t *)name;
    nv->namelen = nlen;
    nv->value = (uint8_t *)value;
    nv->valuelen = vlen;
    nv->flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
}

/* Copy s (n bytes) into the store at *w, lower-cased if asked; returns the copy. */
static char *put(char **w, const char *s, size_t n, int lower)
{
    char *d = *w;
    for (size_t i = 0; i < n; i++)
        d[i] = lower ? (char)tolower((unsigned char)s[i]) : s[i];
    d[n] = 0;
    *w += n + 1;
    return d;
}

/* One "Name: value" line of extra (without its CRLF) as a field; 0 if left out. */
static int extra_field(lg_h2_req_t *q, char **w, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    if (!colon)
        return 0;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    for (size_t i = 0; i < sizeof forbidden / sizeof *forbidden; i++)
        if (nlen == strlen(forbidden[i]) && !strncasecmp(line, forbidden[i], nlen))
            return 0;
    char *name = put(w, line, nlen, 1), *value = put(w, v, (size_t)(end - v), 0);
    if (!strcmp(name, "host")) { /* RFC 9113 8.3.1: :authority instead of Host */
        q->nv[2].value = (uint8_t *)value;
        q->nv[2].valuelen = (size_t)(end - v);
        return 0;
    }
    nv_set(&q->nv[q->nnv++], name, nlen, value, (size_t)(end - v));
    return 1;
}

lg_h2_req_t *lg_h2_req_new(const char *method, int tls, const char *authority, const char *path,
                           const char *extra)
{
    size_t elen = extra ? strlen(extra) : 0, lines = 0;
    for (size_t i = 0; i < elen; i++)
        lines += extra[i] == '\n';
    lg_h2_req_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->nv = calloc(5 + lines, sizeof *q->nv);
    q->store = malloc(strlen(method) + strlen(authority) + strlen(path) + elen + 128);
    if (!q->nv || !q->store) {
        lg_h2_req_free(q);
        return NULL;
    }
    char *w = q->store;
    static const char *const names[] = {":method", ":scheme", ":authority", ":path", "user-agent"};
    const char *values[] = {method, tls ? "https" : "http", authority, path, "gatling-bench"};
    for (int i = 0; i < 5; i++) {
        char *n = put(&w, names[i], strlen(names[i]), 0);
        nv_set(&q->nv[i], n, strlen(n), put(&w, values[i], strlen(values[i]), 0),
               strlen(values[i]));
    }
    q->nnv = 5;
    for (const char *p = extra; p && *p;) {
        const char *eol = strstr(p, "\r\n");
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        extra_field(q, &w, p, len);
        p += len + (eol ? 2 : 0);
    }
    return q;
}

void lg_h2_req_free(lg_h2_req_t *q)
{
    if (q) {
        free(q->nv);
        free(q->store);
        free(q);
    }
}

/* ---- stream slots ---- */

static slot_t *stream_slot(lg_h2_t *h, int32_t id)
{
    slot_t *s = nghttp2_session_get_stream_user_data(h->ng, id);
    return s && s->state == S_OPEN && s->id == id ? s : NULL;
}

static void slot_end(lg_h2_t *h, slot_t *s, int kind)
{
    uint32_t i = (uint32_t)(s - h->slot);
    s->state = S_ENDED;
    s->kind = (int8_t)kind;
    s->next = NONE;
    if (h->end_tail == NONE)
        h->end_head = i;
    else
        h->slot[h->end_tail].next = i;
    h->end_tail = i;
}

/* ---- nghttp2 callbacks: they only record; the caller acts after the feed ---- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *fr, void *ud)
{
    (void)ng;
    slot_t *s = stream_slot(ud, fr->hd.stream_id);
    if (s)
        s->begun = 1;
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *fr, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    (void)ng, (void)flags;
    slot_t *s = stream_slot(ud, fr->hd.stream_id);
    /* nghttp2 has checked that :status is three digits */
    if (s && namelen == 7 && !memcmp(name, ":status", 7) && valuelen == 3)
        s->status = (uint16_t)((value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0'));
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *ud)
{
    (void)ng, (void)flags, (void)data;
    slot_t *s = stream_slot(ud, id);
    if (s)
        s->body += len;
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *fr, void *ud)
{
    (void)ng;
    lg_h2_t *h = ud;
    slot_t *s;
    switch (fr->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        if ((fr->hd.flags & NGHTTP2_FLAG_END_STREAM) && (s = stream_slot(h, fr->hd.stream_id)))
            slot_end(h, s, -1);
        break;
    case NGHTTP2_RST_STREAM:
        if ((s = stream_slot(h, fr->hd.stream_id)))
            s->peer_rst = 1;
        break;
    case NGHTTP2_GOAWAY:
        h->goaway = 1;
        h->goaway_code = fr->goaway.error_code;
        h->last_id = fr->goaway.last_stream_id;
        break;
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    (void)ng, (void)code;
    lg_h2_t *h = ud;
    slot_t *s = stream_slot(h, id);
    if (s) /* closed without END_STREAM from the server: the request is lost */
        slot_end(h, s,
                 s->peer_rst                    ? LG_E_RST
                 : h->goaway && id > h->last_id ? LG_E_GOAWAY
                                                : LG_E_PARSE);
    return 0;
}

/* ---- the session ---- */

lg_h2_t *lg_h2_new(unsigned streams)
{
    if (streams < 1 || streams > LG_H2_MAX_STREAMS)
        return NULL;
    lg_h2_t *h = calloc(1, sizeof *h);
    nghttp2_session_callbacks *cb = NULL;
    if (!h || !(h->slot = calloc(streams, sizeof *h->slot)) ||
        nghttp2_session_callbacks_new(&cb) != 0)
        goto fail;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    int k = nghttp2_session_client_new(&h->ng, cb, h);
    nghttp2_session_callbacks_del(cb);
    if (k != 0)
        goto fail;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                   {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WINDOW}};
    if (nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
        nghttp2_session_set_local_window_size(h->ng, NGHTTP2_FLAG_NONE, 0, WINDOW) != 0)
        goto fail;
    h->nslot = h->nfree = streams;
    for (unsigned i = 0; i < streams; i++)
        h->slot[i].next = i + 1 < streams ? i + 1 : NONE;
    h->free_top = 0;
    h->end_head = h->end_tail = NONE;
    return h;
fail:
    lg_h2_free(h);
    return NULL;
}

void lg_h2_free(lg_h2_t *h)
{
    if (!h)
        return;
    nghttp2_session_del(h->ng);
    free(h->slot);
    free(h->obuf);
    free(h);
}

unsigned lg_h2_room(lg_h2_t *h)
{
    if (h->goaway || !h->nfree)
        return 0;
    uint32_t max =
        nghttp2_session_get_remote_settings(h->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    unsigned busy = h->nslot - h->nfree;
    if (max <= busy)
        return 0;
    return max - busy < h->nfree ? max - busy : h->nfree;
}

int lg_h2_submit(lg_h2_t *h, const lg_h2_req_t *q, int64_t t)
{
    if (h->free_top == NONE)
        return -1;
    slot_t *s = &h->slot[h->free_top];
    int32_t id = nghttp2_submit_request(h->ng, NULL, q->nv, q->nnv, NULL, s);
    if (id < 0)
        return -1;
    h->free_top = s->next;
    h->nfree--;
    *s = (slot_t){.t = t, .id = id, .state = S_OPEN, .next = NONE};
    return 0;
}

int lg_h2_feed(lg_h2_t *h, const char *p, size_t n)
{
    if (!h->received && n) { /* a server without HTTP/2 answers the preface with HTTP/1.x */
        h->received = 1;
        size_t m = n < 5 ? n : 5;
        if (!memcmp(p, "HTTP/", m))
            return LG_E_NOH2;
    }
    ssize_t k = nghttp2_session_mem_recv(h->ng, (const uint8_t *)p, n);
    return k < 0 ? LG_E_PARSE : 0;
}

int lg_h2_next(lg_h2_t *h, lg_h2_end_t *e)
{
    if (h->end_head == NONE)
        return 0;
    uint32_t i = h->end_head;
    slot_t *s = &h->slot[i];
    h->end_head = s->next;
    if (h->end_head == NONE)
        h->end_tail = NONE;
    *e = (lg_h2_end_t){
        .t = s->t, .kind = s->kind, .begun = s->begun, .status = s->status, .body = s->body};
    s->state = S_FREE;
    s->next = h->free_top;
    h->free_top = i;
    h->nfree++;
    return 1;
}

long lg_h2_fill(lg_h2_t *h, gio_batch_t *b)
{
    if (!gio_batch_done(b))
        return 0;
    size_t len = 0;
    while (len < FILL_MAX) {
        const uint8_t *p;
        ssize_t k = nghttp2_session_mem_send(h->ng, &p);
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        if (len + (size_t)k > h->ocap) { /* b is empty: nothing points into obuf */
            size_t cap = h->ocap ? h->ocap : 512;
            while (cap < len + (size_t)k)
                cap *= 2;
            char *o = realloc(h->obuf, cap);
            if (!o)
                return -1;
            h->obuf = o;
            h->ocap = cap;
        }
        memcpy(h->obuf + len, p, (size_t)k);
        len += (size_t)k;
    }
    if (len && gio_batch_add_buf(b, h->obuf, len, 0) < 0)
        return -1;
    return (long)len;
}

unsigned lg_h2_inflight(const lg_h2_t *h)
{
    return h->nslot - h->nfree;
}

int lg_h2_begun(const lg_h2_t *h)
{
    for (unsigned i = 0; i < h->nslot; i++)
        if (h->slot[i].state != S_FREE && h->slot[i].begun)
            return 1;
    return 0;
}

int lg_h2_goaway(const lg_h2_t *h, uint32_t *code)
{
    if (h->goaway)
        *code = h->goaway_code;
    return h->goaway;
}

int lg_h2_over(lg_h2_t *h)
{
    return !nghttp2_session_want_read(h->ng) && !nghttp2_session_want_write(h->ng);
}
