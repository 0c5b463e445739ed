/*
 * acme_dnskey — the TSIG key of --acme-dns-key (RFC 8945), parsed from the
 * text of its file: a pure function, no I/O but acme_dnskey_load's read.
 * Two formats are taken:
 *
 *   - BIND's (tsig-keygen, rndc-confgen -a, knot's keymgr -t writes it in
 *     its first comment line instead), comments (#, //, / * * /) allowed:
 *         key "acme-update." { algorithm hmac-sha256; secret "c2VjcmV0..."; };
 *     the first key statement is the key;
 *   - one line as dig -y and nsupdate -y take it: [ALGORITHM:]NAME:SECRET
 *     (ALGORITHM hmac-sha256 when left out).
 *
 * ALGORITHM: hmac-md5, hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384,
 * hmac-sha512; NAME a domain name (a trailing dot added); SECRET base64 of
 * 1..ACME_DNSKEY_BYTES bytes.  tests/unit/t_acme_dnskey.c, fuzz_acme.
 */
#ifndef GATLING_ACME_DNSKEY_H
#define GATLING_ACME_DNSKEY_H

#include <stddef.h>

#define ACME_DNSKEY_BYTES 128    /* a secret's bytes, at most */
#define ACME_DNSKEY_FILE_MAX 8192 /* a key file's size, at most */

typedef struct acme_dns_key {
    char name[256];   /* "acme-update." (lower case, one trailing dot) */
    char alg[32];     /* as libldns names it: "hmac-sha256." */
    char secret[180]; /* base64, as in the file */
} acme_dns_key_t;

/* Parse text (len bytes, no NUL needed) into k: 0, or -1 with why in err
   (one line, never the secret). */
int acme_dnskey_parse(const char *text, size_t len, acme_dns_key_t *k, char *err, size_t cap);

/* Read path (a regular file of at most ACME_DNSKEY_FILE_MAX bytes) and parse
   it: 0, or -1 with why in err.  What was read is wiped. */
int acme_dnskey_load(const char *path, acme_dns_key_t *k, char *err, size_t cap);

/* printf into err (cap bytes): -1, for "return acme_err(...)" (acme_dns.c too). */
int acme_err(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
