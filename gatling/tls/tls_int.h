/*
 * tls_int.h: what tls.c (the store, the connections) and tls_ctx.c (the
 * contexts and their handshake callbacks) share; nothing outside tls/ includes it.
 * The arrow: tls.c -> tls_ctx.c, none back (make layers).
 */
#ifndef GATLING_TLS_INT_H
#define GATLING_TLS_INT_H

#include "tls_ctx.h"
#include "site/config.h"
#include "site/proc.h"

#include <limits.h>
#include <stdint.h>
#include <openssl/ssl.h>

typedef struct tls_store tls_store_t;

#define TLS_FILE_MAX (1 << 20) /* a certificate chain, key or OCSP file */
#define TLS_DIR_MAX 4096       /* entries looked at in the certificate directory */
#define TLS_NAMES_MAX 256      /* names one certificate answers for */
#define TICKET_PERIOD 3600     /* seconds a ticket key encrypts; it decrypts one more */
#define CHECK_PERIOD 60        /* seconds between looks at the certificate files */
#define SESSION_CACHE 10000    /* sessions kept for clients without tickets */

/* One certificate: what its SSL_CTX answers for.  Hangs off the context as
   ex_data and lives as long as it does (connections keep old contexts). */
typedef struct tls_cert {
    char id[256]; /* file or directory name without .pem; "" for server.pem */
    char **names; /* lower case; "*.example.com" for wildcards */
    int nnames;
    unsigned char *ocsp; /* a DER OCSP response to staple, or NULL */
    long ocsp_len;
    int64_t not_after;  /* the certificate's expiry (unix seconds), for /metrics */
    int64_t not_before; /* ... and its start, for /server-status's renewal window */
    int64_t told_ms;    /* --acme-on-demand: when a handshake's use of it was last told
                           to the ACME client (tls_ondemand_seen; monotonic ms) */
} tls_cert_t;

typedef struct ticket_key {
    uint64_t epoch;
    int set;
    unsigned char master[32]; /* what it derives from: ours, or --cluster's */
    unsigned char name[16], aes[32], mac[32];
} ticket_key_t;

struct tls_store {
    int dirfd; /* the certificate directory, opened at start (survives a chroot) */
    char dir[PATH_MAX];
    const config_t *cfg;
    const proc_t *proc; /* the ACME client's challenges, the cluster's tickets; NULL: none */
    char docroot[PATH_MAX];
    SSL_CTX **ctx;            /* one per certificate */
    SSL_CTX *bare;            /* --acme: no certificate, for handshakes while there is none
                                 (TLS-ALPN-01 challenges only: on_hello refuses the rest) */
    int n, def;               /* def: the index of the default */
    uint64_t signature;       /* of the files, to see a change */
    int64_t checked;          /* when they were last looked at */
    int check_s;              /* CHECK_PERIOD, or GATLING_TEST_CERT_CHECK's */
    int ticket_s;             /* TICKET_PERIOD, or GATLING_TEST_TICKET_PERIOD's */
    unsigned char master[32]; /* ticket keys derive from it: shared by -W workers */
    unsigned char node[8];    /* this node's id in its tickets (tls_early.c): random, made
                                 before -W's fork; another --cluster node's differs */
    ticket_key_t keys[4]; /* by epoch's parity, and which master (--cluster: previous) */
    struct tls_client_def *client_def; /* --tls-client-ca's, or NULL (tls_client.h) */
};


extern int tls_cert_idx; /* the ex_data index of tls_cert_t, set once */
extern int tls_acme_idx; /* SSL ex_data: TLS_ACME_* as a pointer, for --acme's handshakes */

/* tls_ctx.c: the contexts and their callbacks */
int tls_valid_name(const char *s, size_t n);
void tls_cert_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp);
tls_cert_t *tls_cert_of(SSL_CTX *ctx);
/* --acme-on-demand: a handshake found name's certificate ctx: told to the
   ACME client as an ask (a name it keeps is then "in use"), at most every
   quarter of --acme-on-demand-forget (an hour at most) per certificate. */
void tls_ondemand_seen(tls_store_t *st, const SSL_CTX *ctx, const char *name, size_t len,
                       const char *addr);
void tls_add_name(tls_cert_t *c, const char *s, size_t n);
void tls_cert_names(tls_cert_t *c, X509 *x);
int tls_no_passphrase(char *buf, int size, int rw, void *u);
const char *tls_ssl_why(const char *fallback);
int tls_ctx_setup(SSL_CTX *ctx, tls_store_t *st, char *err, size_t errlen);
const SSL_CTX *tls_find_ctx(const tls_store_t *st, const char *host, size_t len);
const SSL_CTX *tls_lookup_ctx(const tls_store_t *st, const char *host, size_t len);

#endif
