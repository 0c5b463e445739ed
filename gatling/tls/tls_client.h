/*
 * tls_client — client certificates (mutual TLS), per certificate of the
 * store: which CAs a site's clients must be issued by, the CRLs that revoke
 * them, required or optional, how deep a chain may be; and what a
 * connection's client sent, for the exchanges (http/exchange.h's
 * ex_client_t).
 *
 * Beside a certificate of -C (tls.h's layouts), read with it at start and
 * at every reload:
 *   NAME/client-ca.pem, NAME.client-ca, server.client-ca     the CAs (PEM)
 *   NAME/client-crl.pem, NAME.client-crl, server.client-crl  CRLs (PEM)
 *   NAME/client-verify, NAME.client-verify, server.client-verify
 *       "required" or "optional", and "depth=N", as words on a line
 * A certificate without its own CA file takes --tls-client-ca's (and
 * --tls-client-crl's), read once at start; without either it asks for none.
 *
 * The handshake asks for a certificate (TLS 1.3 too: in the handshake, never
 * after it) and completes whatever comes, as nginx does: a certificate that
 * does not verify is recorded (SSL_get_verify_result), and a request to a
 * required site without a verified one gets 400 (route/router.c), an
 * answer the client can read rather than a bare alert.  Each such context
 * gets a session ID context of its own (a hash of its CAs, CRLs and mode),
 * so a session made where nothing was asked never resumes where something is.
 * HTTP/3's GnuTLS asks as well (quic/), and the chain it got is verified
 * here by the same rules (tls_client_chain).
 * tls.c calls here, and tls_ctx.c's SNI callback; nothing here calls them.
 */
#ifndef GATLING_TLS_CLIENT_H
#define GATLING_TLS_CLIENT_H

#include "http/exchange.h"
#include "site/config.h"
#include "site/optdef.h"

#include <stddef.h>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

/* --tls-client-ca, --tls-client-crl, --tls-client-verify, --tls-client-depth:
   their rows of the options table (site/optdef.h), ended by OPT_LAST. */
extern const optdef_t tls_client_opts[];

/* The options' CAs and CRLs, read once (before the chroot). */
typedef struct tls_client_def tls_client_def_t;

/* Read --tls-client-ca and --tls-client-crl of cfg: 0 (*out NULL when
   neither was given), or -1 with why in err. */
int tls_client_defaults(const config_t *cfg, tls_client_def_t **out, char *err, size_t errlen);
void tls_client_defaults_free(tls_client_def_t *d);

/*
 * Set ctx up for client certificates from the files ca, crl and verify
 * (paths below dirfd; absent ones are passed over) or def's: the trust
 * store, the CA names the CertificateRequest lists, verify mode and depth,
 * the session ID context.  0 (also when neither asks for any), or -1 with
 * why in err (a file that is not what it should be; dir names the directory).
 */
int tls_client_ctx(SSL_CTX *ctx, int dirfd, const char *dir, const char *ca, const char *crl,
                   const char *verify, const tls_client_def_t *def, const config_t *cfg,
                   char *err, size_t errlen);

/* SNI moved ssl to ctx: take ctx's verify mode and depth (OpenSSL does not). */
void tls_client_sni(SSL *ssl, SSL_CTX *ctx);

/* What ssl's client sent, for its exchanges: NULL when its certificate asks
   for none or the handshake is not done; made once, freed with ssl. */
const ex_client_t *tls_client(SSL *ssl);

/* The same for a connection with no certificate from the client whose
   server certificate was ctx (HTTP/3, whose GnuTLS asks for none): NULL, or
   static facts "NONE", required as ctx says. */
const ex_client_t *tls_client_none(const SSL_CTX *ctx);

/* HTTP/3 (GnuTLS): does ctx ask for client certificates? */
int tls_client_asks(const SSL_CTX *ctx);

/*
 * HTTP/3: what its client sent, the DER chain der[0..n) (len[i] bytes each;
 * n 0: none), verified against ctx's CAs, CRLs and depth as a handshake's
 * would be (GnuTLS only checked that the client holds its key).  Facts the
 * caller frees with free(), or NULL (ctx asks for none, or out of memory).
 */
ex_client_t *tls_client_chain(const SSL_CTX *ctx, const unsigned char *const *der,
                              const size_t *len, unsigned n);

#endif
