/*
 * acme_proto — RFC 8555's exchanges, blocking, one CA: the directory, nonces
 * (a badNonce answer retried with the nonce it carried), the account (its
 * key made once and kept in the state directory), and an order for one name
 * from newOrder to the downloaded chain, answering its authorizations with
 * HTTP-01 or TLS-ALPN-01 through files in the state directory
 * (site/acme_chal.h).  ARI's renewalInfo too (RFC 9773).
 *
 * A failing step returns -1 and says why in cl->err (one line: the name, the
 * step, and the CA's problem type and detail when it sent one); cl->retry_after
 * is the CA's Retry-After on that answer (-1: none).
 */
#ifndef GATLING_ACME_PROTO_H
#define GATLING_ACME_PROTO_H

#include <signal.h>
#include <time.h>

#include <openssl/evp.h>

#include "acme_crypto.h"
#include "acme_etcd.h"
#include "acme_http.h"
#include "acme_parse.h"
#include "site/config.h"

#define ACME_ERR_MAX 640
#define ACME_NONCE_TRIES 10    /* a POST sent again on badNonce, at most */
#define ACME_POLL_SECS 120     /* an authorization's or order's polling, in all */
#define ACME_POLL_DEFAULT 1    /* seconds between polls without Retry-After */
#define ACME_POLL_FIRST_MS 250 /* ... but the first look comes sooner */

typedef struct acme_client {
    const config_t *cfg;
    int ca;                      /* the CA in use: cfg->acme.cas[ca] (acme_client_use) */
    const char *url;             /* ... its directory's URL */
    acme_http_t http;
    acme_dir_t dir;
    int have_dir;
    char nonce[ACME_NONCE_MAX];  /* "" when none is saved */
    EVP_PKEY *key;               /* the account's */
    char kid[ACME_URL_MAX];      /* the account's URL; "" until known */
    char thumb[ACME_THUMB_LEN + 1];
    char cahash[17];             /* account/CAHASH/ */
    int state_fd;                /* the state directory */
    int http01;                  /* HTTP-01 allowed (the HTTP port listens) */
    const volatile sig_atomic_t *stop;
    long retry_after;
    char ptype[128];             /* the last problem's type, "" for none */
    int ca_fault;                /* set when the CA failed on its side: no answer or no
                                    directory, HTTP 5xx or 429, rateLimited (acme_ca.h) */
    char err[ACME_ERR_MAX];
    unsigned long orders;        /* newOrder requests made */
    int avoid;                   /* the challenge type that failed last for this name
                                    (CONFIG_ACME_HTTP01...; 0: none), set by the caller */
    int chal_failed;             /* the type the CA tried and refused in the last issue */
    etcd_t *etcd;                /* --cluster: the account key is the cluster's (NULL: none) */
    struct cluster_view *cluster; /* ... and the side process's page (site/cluster.h) */
} acme_client_t;

/* What an order hands back: the chain and its key, both PEM, malloc'd. */
typedef struct acme_issued {
    char *chain, *key;
    size_t chain_len, key_len;
} acme_issued_t;

/* Set up (no network yet); -1 when libcurl cannot start. */
int acme_client_init(acme_client_t *cl, const config_t *cfg, int state_fd, int http01,
                     const volatile sig_atomic_t *stop);
void acme_client_free(acme_client_t *cl);

/* Talk to cfg->acme.cas[ca] from now on (--acme-ca given more than once):
   its directory and account loaded anew by the next acme_client_ready
   (the account key is the CA's own, account/CAHASH/).  Nothing when it is
   the CA in use already. */
void acme_client_use(acme_client_t *cl, int ca);

/* The directory and the account (loaded, or made and registered): 0 or -1.
   Cheap once done: the caller calls it before each order. */
int acme_client_ready(acme_client_t *cl);

/* The directory alone (what ARI needs): 0 or -1. */
int acme_client_dir(acme_client_t *cl);

/* A certificate for name; replaces: the RFC 9773 ID of the certificate it
   renews, or NULL.  0 with out filled (free with acme_issued_free), or -1. */
int acme_client_issue(acme_client_t *cl, const char *name, const char *replaces,
                      acme_issued_t *out);
void acme_issued_free(acme_issued_t *out);

/* RFC 9773: the suggested window for certid, and the seconds until the next
   ARI poll the CA asks for (-1: none said).  0, or -1 (no ARI, or a fault). */
int acme_client_ari(acme_client_t *cl, const char *certid, time_t *start, time_t *end,
                    long *retry_after);

#endif
