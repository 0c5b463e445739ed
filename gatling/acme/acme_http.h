/*
 * acme_http — one HTTPS exchange with the CA over libcurl, blocking, under
 * the limits a CA's answer is held to: a body of at most ACME_BODY_MAX bytes,
 * no redirect followed, https only (RFC 8555 6.1: a URL the CA hands out as
 * http:// is refused), a deadline on every transfer, the CA's root from
 * --acme-ca-root when given.
 */
#ifndef GATLING_ACME_HTTP_H
#define GATLING_ACME_HTTP_H

#include <signal.h>
#include <stddef.h>

#include "acme_parse.h"

#define ACME_BODY_MAX (1 << 20)
#define ACME_CONNECT_SECS 10
#define ACME_TRANSFER_SECS 30

typedef struct acme_resp {
    long status;  /* the HTTP status; 0 when the transfer failed */
    char *body;   /* malloc'd, NUL-terminated (NULL: empty) */
    size_t len;
    int too_long; /* the body passed ACME_BODY_MAX: the transfer was cut */
    char ctype[128];
    acme_head_t head;
} acme_resp_t;

typedef struct acme_http {
    void *curl;  /* CURL * */
    const char *ca_root;
    const volatile sig_atomic_t *stop; /* set: abort a transfer under way */
    int plain_ok; /* http:// too: only tests' directories (--acme-ca refuses it) */
} acme_http_t;

/* 0, or -1 when libcurl cannot start. */
int acme_http_init(acme_http_t *h, const char *ca_root, const volatile sig_atomic_t *stop);
void acme_http_free(acme_http_t *h);

/*
 * GET url (post NULL), HEAD (head 1) or POST post as application/jose+json.
 * 0 with r filled when an answer came (any status), -1 with the reason in
 * err when none did (DNS, connection, TLS, timeout, too long).  Free r with
 * acme_resp_free either way.
 */
int acme_http_do(acme_http_t *h, const char *url, const char *post, int head, acme_resp_t *r,
                 char *err, size_t errlen);
void acme_resp_free(acme_resp_t *r);

#endif
