/*
 * tls — HTTPS in the same process and loop as HTTP, with OpenSSL.
 *
 * The certificates are loaded once, at start (before a chroot or a change of
 * user), into one SSL_CTX each; a connection picks one by SNI.  The store
 * looks at its files again every minute (tls_store_check_period) and on SIGUSR1
 * and swaps in renewed certificates without touching open connections (they
 * hold a reference to the context they started with).  A -C directory that
 * holds none yet (certbot's live/ before the first issuance) makes a store of
 * none: the HTTPS port is bound, its handshakes are refused with an alert
 * (tls_refuse), and the same looks load the first ones.
 *
 * Layouts in the certificate directory (-C; without it the start
 * directory's server.pem, as the original gatling did):
 *   server.pem               the default: certificate chain and private key
 *   NAME.pem                 the same for the host NAME
 *   NAME/fullchain.pem       Let's Encrypt's live/ layout: chain ...
 *   NAME/privkey.pem         ... and key
 *   server.ocsp, NAME.ocsp, NAME/ocsp.der   a DER OCSP response to staple
 * (a NAME/ with one of the two files but not the other fails its load, naming
 * the missing one; entries of other names are passed over).  A certificate
 * out of its dates is loaded, and named with the date (tls_store_check's
 * err, tls_store_load's stderr).
 * A certificate answers for its file or directory name and for every DNS
 * name in its subjectAltName (wildcards one label deep); an unknown or
 * missing SNI name gets the default (server.pem, else the first by name).
 *
 * In the loop a TLS connection is a plain conn (conn.c) with an SSL object:
 * conn reads through gio_tls_read, sends its output batch through
 * gio_tls_send (io/gio_tls.h: SSL_sendfile for file ranges when the kernel
 * does TLS, else the bytes are read and written with SSL_write in full
 * records), and asks the loop for what OpenSSL wants (a read can need the
 * socket writable).
 */
#ifndef GATLING_TLS_H
#define GATLING_TLS_H

#include "gio_tls.h"
#include "tls_ctx.h" /* the default ciphers, what became of a handshake (--acme) */
#include "tls_early.h" /* early data: --early-data's row, the handshake's questions */
#include "http/exchange.h" /* ex_client_t: mutual TLS's facts */

#include <stddef.h>
#include <stdint.h>

typedef struct ssl_st SSL;
struct x509_store_st;
typedef struct tls_store tls_store_t;
struct config;
struct proc;

/* What a -o/-O option may hold at most. */
#define TLS_CIPHERS_MAX 1024

/*
 * Load the certificates of dir (NULL: server.pem in the current directory,
 * and no store at all if there is none).  docroot_real is the document
 * root's canonical path: a private key inside it that others may read is
 * refused.  Returns the store, or NULL: *missing set if there simply were no
 * certificates (dir NULL), else after printing why to stderr.  A dir that
 * exists but holds no certificate yet (certbot's live/ before the first
 * issuance) gives a store of none (tls_store_count 0): tls_new refuses, and
 * tls_store_check loads them once they appear.
 */
tls_store_t *tls_store_load(const char *dir, const struct config *cfg, const struct proc *p,
                            const char *docroot_real, int *missing);

/* How many certificates are loaded (0: waiting for the first). */
int tls_store_count(const tls_store_t *st);

/* Seconds between looks at the certificate files: 60, or less with the
   GATLING_TEST_CERT_CHECK variable (for tests; gatling(8)). */
int tls_store_check_period(const tls_store_t *st);

/*
 * Look at the files again (force: now, else only if the check period
 * passed since the last look) and load them anew if any changed.  A failed
 * load keeps the old certificates: returns -1 with why in err.  0 unchanged
 * (or still none there), 1 reloaded (or the first loaded), with err naming
 * the new ones that are expired or not valid yet ("" if none: they are
 * served all the same; tls_store_load says so on stderr).
 */
int tls_store_check(tls_store_t *st, int64_t now_s, int force, char *err, size_t errlen);

/*
 * The certificate files of the store's directory, read afresh (the same scan
 * and the same refusal of a world-readable key inside the document root):
 * fn gets each one's id (file or directory name, "" for server.pem, which
 * comes first), its PEM chain and its PEM key (wiped after the call), for
 * another TLS library to load (HTTP/3's GnuTLS, quic/quic_cred.c).  Returns how
 * many fn took, or -1 with why in err (fn's -1 too).
 */
typedef int (*tls_pem_fn)(void *arg, const char *id, const char *chain, size_t clen,
                          const char *key, size_t klen);
int tls_store_pems(tls_store_t *st, tls_pem_fn fn, void *arg, char *err, size_t errlen);

/* The current master secret session tickets derive from (--cluster's once
   its side process has it, else the store's own, the same in every -W
   worker): HTTP/3's GnuTLS tickets derive from it too (quic_cred.c). */
int tls_store_ticket_master(const tls_store_t *st, unsigned char m[32]);

void tls_store_free(tls_store_t *st);

/* A server-side SSL for the accepted socket fd, or NULL (out of memory, or
   no certificate loaded yet). */
SSL *tls_new(tls_store_t *st, int fd);
void tls_free(SSL *ssl);

/* Does the first byte of what fd has received start a TLS handshake record?
   1 yes, 0 no (not TLS: close it), -1 nothing there yet. */
int tls_looks_like_hello(int fd);

/* While the store has no certificate (-C DIR waiting for its first): answer
   the ClientHello fd received with a fatal alert, and shut down sending; the
   caller closes fd. */
void tls_refuse(int fd);

/* The data calls are gio_tls.h's: gio_tls_handshake, gio_tls_read, gio_tls_send. */

/* Decrypted bytes already buffered, which the kernel will not report. */
int tls_pending(SSL *ssl);

/* Best effort, for a tiny message on an idle connection (100 Continue, 408). */
void tls_send_small(SSL *ssl, const void *buf, size_t len);

/* Send close_notify (once, without waiting for the peer's). */
void tls_close_notify(SSL *ssl);

/* Was the session resumed?  The SNI name (NULL if none). */
int tls_resumed(SSL *ssl);

/*
 * RFC 9110 7.4: would the Host (name, without port) be answered by another
 * certificate than the one this connection was set up with?  Then the
 * request gets 421.
 */
int tls_misdirected(tls_store_t *st, SSL *ssl, const char *host, size_t len);

/* The same for a connection whose certificate another TLS library chose by
   the server name sni[0..snilen) (NULL: none was sent; HTTP/3's GnuTLS): the
   store's certificate for that name, or its default, against the Host's. */
int tls_misdirected_name(tls_store_t *st, const char *sni, size_t snilen, const char *host,
                         size_t len);

/* Mutual TLS for a connection whose certificate another TLS library chose
   by the server name sni[0..snilen) (HTTP/3's GnuTLS, which asks no client
   certificate): NULL when that certificate asks for none, else facts of no
   certificate ("NONE"), required or not as it says (tls_client.h). */
const ex_client_t *tls_client_name(tls_store_t *st, const char *sni, size_t snilen);

/* HTTP/3: does the certificate of the server name sni[0..snilen) ask for
   client certificates?  And what the client sent, its DER chain der[0..n)
   verified as that certificate's handshakes verify (tls_client_chain):
   facts to free(), or NULL. */
int tls_client_asks_name(tls_store_t *st, const char *sni, size_t snilen);
ex_client_t *tls_client_quic(tls_store_t *st, const char *sni, size_t snilen,
                             const unsigned char *const *der, const size_t *len, unsigned n);

/* Does the store take handshakes now: a certificate loaded, or --acme's
   challenges while none is? */
int tls_store_accepts(const tls_store_t *st);

/* --acme's -X: does a loaded certificate name host[0..len) (exactly, or by a
   wildcard one label up), rather than the default answering for it? */
int tls_store_covers(const tls_store_t *st, const char *host, size_t len);

/* --acme-on-demand, HTTP/3's handshakes (TCP's do it themselves): does a
   loaded certificate name host?  If so, its use is told to the ACME client
   now and then, so that a name in use is kept and one nobody names is
   forgotten (acme/acme_ondemand.h); addr is the client's, for the log. */
int tls_ondemand_covers(tls_store_t *st, const char *host, size_t len, const char *addr);

/* The i-th certificate loaded (from 0): its name (the file or directory
   name; server.pem's first DNS name) and its expiry, read at load, for
   /metrics.  1, or 0 past the last. */
int tls_store_expiry(const tls_store_t *st, int i, const char **name, int64_t *not_after);

/* The i-th certificate's entry in the store's directory, if it is a
   symlink (the ACME client's NAME -> .acme/NAME.SERIAL): its target into
   target (cap bytes with its NUL), its length; -1 when it is none. */
int tls_store_link(const tls_store_t *st, int i, char *target, size_t cap);

/* Does the i-th certificate's chain, as served, lack a root of roots (an
   X509_STORE the caller loaded)?  1 with the name of the certificate it
   needs (the issuer of the chain's last certificate, one line) in top; 0
   when it leads to one of them (or fails for another reason: its dates, its
   purpose); -1 past the last. */
int tls_store_root_missing(const tls_store_t *st, int i, struct x509_store_st *roots, char *top,
                           size_t cap);

/* The k-th name (from 0, lower case; "*.example.com" for a wildcard) the
   i-th certificate loaded answers for: 1, or 0 past its last. */
int tls_store_name(const tls_store_t *st, int i, int k, const char **name);

/* Does the i-th certificate ask its clients for certificates (client-ca,
   required or optional)?  0 past the last. */
int tls_store_asks_client(const tls_store_t *st, int i);

/* ... and its start (notBefore, unix seconds; 0: unknown or past the last),
   for /server-status's renewal window. */
int64_t tls_store_issued(const tls_store_t *st, int i);

/* Did ALPN choose HTTP/2 ("h2") for this session? */
int tls_alpn_h2(struct ssl_st *ssl);

#endif
