/*
 * quic_cred — HTTP/3's certificates: the files of -C (the TLS store,
 * tls.h) loaded into GnuTLS credentials for QUIC's handshakes, counted by
 * reference so that a reload (SIGUSR1, a renewal) gives new connections new
 * credentials while the ones that began with the old keep them.  Built with
 * HAVE_H3.
 */
#ifndef GATLING_QUIC_CRED_H
#define GATLING_QUIC_CRED_H

#ifdef HAVE_H3
#include "tls/tls.h"

#include <gnutls/gnutls.h>
#include <stddef.h>

/* GnuTLS credentials, shared by the connections that began with them. */
typedef struct quic_cred {
    gnutls_certificate_credentials_t cred;
    unsigned refs;
    int n; /* certificates */
} quic_cred_t;

/* The store's certificates in new credentials (one reference; server.pem
   first: GnuTLS answers a name no certificate has with the first).  NULL
   with why in err. */
quic_cred_t *quic_cred_load(tls_store_t *st, char *err, size_t errlen);

/* Drop a reference (NULL: nothing); the last frees them. */
void quic_cred_release(quic_cred_t *c);

#endif
#endif
