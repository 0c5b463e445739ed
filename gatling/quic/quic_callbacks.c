/*
 * quic_callbacks.c — ngtcp2's callbacks (quic_callbacks, the table a new
 * connection gets) and what a new connection is set up with: its TLS session,
 * its path, its transport parameters.  quic.c calls here (quic_int.h).
 */
#ifdef HAVE_H3
#include "quic_int.h"
#include "quic_steer.h"
#include "site/acme_chal.h"
#include "site/proc.h"
#include "site/replay.h"
#include "tls/tls.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define QUIC_RX_MAX 1472          /* max_udp_payload_size: what fits Ethernet's MTU */
#define QUIC_STREAM_WINDOW (256 * 1024) /* a request stream's receive window */
#define QUIC_CONN_WINDOW (1024 * 1024)  /* the connection's */
#define QUIC_HANDSHAKE_S 10       /* a handshake not done in this long ends */

/* ---- ngtcp2's callbacks ----------------------------------------------------------- */

static void on_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    gnutls_rnd(GNUTLS_RND_NONCE, dest, len);
}

static int on_new_cid(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t len, void *user)
{
    (void)q;
    quic_conn_t *c = user;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, len) < 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    quic_steer_mark(cid->data, len, c->ep->steer);
    cid->datalen = len;
    if (ngtcp2_crypto_generate_stateless_reset_token(token, c->ep->secret, sizeof c->ep->secret,
                                                     cid) != 0 ||
        quic_cid_put(c->ep->cids, cid->data, cid->datalen, c) < 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int on_remove_cid(ngtcp2_conn *q, const ngtcp2_cid *cid, void *user)
{
    (void)q;
    quic_conn_t *c = user;
    if (quic_cid_get(c->ep->cids, cid->data, cid->datalen) == c)
        quic_cid_del(c->ep->cids, cid->data, cid->datalen);
    return 0;
}

/* CRYPTO data in: to GnuTLS while the handshake runs; after it (tls_release) a
   protocol violation. */
static int on_crypto_data(ngtcp2_conn *q, ngtcp2_crypto_level level, uint64_t off,
                          const uint8_t *p, size_t n, void *user)
{
    quic_conn_t *c = user;
    if (c->tls)
        return ngtcp2_crypto_recv_crypto_data_cb(q, level, off, p, n, user);
    ngtcp2_connection_close_error_set_transport_error(&c->err, NGTCP2_PROTOCOL_VIOLATION, NULL,
                                                      0);
    return NGTCP2_ERR_CALLBACK_FAILURE;
}

/* The connection of a GnuTLS session (quic_tls_setup's pointer). */
static quic_conn_t *conn_of(gnutls_session_t s)
{
    ngtcp2_crypto_conn_ref *ref = gnutls_session_get_ptr(s);
    return ref ? ref->user_data : NULL;
}

/* --acme-on-demand: a hello for a name no certificate answers asks the ACME
   client for one, as a TCP handshake's does (tls/); this handshake does not
   wait for it (GnuTLS picks what is loaded), the next ones get it. */
static void ondemand_ask(quic_conn_t *c, const char *name, size_t len)
{
    const proc_t *p = c->ep->site->proc;
    char addr[INET6_ADDRSTRLEN] = "-";
    const struct sockaddr *sa = (const struct sockaddr *)ngtcp2_conn_get_path(c->q)->remote.addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, addr, sizeof addr);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, addr, sizeof addr);
    if (!tls_ondemand_covers(p->tls, name, len, addr)) /* loaded: its use told, now and then */
        acme_chal_ask(p->acme_chal, name, len, addr);
}

/* The hello: mutual TLS asks for client certificates in the handshake where
   the server name's certificate does (tls/tls_client.h); a name no
   certificate answers is asked for under --acme-on-demand. */
static int on_client_hello(gnutls_session_t s)
{
    quic_conn_t *c = conn_of(s);
    char name[256];
    size_t len = sizeof name - 1;
    unsigned type;
    if (gnutls_server_name_get(s, name, &len, &type, 0) != 0 || type != GNUTLS_NAME_DNS)
        len = 0;
    if (c && c->h3 && len)
        h3_server_name(c->h3, name, len); /* for requests in 0-RTT, before the handshake ends */
    if (c && tls_client_asks_name(c->ep->site->proc->tls, len ? name : NULL, len))
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUEST);
    if (c && len && acme_chal_ondemand(c->ep->site->proc->acme_chal))
        ondemand_ask(c, name, len);
    return 0;
}

/* What the client sent where it was asked, verified by the store's rules
   (GnuTLS checked only that it holds the key), for the exchanges. */
static void client_cert(quic_conn_t *c, const char *sni, size_t snilen)
{
    tls_store_t *st = c->ep->site->proc->tls;
    if (!tls_client_asks_name(st, snilen ? sni : NULL, snilen))
        return;
    enum { CHAIN_MAX = 10 };
    unsigned n = 0;
    const gnutls_datum_t *p = gnutls_certificate_get_peers(c->tls, &n);
    const unsigned char *der[CHAIN_MAX];
    size_t len[CHAIN_MAX];
    n = p && n < CHAIN_MAX ? n : p ? CHAIN_MAX : 0;
    for (unsigned i = 0; i < n; i++)
        der[i] = p[i].data, len[i] = p[i].size;
    h3_client_cert(c->h3, tls_client_quic(st, snilen ? sni : NULL, snilen, der, len, n));
}

static int on_handshake_completed(ngtcp2_conn *q, void *user)
{
    quic_conn_t *c = user;
    c->ep->site->stats.h3_handshakes++;
    if (c->ep->replay) {
        if (gnutls_session_get_flags(c->tls) & GNUTLS_SFLAGS_EARLY_DATA)
            c->ep->site->stats.early_accepted++;
        /* a ticket for the next connection (GNUTLS_NO_AUTO_SEND_TICKET: QUIC
           sends it once the handshake is done, as ngtcp2's examples) */
        if (gnutls_session_ticket_send(c->tls, 1, 0) != 0)
            return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    c->ep->handshaking -= c->shaking;
    c->shaking = 0;
    char name[256]; /* the server name, for 421 */
    size_t len = sizeof name;
    unsigned type;
    if (gnutls_server_name_get(c->tls, name, &len, &type, 0) == 0 && type == GNUTLS_NAME_DNS)
        h3_server_name(c->h3, name, len);
    else
        len = 0;
    client_cert(c, name, len);
    h3_handshake_done(c->h3); /* what came in 0-RTT and waited is answered */
    /* a token for the client's next connection: validated at once, no Retry (quic_retry.h) */
    uint8_t token[QUIC_NEW_TOKEN_MAX];
    const ngtcp2_path *path = ngtcp2_conn_get_path(q);
    size_t n = quic_retry_new_token(c->ep->retry, (const struct sockaddr *)path->remote.addr,
                                    path->remote.addrlen, now_ts(c->ep), token);
    if (n && ngtcp2_conn_submit_new_token(q, token, n) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int on_tx_key(ngtcp2_conn *q, ngtcp2_crypto_level level, void *user)
{
    (void)q;
    quic_conn_t *c = user;
    if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION)
        return 0;
    return h3_bind(c->h3) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int on_stream_data(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t off,
                          const uint8_t *p, size_t n, void *user, void *stream_user)
{
    (void)q, (void)off, (void)stream_user;
    quic_conn_t *c = user;
    int r = h3_recv(c->h3, id, p, n, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
    if (r != 0) {
        ngtcp2_connection_close_error_set_application_error(
            &c->err, nghttp3_err_infer_quic_app_error_code(r), NULL, 0);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int on_acked(ngtcp2_conn *q, int64_t id, uint64_t off, uint64_t n, void *user,
                    void *stream_user)
{
    (void)q, (void)off, (void)stream_user;
    quic_conn_t *c = user;
    return nghttp3_conn_add_ack_offset(h3_ng(c->h3), id, n) == 0 ? 0
                                                                 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int on_stream_close(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t code,
                           void *user, void *stream_user)
{
    (void)stream_user;
    quic_conn_t *c = user;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
        code = NGHTTP3_H3_NO_ERROR;
    int r = nghttp3_conn_close_stream(h3_ng(c->h3), id, code);
    if (r == NGHTTP3_ERR_STREAM_NOT_FOUND) { /* a stream nghttp3 never saw */
        if (ngtcp2_is_bidi_stream(id))
            ngtcp2_conn_extend_max_streams_bidi(q, 1);
        return 0;
    }
    return r == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int on_stream_reset(ngtcp2_conn *q, int64_t id, uint64_t size, uint64_t code, void *user,
                           void *stream_user)
{
    (void)size, (void)code, (void)stream_user;
    quic_conn_t *c = user;
    if (ngtcp2_is_bidi_stream(id)) {
        if (h3_client_reset(c->h3, id) < 0) { /* rapid reset */
            ngtcp2_connection_close_error_set_application_error(
                &c->err, NGHTTP3_H3_EXCESSIVE_LOAD, NULL, 0);
            return NGTCP2_ERR_CALLBACK_FAILURE;
        }
        /* the request is cancelled: so is its answer (RFC 9114 4.1.1), and the stream
           closes at once, which it never would if nghttp3 never saw it */
        ngtcp2_conn_shutdown_stream_write(q, id, NGHTTP3_H3_REQUEST_CANCELLED);
    }
    int r = nghttp3_conn_shutdown_stream_read(h3_ng(c->h3), id);
    return r == 0 || r == NGHTTP3_ERR_STREAM_NOT_FOUND ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
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
    quic_conn_t *c = user;
    int r = nghttp3_conn_unblock_stream(h3_ng(c->h3), id);
    return r == 0 || r == NGHTTP3_ERR_STREAM_NOT_FOUND ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

const ngtcp2_callbacks quic_callbacks = {
    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
    .recv_crypto_data = on_crypto_data,
    .handshake_completed = on_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = on_stream_data,
    .acked_stream_data_offset = on_acked,
    .stream_close = on_stream_close,
    .rand = on_rand,
    .get_new_connection_id = on_new_cid,
    .remove_connection_id = on_remove_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = on_stream_reset,
    .extend_max_stream_data = on_extend_stream_data,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .stream_stop_sending = on_stop_sending,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
    .recv_tx_key = on_tx_key,
};

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
    return ((quic_conn_t *)ref->user_data)->q;
}

/* ---- a new connection's set-up ---------------------------------------------------- */

/* The datagram's path, its local port filled in (packet info carries none). */
void quic_path_of(quic_ep_t *e, gio_dgram_t *d, ngtcp2_path *path)
{
    if (!d->local.ss_family) {
        memcpy(&d->local, &e->bound, e->boundlen);
    } else if (d->local.ss_family == AF_INET) {
        ((struct sockaddr_in *)&d->local)->sin_port = htons((uint16_t)e->port);
    } else {
        ((struct sockaddr_in6 *)&d->local)->sin6_port = htons((uint16_t)e->port);
    }
    socklen_t ll = d->local.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                 : sizeof(struct sockaddr_in6);
    *path = (ngtcp2_path){.local = {(ngtcp2_sockaddr *)&d->local, ll},
                          .remote = {(ngtcp2_sockaddr *)&d->peer, d->peerlen}};
}

/* ---- early data (0-RTT, --early-data) -------------------------------------------- */

/* GnuTLS's anti-replay database: the shared table (site/replay.h), so that a
   first flight replayed to another -W worker is caught too.  Anything but a
   first sighting refuses the early data (fail closed). */
static int replay_add(void *ptr, time_t exp, const gnutls_datum_t *key, const gnutls_datum_t *data)
{
    (void)exp, (void)data;
    quic_ep_t *e = ptr;
    int r = replay_record(e->proc->replay, key->data, key->size, gio_now(e->site->loop));
    e->replay_said = 1 + r;
    if (r == REPLAY_NEW)
        return 0;
    if (r == REPLAY_SEEN)
        e->site->stats.early_replayed++;
    else
        e->site->stats.early_refused++;
    return GNUTLS_E_DB_ENTRY_EXISTS;
}

int quic_early_setup(quic_ep_t *e)
{
    if (!e->cfg->early_data || !e->proc->replay)
        return 0;
    if (gnutls_anti_replay_init(&e->replay) < 0) {
        e->replay = NULL;
        return -1;
    }
    gnutls_anti_replay_set_window(e->replay, REPLAY_WINDOW_MS - 1000); /* 10 s */
    gnutls_anti_replay_set_add_function(e->replay, replay_add);
    gnutls_anti_replay_set_ptr(e->replay, e);
    return 0;
}

/* The session ticket key (GnuTLS's 64 bytes, which it rotates by the clock
   itself), derived from the master the TCP side's tickets derive from (the
   same in every -W worker, and with --cluster on every node) and from the
   transport parameters a 0-RTT client remembers (RFC 9000 7.4.1): a ticket
   issued under other ones (a new -t) does not decrypt, so its 0-RTT is
   refused and a full handshake made, never 0-RTT against smaller limits.
   The master rotates with --cluster: a ticket of the previous one is not
   taken (GnuTLS takes one key per session). */
static int ticket_key(quic_ep_t *e, unsigned char key[64])
{
    unsigned char master[32], msg[64 + 256];
    char node[256] = "";
    /* --cluster: the node's name too.  GnuTLS 3.7's tickets have no room for
       a mark of the node that issued them, and the replay table is the
       node's own, so another node's ticket must not carry early data: it
       is not taken at all (a full handshake there) */
    if (e->cfg->cluster_etcd && gethostname(node, sizeof node - 1) < 0)
        return -1;
    if (tls_store_ticket_master(e->proc->tls, master) < 0)
        return -1;
    int n = snprintf((char *)msg, sizeof msg, "h3 ticket %c %d %d %d %d %s", 'a', e->cfg->timeout,
                     QUIC_STREAM_WINDOW, QUIC_CONN_WINDOW, H3_MAX_STREAMS, node);
    if (n < 0 || (size_t)n >= sizeof msg)
        return -1;
    int r = 0;
    for (int i = 0; i < 2 && r == 0; i++) {
        msg[10] = (unsigned char)('a' + i);
        r = gnutls_hmac_fast(GNUTLS_MAC_SHA256, master, sizeof master, msg, (size_t)n,
                             key + 32 * i);
    }
    explicit_bzero(master, sizeof master);
    return r < 0 ? -1 : 0;
}

/* Does the ClientHello msg offer early data (the early_data extension)? */
static int ext_early(void *ctx, unsigned tls_id, const unsigned char *data, unsigned size)
{
    (void)data, (void)size;
    if (tls_id == 42)
        *(int *)ctx = 1;
    return 0;
}

/* After the ClientHello: one that offered early data GnuTLS refused before
   the table was asked (the ticket's age out of the window, or older than
   the window's last rollover: it keeps no record from before) is counted
   refused; the table's own verdicts were counted by replay_add. */
static int on_hello_read(gnutls_session_t s, unsigned htype, unsigned when, unsigned incoming,
                         const gnutls_datum_t *msg)
{
    (void)htype, (void)when, (void)incoming;
    quic_conn_t *c = conn_of(s);
    if (!c)
        return 0;
    quic_ep_t *e = c->ep;
    int said = e->replay_said, offered = 0;
    e->replay_said = 0;
    if (said || (gnutls_session_get_flags(s) & GNUTLS_SFLAGS_EARLY_DATA))
        return 0;
    if (gnutls_ext_raw_parse(&offered, ext_early, msg, GNUTLS_EXT_RAW_FLAG_TLS_CLIENT_HELLO) ==
            0 &&
        offered)
        e->site->stats.early_refused++;
    return 0;
}

/* Resumption and 0-RTT for session s: tickets, early data of any size (QUIC
   bounds it with its flow control), the anti-replay. */
static int early_setup(quic_conn_t *c)
{
    quic_ep_t *e = c->ep;
    unsigned char k[64];
    if (ticket_key(e, k) < 0)
        return -1;
    gnutls_datum_t kd = {k, sizeof k};
    int r = gnutls_session_ticket_enable_server(c->tls, &kd);
    explicit_bzero(k, sizeof k);
    if (r < 0)
        return -1;
    gnutls_anti_replay_enable(c->tls, e->replay);
    gnutls_handshake_set_hook_function(c->tls, GNUTLS_HANDSHAKE_CLIENT_HELLO, GNUTLS_HOOK_POST,
                                       on_hello_read);
    gnutls_record_set_max_early_data_size(c->tls, 0xffffffffu);
    return 0;
}

int quic_tls_setup(quic_conn_t *c)
{
    quic_ep_t *e = c->ep;
    static const gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
    /* without --early-data no tickets and no GNUTLS_ENABLE_EARLY_DATA: 0-RTT is
       refused; with it, QUIC has no EndOfEarlyData (RFC 9001 8.3) */
    unsigned flags = GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET;
    if (e->replay)
        flags |= GNUTLS_ENABLE_EARLY_DATA | GNUTLS_NO_END_OF_EARLY_DATA;
    if (gnutls_init(&c->tls, flags) < 0) {
        c->tls = NULL;
        return -1;
    }
    c->cred = e->cred;
    c->cred->refs++;
    c->ref = (ngtcp2_crypto_conn_ref){.get_conn = get_conn, .user_data = c};
    if (gnutls_priority_set(c->tls, e->prio) < 0 ||
        ngtcp2_crypto_gnutls_configure_server_session(c->tls) != 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred->cred) < 0 ||
        gnutls_alpn_set_protocols(c->tls, &alpn, 1,
                                  GNUTLS_ALPN_MANDATORY | GNUTLS_ALPN_SERVER_PRECEDENCE) < 0)
        return -1;
    if (e->replay && early_setup(c) < 0)
        return -1;
    gnutls_session_set_ptr(c->tls, &c->ref);
    gnutls_handshake_set_post_client_hello_function(c->tls, on_client_hello);
    ngtcp2_conn_set_tls_native_handle(c->q, c->tls);
    return 0;
}

/* The connection's settings and parameters.  v: quic_retry_check's verdict; odcid:
   the client's first Destination Connection ID if a Retry token carried it. */
void quic_params(quic_ep_t *e, ngtcp2_settings *s, ngtcp2_transport_params *p,
                 const ngtcp2_pkt_hd *hd, int v, const ngtcp2_cid *odcid)
{
    ngtcp2_settings_default(s);
    s->initial_ts = now_ts(e);
    s->max_window = 6 * QUIC_CONN_WINDOW;
    s->max_stream_window = 6 * QUIC_STREAM_WINDOW;
    s->handshake_timeout = (ngtcp2_duration)QUIC_HANDSHAKE_S * NGTCP2_SECONDS;
    ngtcp2_transport_params_default(p);
    p->initial_max_stream_data_bidi_remote = QUIC_STREAM_WINDOW;
    p->initial_max_stream_data_uni = QUIC_STREAM_WINDOW;
    p->initial_max_data = QUIC_CONN_WINDOW;
    p->initial_max_streams_bidi = H3_MAX_STREAMS;
    p->initial_max_streams_uni = 3;
    p->max_idle_timeout = (ngtcp2_duration)e->cfg->timeout * NGTCP2_SECONDS;
    p->max_udp_payload_size = QUIC_RX_MAX;
    p->active_connection_id_limit = 7;
    p->stateless_reset_token_present = 1;
    p->original_dcid = v == QUIC_ADMIT_VALID ? *odcid : hd->dcid;
    if (v == QUIC_ADMIT_VALID) { /* RFC 9000 7.3: the Retry's ID */
        p->retry_scid = hd->dcid;
        p->retry_scid_present = 1;
    }
    if (v == QUIC_ADMIT_VALID || v == QUIC_ADMIT_TOKEN) {
        s->token = hd->token; /* the address is proved: no anti-amplification limit */
        e->site->stats.h3_validated++;
    }
}
#endif
