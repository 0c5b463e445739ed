/*
 * t_quic_retry — who gets a QUIC Retry, and its tokens
 * (gatling/quic/quic_retry.c): the three modes, the per-address count (8
 * new connections a second, IPv6 counted by /64, a new second starting
 * afresh), and a token that round-trips from the Retry it was sent in to a
 * validated Initial (the client's first connection ID given back), but not
 * from another address or port, not after its lifetime, and not forged.
 * Without HAVE_H3 there is nothing to test (one skipped line).
 */
#include "tap.h"

#ifndef HAVE_H3
int main(void)
{
    ok(1, "# SKIP built without HTTP/3");
    return tap_done();
}
#else
#include "quic_retry.h"
#include "site/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <ngtcp2/ngtcp2_crypto.h>

#define SEC ((ngtcp2_tstamp)NGTCP2_SECONDS)

static struct sockaddr_in v4(const char *a, int port)
{
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, a, &s.sin_addr);
    return s;
}

static struct sockaddr_in6 v6(const char *a, int port)
{
    struct sockaddr_in6 s = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    inet_pton(AF_INET6, a, &s.sin6_addr);
    return s;
}

/* An Initial's header with dcid byte d (8 bytes of it), scid 0x5c.., and a token. */
static ngtcp2_pkt_hd initial(uint8_t d, const uint8_t *token, size_t tokenlen)
{
    ngtcp2_pkt_hd hd = {.type = NGTCP2_PKT_INITIAL, .version = NGTCP2_PROTO_VER_V1};
    uint8_t id[8];
    memset(id, d, sizeof id);
    ngtcp2_cid_init(&hd.dcid, id, sizeof id);
    memset(id, 0x5c, sizeof id);
    ngtcp2_cid_init(&hd.scid, id, sizeof id);
    hd.token = (ngtcp2_vec){(uint8_t *)(uintptr_t)token, tokenlen};
    return hd;
}

static int check(quic_retry_t *r, const ngtcp2_pkt_hd *hd, const void *sa, socklen_t len,
                 ngtcp2_tstamp ts, int64_t ms, int busy, ngtcp2_cid *odcid, uint8_t *out,
                 size_t *n)
{
    quic_initial_t in = {hd, sa, len, ts, ms, busy, -1};
    return quic_retry_check(r, &in, odcid, out, n);
}

static void test_modes(void)
{
    static uint8_t out[QUIC_RETRY_OUT_MAX];
    size_t n;
    ngtcp2_cid odcid;
    struct sockaddr_in a = v4("192.0.2.1", 4000);
    ngtcp2_pkt_hd hd = initial(1, NULL, 0);
    quic_retry_t *never = quic_retry_new(CONFIG_RETRY_NEVER);
    quic_retry_t *always = quic_retry_new(CONFIG_RETRY_ALWAYS);
    quic_retry_t *busy = quic_retry_new(CONFIG_RETRY_BUSY);
    ok(never && always && busy, "three checkers");
    int v = check(never, &hd, &a, sizeof a, SEC, 1000, 1, &odcid, out, &n);
    is_int(v, QUIC_ADMIT_NEW, "never: a connection even when busy");
    v = check(always, &hd, &a, sizeof a, SEC, 1000, 0, &odcid, out, &n);
    is_int(v, QUIC_ADMIT_RETRY, "always: a Retry");
    ok(n > 20 && n < 200 && (out[0] & 0xf0) == 0xf0, "a Retry packet (%zu bytes, long type 3)", n);
    v = check(busy, &hd, &a, sizeof a, SEC, 1000, 1, &odcid, out, &n);
    is_int(v, QUIC_ADMIT_RETRY, "busy: a Retry while handshakes are many");
    quic_retry_free(never);
    quic_retry_free(always);
    quic_retry_free(busy);
}

static void test_per_address(void)
{
    static uint8_t out[QUIC_RETRY_OUT_MAX];
    size_t n;
    ngtcp2_cid odcid;
    quic_retry_t *r = quic_retry_new(CONFIG_RETRY_BUSY);
    struct sockaddr_in a = v4("192.0.2.7", 4000), b = v4("198.51.100.9", 4000);
    struct sockaddr_in6 c = v6("2001:db8:1:2::1", 5000), c2 = v6("2001:db8:1:2:ffff::9", 5001);
    ngtcp2_pkt_hd hd = initial(2, NULL, 0);
    int news = 0;
    for (int i = 0; i < QUIC_RETRY_PER_ADDR; i++)
        news += check(r, &hd, &a, sizeof a, SEC, 5000 + i, 0, &odcid, out, &n) == QUIC_ADMIT_NEW;
    is_int(news, QUIC_RETRY_PER_ADDR, "the first %d from an address in a second: connections",
           QUIC_RETRY_PER_ADDR);
    is_int(check(r, &hd, &a, sizeof a, SEC, 5900, 0, &odcid, out, &n), QUIC_ADMIT_RETRY,
           "the next: a Retry");
    is_int(check(r, &hd, &b, sizeof b, SEC, 5900, 0, &odcid, out, &n), QUIC_ADMIT_NEW,
           "another address is not held to it");
    is_int(check(r, &hd, &a, sizeof a, SEC, 6000, 0, &odcid, out, &n), QUIC_ADMIT_NEW,
           "a new second starts afresh");
    for (int i = 0; i < QUIC_RETRY_PER_ADDR; i++)
        check(r, &hd, i % 2 ? (const void *)&c : (const void *)&c2, sizeof c, SEC, 7000, 0,
              &odcid, out, &n);
    is_int(check(r, &hd, &c, sizeof c, SEC, 7000, 0, &odcid, out, &n), QUIC_ADMIT_RETRY,
           "IPv6: one /64 counts as one address");
    quic_retry_free(r);
}

/* A Retry packet's Source Connection ID (the client's next DCID) and its token:
   after the header, before the 16-byte integrity tag (RFC 9000 17.2.5). */
static size_t retry_token(const uint8_t *p, size_t n, ngtcp2_cid *scid, const uint8_t **token)
{
    size_t off = 5;
    off += 1 + p[off];
    ngtcp2_cid_init(scid, p + off + 1, p[off]);
    off += 1 + p[off];
    *token = p + off;
    return n - off - 16;
}

static void test_tokens(void)
{
    static uint8_t out[QUIC_RETRY_OUT_MAX], out2[QUIC_RETRY_OUT_MAX];
    size_t n, n2;
    ngtcp2_cid odcid;
    quic_retry_t *r = quic_retry_new(CONFIG_RETRY_ALWAYS);
    struct sockaddr_in a = v4("192.0.2.1", 4000), a2 = v4("192.0.2.1", 4001);
    ngtcp2_pkt_hd first = initial(3, NULL, 0);
    is_int(check(r, &first, &a, sizeof a, 100 * SEC, 0, 0, &odcid, out, &n), QUIC_ADMIT_RETRY,
           "a Retry");
    const uint8_t *token;
    ngtcp2_cid scid;
    size_t tl = retry_token(out, n, &scid, &token);
    ok(tl > 0 && tl <= NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN && token[0] == 0xb6,
       "its token (%zu bytes)", tl);
    ngtcp2_pkt_hd again = initial(9, token, tl);
    again.dcid = scid; /* the client's Initial goes to the Retry's Source Connection ID */
    int v = check(r, &again, &a, sizeof a, 101 * SEC, 0, 0, &odcid, out2, &n2);
    is_int(v, QUIC_ADMIT_VALID, "sent back from the address: validated (even with always)");
    ok(odcid.datalen == 8 && odcid.data[0] == 3, "the client's first connection ID comes back");
    ngtcp2_pkt_hd elsewhere = initial(9, token, tl);
    v = check(r, &elsewhere, &a, sizeof a, 101 * SEC, 0, 0, &odcid, out2, &n2);
    is_int(v, QUIC_ADMIT_BAD, "to another connection ID than the Retry's: INVALID_TOKEN");
    v = check(r, &again, &a2, sizeof a2, 101 * SEC, 0, 0, &odcid, out2, &n2);
    is_int(v, QUIC_ADMIT_BAD, "from another port: INVALID_TOKEN");
    ok(n2 > 0, "a CONNECTION_CLOSE to send (%zu bytes)", n2);
    v = check(r, &again, &a, sizeof a, (100 + QUIC_RETRY_TOKEN_S + 1) * SEC, 0, 0, &odcid, out2,
              &n2);
    is_int(v, QUIC_ADMIT_BAD, "after its lifetime: INVALID_TOKEN");
    uint8_t forged[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
    memcpy(forged, token, tl);
    forged[tl / 2] ^= 1;
    ngtcp2_pkt_hd bad = initial(9, forged, tl);
    bad.dcid = scid;
    v = check(r, &bad, &a, sizeof a, 101 * SEC, 0, 0, &odcid, out2, &n2);
    is_int(v, QUIC_ADMIT_BAD, "a byte changed: INVALID_TOKEN");
    quic_retry_t *other = quic_retry_new(CONFIG_RETRY_NEVER);
    v = check(other, &again, &a, sizeof a, 101 * SEC, 0, 0, &odcid, out2, &n2);
    is_int(v, QUIC_ADMIT_BAD, "another process's secret: INVALID_TOKEN");
    static const uint8_t regular[] = {0x36, 1, 2, 3};
    ngtcp2_pkt_hd foreign = initial(9, regular, sizeof regular);
    v = check(other, &foreign, &a, sizeof a, 101 * SEC, 0, 0, &odcid, out2, &n2);
    is_int(v, QUIC_ADMIT_NEW, "a token of another kind counts as none");
    quic_retry_free(other);
    quic_retry_free(r);
}

static void test_new_token(void)
{
    static uint8_t out[QUIC_RETRY_OUT_MAX];
    uint8_t token[QUIC_NEW_TOKEN_MAX];
    size_t n;
    ngtcp2_cid odcid;
    quic_retry_t *r = quic_retry_new(CONFIG_RETRY_ALWAYS);
    struct sockaddr_in a = v4("192.0.2.1", 4000), later = v4("192.0.2.1", 4999);
    struct sockaddr_in other = v4("192.0.2.2", 4000);
    size_t tl = quic_retry_new_token(r, (struct sockaddr *)&a, sizeof a, 100 * SEC, token);
    ok(tl > 0 && token[0] == 0x36, "a NEW_TOKEN token (%zu bytes)", tl);
    ngtcp2_pkt_hd hd = initial(4, token, tl);
    int v = check(r, &hd, &later, sizeof later, 200 * SEC, 0, 0, &odcid, out, &n);
    is_int(v, QUIC_ADMIT_TOKEN, "from the address, another port: validated, no Retry");
    v = check(r, &hd, &other, sizeof other, 200 * SEC, 0, 0, &odcid, out, &n);
    is_int(v, QUIC_ADMIT_RETRY, "from another address: as none (a Retry, here)");
    v = check(r, &hd, &a, sizeof a, (100 + QUIC_NEW_TOKEN_S + 1) * SEC, 0, 0, &odcid, out, &n);
    is_int(v, QUIC_ADMIT_RETRY, "after its lifetime: as none");
    quic_retry_free(r);
}

int main(void)
{
    test_modes();
    test_new_token();
    test_per_address();
    test_tokens();
    return tap_done();
}
#endif
