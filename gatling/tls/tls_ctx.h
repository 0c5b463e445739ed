/*
 * tls_ctx.h: what the contexts (tls_ctx.c) tell others: the ciphers they
 * default to, and what became of a handshake (--acme).  Included by tls.h.
 */
#ifndef GATLING_TLS_CTX_H
#define GATLING_TLS_CTX_H

typedef struct ssl_st SSL;

/* Mozilla's "intermediate" configuration (TLS 1.2 suites; 1.3 keeps OpenSSL's). */
#define TLS_DEFAULT_CIPHERS \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:" \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:" \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:" \
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305"
#define TLS_DEFAULT_SUITES \
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

/*
 * --acme (proc_t's acme_chal set when the store is loaded): TLS-ALPN-01, RFC
 * 8737.  A ClientHello whose ALPN list is exactly "acme-tls/1", for a server
 * name with a challenge outstanding (site/acme_chal.h), gets that challenge
 * certificate and ALPN acme-tls/1, and nothing else ever does; acme-tls/1
 * for a name without one is refused (handshake_failure).  While the store
 * has no certificate, the HTTPS port takes handshakes all the same
 * (tls_store_accepts) and answers only challenges: the others are refused
 * (internal_error, as tls_refuse).  What became of a handshake:
 */
enum {
    TLS_ACME_NONE = 0,  /* not ACME's business: an ordinary handshake */
    TLS_ACME_SERVED,    /* a challenge answered: close after the handshake, no HTTP */
    TLS_ACME_REFUSED,   /* acme-tls/1 for a name without a challenge */
    TLS_ACME_NO_CERT    /* no certificate yet, and no challenge: refused */
};
int tls_acme_state(SSL *ssl);

/*
 * --acme-on-demand: this handshake may pause while the ACME client gets a
 * certificate for a name none answers (gio_tls_handshake's GIO_AGAIN with
 * *want 0: the caller calls it again later, within -s); without this call a
 * handshake asks for the name and goes on with what is loaded.
 */
void tls_may_pause(SSL *ssl);

#endif
