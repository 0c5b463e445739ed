/* t_acme_crypto — the ACME client's cryptography (gatling/acme/acme_crypto.c):
   base64url vectors, RFC 7638's thumbprint example, JWS signatures that
   OpenSSL verifies against the JWK's key, EAB's HMAC, the CSR and RFC 8737's
   challenge certificate, a certificate's RFC 9773 ID. */
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>
#include <json-c/json.h>

#include "acme_crypto.h"
#include "config.h"
#include "tap.h"

/* RFC 7638 3.1 */
static const char RFC7638_N[] =
    "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_"
    "BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_"
    "FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-"
    "bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
static const char RFC7638_THUMB[] = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs";

static void test_b64url(void)
{
    char out[64];
    unsigned char bin[64];
    static const struct {
        const char *in, *out;
    } v[] = {{"", ""},         {"f", "Zg"},         {"fo", "Zm8"},      {"foo", "Zm9v"},
             {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        acme_b64url((const unsigned char *)v[i].in, strlen(v[i].in), out, sizeof out);
        is_str(out, v[i].out, "base64url(\"%s\")", v[i].in);
        int n = acme_b64url_decode(v[i].out, strlen(v[i].out), bin, sizeof bin);
        ok(n == (int)strlen(v[i].in) && memcmp(bin, v[i].in, (size_t)n) == 0, "decode %s",
           v[i].out);
    }
    unsigned char hi[] = {0xfb, 0xff, 0xfe};
    acme_b64url(hi, 3, out, sizeof out);
    is_str(out, "-__-", "base64url uses - and _");
    is_int(acme_b64url(hi, 3, out, 4), -1, "base64url refuses a short buffer (NUL counted)");
    is_int(acme_b64url_decode("Zm9v!", 5, bin, sizeof bin), -1, "decode refuses '!'");
    is_int(acme_b64url_decode("Z", 1, bin, sizeof bin), -1, "decode refuses a lone char");
    is_int(acme_b64url_decode("Zm9vYmFy", 8, bin, 5), -1, "decode refuses a short buffer");
    is_int(acme_b64url_decode("Zm8=", 4, bin, sizeof bin), 2, "decode takes padding");
}

/* The RFC's RSA key, from n and e. */
static EVP_PKEY *rfc7638_key(void)
{
    unsigned char n[512], e[] = {1, 0, 1};
    int nl = acme_b64url_decode(RFC7638_N, strlen(RFC7638_N), n, sizeof n);
    BIGNUM *bn = BN_bin2bn(n, nl, NULL), *be = BN_bin2bn(e, 3, NULL);
    OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
    OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_RSA_N, bn);
    OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_RSA_E, be);
    OSSL_PARAM *p = OSSL_PARAM_BLD_to_param(b);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    EVP_PKEY *k = NULL;
    EVP_PKEY_fromdata_init(ctx);
    EVP_PKEY_fromdata(ctx, &k, EVP_PKEY_PUBLIC_KEY, p);
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(p);
    OSSL_PARAM_BLD_free(b);
    BN_free(bn);
    BN_free(be);
    return k;
}

static void test_thumbprint(void)
{
    char jwk[ACME_JWK_MAX], want[ACME_JWK_MAX], th[64];
    snprintf(want, sizeof want, "{\"e\":\"AQAB\",\"kty\":\"RSA\",\"n\":\"%s\"}", RFC7638_N);
    EVP_PKEY *k = rfc7638_key();
    ok(k != NULL, "the RFC 7638 key loads");
    ok(k && acme_jwk(k, jwk, sizeof jwk) > 0, "its JWK");
    is_str(jwk, want, "the JWK is RFC 7638's canonical form");
    acme_thumbprint(jwk, th, sizeof th);
    is_str(th, RFC7638_THUMB, "RFC 7638 3.1's thumbprint");
    is_int(acme_jwk(k, jwk, 100), -1, "a JWK that does not fit is refused");
    EVP_PKEY_free(k);
}

/* The JWS's parts, and whether its signature verifies with key. */
static int jws_verifies(const char *jws, EVP_PKEY *key, char *prot, size_t cap)
{
    json_object *o = json_tokener_parse(jws), *p, *l, *s;
    int ok_ = 0;
    if (!o || !json_object_object_get_ex(o, "protected", &p) ||
        !json_object_object_get_ex(o, "payload", &l) ||
        !json_object_object_get_ex(o, "signature", &s)) {
        json_object_put(o);
        return 0;
    }
    char input[8192];
    unsigned char sig[1024], der[128];
    snprintf(input, sizeof input, "%s.%s", json_object_get_string(p), json_object_get_string(l));
    const char *ss = json_object_get_string(s);
    int sl = acme_b64url_decode(ss, strlen(ss), sig, sizeof sig);
    int pl = acme_b64url_decode(json_object_get_string(p), strlen(json_object_get_string(p)),
                                (unsigned char *)prot, cap - 1);
    prot[pl > 0 ? pl : 0] = 0;
    const unsigned char *vs = sig;
    size_t vl = (size_t)sl;
    if (EVP_PKEY_is_a(key, "EC") && sl == 64) { /* r || s back to DER */
        ECDSA_SIG *es = ECDSA_SIG_new();
        ECDSA_SIG_set0(es, BN_bin2bn(sig, 32, NULL), BN_bin2bn(sig + 32, 32, NULL));
        unsigned char *d = der;
        vl = (size_t)i2d_ECDSA_SIG(es, &d);
        vs = der;
        ECDSA_SIG_free(es);
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    ok_ = sl > 0 && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
          EVP_DigestVerify(ctx, vs, vl, (unsigned char *)input, strlen(input)) == 1;
    EVP_MD_CTX_free(ctx);
    json_object_put(o);
    return ok_;
}

static void test_jws(int type, const char *alg)
{
    EVP_PKEY *k = acme_key_new(type);
    char prot[4096], jwk[ACME_JWK_MAX], want[ACME_JWK_MAX + 64];
    ok(k != NULL, "%s: a key", alg);
    is_str(acme_jws_alg(k), alg, "%s: its algorithm", alg);
    char *j = acme_jws(k, NULL, "NONCE1", "https://ca/new-acct", "{\"a\":1}");
    ok(j && jws_verifies(j, k, prot, sizeof prot), "%s: a JWS with jwk verifies", alg);
    acme_jwk(k, jwk, sizeof jwk);
    snprintf(want, sizeof want, "{\"alg\":\"%s\",\"jwk\":%s,\"nonce\":\"NONCE1\",\"url\":\"%s\"}",
             alg, jwk, "https://ca/new-acct");
    is_str(prot, want, "%s: its protected header", alg);
    free(j);
    j = acme_jws(k, "https://ca/acct/1", "N2", "https://ca/order", "");
    ok(j && jws_verifies(j, k, prot, sizeof prot), "%s: a POST-as-GET with kid verifies", alg);
    ok(j && strstr(j, "\"payload\":\"\"") != NULL, "%s: POST-as-GET's payload is empty", alg);
    ok(strstr(prot, "\"kid\":\"https://ca/acct/1\"") && !strstr(prot, "jwk"), "%s: kid, no jwk",
       alg);
    free(j);
    ok(acme_jws(k, NULL, "bad\"nonce", "https://ca/x", "") == NULL, "%s: a quote is refused", alg);
    size_t len;
    char *pem = acme_key_pem(k, &len);
    EVP_PKEY *k2 = pem ? acme_key_from_pem(pem, len) : NULL;
    ok(k2 && EVP_PKEY_eq(k, k2) == 1, "%s: the key survives PEM", alg);
    EVP_PKEY_free(k2);
    free(pem);
    EVP_PKEY_free(k);
}

static void test_eab(void)
{
    EVP_PKEY *k = acme_key_new(CONFIG_ACME_EC256);
    const char *hmac = "c2VjcmV0LWtleS0xMjM0NTY3ODkwMTIzNDU2Nzg5MDEy";
    char *e = acme_eab(k, "kid-1", hmac, "https://ca/new-acct");
    json_object *o = e ? json_tokener_parse(e) : NULL, *p, *l, *s;
    ok(o && json_object_object_get_ex(o, "protected", &p) &&
           json_object_object_get_ex(o, "payload", &l) &&
           json_object_object_get_ex(o, "signature", &s),
       "EAB: a flattened JWS");
    if (o) {
        unsigned char key[64], md[32];
        char input[4096], sig[64], jwk[ACME_JWK_MAX], jb[ACME_JWK_MAX * 2];
        int kl = acme_b64url_decode(hmac, strlen(hmac), key, sizeof key);
        snprintf(input, sizeof input, "%s.%s", json_object_get_string(p),
                 json_object_get_string(l));
        HMAC(EVP_sha256(), key, kl, (unsigned char *)input, strlen(input), md, NULL);
        acme_b64url(md, 32, sig, sizeof sig);
        is_str(json_object_get_string(s), sig, "EAB: HS256 over protected.payload");
        acme_jwk(k, jwk, sizeof jwk);
        acme_b64url((unsigned char *)jwk, strlen(jwk), jb, sizeof jb);
        is_str(json_object_get_string(l), jb, "EAB: the payload is the account's JWK");
    }
    ok(acme_eab(k, "kid", "!!", "https://ca/") == NULL, "EAB: a bad HMAC key is refused");
    json_object_put(o);
    free(e);
    EVP_PKEY_free(k);
}

static X509_REQ *csr_parse(const char *b64)
{
    unsigned char der[8192];
    int n = acme_b64url_decode(b64, strlen(b64), der, sizeof der);
    const unsigned char *p = der;
    return n > 0 ? d2i_X509_REQ(NULL, &p, n) : NULL;
}

static void test_csr(int type, const char *what)
{
    EVP_PKEY *k = acme_key_new(type);
    const char *names[] = {"example.org", "www.example.org", "192.0.2.7", "2001:db8::1"};
    char *c = acme_csr(k, names, 4);
    X509_REQ *r = c ? csr_parse(c) : NULL;
    ok(r && X509_REQ_verify(r, k) == 1, "CSR %s: parses and verifies", what);
    STACK_OF(X509_EXTENSION) *exts = r ? X509_REQ_get_extensions(r) : NULL;
    GENERAL_NAMES *g = exts ? X509V3_get_d2i(exts, NID_subject_alt_name, NULL, NULL) : NULL;
    int dns = 0, ip = 0;
    for (int i = 0; g && i < sk_GENERAL_NAME_num(g); i++) {
        const GENERAL_NAME *n = sk_GENERAL_NAME_value(g, i);
        dns += n->type == GEN_DNS;
        ip += n->type == GEN_IPADD && (n->d.ip->length == 4 || n->d.ip->length == 16);
    }
    ok(dns == 2 && ip == 2, "CSR %s: two dNSNames and two iPAddresses", what);
    GENERAL_NAMES_free(g);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    X509_REQ_free(r);
    free(c);
    EVP_PKEY_free(k);
}

static void test_alpn(void)
{
    size_t len;
    char *pem = acme_alpn_cert("example.org", "tok.thumb", &len);
    BIO *b = pem ? BIO_new_mem_buf(pem, (int)len) : NULL;
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    ok(x && k && X509_check_private_key(x, k) == 1, "ALPN: a certificate then its key");
    ok(x && X509_verify(x, k) == 1, "ALPN: self-signed");
    ok(x && X509_check_host(x, "example.org", 0, 0, NULL) == 1, "ALPN: SAN is the name");
    ASN1_OBJECT *obj = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
    int at = x ? X509_get_ext_by_OBJ(x, obj, -1) : -1;
    X509_EXTENSION *ext = at >= 0 ? X509_get_ext(x, at) : NULL;
    ok(ext && X509_EXTENSION_get_critical(ext), "ALPN: acmeIdentifier, critical");
    unsigned char want[34] = {0x04, 32};
    SHA256((const unsigned char *)"tok.thumb", 9, want + 2);
    ASN1_OCTET_STRING *v = ext ? X509_EXTENSION_get_data(ext) : NULL;
    ok(v && v->length == 34 && memcmp(v->data, want, 34) == 0,
       "ALPN: an OCTET STRING of SHA-256(keyauth)");
    ASN1_OBJECT_free(obj);
    EVP_PKEY_free(k);
    X509_free(x);
    BIO_free(b);
    free(pem);
    pem = acme_alpn_cert("192.0.2.1", "t.k", &len);
    ok(pem != NULL, "ALPN: an IP address's certificate");
    free(pem);
}

/* A certificate with a known AKI and serial, made here. */
static void test_cert_info(void)
{
    EVP_PKEY *k = acme_key_new(CONFIG_ACME_EC256);
    X509 *x = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(x), 0x87654321L);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_time_adj_ex(X509_getm_notAfter(x), 0, 0, &(time_t){1800000000});
    X509_set_pubkey(x, k);
    AUTHORITY_KEYID *aki = AUTHORITY_KEYID_new();
    aki->keyid = ASN1_OCTET_STRING_new();
    ASN1_OCTET_STRING_set(aki->keyid, (const unsigned char *)"\x69\x88\x5B\x6B\x87\x46\x40\x41", 8);
    X509_add1_ext_i2d(x, NID_authority_key_identifier, aki, 0, 0);
    AUTHORITY_KEYID_free(aki);
    X509_sign(x, k, EVP_sha256());
    BIO *b = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(b, x);
    char *pem;
    long len = BIO_get_mem_data(b, &pem);
    acme_cert_info_t ci;
    ok(acme_cert_info(pem, (size_t)len, &ci) == 0, "cert info: parses");
    is_int(ci.not_after, 1800000000, "cert info: notAfter");
    is_str(ci.serial, "87654321", "cert info: serial in hex");
    /* RFC 9773 4.1's example: AKI 69:88:5B:6B:87:46:40:41, serial 00:87:65:43:21 */
    is_str(ci.certid, "aYhba4dGQEE.AIdlQyE", "cert info: RFC 9773's certificate ID");
    ok(acme_cert_matches_key(pem, (size_t)len, k), "cert info: matches its key");
    is_int(acme_cert_info("junk", 4, &ci), -1, "cert info: junk is refused");
    BIO_free(b);
    X509_free(x);
    EVP_PKEY_free(k);
}

/* A certificate for subject_cn, issued by issuer_cn and signed with signer,
   appended to b as PEM. */
static void add_cert(BIO *b, const char *subject_cn, const char *issuer_cn, EVP_PKEY *key,
                     EVP_PKEY *signer)
{
    X509 *x = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "O", MBSTRING_ASC,
                               (const unsigned char *)"Test CA Org", -1, -1, 0);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               (const unsigned char *)subject_cn, -1, -1, 0);
    X509_NAME_add_entry_by_txt(X509_get_issuer_name(x), "CN", MBSTRING_ASC,
                               (const unsigned char *)issuer_cn, -1, -1, 0);
    X509_sign(x, signer, EVP_sha256());
    PEM_write_bio_X509(b, x);
    X509_free(x);
}

/* --acme-chain: is the CA's chain (or an alternate one) the one asked for?
   The leaf's own issuer does not count, the certificates after it do, by
   subject or issuer; a certificate that is not the key's is told apart. */
static void test_chain(void)
{
    EVP_PKEY *leaf = acme_key_new(CONFIG_ACME_EC256), *mid = acme_key_new(CONFIG_ACME_EC256),
             *other = acme_key_new(CONFIG_ACME_EC256);
    BIO *b = BIO_new(BIO_s_mem());
    add_cert(b, "www.example.org", "Fake Intermediate E9", leaf, mid);
    char *pem;
    long one = BIO_get_mem_data(b, &pem);
    ok(!acme_chain_has_issuer(pem, (size_t)one, "Fake Intermediate E9"),
       "chain: the leaf alone: its issuer is not a chain's");
    add_cert(b, "Fake Intermediate E9", "Fake Root X2", mid, mid);
    long len = BIO_get_mem_data(b, &pem);
    ok(acme_chain_has_issuer(pem, (size_t)len, "Fake Root X2"),
       "chain: the intermediate's issuer named: this chain");
    ok(acme_chain_has_issuer(pem, (size_t)len, "Fake Intermediate E9"),
       "chain: the intermediate's subject named: this chain");
    ok(!acme_chain_has_issuer(pem, (size_t)len, "Fake Root X1"),
       "chain: another root named: not this chain");
    ok(!acme_chain_has_issuer(pem, (size_t)len, "www.example.org"),
       "chain: the leaf's own name is not an issuer");
    ok(!acme_chain_has_issuer("junk", 4, "Fake Root X2"), "chain: junk names nothing");
    ok(acme_cert_matches_key(pem, (size_t)len, leaf), "chain: the first certificate is the key's");
    ok(!acme_cert_matches_key(pem, (size_t)len, other), "chain: ... and not another key's");
    ok(!acme_cert_matches_key("junk", 4, leaf), "chain: junk matches no key");
    acme_cert_info_t ci;
    ok(acme_cert_info(pem, (size_t)len, &ci) == 0 && !ci.certid[0] &&
           ci.not_after - ci.not_before == 86400,
       "cert info without an AKI: no certificate ID, a day's validity");
    BIO_free(b);
    EVP_PKEY_free(leaf);
    EVP_PKEY_free(mid);
    EVP_PKEY_free(other);
}

int main(void)
{
    test_b64url();
    test_thumbprint();
    test_jws(CONFIG_ACME_EC256, "ES256");
    test_jws(CONFIG_ACME_RSA2048, "RS256");
    test_eab();
    test_csr(CONFIG_ACME_EC256, "P-256");
    test_csr(CONFIG_ACME_RSA2048, "RSA 2048");
    test_alpn();
    test_cert_info();
    test_chain();
    ok(acme_is_ip("::1") && acme_is_ip("10.0.0.1") && !acme_is_ip("example.org"), "acme_is_ip");
    return tap_done();
}
