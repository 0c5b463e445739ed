/*
 * What the ACME client reads from a CA (gatling/acme/acme_parse.c): the
 * input as each JSON document the client parses (directory, order,
 * authorization, problem, renewal information, an account's status), as an
 * RFC 3339 time, line by line as response headers, and as a TSIG key file
 * (acme_dnskey.c, DNS-01's --acme-dns-key).  Invariants: every
 * string filled is NUL-terminated inside its buffer; a token accepted is
 * base64url of at most ACME_TOKEN_MAX characters; a window has start <= end;
 * counts stay inside their arrays; Retry-After is -1 or in [0,
 * ACME_RETRY_AFTER_CAP] (99999999999999999999 saturates, no overflow), and
 * the wait it makes (acme_sched.c) stays within the time left; a renewal
 * picked in any ARI window lands in [notBefore, acme_sched_latest()]; a
 * key accepted has a name ending in one dot, a known algorithm and a base64
 * secret, and a key refused leaves nothing behind.
 */
#include "acme/acme_dnskey.h"
#include "acme/acme_parse.h"
#include "acme/acme_sched.h"
#include "fuzz.h"

#define NB 1700000000L /* a certificate of 90 days, for the schedule's checks */
#define NA (NB + 90 * 86400L)

#define TERMINATED(a) CHECK(memchr((a), 0, sizeof(a)) != NULL)

static void check_json(const char *s, size_t n)
{
    acme_dir_t d;
    acme_order_t o;
    acme_authz_t a;
    acme_problem_t p;
    time_t t0, t1;
    if (acme_parse_dir(s, n, &d) == 0) {
        TERMINATED(d.new_nonce); TERMINATED(d.new_order); TERMINATED(d.renewal_info);
        CHECK(d.nprofiles >= 0 && d.nprofiles <= ACME_PROFILES_MAX);
        for (int i = 0; i < d.nprofiles; i++)
            TERMINATED(d.profiles[i]);
    }
    if (acme_parse_order(s, n, &o) == 0) {
        CHECK(o.nauthz >= 0 && o.nauthz <= ACME_AUTHZ_MAX);
        for (int i = 0; i < o.nauthz; i++)
            TERMINATED(o.authz[i]);
        TERMINATED(o.status); TERMINATED(o.finalize); TERMINATED(o.certificate);
        TERMINATED(o.error);
    }
    if (acme_parse_authz(s, n, &a) == 0) {
        TERMINATED(a.status); TERMINATED(a.ident); TERMINATED(a.error);
        CHECK(!a.http_token[0] || acme_token_ok(a.http_token));
        CHECK(!a.alpn_token[0] || acme_token_ok(a.alpn_token));
        CHECK(!a.dns_token[0] || acme_token_ok(a.dns_token));
    }
    if (acme_parse_problem(s, n, &p) == 0) {
        TERMINATED(p.type);
        TERMINATED(p.detail);
    }
    if (acme_parse_ari(s, n, &t0, &t1) == 0) {
        CHECK(t0 <= t1);
        /* any window the CA sends: the renewal picked in [nb, latest] */
        time_t t = acme_sched_ari_pick(NB, NA, t0, t1, (uint64_t)t0 * 2654435761u);
        CHECK(t >= NB && t <= acme_sched_latest(NB, NA));
    }
}

static void check_key(const char *s, size_t n)
{
    acme_dns_key_t k;
    char err[128];
    if (acme_dnskey_parse(s, n, &k, err, sizeof err) == 0) {
        TERMINATED(k.name); TERMINATED(k.alg); TERMINATED(k.secret);
        size_t ln = strlen(k.name);
        CHECK(ln >= 2 && k.name[ln - 1] == '.' && k.name[ln - 2] != '.');
        CHECK(!strncmp(k.alg, "hmac-", 5) && k.secret[0]);
        CHECK(strspn(k.secret, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789+/=") == strlen(k.secret));
    } else {
        TERMINATED(err);
        CHECK(!k.name[0] && !k.secret[0]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *s = fuzz_copy(data, n);
    time_t t;
    if (!s)
        return 0;
    check_json(s, n);
    check_key(s, n);
    char *z = malloc(n + 1); /* as a C string: a time, a token */
    if (z) {
        memcpy(z, data, n);
        z[n] = 0;
        acme_parse_time(z, &t);
        if (acme_token_ok(z))
            CHECK(strlen(z) <= ACME_TOKEN_MAX);
        free(z);
    }
    acme_head_t h;
    memset(&h, 0, sizeof h);
    h.retry_after = -1;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(s + i, '\n', n - i);
        size_t len = nl ? (size_t)(nl - s - i) + 1 : n - i;
        acme_parse_header(&h, s + i, len, 1700000000);
        i += len;
    }
    TERMINATED(h.nonce); TERMINATED(h.location);
    CHECK(h.nalt >= 0 && h.nalt <= ACME_ALTS_MAX);
    for (int i = 0; i < h.nalt; i++)
        TERMINATED(h.alt[i]);
    CHECK(h.retry_after >= -1 && h.retry_after <= ACME_RETRY_AFTER_CAP);
    /* the wait it makes: capped by the time left, and no overflow past now */
    long w = acme_sched_cap(h.retry_after, NB, NA, 60);
    CHECK(w <= (NA - NB) / ACME_WAIT_SHARE && acme_sched_add(NB, w) >= NB);
    free(s);
    return 0;
}
