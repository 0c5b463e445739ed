/*
 * acme_crypto — the ACME client's cryptography, pure functions over OpenSSL:
 * base64url, keys, the JWK and its RFC 7638 thumbprint, JWS (ES256 and RS256
 * for the account, HS256 for External Account Binding, RFC 8555 7.3.4), the
 * CSR, RFC 8737's TLS-ALPN-01 challenge certificate, and what the client
 * reads back from a certificate (expiry, serial, RFC 9773's certificate ID).
 * No I/O, no globals: tests/unit/t_acme_crypto.c checks them.
 *
 * Strings out are NUL-terminated; "-1" means the output did not fit or the
 * input was malformed (nothing is written past cap).
 */
#ifndef GATLING_ACME_CRYPTO_H
#define GATLING_ACME_CRYPTO_H

#include <stddef.h>
#include <time.h>

#include <openssl/evp.h>

#define ACME_JWK_MAX 1024   /* an RSA 4096 JWK fits */
#define ACME_THUMB_LEN 43   /* base64url of 32 bytes */
#define ACME_CERTID_MAX 256 /* base64url(AKI) "." base64url(serial) */
#define ACME_SERIAL_MAX 64  /* a serial in hex (20 bytes at most: 40) */

/* base64url without padding: the length written, or -1 when cap is short. */
int acme_b64url(const unsigned char *in, size_t n, char *out, size_t cap);

/* Decode base64url (padding tolerated): the bytes written, or -1 when in is
   not base64url or out is short. */
int acme_b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap);

/* A new private key: CONFIG_ACME_EC256, RSA2048 or RSA3072 (site/config.h).
   NULL on failure.  The caller frees it (EVP_PKEY_free). */
EVP_PKEY *acme_key_new(int type);

/* PEM (PKCS#8, unencrypted) of key in a malloc'd string; NULL on failure. */
char *acme_key_pem(EVP_PKEY *key, size_t *len);

/* A private key from PEM; NULL when it is none. */
EVP_PKEY *acme_key_from_pem(const char *pem, size_t len);

/* The public JWK in RFC 7638's canonical form (members in order, no spaces):
   EC P-256 {"crv","kty","x","y"} or RSA {"e","kty","n"}.  Its length or -1. */
int acme_jwk(EVP_PKEY *key, char *out, size_t cap);

/* The RFC 7638 thumbprint of a canonical JWK: base64url(SHA-256(jwk)). */
int acme_thumbprint(const char *jwk, char *out, size_t cap);

/* The JWS algorithm for an account key: "ES256" (EC P-256) or "RS256" (RSA);
   NULL for any other key. */
const char *acme_jws_alg(EVP_PKEY *key);

/*
 * A flattened JWS (RFC 7515 7.2.2) signed with key, its protected header
 * {"alg","kid" or "jwk","nonce","url"}: kid is the account URL, or NULL to
 * send the JWK (newAccount).  payload is the JSON text, "" for POST-as-GET.
 * A malloc'd string; NULL on failure.
 */
char *acme_jws(EVP_PKEY *key, const char *kid, const char *nonce, const char *url,
               const char *payload);

/*
 * External Account Binding (RFC 8555 7.3.4): the JWS over the account's JWK,
 * HS256 with the CA's MAC key (hmac, base64url as the CA gives it), protected
 * {"alg":"HS256","kid":eab_kid,"url":url}.  A malloc'd JSON object's text.
 */
char *acme_eab(EVP_PKEY *account, const char *eab_kid, const char *hmac_b64, const char *url);

/* 1 when name is an IPv4 or IPv6 address (an "ip" identifier, RFC 8738). */
int acme_is_ip(const char *name);

/* The CSR for names (SAN dNSName or iPAddress each) over key, DER in
   base64url, malloc'd; NULL on failure. */
char *acme_csr(EVP_PKEY *key, const char *const *names, int nnames);

/*
 * RFC 8737's challenge certificate for name: a new P-256 key, self-signed,
 * SAN the name, and the critical id-pe-acmeIdentifier extension holding an
 * OCTET STRING of SHA-256(keyauth).  The certificate's PEM then the key's,
 * malloc'd, its length in *len; NULL on failure.
 */
char *acme_alpn_cert(const char *name, const char *keyauth, size_t *len);

/* What the client needs from a certificate (the first in a PEM chain). */
#define ACME_ISSUER_MAX 128
typedef struct acme_cert_info {
    time_t not_before, not_after;
    char serial[ACME_SERIAL_MAX]; /* lowercase hex, no separators */
    char certid[ACME_CERTID_MAX]; /* RFC 9773 4.1; "" without an AKI */
    char issuer[ACME_ISSUER_MAX]; /* its issuer's CN (printable ASCII, else '?'); "" for none */
} acme_cert_info_t;

/* Fill info from the first certificate in pem: 0, or -1 when none parses. */
int acme_cert_info(const char *pem, size_t len, acme_cert_info_t *info);

/* 1 when a certificate of the PEM chain after the first names issuer_cn (a
   substring) in its subject or issuer, 0 otherwise. */
int acme_chain_has_issuer(const char *pem, size_t len, const char *issuer_cn);

/* 1 when the first certificate's public key is key's. */
int acme_cert_matches_key(const char *pem, size_t len, EVP_PKEY *key);

#endif
