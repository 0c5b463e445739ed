/*
 * h3.c — the HTTP/3 codec on libnghttp3 (see h3.h).  Its shape follows h2.c:
 * a stream per exchange, its request fields kept in blocks of its own, jobs
 * and producers resumed the same way; what differs is that DATA is handed to
 * nghttp3 as vectors that must stay until the client acknowledged them, which
 * h3_body.c does (h3_int.h).  What a stream does alike over HTTP/2 (the
 * exchange's head, error page, body parts, a producer's request body,
 * dispatch) is stream_body.c's: this file gives it its sb_ops.
 */
#ifdef HAVE_H3
#include "h3.h"
#include "h3_int.h"
#include "codec/admit.h"
#include "http/hbuf.h"
#include "http/response.h"
#include "site/alog.h"
#include "site/encoding.h"
#include "site/fcache.h"
#include "site/jobs.h"
#include "site/peerlimits.h"
#include "tls/tls.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>


static const ex_codec_t h3_codec;
static const sb_ops_t h3_sb_ops;
SB_CHECK_LAYOUT(h3_stream_t);

static h3_stream_t *stream_of(exchange_t *ex)
{
    return (h3_stream_t *)ex;
}

static void unlink_stream(h3_stream_t *s)
{
    if (s->next)
        s->next->prevp = s->prevp;
    *s->prevp = s->next;
}

static void push_stream(h3_stream_t **head, h3_stream_t *s)
{
    s->next = *head;
    if (*head)
        (*head)->prevp = &s->next;
    s->prevp = head;
    *head = s;
}

/* What a stream holds goes; its memory goes back to the pool (its parts
   array with it), or is freed. */
static void stream_free(h3_stream_t *s)
{
    h3_t *h = s->h3;
    sb_release(&s->sb);
    for (h3_sent_t *x = s->sent, *next; x; x = next) {
        next = x->next;
        free(x->b);
        free(x);
    }
    sb_pool_give(h->pool, (sb_stream_t *)s);
}

/* ---- the response ---------------------------------------------------------------- */

/* HEADERS for the response (nghttp3 copies the fields), and DATA for a body
   of len bytes.  Alt-Svc, which names HTTP/3, is no news over it. */
static int submit(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    h3_stream_t *s = stream_of(ex);
    sb_head_strs_t strs;
    nghttp3_nv nv[HEAD_FIELDS_MAX];
    size_t n = sb_head_fields(ex, status, ctype, len, mtime, "alt-svc", &strs);
    const http_field_t *f = strs.t.low;
    if (!n)
        return -1;
    for (size_t i = 0; i < n; i++)
        nv[i] = (nghttp3_nv){(uint8_t *)f[i].name, (uint8_t *)f[i].value, f[i].nlen, f[i].vlen, 0};
    ex->status = (uint16_t)status;
    s->sb.streamed = len == EX_LEN_STREAM;
    if (ex->producer && !s->produced)
        s->produced = 1;
    ex->body_len = s->sb.streamed ? 0 : len;
    s->sb.body_left = head_has_body(ex->head_only, status) ? len : 0; /* streamed: UINT64_MAX */
    int body = s->sb.body_left > 0;
    s->answered = 1;
    nghttp3_data_reader dr = {.read_data = h3_read_data};
    int r = nghttp3_conn_submit_response(s->h3->ng, s->id, nv, n, body ? &dr : NULL);
    return r == 0 ? 0 : -1;
}

/* An informational head (100, 103; nghttp3 copies the fields). */
static int op_info(exchange_t *ex, const http_field_t *f, size_t n)
{
    h3_stream_t *s = stream_of(ex);
    nghttp3_nv nv[2];
    for (size_t i = 0; i < n && i < 2; i++)
        nv[i] = (nghttp3_nv){(uint8_t *)f[i].name, (uint8_t *)f[i].value, f[i].nlen, f[i].vlen, 0};
    int r = nghttp3_conn_submit_info(s->h3->ng, s->id, nv, n < 2 ? n : 2);
    return r == 0 ? 0 : r == NGHTTP3_ERR_NOMEM ? -1 : 1;
}

/* -R: this stream is the connection's last; the streams its GOAWAY lets in
   are still answered. */
static int op_last(exchange_t *ex)
{
    h3_t *h = stream_of(ex)->h3;
    if (h->goaway)
        return 0;
    h3_goaway(h);
    h->capped = 1;
    return 1;
}

static void op_turned_away(exchange_t *ex, int why)
{
    h3_stream_t *s = stream_of(ex);
    status_counters_t *st = &s->h3->f.site->stats;
    if (why == SB_NO_ROOM) /* its 100 streams' fields are at most HTTP_MAX_HEAD each: */
        st->h3_streams_refused++; /* 1.6 MiB a connection without the cap */
    else if (why == SB_FIELDS_OVER)
        st->h3_fields_refused++;
    else /* -A: this request is refused, not the connection */
        stream_abort(s, NGHTTP3_H3_EXCESSIVE_LOAD);
}

static const char *suite_of(ngtcp2_conn *q);

/* QUIC's TLS is always 1.3 (RFC 9001 4.2); the session is gone: the suite
   is the AEAD's. */
static void op_log_facts(exchange_t *ex, alog_facts_t *out)
{
    codec_log_facts(out, ex, NULL, "h3");
    out->tls_version = "TLSv1.3";
    out->tls_cipher = suite_of(stream_of(ex)->h3->q);
}

static void op_reset(exchange_t *ex, int why)
{
    static const uint64_t code[] = {[SB_INTERNAL] = NGHTTP3_H3_INTERNAL_ERROR,
                                    [SB_CALM] = NGHTTP3_H3_EXCESSIVE_LOAD,
                                    [SB_REFUSED] = NGHTTP3_H3_REQUEST_REJECTED};
    stream_abort(stream_of(ex), code[why]);
}

static void op_consume(exchange_t *ex, size_t n)
{
    h3_stream_t *s = stream_of(ex);
    consume(s->h3, s->id, n);
}

/* A part came: nghttp3's data reader that found none goes on. */
static void op_resume(exchange_t *ex)
{
    h3_stream_t *s = stream_of(ex);
    nghttp3_conn_resume_stream(s->h3->ng, s->id);
}

static const sb_ops_t h3_sb_ops = {
    .submit = submit,
    .reset = op_reset,
    .consume = op_consume,
    .resume = op_resume,
    .last = op_last,
    .turned_away = op_turned_away,
    .info = op_info,
    .log_facts = op_log_facts,
    .version = "HTTP/3.0",
    .stats_kind = STATS_H3,
};

static const ex_codec_t h3_codec = {
    SB_CODEC_OPS,
    .hints = admit_codec_hints,
};

/* ---- the request ----------------------------------------------------------------- */

/* The client's certificate, or none where one was asked (a handshake
   that did not finish its check: refused as a TCP client without one) */
static const ex_client_t *client_of(const h3_t *h)
{
    return h->client ? h->client
                     : tls_client_name(h->f.site->proc->tls, h->snilen ? h->sni : NULL, h->snilen);
}

static int on_begin_headers(nghttp3_conn *ng, int64_t id, void *user, void *stream_user)
{
    h3_t *h = user;
    if (stream_user) /* trailers come through their own callbacks; this is a second head */
        return 0;
    h3_stream_t *s = (h3_stream_t *)sb_pool_take(h->pool, sizeof *s, offsetof(h3_stream_t, req));
    if (!s)
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    s->sb.ops = &h3_sb_ops;
    s->sb.c = &h->sc;
    s->h3 = h;
    s->id = id;
    s->begun = gio_now(h->f.site->loop);
    s->sent_tail = &s->sent;
    codec_exchange_init(&s->ex, &h->f, &h3_codec, s);
    s->ex.client = client_of(h);
    s->ex.early_data = !h->done; /* stream data in 0-RTT, before the handshake completed */
    s->ex.req = &s->req;
    s->req.version = 30;
    h->open++;
    h->heading++;
    push_stream(&h->open_list, s);
    nghttp3_conn_set_stream_user_data(ng, id, s);
    return 0;
}

/* :path's value p[0..n): an absolute-path, or OPTIONS' "*"? */
static int origin_path(const char *p, size_t n)
{
    return n && (p[0] == '/' || (n == 1 && p[0] == '*'));
}

static int on_header(nghttp3_conn *ng, int64_t id, int32_t token, nghttp3_rcbuf *name,
                     nghttp3_rcbuf *value, uint8_t flags, void *user, void *stream_user)
{
    (void)ng, (void)id, (void)token, (void)flags, (void)user;
    h3_stream_t *s = stream_user;
    if (!s || s->sb.bad || s->sb.refused || s->headed)
        return 0;
    nghttp3_vec nm = nghttp3_rcbuf_get_buf(name), vl = nghttp3_rcbuf_get_buf(value);
    http_request_t *req = &s->req;
    size_t nlen = nm.len;
    const uint8_t *nb = nm.base;
    int authority = nlen == 10 && !memcmp(nb, ":authority", 10);
    int host = authority || (nlen == 4 && !memcmp(nb, "host", 4));
    const http_str_t *had = host ? http_header(req, "Host") : NULL;
    if (had) { /* :authority first; a host beside it names the same, or malformed (4.3.1) */
        if (had->n != vl.len || strncasecmp(had->p, (const char *)vl.base, vl.len))
            s->malformed = 1;
        return 0;
    }
    const char *v = admit_keep(&s->sb, vl.base, vl.len);
    if (!v)
        return 0;
    http_str_t val = {v, vl.len};
    if (nlen == 7 && !memcmp(nb, ":method", 7))
        req->method = val;
    else if (nlen == 5 && !memcmp(nb, ":path", 5) && !origin_path(v, vl.len))
        s->sb.bad = 1; /* RFC 9114 4.3.1: the absolute-path, never a URI (:authority names it) */
    else if (nlen == 5 && !memcmp(nb, ":path", 5))
        req->target = val;
    else if (nb[0] == ':' && !authority)
        return 0; /* :scheme; nghttp3 checked the set */
    else if (req->nheaders == HTTP_MAX_HEADERS)
        s->sb.bad = 1;
    else {
        const char *n = authority ? "host" : admit_keep(&s->sb, nb, nlen);
        if (n)
            req->headers[req->nheaders++] = (http_header_t){{n, authority ? 4 : nlen}, val};
    }
    return 0;
}

/* What every request goes through before it is answered (admit_request:
   the counts, -R, -A, 431, HEAD, the log line).  0: answer it. */
static int dispatch_begin(h3_stream_t *s)
{
    s->dispatched = 1;
    return admit_request(&s->sb, &s->req);
}

/* May a request of the stream be answered now, as early_hold asks? */
static int early_ok(const h3_stream_t *s)
{
    const h3_t *h = s->h3;
    return h->done ||
           (codec_early_safe(&s->ex) &&
            !tls_client_asks_name(h->f.site->proc->tls, h->snilen ? h->sni : NULL, h->snilen));
}

/* A request in 0-RTT (RFC 8470): answered at once if a replay of it would do
   no harm (codec_early_safe) and no client certificate is asked (the
   handshake has not proved one yet), else held until the handshake
   completes (h3_handshake_done).  1: held. */
static int early_hold(h3_stream_t *s)
{
    h3_t *h = s->h3;
    if (s->held)
        return 1;
    if (!s->ex.early_data || h->done)
        return 0;
    status_counters_t *st = &h->f.site->stats;
    if (early_ok(s)) {
        st->early_requests++;
        return 0;
    }
    st->early_held++;
    s->held = 1;
    return 1;
}

static void dispatch(h3_stream_t *s)
{
    if (early_hold(s))
        return;
    if (dispatch_begin(s) == 0)
        sb_dispatch(&s->sb);
}

void h3_handshake_done(h3_t *h)
{
    h->done = 1;
    for (h3_stream_t *s = h->open_list, *next; s; s = next) {
        next = s->next;
        if (!s->held)
            continue;
        s->held = 0;
        s->ex.early_data = 0; /* a replayed flight cannot get here: as a TCP held request's */
        s->ex.client = client_of(h); /* what the handshake proved */
        dispatch(s);
    }
}

/* A request head with a body to come: a producer takes it as it comes; else
   413 at once for a Content-Length over the limit. */
static void body_begins(h3_stream_t *s)
{
    s->in_body = 1;
    int r = admit_body(&s->sb);
    if (r == ADMIT_TOO_LARGE) {
        s->in_body = 0;
        if (dispatch_begin(s) == 0)
            ex_error(&s->ex, 413, NULL, NULL);
        return;
    }
    if (r == ADMIT_EARLY && s->ex.early_data && !early_ok(s)) {
        /* a body a producer takes as it comes, in 0-RTT: not held (it would
           have to be kept), 425 Too Early (RFC 8470 5.2: sent again after
           the handshake) */
        s->sb.early = 0;
        s->in_body = 0;
        s->h3->f.site->stats.early_425++;
        if (dispatch_begin(s) == 0)
            ex_error(&s->ex, 425, NULL, NULL);
        return;
    }
    if (r == ADMIT_EARLY)
        s->produced = 1;
    if (admit_continue(&s->sb) != 0) /* as h1.c and h2 send it */
        stream_abort(s, NGHTTP3_H3_INTERNAL_ERROR);
    if (s->sb.early)
        dispatch(s);
}

static int on_end_headers(nghttp3_conn *ng, int64_t id, int fin, void *user, void *stream_user)
{
    (void)ng, (void)id;
    h3_t *h = user;
    h3_stream_t *s = stream_user;
    if (!s || s->headed)
        return 0;
    s->headed = 1;
    h->heading--;
    h->headed = 1;
    if (s->sb.refused) /* reset already: nothing more to do */
        return 0;
    if (s->malformed) { /* a stream error (RFC 9114 4.1.2): the others go on */
        stream_abort(s, NGHTTP3_H3_MESSAGE_ERROR);
        return 0;
    }
    if (h->shut && !h->capped) { /* a drain: nghttp3 refuses new streams itself; be sure */
        stream_abort(s, NGHTTP3_H3_REQUEST_REJECTED);
        return 0;
    }
    if (h->goaway && !h->shut && ++h->after_notice > h3_max_streams(h))
        h3_shut(h); /* a window's worth since the notice is enough */
    if (!fin)
        body_begins(s);
    return 0;
}

static int on_data(nghttp3_conn *ng, int64_t id, const uint8_t *p, size_t n, void *user,
                   void *stream_user)
{
    (void)ng;
    h3_t *h = user;
    h3_stream_t *s = stream_user;
    if (s && s->sb.early) {
        sb_body_to_producer(&s->sb, p, n);
        return 0;
    }
    consume(h, id, n); /* dropped: the window opens at once */
    if (s && s->in_body && !s->dispatched && (s->body_got += n) > CODEC_BODY_MAX) {
        s->in_body = 0;
        if (dispatch_begin(s) == 0)
            ex_error(&s->ex, 413, NULL, NULL);
    }
    return 0;
}

static int on_deferred_consume(nghttp3_conn *ng, int64_t id, size_t n, void *user,
                               void *stream_user)
{
    (void)ng, (void)stream_user;
    consume(user, id, n);
    return 0;
}

static int on_end_stream(nghttp3_conn *ng, int64_t id, void *user, void *stream_user)
{
    (void)ng, (void)id;
    h3_t *h = user;
    h3_stream_t *s = stream_user;
    if (!s)
        return 0;
    s->peer_ended = 1;
    s->in_body = 0;
    if (s->sb.early) {
        s->sb.input_last = 1;
        if (!s->sb.input_held)
            sb_offer_held(&s->sb);
    } else if (s->sb.refused || s->malformed) {
        return 0;
    } else if (!s->dispatched && s->headed && (!h->shut || h->capped)) {
        dispatch(s);
    } else if (!s->dispatched && s->headed) {
        stream_abort(s, NGHTTP3_H3_REQUEST_REJECTED); /* draining: not answered, say so */
    }
    return 0;
}

/*
 * The TLS 1.3 cipher suite of q, in OpenSSL's (and the RFC's) spelling, for the
 * access log: by the AEAD that ngtcp2 keeps, since the TLS session itself is
 * gone once the handshake is done (quic.c's tls_release).  ngtcp2's GnuTLS
 * helper keeps the gnutls_cipher_algorithm_t as the AEAD's native handle.
 */
static const char *suite_of(ngtcp2_conn *q)
{
    const ngtcp2_crypto_ctx *cx = ngtcp2_conn_get_crypto_ctx(q);
    gnutls_cipher_algorithm_t a =
        cx ? (gnutls_cipher_algorithm_t)(intptr_t)cx->aead.native_handle : GNUTLS_CIPHER_UNKNOWN;
    return a == GNUTLS_CIPHER_AES_128_GCM         ? "TLS_AES_128_GCM_SHA256"
           : a == GNUTLS_CIPHER_AES_256_GCM       ? "TLS_AES_256_GCM_SHA384"
           : a == GNUTLS_CIPHER_CHACHA20_POLY1305 ? "TLS_CHACHA20_POLY1305_SHA256"
           : a == GNUTLS_CIPHER_AES_128_CCM       ? "TLS_AES_128_CCM_SHA256"
                                                  : NULL;
}

/* A request answered (or cut off with its connection): the log line, the counts. */
static void stream_log(h3_stream_t *s)
{
    if (!s->dispatched)
        return;
    s->dispatched = 0;
    admit_log(&s->sb);
}

/* The stream is over: log it; it is freed at the next sweep. */
static int on_stream_close(nghttp3_conn *ng, int64_t id, uint64_t code, void *user,
                           void *stream_user)
{
    (void)ng, (void)code;
    h3_t *h = user;
    h3_stream_t *s = stream_user;
    if (ngtcp2_is_bidi_stream(id))
        ngtcp2_conn_extend_max_streams_bidi(h->q, 1);
    if (!s)
        return 0;
    stream_log(s);
    if (s->fin_owed) { /* reset: no end to send */
        s->fin_owed = 0;
        h->fins_owed--;
    }
    if (s->ex.job) {
        s->ex.job->ex = NULL;
        s->ex.job = NULL;
    }
    s->sb.closed = 1;
    h->open--;
    h->heading -= !s->headed;
    unlink_stream(s);
    push_stream(&h->dead, s);
    return 0;
}

static int on_stop_sending(nghttp3_conn *ng, int64_t id, uint64_t code, void *user,
                           void *stream_user)
{
    (void)ng, (void)stream_user;
    return ngtcp2_conn_shutdown_stream_read(((h3_t *)user)->q, id, code) == 0
               ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

static int on_reset_stream(nghttp3_conn *ng, int64_t id, uint64_t code, void *user,
                           void *stream_user)
{
    (void)ng, (void)stream_user;
    return ngtcp2_conn_shutdown_stream_write(((h3_t *)user)->q, id, code) == 0
               ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

/* ---- the session ----------------------------------------------------------------- */

h3_pool_t *h3_pool_new(void)
{
    h3_pool_t *p = calloc(1, sizeof *p);
    if (p)
        p->max = H3_POOL_MAX;
    return p;
}

void h3_pool_free(h3_pool_t *p)
{
    if (p)
        sb_pool_empty(p);
    free(p);
}

h3_t *h3_new(const codec_conn_t *f, ngtcp2_conn *q, h3_pool_t *pool, const nghttp3_mem *mem)
{
    h3_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->f = *f;
    h->f.sni = h->sni; /* GnuTLS chose the certificate by it: 421 (route/router.c) */
    h->f.snilen = 0;
    h->sc = (sb_conn_t){.wake = f->wake, .conn = f->conn};
    h->q = q;
    h->pool = pool;
    site_t *site = f->site;
    h->reset_at = gio_now(site->loop);
    /* an address a flood defence ended lately gets less (--flood-memory), as over HTTP/2 */
    if ((h->level = (uint8_t)peer_allowance(site->limits, f->peer, h->reset_at)))
        site->stats.offender_reduced++;
    h->reset_milli = (uint64_t)peer_budget(H3_RESET_BURST, h->level) * 1000;
    h->reset_last = -1;
    nghttp3_callbacks cb = {
        .acked_stream_data = h3_on_acked,
        .stream_close = on_stream_close,
        .recv_data = on_data,
        .deferred_consume = on_deferred_consume,
        .begin_headers = on_begin_headers,
        .recv_header = on_header,
        .end_headers = on_end_headers,
        .stop_sending = on_stop_sending,
        .end_stream = on_end_stream,
        .reset_stream = on_reset_stream,
    };
    nghttp3_settings st;
    nghttp3_settings_default(&st);
    st.max_field_section_size = HTTP_MAX_HEAD;
    st.qpack_max_dtable_capacity = H3_QPACK_TABLE;
    st.qpack_encoder_max_dtable_capacity = 0; /* responses use the static table only */
    st.qpack_blocked_streams = H3_QPACK_BLOCKED;
    if (nghttp3_conn_server_new(&h->ng, &cb, &st, mem, h) != 0) {
        free(h);
        return NULL;
    }
    nghttp3_conn_set_max_client_streams_bidi(h->ng, h3_max_streams(h));
    return h;
}

int h3_bind(h3_t *h)
{
    int64_t ctrl, enc, dec;
    if (h->bound)
        return 0;
    if (ngtcp2_conn_get_max_local_streams_uni(h->q) < 3 ||
        ngtcp2_conn_open_uni_stream(h->q, &ctrl, NULL) != 0 ||
        nghttp3_conn_bind_control_stream(h->ng, ctrl) != 0 ||
        ngtcp2_conn_open_uni_stream(h->q, &enc, NULL) != 0 ||
        ngtcp2_conn_open_uni_stream(h->q, &dec, NULL) != 0 ||
        nghttp3_conn_bind_qpack_streams(h->ng, enc, dec) != 0)
        return -1;
    h->bound = 1;
    h->bound_at = gio_now(h->f.site->loop);
    return 0;
}

nghttp3_conn *h3_ng(h3_t *h)
{
    return h->ng;
}

int h3_recv(h3_t *h, int64_t stream_id, const uint8_t *p, size_t n, int fin)
{
    nghttp3_ssize r = nghttp3_conn_read_stream(h->ng, stream_id, p, n, fin);
    if (r < 0)
        return (int)r;
    consume(h, stream_id, (size_t)r);
    return 0;
}

void h3_sweep(h3_t *h)
{
    while (h->dead) {
        h3_stream_t *s = h->dead;
        unlink_stream(s);
        stream_free(s);
    }
    /* producers told when what they handed over has gone below the low mark */
    for (h3_stream_t *s = h->open_list; s && h->sc.drainers; s = s->next)
        sb_drained(&s->sb);
}

void h3_free(h3_t *h)
{
    if (!h)
        return;
    while (h->open_list) {
        h3_stream_t *s = h->open_list;
        stream_log(s);
        s->sb.closed = 1;
        unlink_stream(s);
        stream_free(s);
    }
    h3_sweep(h);
    nghttp3_conn_del(h->ng);
    free(h->client); /* after the streams' log lines, which name it */
    free(h);
}

static h3_stream_t *open_stream(const h3_t *h, int64_t id)
{
    for (h3_stream_t *s = h->open_list; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

void h3_fin_owed(h3_t *h, int64_t id)
{
    h3_stream_t *s = open_stream(h, id);
    if (s && !s->fin_owed) {
        s->fin_owed = 1;
        h->fins_owed++;
    }
}

int64_t h3_owed_fin(const h3_t *h)
{
    if (!h->fins_owed)
        return -1;
    for (h3_stream_t *s = h->open_list; s; s = s->next)
        if (s->fin_owed)
            return s->id;
    return -1;
}

void h3_fin_gone(h3_t *h, int64_t id)
{
    h3_stream_t *s = open_stream(h, id);
    if (s && s->fin_owed) {
        s->fin_owed = 0;
        h->fins_owed--;
    }
}

int64_t h3_head_due(const h3_t *h)
{
    int64_t s = (int64_t)h->f.site->cfg->head_timeout * 1000, due = INT64_MAX;
    if (!h->bound || h->goaway)
        return INT64_MAX; /* the handshake has its own limit; a drain its own */
    if (!h->headed)
        due = h->bound_at + s;
    for (const h3_stream_t *x = h->heading ? h->open_list : NULL; x; x = x->next)
        if (!x->headed && x->begun + s < due)
            due = x->begun + s;
    return due;
}

unsigned h3_max_streams(const h3_t *h)
{
    return peer_budget(H3_MAX_STREAMS, h->level);
}

/* The error log's line for a rapid reset that ends the connection. */
static void rapid_reset_log(h3_t *h, int64_t now)
{
    char d[160];
    hbuf_t b = hb_init(d, sizeof d);
    hb_puts(&b, "request streams reset: ");
    hb_num(&b, h->resets);
    hb_puts(&b, " in ");
    hb_num(&b, (uint64_t)(now - h->bound_at));
    hb_puts(&b, " ms (allowed ");
    hb_num(&b, peer_budget(H3_RESET_BURST, h->level));
    hb_puts(&b, ", then ");
    hb_num(&b, peer_budget(H3_RESET_RATE, h->level));
    hb_puts(&b, " a second)");
    const char *t = hb_str(&b); /* 160 bytes hold it */
    site_event(h->f.site, "HTTP/3 rapid reset, H3_EXCESSIVE_LOAD", h->f.peer,
               t ? t : "request streams reset");
}

int h3_client_reset(h3_t *h, int64_t id)
{
    if (id == h->reset_last)
        return h->calm ? -1 : 0;
    h->reset_last = id;
    h->resets++;
    site_t *site = h->f.site;
    int64_t now = gio_now(site->loop);
    uint64_t cap = (uint64_t)peer_budget(H3_RESET_BURST, h->level) * 1000;
    if (now > h->reset_at) { /* thousandths: rate per second is rate per ms in them */
        uint64_t add = (uint64_t)(now - h->reset_at) * peer_budget(H3_RESET_RATE, h->level);
        h->reset_milli = cap - h->reset_milli < add ? cap : h->reset_milli + add;
        h->reset_at = now;
    }
    if (h->reset_milli >= 1000) {
        h->reset_milli -= 1000;
        return 0;
    }
    if (!h->calm) {
        h->calm = 1;
        site->stats.h3_rapid_reset++;
        site->stats.offences++;
        peer_offence(site->limits, h->f.peer, PEER_RESETS, now);
        rapid_reset_log(h, now);
    }
    return -1;
}

void h3_server_name(h3_t *h, const char *name, size_t len)
{
    if (len < sizeof h->sni) {
        memcpy(h->sni, name, len);
        h->snilen = h->f.snilen = len;
    }
}

void h3_client_cert(h3_t *h, ex_client_t *facts)
{
    free(h->client);
    h->client = facts;
}

void h3_goaway(h3_t *h)
{
    if (h->goaway)
        return;
    h->goaway = 1;
    h->notice_at = gio_now(h->f.site->loop);
    if (!h->bound || nghttp3_conn_submit_shutdown_notice(h->ng) != 0)
        h3_shut(h); /* no control stream yet: nothing to notice */
}

void h3_shut(h3_t *h)
{
    if (h->shut)
        return;
    h->goaway = h->shut = 1;
    if (h->bound)
        nghttp3_conn_shutdown(h->ng);
}

int64_t h3_shut_due(const h3_t *h)
{
    return h->goaway && !h->shut ? h->notice_at + H3_NOTICE_MS : INT64_MAX;
}

int h3_done(const h3_t *h)
{
    return h->shut && !h->open;
}

#endif
