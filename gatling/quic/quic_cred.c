/*
 * quic_cred.c — GnuTLS credentials from the TLS store (see quic_cred.h).
 */
#ifdef HAVE_H3
#include "quic_cred.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void quic_cred_release(quic_cred_t *c)
{
    if (c && --c->refs == 0) {
        gnutls_certificate_free_credentials(c->cred);
        free(c);
    }
}

static int take_pem(void *arg, const char *id, const char *chain, size_t clen, const char *key,
                    size_t klen)
{
    (void)id;
    quic_cred_t *c = arg;
    gnutls_datum_t cd = {(unsigned char *)(uintptr_t)chain, (unsigned)clen};
    gnutls_datum_t kd = {(unsigned char *)(uintptr_t)key, (unsigned)klen};
    /* server.pem holds chain and key in one file: GnuTLS takes what it needs of each */
    if (gnutls_certificate_set_x509_key_mem2(c->cred, &cd, &kd, GNUTLS_X509_FMT_PEM, NULL, 0) < 0)
        return -1;
    c->n++;
    return 0;
}

quic_cred_t *quic_cred_load(tls_store_t *st, char *err, size_t errlen)
{
    quic_cred_t *c = calloc(1, sizeof *c);
    if (!c || gnutls_certificate_allocate_credentials(&c->cred) < 0) {
        free(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->refs = 1;
    if (tls_store_pems(st, take_pem, c, err, errlen) < 0) {
        quic_cred_release(c);
        return NULL;
    }
    return c;
}
#endif
