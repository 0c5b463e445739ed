/* acme_crypto — see acme_crypto.h. */
#include "acme_crypto.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "http/hbuf.h"
#include "site/config.h"

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int acme_b64url(const unsigned char *in, size_t n, char *out, size_t cap)
{
    size_t need = n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
    if (need >= cap)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = B64URL[v >> 18 & 63];
        out[o++] = B64URL[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = B64URL[v >> 6 & 63];
        if (i + 2 < n)
            out[o++] = B64URL[v & 63];
    }
    out[o] = 0;
    return (int)o;
}

static int b64url_value(char c)
{
    const char *p = c ? strchr(B64URL, c) : NULL;
    if (p)
        return (int)(p - B64URL);
    if (c == '+') /* the CAs' HMAC keys are sometimes plain base64 */
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int acme_b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
    while (n && in[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return -1;
    size_t o = 0;
    unsigned v = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int d = b64url_value(in[i]);
        if (d < 0)
            return -1;
        v = (v << 6 | (unsigned)d) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (unsigned char)(v >> bits);
        }
    }
    return (int)o;
}

EVP_PKEY *acme_key_new(int type)
{
    if (type == CONFIG_ACME_RSA2048)
        return EVP_RSA_gen(2048);
    if (type == CONFIG_ACME_RSA3072)
        return EVP_RSA_gen(3072);
    return EVP_EC_gen("P-256");
}

/* A memory BIO's contents as a malloc'd NUL-terminated string. */
static char *bio_string(BIO *b, size_t *len)
{
    char *data;
    long n = BIO_get_mem_data(b, &data);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        memcpy(s, data, (size_t)n);
        s[n] = 0;
        if (len)
            *len = (size_t)n;
    }
    return s;
}

char *acme_key_pem(EVP_PKEY *key, size_t *len)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *s = NULL;
    if (b && PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL))
        s = bio_string(b, len);
    BIO_free(b);
    return s;
}

EVP_PKEY *acme_key_from_pem(const char *pem, size_t len)
{
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return k;
}

/* A BIGNUM parameter of key as base64url of its bytes, padded to pad bytes
   (0: its own length). */
static int bn_b64(EVP_PKEY *key, const char *param, int pad, char *out, size_t cap)
{
    BIGNUM *bn = NULL;
    unsigned char bytes[1024];
    int r = -1;
    if (!EVP_PKEY_get_bn_param(key, param, &bn))
        return -1;
    int n = pad ? pad : BN_num_bytes(bn);
    if (n > 0 && (size_t)n <= sizeof bytes && BN_bn2binpad(bn, bytes, n) == n)
        r = acme_b64url(bytes, (size_t)n, out, cap);
    BN_free(bn);
    return r;
}

int acme_jwk(EVP_PKEY *key, char *out, size_t cap)
{
    char a[700], b[700];
    hbuf_t h = hb_init(out, cap);
    if (EVP_PKEY_is_a(key, "EC")) {
        char group[32];
        if (!EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                            NULL) ||
            strcmp(group, "prime256v1") != 0)
            return -1;
        if (bn_b64(key, OSSL_PKEY_PARAM_EC_PUB_X, 32, a, sizeof a) < 0 ||
            bn_b64(key, OSSL_PKEY_PARAM_EC_PUB_Y, 32, b, sizeof b) < 0)
            return -1;
        hb_puts(&h, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"");
        hb_puts(&h, a);
        hb_puts(&h, "\",\"y\":\"");
        hb_puts(&h, b);
    } else if (EVP_PKEY_is_a(key, "RSA")) {
        if (bn_b64(key, OSSL_PKEY_PARAM_RSA_E, 0, a, sizeof a) < 0 ||
            bn_b64(key, OSSL_PKEY_PARAM_RSA_N, 0, b, sizeof b) < 0)
            return -1;
        hb_puts(&h, "{\"e\":\"");
        hb_puts(&h, a);
        hb_puts(&h, "\",\"kty\":\"RSA\",\"n\":\"");
        hb_puts(&h, b);
    } else
        return -1;
    hb_put(&h, "\"}", 3); /* with the NUL */
    return h.over ? -1 : (int)hb_len(&h) - 1;
}

int acme_thumbprint(const char *jwk, char *out, size_t cap)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)jwk, strlen(jwk), md);
    return acme_b64url(md, sizeof md, out, cap);
}

const char *acme_jws_alg(EVP_PKEY *key)
{
    if (EVP_PKEY_is_a(key, "EC") && EVP_PKEY_get_bits(key) == 256)
        return "ES256";
    if (EVP_PKEY_is_a(key, "RSA"))
        return "RS256";
    return NULL;
}

/* ECDSA's DER signature as JWS wants it: r || s, 32 bytes each. */
static int ecdsa_raw(const unsigned char *der, size_t len, unsigned char out[64])
{
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &der, (long)len);
    int ok = 0;
    if (sig) {
        const BIGNUM *r, *s;
        ECDSA_SIG_get0(sig, &r, &s);
        ok = BN_bn2binpad(r, out, 32) == 32 && BN_bn2binpad(s, out + 32, 32) == 32;
        ECDSA_SIG_free(sig);
    }
    return ok ? 64 : -1;
}

/* Sign msg with key (SHA-256), as the JWS's base64url signature. */
static int sign_b64(EVP_PKEY *key, const char *msg, char *out, size_t cap)
{
    unsigned char sig[1024];
    size_t siglen = sizeof sig;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
             EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)msg, strlen(msg)) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return -1;
    if (EVP_PKEY_is_a(key, "EC")) {
        unsigned char raw[64];
        if (ecdsa_raw(sig, siglen, raw) != 64)
            return -1;
        return acme_b64url(raw, 64, out, cap);
    }
    return acme_b64url(sig, siglen, out, cap);
}

/* base64url of a NUL-terminated string in a malloc'd string. */
static char *b64_str(const char *s)
{
    size_t n = strlen(s), cap = n / 3 * 4 + 5;
    char *o = malloc(cap);
    if (o && acme_b64url((const unsigned char *)s, n, o, cap) < 0) {
        free(o);
        o = NULL;
    }
    return o;
}

/* Join protected and payload (both base64url) and sign them with either an
   account key or an HMAC key: the flattened JWS. */
static char *jws_join(const char *prot, const char *payload, EVP_PKEY *key,
                      const unsigned char *mac, size_t maclen)
{
    size_t n = strlen(prot) + strlen(payload) + 2;
    char *input = malloc(n), sig[1400];
    if (!input)
        return NULL;
    snprintf(input, n, "%s.%s", prot, payload);
    int sl = -1;
    if (key)
        sl = sign_b64(key, input, sig, sizeof sig);
    else {
        unsigned char md[SHA256_DIGEST_LENGTH];
        unsigned mdlen = 0;
        if (HMAC(EVP_sha256(), mac, (int)maclen, (unsigned char *)input, strlen(input), md,
                 &mdlen))
            sl = acme_b64url(md, mdlen, sig, sizeof sig);
    }
    free(input);
    if (sl < 0)
        return NULL;
    size_t cap = n + (size_t)sl + 64;
    char *out = malloc(cap);
    if (out)
        snprintf(out, cap, "{\"protected\":\"%s\",\"payload\":\"%s\",\"signature\":\"%s\"}",
                 prot, payload, sig);
    return out;
}

/* A JSON string value's text for s: ACME's URLs and nonces carry no quote or
   backslash, and one that does is refused rather than escaped. */
static int json_safe(const char *s)
{
    for (; *s; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
            return 0;
    return 1;
}

char *acme_jws(EVP_PKEY *key, const char *kid, const char *nonce, const char *url,
               const char *payload)
{
    const char *alg = acme_jws_alg(key);
    char jwk[ACME_JWK_MAX], head[4096];
    if (!alg || !json_safe(nonce) || !json_safe(url) || (kid && !json_safe(kid)))
        return NULL;
    hbuf_t h = hb_init(head, sizeof head);
    hb_puts(&h, "{\"alg\":\"");
    hb_puts(&h, alg);
    if (kid) {
        hb_puts(&h, "\",\"kid\":\"");
        hb_puts(&h, kid);
        hb_puts(&h, "\"");
    } else {
        if (acme_jwk(key, jwk, sizeof jwk) < 0)
            return NULL;
        hb_puts(&h, "\",\"jwk\":");
        hb_puts(&h, jwk);
    }
    hb_puts(&h, ",\"nonce\":\"");
    hb_puts(&h, nonce);
    hb_puts(&h, "\",\"url\":\"");
    hb_puts(&h, url);
    hb_put(&h, "\"}", 3);
    if (h.over)
        return NULL;
    char *p = b64_str(head), *l = b64_str(payload), *out = NULL;
    if (p && l)
        out = jws_join(p, l, key, NULL, 0);
    free(p);
    free(l);
    return out;
}

char *acme_eab(EVP_PKEY *account, const char *eab_kid, const char *hmac_b64, const char *url)
{
    unsigned char mac[256];
    char jwk[ACME_JWK_MAX], head[2048];
    int maclen = acme_b64url_decode(hmac_b64, strlen(hmac_b64), mac, sizeof mac);
    if (maclen <= 0 || !json_safe(eab_kid) || !json_safe(url) ||
        acme_jwk(account, jwk, sizeof jwk) < 0)
        return NULL;
    int n = snprintf(head, sizeof head, "{\"alg\":\"HS256\",\"kid\":\"%s\",\"url\":\"%s\"}",
                     eab_kid, url);
    if (n < 0 || (size_t)n >= sizeof head)
        return NULL;
    char *p = b64_str(head), *l = b64_str(jwk), *out = NULL;
    if (p && l)
        out = jws_join(p, l, NULL, mac, (size_t)maclen);
    free(p);
    free(l);
    OPENSSL_cleanse(mac, sizeof mac);
    return out;
}

int acme_is_ip(const char *name)
{
    unsigned char a[16];
    return inet_pton(AF_INET, name, a) == 1 || inet_pton(AF_INET6, name, a) == 1;
}

/* SubjectAltName for names: iPAddress for an address, dNSName otherwise. */
static GENERAL_NAMES *san_names(const char *const *names, int nnames)
{
    GENERAL_NAMES *gens = GENERAL_NAMES_new();
    for (int i = 0; gens && i < nnames; i++) {
        GENERAL_NAME *g = GENERAL_NAME_new();
        ASN1_STRING *v = NULL;
        int type = GEN_DNS;
        if (acme_is_ip(names[i])) {
            type = GEN_IPADD;
            v = a2i_IPADDRESS(names[i]);
        } else {
            v = ASN1_IA5STRING_new();
            if (v && !ASN1_STRING_set(v, names[i], -1)) {
                ASN1_STRING_free(v);
                v = NULL;
            }
        }
        if (!g || !v || !sk_GENERAL_NAME_push(gens, g)) {
            GENERAL_NAME_free(g);
            ASN1_STRING_free(v);
            GENERAL_NAMES_free(gens);
            return NULL;
        }
        GENERAL_NAME_set0_value(g, type, v);
    }
    return gens;
}

char *acme_csr(EVP_PKEY *key, const char *const *names, int nnames)
{
    X509_REQ *req = X509_REQ_new();
    GENERAL_NAMES *gens = san_names(names, nnames);
    STACK_OF(X509_EXTENSION) *exts = NULL;
    unsigned char *der = NULL;
    char *out = NULL;
    int len = -1;
    if (req && gens && X509_REQ_set_version(req, 0) && X509_REQ_set_pubkey(req, key) &&
        X509V3_add1_i2d(&exts, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) == 1 &&
        X509_REQ_add_extensions(req, exts) && X509_REQ_sign(req, key, EVP_sha256()) > 0)
        len = i2d_X509_REQ(req, &der);
    if (len > 0) {
        size_t cap = (size_t)len / 3 * 4 + 5;
        out = malloc(cap);
        if (out && acme_b64url(der, (size_t)len, out, cap) < 0) {
            free(out);
            out = NULL;
        }
    }
    OPENSSL_free(der);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    GENERAL_NAMES_free(gens);
    X509_REQ_free(req);
    return out;
}

/* The critical id-pe-acmeIdentifier extension: OCTET STRING (SHA-256 of the
   key authorization), DER-encoded as the extension's value (RFC 8737 3). */
static X509_EXTENSION *acme_identifier_ext(const char *keyauth)
{
    unsigned char der[2 + SHA256_DIGEST_LENGTH] = {0x04, SHA256_DIGEST_LENGTH};
    SHA256((const unsigned char *)keyauth, strlen(keyauth), der + 2);
    ASN1_OBJECT *obj = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
    ASN1_OCTET_STRING *val = ASN1_OCTET_STRING_new();
    X509_EXTENSION *ext = NULL;
    if (obj && val && ASN1_OCTET_STRING_set(val, der, sizeof der))
        ext = X509_EXTENSION_create_by_OBJ(NULL, obj, 1, val);
    ASN1_OBJECT_free(obj);
    ASN1_OCTET_STRING_free(val);
    return ext;
}

/* The challenge certificate's body over key: serial, validity, names. */
static int alpn_fill(X509 *x, EVP_PKEY *key, const char *name, const char *keyauth)
{
    unsigned char rnd[16];
    BIGNUM *bn = NULL;
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return 0;
    rnd[0] &= 0x7f; /* a positive serial */
    int ok = (bn = BN_bin2bn(rnd, sizeof rnd, NULL)) &&
             BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) && X509_set_version(x, 2) &&
             X509_gmtime_adj(X509_getm_notBefore(x), -86400) &&
             X509_gmtime_adj(X509_getm_notAfter(x), 7 * 86400) && X509_set_pubkey(x, key);
    BN_free(bn);
    if (!ok)
        return 0;
    X509_NAME *sub = X509_get_subject_name(x);
    const unsigned char *cn = (const unsigned char *)name;
    if (strlen(name) <= 64 && !X509_NAME_add_entry_by_txt(sub, "CN", MBSTRING_ASC, cn, -1, -1, 0))
        return 0;
    X509_set_issuer_name(x, sub);
    const char *names[1] = {name};
    GENERAL_NAMES *gens = san_names(names, 1);
    X509_EXTENSION *ext = acme_identifier_ext(keyauth);
    ok = gens && ext && X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, 0) == 1 &&
         X509_add_ext(x, ext, -1);
    GENERAL_NAMES_free(gens);
    X509_EXTENSION_free(ext);
    return ok && X509_sign(x, key, EVP_sha256()) > 0;
}

char *acme_alpn_cert(const char *name, const char *keyauth, size_t *len)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (key && x && b && alpn_fill(x, key, name, keyauth) && PEM_write_bio_X509(b, x) &&
        PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL))
        out = bio_string(b, len);
    BIO_free(b);
    X509_free(x);
    EVP_PKEY_free(key);
    return out;
}

static time_t asn1_time(const ASN1_TIME *t)
{
    struct tm tm;
    if (!t || !ASN1_TIME_to_tm(t, &tm))
        return 0;
    return timegm(&tm);
}

/* RFC 9773 4.1: base64url(AKI keyIdentifier) "." base64url(serial's DER
   content octets). */
static void cert_id(X509 *x, char *out, size_t cap)
{
    const ASN1_OCTET_STRING *aki = X509_get0_authority_key_id(x);
    unsigned char *der = NULL;
    int n = i2d_ASN1_INTEGER(X509_get0_serialNumber(x), &der);
    out[0] = 0;
    /* a serial is at most 20 bytes (RFC 5280): its length fits one byte */
    if (aki && n > 2 && n < 130 && der[1] == n - 2) {
        int a = acme_b64url(ASN1_STRING_get0_data(aki), (size_t)ASN1_STRING_length(aki), out,
                            cap);
        if (a < 0 || (size_t)a + 1 >= cap ||
            acme_b64url(der + 2, (size_t)n - 2, out + a + 1, cap - (size_t)a - 1) < 0)
            out[0] = 0;
        else
            out[a] = '.';
    }
    OPENSSL_free(der);
}

static X509 *first_cert(const char *pem, size_t len)
{
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return x;
}

int acme_cert_info(const char *pem, size_t len, acme_cert_info_t *info)
{
    X509 *x = first_cert(pem, len);
    if (!x)
        return -1;
    memset(info, 0, sizeof *info);
    info->not_before = asn1_time(X509_get0_notBefore(x));
    info->not_after = asn1_time(X509_get0_notAfter(x));
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    char *hex = bn ? BN_bn2hex(bn) : NULL;
    if (hex && strlen(hex) < sizeof info->serial) {
        for (size_t i = 0; hex[i]; i++)
            info->serial[i] = (char)(hex[i] >= 'A' && hex[i] <= 'F' ? hex[i] + 32 : hex[i]);
    }
    OPENSSL_free(hex);
    BN_free(bn);
    cert_id(x, info->certid, sizeof info->certid);
    if (X509_NAME_get_text_by_NID(X509_get_issuer_name(x), NID_commonName, info->issuer,
                                  sizeof info->issuer) < 0)
        info->issuer[0] = 0;
    for (char *c = info->issuer; *c; c++) /* a log line's and a status line's */
        if ((unsigned char)*c < ' ' || (unsigned char)*c >= 0x7f)
            *c = '?';
    X509_free(x);
    return info->not_after && info->serial[0] ? 0 : -1;
}

static int name_has(const X509_NAME *n, const char *cn)
{
    char buf[512];
    return X509_NAME_oneline(n, buf, sizeof buf) && strstr(buf, cn) != NULL;
}

int acme_chain_has_issuer(const char *pem, size_t len, const char *issuer_cn)
{
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    X509 *x;
    int found = 0, i = 0;
    while (b && !found && (x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        if (i++ > 0)
            found = name_has(X509_get_subject_name(x), issuer_cn) ||
                    name_has(X509_get_issuer_name(x), issuer_cn);
        X509_free(x);
    }
    BIO_free(b);
    return found;
}

int acme_cert_matches_key(const char *pem, size_t len, EVP_PKEY *key)
{
    X509 *x = first_cert(pem, len);
    int r = x && X509_check_private_key(x, key) == 1;
    X509_free(x);
    return r;
}
