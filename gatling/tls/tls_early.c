/* Early data (0-RTT): see tls_early.h. */
#include "tls_early.h"
#include "tls_int.h"
#include "site/replay.h"

#include <openssl/ssl.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

const optdef_t tls_early_opts[] = {
    OPT_ROW_NUM(0, "early-data", OPT_NUMBER, 0, 1 << 24, early_data,
                "not a number of entries (0-16777216)",
        "  --early-data n  accept TLS 1.3 and QUIC early data (0-RTT) from returning\n"
        "            clients for requests safe to replay (GET, HEAD), remembering up to\n"
        "            n ClientHellos (shared by -W's workers) to refuse replays; a full\n"
        "            table refuses early data (default 0: off; 65536 takes 1 MB)\n"),
    OPT_LAST};

/* SSL ex_data: the outcome (TLS_EARLY_*) not yet taken, and whether the
   ticket the session resumes was sealed by another node's store. */
static int outcome_idx = -1, foreign_idx = -1;

#define TAKEN 0x10 /* outcome_idx: counted */

/* A ticket's app data: this tag and the sealing store's node id. */
#define NODE_TAG "gE1"

static void mark(SSL *ssl, int idx, int v)
{
    SSL_set_ex_data(ssl, idx, (void *)(intptr_t)v);
}

static int marked(SSL *ssl, int idx)
{
    return idx < 0 ? 0 : (int)(intptr_t)SSL_get_ex_data(ssl, idx);
}

/* A ticket is issued: it names this node (the store's random id, made
   before -W's fork, so every worker's; another --cluster node's differs). */
static int on_ticket_gen(SSL *ssl, void *arg)
{
    const tls_store_t *st = arg;
    unsigned char v[sizeof NODE_TAG - 1 + sizeof st->node];
    memcpy(v, NODE_TAG, sizeof NODE_TAG - 1);
    memcpy(v + sizeof NODE_TAG - 1, st->node, sizeof st->node);
    SSL_SESSION *s = SSL_get_session(ssl);
    if (s)
        (void)SSL_SESSION_set1_ticket_appdata(s, v, sizeof v);
    return 1; /* a ticket without it only loses its early data */
}

/* A ticket was decrypted (tls_ctx.c's on_ticket): resumed as OpenSSL would
   without this callback; one sealed elsewhere is marked for on_early. */
static SSL_TICKET_RETURN on_ticket_dec(SSL *ssl, SSL_SESSION *ss, const unsigned char *name,
                                       size_t namelen, SSL_TICKET_STATUS status, void *arg)
{
    const tls_store_t *st = arg;
    (void)name, (void)namelen;
    switch (status) {
    case SSL_TICKET_FATAL_ERR_MALLOC:
    case SSL_TICKET_FATAL_ERR_OTHER: return SSL_TICKET_RETURN_ABORT;
    case SSL_TICKET_SUCCESS:
    case SSL_TICKET_SUCCESS_RENEW: break;
    default: return SSL_TICKET_RETURN_IGNORE_RENEW; /* none, or not ours: a full handshake */
    }
    void *v = NULL;
    size_t n = 0;
    const size_t tag = sizeof NODE_TAG - 1;
    int ours = SSL_SESSION_get0_ticket_appdata(ss, &v, &n) && n == tag + sizeof st->node &&
               !memcmp(v, NODE_TAG, tag) && !memcmp((char *)v + tag, st->node, sizeof st->node);
    mark(ssl, foreign_idx, !ours);
    return status == SSL_TICKET_SUCCESS ? SSL_TICKET_RETURN_USE : SSL_TICKET_RETURN_USE_RENEW;
}

/*
 * May this handshake's early data be accepted?  OpenSSL asks only when
 * everything else allows it (a resumption of a ticket that allows early
 * data, its ticket age within 10 s, the same ALPN and SNI).  Fail closed:
 * no table, another node's ticket, a client certificate asked for (its
 * verification is the handshake's: a request must wait for it), a full or
 * young table refuse; a random seen within the window is a replay.
 */
static int on_early(SSL *ssl, void *arg)
{
    const tls_store_t *st = arg;
    replay_t *t = st->proc ? st->proc->replay : NULL;
    int out = TLS_EARLY_REFUSED;
    if (t && !marked(ssl, foreign_idx) && !(SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER)) {
        unsigned char rnd[SSL3_RANDOM_SIZE];
        size_t n = SSL_get_client_random(ssl, rnd, sizeof rnd);
        int r = n == sizeof rnd ? replay_record(t, rnd, n, replay_clock_ms()) : REPLAY_FULL;
        out = r == REPLAY_NEW ? TLS_EARLY_ACCEPTED : r == REPLAY_SEEN ? TLS_EARLY_REPLAYED
                                                                      : TLS_EARLY_REFUSED;
    }
    mark(ssl, outcome_idx, out);
    return out == TLS_EARLY_ACCEPTED;
}

int tls_early_setup(SSL_CTX *ctx, tls_store_t *st, char *err, size_t errlen)
{
    if (!st->cfg || st->cfg->early_data <= 0)
        return 0; /* off: max_early_data stays 0, tickets allow none */
    if (outcome_idx < 0)
        outcome_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    if (foreign_idx < 0)
        foreign_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    /* OpenSSL's anti-replay keeps sessions in the process's cache and takes
       each once: the workers and nodes do not share it; the table does */
    SSL_CTX_set_options(ctx, SSL_OP_NO_ANTI_REPLAY);
    if (outcome_idx < 0 || foreign_idx < 0 || !SSL_CTX_set_max_early_data(ctx, TLS_EARLY_MAX) ||
        !SSL_CTX_set_recv_max_early_data(ctx, TLS_EARLY_MAX) ||
        !SSL_CTX_set_session_ticket_cb(ctx, on_ticket_gen, on_ticket_dec, st)) {
        snprintf(err, errlen, "--early-data: OpenSSL refused its settings");
        return -1;
    }
    SSL_CTX_set_allow_early_data_cb(ctx, on_early, st);
    return 0;
}

int tls_early_on(SSL *ssl)
{
    return SSL_get_max_early_data(ssl) > 0;
}

int tls_early_take(SSL *ssl)
{
    int v = marked(ssl, outcome_idx);
    if (v == TAKEN)
        return TLS_EARLY_NONE;
    /* OpenSSL refused it before asking (a ticket age off by more than its
       10 s, another ALPN or server name, no resumption): refused too */
    if (!v && SSL_get_early_data_status(ssl) == SSL_EARLY_DATA_REJECTED)
        v = TLS_EARLY_REFUSED;
    if (v)
        mark(ssl, outcome_idx, TAKEN);
    return v;
}
