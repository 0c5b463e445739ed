/*
 * bench_h3_cb — bench --h3: what ngtcp2 and nghttp3 call back for one
 * connection (keys, stream data, acknowledgements, a stream's fields, data,
 * end, reset, GOAWAY) and the request fields made from bench's HTTP/1.1
 * request; the tables bench_h3.c gives the libraries (bench_h3_int.h).
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#ifdef HAVE_H3
#include "bench_h3_int.h"

#include <ctype.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int hop_field(const char *name)
{
    static const char *const hop[] = {"connection", "keep-alive", "proxy-connection",
                                      "transfer-encoding", "upgrade", "te", NULL};
    for (int i = 0; hop[i]; i++)
        if (!strcmp(name, hop[i]))
            return 1;
    return 0;
}

static void nv_add(h3req_t *q, const char *name, size_t nl, const char *value, size_t vl)
{
    if (q->n < H3B_FIELDS)
        q->nv[q->n++] = (nghttp3_nv){(uint8_t *)(uintptr_t)name, (uint8_t *)(uintptr_t)value,
                                     nl, vl, NGHTTP3_NV_FLAG_NONE};
}

/*
 * The request line and fields of bench's HTTP/1.1 request text ("GET /p HTTP/1.1\r\n
 * Host: h\r\nName: v\r\n...\r\n") as HTTP/3 fields: :method, :scheme https,
 * :authority (Host), :path, then the rest in lower case, hop-by-hop ones left out.
 */
int h3b_req_make(h3req_t *q, const char *text)
{
    memset(q, 0, sizeof *q);
    if (!(q->mem = strdup(text)))
        return -1;
    char *line = q->mem, *eol = strstr(line, "\r\n");
    char *sp1 = strchr(line, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!eol || !sp1 || !sp2 || sp2 > eol)
        return -1;
    *sp1 = *sp2 = 0;
    nv_add(q, ":method", 7, line, strlen(line));
    nv_add(q, ":scheme", 7, "https", 5);
    size_t auth_at = q->n;
    nv_add(q, ":authority", 10, "", 0);
    nv_add(q, ":path", 5, sp1 + 1, strlen(sp1 + 1));
    for (line = eol + 2; (eol = strstr(line, "\r\n")) && eol != line; line = eol + 2) {
        *eol = 0;
        char *colon = strchr(line, ':');
        if (!colon)
            return -1;
        *colon = 0;
        char *v = colon + 1 + strspn(colon + 1, " \t");
        for (char *p = line; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        if (!strcmp(line, "host"))
            q->nv[auth_at].value = (uint8_t *)v, q->nv[auth_at].valuelen = strlen(v);
        else if (!hop_field(line))
            nv_add(q, line, strlen(line), v, strlen(v));
    }
    return q->n < H3B_FIELDS ? 0 : -1;
}

static void slot_put(h3conn_t *c, h3slot_t *s)
{
    s->next_free = c->free;
    c->free = s;
    c->inflight--;
}

/* A response is complete (its stream ended): count it like bench_run's response_done. */
static void response_done(h3run_t *r, h3slot_t *s)
{
    bench_stats_t *st = r->st;
    h3conn_t *c = s->c;
    st->responses++;
    st->body += s->body;
    unsigned cls = s->status >= 100 && s->status < 600 ? s->status / 100 : 0;
    st->status[cls]++;
    if (s->status >= 400)
        st->err[LG_E_STATUS]++;
    int64_t lat = r->now - s->t;
    lg_hist_add(&st->lat, lat > 0 ? (uint64_t)lat / 1000 : 0);
    c->progress = r->now;
    slot_put(c, s);
}

static h3conn_t *of(void *user)
{
    return user;
}

static void on_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    gnutls_rnd(GNUTLS_RND_NONCE, dest, len);
}

static int on_new_cid(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t len, void *user)
{
    (void)q, (void)user;
    if (gnutls_rnd(GNUTLS_RND_NONCE, cid->data, len) < 0 ||
        gnutls_rnd(GNUTLS_RND_NONCE, token, NGTCP2_STATELESS_RESET_TOKENLEN) < 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    cid->datalen = len;
    return 0;
}

/* 1-RTT keys: the HTTP/3 control and QPACK streams can open. */
static int on_rx_key(ngtcp2_conn *q, ngtcp2_crypto_level level, void *user)
{
    h3conn_t *c = of(user);
    int64_t ctrl, enc, dec;
    if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION || c->bound)
        return 0;
    if (ngtcp2_conn_open_uni_stream(q, &ctrl, NULL) != 0 ||
        nghttp3_conn_bind_control_stream(c->h3, ctrl) != 0 ||
        ngtcp2_conn_open_uni_stream(q, &enc, NULL) != 0 ||
        ngtcp2_conn_open_uni_stream(q, &dec, NULL) != 0 ||
        nghttp3_conn_bind_qpack_streams(c->h3, enc, dec) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    c->bound = 1;
    return 0;
}

static int on_handshake_completed(ngtcp2_conn *q, void *user)
{
    (void)q;
    h3conn_t *c = of(user);
    h3run_t *r = c->r;
    r->now = lg_now_ns();
    c->state = S_OPEN;
    r->shaking--;
    r->st->connects++;
    r->st->open++;
    lg_hist_add(&r->st->hs, (uint64_t)(r->now - c->t0) / 1000);
    /* the "connect" time: to the server's first answer (counted with the connection, so
       that the histogram's count is the connections', as for TCP) */
    lg_hist_add(&r->st->conn, (uint64_t)((c->heard ? c->heard : r->now) - c->t0) / 1000);
    return 0;
}

static int on_stream_data(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t off,
                          const uint8_t *p, size_t n, void *user, void *stream_user)
{
    (void)off, (void)stream_user;
    h3conn_t *c = of(user);
    nghttp3_ssize k =
        nghttp3_conn_read_stream(c->h3, id, p, n, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
    if (k < 0) {
        c->fail_kind = LG_E_PARSE;
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    ngtcp2_conn_extend_max_stream_offset(q, id, (uint64_t)k);
    ngtcp2_conn_extend_max_offset(q, (uint64_t)k);
    return 0;
}

static int on_acked(ngtcp2_conn *q, int64_t id, uint64_t off, uint64_t n, void *user,
                    void *stream_user)
{
    (void)q, (void)off, (void)stream_user;
    return nghttp3_conn_add_ack_offset(of(user)->h3, id, n) == 0 ? 0
                                                                 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int on_stream_close(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t code,
                           void *user, void *stream_user)
{
    (void)q, (void)stream_user;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
        code = NGHTTP3_H3_NO_ERROR;
    int rv = nghttp3_conn_close_stream(of(user)->h3, id, code);
    return rv == 0 || rv == NGHTTP3_ERR_STREAM_NOT_FOUND ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int on_stream_reset(ngtcp2_conn *q, int64_t id, uint64_t size, uint64_t code, void *user,
                           void *stream_user)
{
    (void)q, (void)size, (void)code, (void)stream_user;
    int rv = nghttp3_conn_shutdown_stream_read(of(user)->h3, id);
    return rv == 0 || rv == NGHTTP3_ERR_STREAM_NOT_FOUND ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int on_stop_sending(ngtcp2_conn *q, int64_t id, uint64_t code, void *user,
                           void *stream_user)
{
    return on_stream_reset(q, id, 0, code, user, stream_user);
}

static int on_extend_stream_data(ngtcp2_conn *q, int64_t id, uint64_t max, void *user,
                                 void *stream_user)
{
    (void)q, (void)max, (void)stream_user;
    int rv = nghttp3_conn_unblock_stream(of(user)->h3, id);
    return rv == 0 || rv == NGHTTP3_ERR_STREAM_NOT_FOUND ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

const ngtcp2_callbacks h3b_quic_cb = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = on_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = on_stream_data,
    .acked_stream_data_offset = on_acked,
    .stream_close = on_stream_close,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .rand = on_rand,
    .get_new_connection_id = on_new_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = on_stream_reset,
    .extend_max_stream_data = on_extend_stream_data,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .stream_stop_sending = on_stop_sending,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
    .recv_rx_key = on_rx_key,
};

static int h3_header(nghttp3_conn *ng, int64_t id, int32_t token, nghttp3_rcbuf *name,
                     nghttp3_rcbuf *value, uint8_t flags, void *user, void *stream_user)
{
    (void)ng, (void)id, (void)name, (void)flags, (void)user;
    h3slot_t *s = stream_user;
    if (!s || token != NGHTTP3_QPACK_TOKEN__STATUS)
        return 0;
    nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
    unsigned st = 0;
    for (size_t i = 0; i < v.len && i < 3; i++)
        st = st * 10 + (unsigned)(v.base[i] - '0');
    if (st >= 200 || !s->status) /* the final status, not a 1xx before it */
        s->status = st;
    return 0;
}

static int h3_data(nghttp3_conn *ng, int64_t id, const uint8_t *p, size_t n, void *user,
                   void *stream_user)
{
    (void)ng, (void)p;
    h3conn_t *c = of(user);
    h3slot_t *s = stream_user;
    if (s)
        s->body += n;
    ngtcp2_conn_extend_max_stream_offset(c->q, id, n);
    ngtcp2_conn_extend_max_offset(c->q, n);
    return 0;
}

static int h3_deferred(nghttp3_conn *ng, int64_t id, size_t n, void *user, void *stream_user)
{
    (void)ng, (void)stream_user;
    h3conn_t *c = of(user);
    ngtcp2_conn_extend_max_stream_offset(c->q, id, n);
    ngtcp2_conn_extend_max_offset(c->q, n);
    return 0;
}

/* The response ended (FIN): complete; the slot is free at once. */
static int h3_end(nghttp3_conn *ng, int64_t id, void *user, void *stream_user)
{
    h3conn_t *c = of(user);
    h3slot_t *s = stream_user;
    if (!s)
        return 0;
    nghttp3_conn_set_stream_user_data(ng, id, NULL);
    c->r->now = lg_now_ns();
    response_done(c->r, s);
    return 0;
}

/* Closed before its end: reset by the server (or by us, for a bad response).  One
   the server refused unread (H3_REQUEST_REJECTED: sent past its GOAWAY, -R's or a
   drain's) goes out again on another connection, as --h2 does (RFC 9114 4.1.1). */
static int h3_close(nghttp3_conn *ng, int64_t id, uint64_t code, void *user, void *stream_user)
{
    (void)ng, (void)id;
    h3conn_t *c = of(user);
    h3slot_t *s = stream_user;
    if (!s)
        return 0;
    if (code == NGHTTP3_H3_REQUEST_REJECTED) {
        c->r->st->requests--; /* issued again later: counted then */
        c->r->st->retried++;
        c->r->started--;
    } else {
        c->r->st->lost++;
        c->r->st->err[LG_E_RST]++;
    }
    slot_put(c, s);
    return 0;
}

static int h3_stop_sending(nghttp3_conn *ng, int64_t id, uint64_t code, void *user,
                           void *stream_user)
{
    (void)ng, (void)stream_user;
    return ngtcp2_conn_shutdown_stream_read(of(user)->q, id, code) == 0
               ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

static int h3_reset_stream(nghttp3_conn *ng, int64_t id, uint64_t code, void *user,
                           void *stream_user)
{
    (void)ng, (void)stream_user;
    return ngtcp2_conn_shutdown_stream_write(of(user)->q, id, code) == 0
               ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

/* The server's GOAWAY: no new stream on this connection; it ends when the ones in flight do. */
static int h3_goaway(nghttp3_conn *ng, int64_t id, void *user)
{
    (void)ng, (void)id;
    of(user)->closing = 1;
    return 0;
}

const nghttp3_callbacks h3b_h3_cb = {
    .stream_close = h3_close,
    .recv_data = h3_data,
    .deferred_consume = h3_deferred,
    .recv_header = h3_header,
    .stop_sending = h3_stop_sending,
    .end_stream = h3_end,
    .reset_stream = h3_reset_stream,
    .shutdown = h3_goaway,
};

ngtcp2_conn *h3b_get_conn(ngtcp2_crypto_conn_ref *ref)
{
    return ((h3conn_t *)ref->user_data)->q;
}

#else
typedef int bench_h3_cb_none; /* built without HTTP/3 */
#endif
