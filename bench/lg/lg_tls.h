/*
 * lg_tls — the load generators' TLS client (OpenSSL), for https:// URLs.
 *
 * One context per worker process.  Certificates are not verified (as with
 * wrk and h2load: the tools measure servers, they do not trust them); SNI is
 * the URL's host, ALPN offers http/1.1.  With resumption on, the sessions
 * the server hands out (a TLS 1.2 session, or a TLS 1.3 ticket, which comes
 * after the handshake) are kept, the newest 64, and each new connection
 * offers the last one (lg_tls_new), or takes one (lg_tls_open).
 *
 * The data calls are io/gio_tls.h's (gio_tls_handshake, gio_tls_read,
 * gio_tls_send), shared with the server.
 */
#ifndef LG_TLS_H
#define LG_TLS_H

#include <stddef.h>

#include "gio_tls.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

/* A client context (h2: ALPN offers h2 first); NULL with a message in err. */
SSL_CTX *lg_tls_ctx(int resume, int h2, char *err, size_t errlen);

/* bench --surge -C: ctx verifies the server's chain against the CA(s) in
   cafile, and its name against the SNI (a host name; an address URL has
   the chain checked alone); a handshake that fails it is a TLS error.
   0, or -1 with a message in err. */
int lg_tls_verify(SSL_CTX *ctx, const char *cafile, char *err, size_t errlen);
void lg_tls_ctx_free(SSL_CTX *ctx);

/* An SSL on the connected socket fd, offering the kept session if any. */
SSL *lg_tls_new(SSL_CTX *ctx, int fd, const char *sni);

/*
 * The same, offering a kept session only if offer is set (bench --surge:
 * a returning visitor resumes, a new one does a full handshake), and taking
 * it: each session (TLS 1.3 ticket) is offered once, the newest first.
 * *offered says whether a session was there to offer.
 */
SSL *lg_tls_open(SSL_CTX *ctx, int fd, const char *sni, int offer, int *offered);
void lg_tls_free(SSL *ssl);

int lg_tls_resumed(SSL *ssl);

/* TLS 1.3 early data (bench --surge --early-data): does the session the SSL
   offers allow it?  Send buf[0..n) as early data with the ClientHello (1
   when all of it went, GIO_AGAIN with *want, GIO_ERR); after the handshake,
   did the server accept it (else it was dropped: send it again)? */
int lg_tls_early_ok(SSL *ssl);
int lg_tls_write_early(SSL *ssl, const void *buf, size_t n, unsigned *want);
int lg_tls_early_accepted(SSL *ssl);

/* After the handshake: did the server pick h2 by ALPN? */
int lg_tls_alpn_h2(SSL *ssl);

/* The SNI name of a URL's authority: the host without port or brackets;
   NULL for an IP literal (RFC 6066 3: no literal addresses). */
const char *lg_tls_sni(const char *authority, char *buf, size_t len);

#endif
