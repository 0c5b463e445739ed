/*
 * quic_retry.c — who gets a Retry, and the tokens (see quic_retry.h).
 */
#ifdef HAVE_H3
#include "quic_retry.h"
#include "quic_steer.h"
#include "site/config.h"
#include "site/siphash.h"

#include <netinet/in.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* An address's new connections in the current second (a slot may be shared). */
typedef struct retry_slot {
    int64_t second; /* now_ms / 1000 of the count */
    uint32_t count;
} retry_slot_t;

struct quic_retry {
    int mode;
    uint8_t secret[32]; /* the tokens' keying material */
    uint8_t hkey[16];   /* the slots' SipHash key */
    retry_slot_t slot[QUIC_RETRY_SLOTS];
};

quic_retry_t *quic_retry_new(int mode)
{
    quic_retry_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->mode = mode;
    if (getrandom(r->secret, sizeof r->secret, 0) != (ssize_t)sizeof r->secret) {
        free(r); /* tokens need a secret nobody can guess: no fallback */
        return NULL;
    }
    siphash_key(r->hkey);
    return r;
}

void quic_retry_free(quic_retry_t *r)
{
    if (!r)
        return;
    explicit_bzero(r, sizeof *r);
    free(r);
}

/* The client as peerlimits counts it: IPv4 (mapped too) as ::ffff:a.b.c.d, IPv6 its /64. */
static void client_key(const struct sockaddr *sa, uint8_t key[16])
{
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        memcpy(key, a, memcmp(a, mapped, 12) ? 8 : 16);
    }
}

/* One more new connection from sa this second: 1 if that is over QUIC_RETRY_PER_ADDR. */
static int too_many(quic_retry_t *r, const struct sockaddr *sa, int64_t now_ms)
{
    uint8_t key[16];
    client_key(sa, key);
    retry_slot_t *s = &r->slot[siphash24(r->hkey, key, sizeof key) % QUIC_RETRY_SLOTS];
    int64_t sec = now_ms / 1000;
    if (s->second != sec)
        *s = (retry_slot_t){sec, 0};
    if (s->count < UINT32_MAX)
        s->count++;
    return s->count > QUIC_RETRY_PER_ADDR;
}

/* A Retry to the Initial in: a fresh connection ID for the client to use,
   and the token that carries its first one back. */
static int write_retry(quic_retry_t *r, const quic_initial_t *in, uint8_t *out, size_t *outlen)
{
    const ngtcp2_pkt_hd *hd = in->hd;
    uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
    ngtcp2_cid scid = {.datalen = NGTCP2_MAX_CIDLEN};
    if (getrandom(scid.data, scid.datalen, 0) != (ssize_t)scid.datalen)
        return QUIC_ADMIT_DROP;
    /* the client's next Initial comes to this ID: the socket (-W: the worker) whose
       secret checks the token */
    quic_steer_mark(scid.data, scid.datalen, in->steer);
    ngtcp2_ssize tl = ngtcp2_crypto_generate_retry_token(
        token, r->secret, sizeof r->secret, hd->version, (const ngtcp2_sockaddr *)in->peer,
        (ngtcp2_socklen)in->peerlen, &scid, &hd->dcid, in->ts);
    if (tl < 0)
        return QUIC_ADMIT_DROP;
    ngtcp2_ssize n = ngtcp2_crypto_write_retry(out, QUIC_RETRY_OUT_MAX, hd->version, &hd->scid,
                                               &scid, &hd->dcid, token, (size_t)tl);
    if (n <= 0)
        return QUIC_ADMIT_DROP;
    *outlen = (size_t)n;
    return QUIC_ADMIT_RETRY;
}

int quic_retry_check(quic_retry_t *r, const quic_initial_t *in, ngtcp2_cid *odcid, uint8_t *out,
                     size_t *outlen)
{
    const ngtcp2_pkt_hd *hd = in->hd;
    *outlen = 0;
    if (hd->type == NGTCP2_PKT_INITIAL && hd->token.len &&
        hd->token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
        if (ngtcp2_crypto_verify_retry_token(
                odcid, hd->token.base, hd->token.len, r->secret, sizeof r->secret, hd->version,
                (const ngtcp2_sockaddr *)in->peer, (ngtcp2_socklen)in->peerlen, &hd->dcid,
                (ngtcp2_duration)QUIC_RETRY_TOKEN_S * NGTCP2_SECONDS, in->ts) == 0)
            return QUIC_ADMIT_VALID;
        /* RFC 9000 8.1.3: INVALID_TOKEN, from the IDs the client chose, no state kept */
        ngtcp2_ssize n = ngtcp2_crypto_write_connection_close(
            out, QUIC_RETRY_OUT_MAX, hd->version, &hd->scid, &hd->dcid, NGTCP2_INVALID_TOKEN,
            NULL, 0);
        if (n <= 0)
            return QUIC_ADMIT_DROP;
        *outlen = (size_t)n;
        return QUIC_ADMIT_BAD;
    }
    if (hd->token.len && hd->token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR &&
        ngtcp2_crypto_verify_regular_token(
            hd->token.base, hd->token.len, r->secret, sizeof r->secret,
            (const ngtcp2_sockaddr *)in->peer, (ngtcp2_socklen)in->peerlen,
            (ngtcp2_duration)QUIC_NEW_TOKEN_S * NGTCP2_SECONDS, in->ts) == 0)
        return QUIC_ADMIT_TOKEN;
    if (r->mode == CONFIG_RETRY_NEVER || hd->type != NGTCP2_PKT_INITIAL)
        return QUIC_ADMIT_NEW;
    /* counted whatever the verdict, so that a flood of them keeps its address retried */
    int many = too_many(r, in->peer, in->now_ms);
    if (r->mode == CONFIG_RETRY_ALWAYS || in->busy || many)
        return write_retry(r, in, out, outlen);
    return QUIC_ADMIT_NEW;
}

size_t quic_retry_new_token(quic_retry_t *r, const struct sockaddr *peer, socklen_t peerlen,
                            ngtcp2_tstamp ts, uint8_t *out)
{
    _Static_assert(QUIC_NEW_TOKEN_MAX >= NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN, "room");
    if (peer->sa_family != AF_INET && peer->sa_family != AF_INET6)
        return 0;
    ngtcp2_ssize n = ngtcp2_crypto_generate_regular_token(
        out, r->secret, sizeof r->secret, (const ngtcp2_sockaddr *)peer,
        (ngtcp2_socklen)peerlen, ts);
    return n > 0 ? (size_t)n : 0;
}
#endif
