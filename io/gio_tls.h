/*
 * gio_tls — TLS on gio's terms: OpenSSL's non-blocking calls mapped to gio's
 * return convention, and output batches sent through a TLS session.  The
 * server (gatling/tls.c) and the load generators (bench/lg/lg_tls.c) share it;
 * each sets up its own contexts.
 *
 * Every call returns what gio's data calls return: bytes (> 0), GIO_EOF (the
 * peer closed: close_notify, or an EOF OpenSSL was told to accept),
 * GIO_AGAIN with *want set to the readiness to wait for (a read may need the
 * socket writable and a write readable), or GIO_ERR with errno set (EPROTO
 * for a TLS protocol error; the session is then made quiet, so that no
 * close_notify follows a fatal alert).
 *
 * Sending: the batch's bytes are copied into one record (16 KiB, the TLS
 * maximum) at a time, file ranges read with pread, and written with
 * SSL_write; nothing is consumed from the batch until OpenSSL took it, so a
 * retry after GIO_AGAIN rebuilds the same record (OpenSSL requires it).
 * When the kernel does the encryption (kTLS: BIO_get_ktls_send), file
 * ranges go out with SSL_sendfile instead, without the copy.
 *
 * Separate from libgio's core (it needs OpenSSL): programs that do not call
 * it do not link it.
 */
#ifndef GIO_TLS_H
#define GIO_TLS_H

#include "gio_batch.h"

#include <stddef.h>
#include <stdint.h>

typedef struct ssl_st SSL;

#define GIO_TLS_RECORD 16384 /* plaintext bytes per record written */

/* SSL_do_handshake: 1 done, GIO_AGAIN, or GIO_ERR (an EOF in it too). */
int gio_tls_handshake(SSL *ssl, unsigned *want);

/* SSL_read: bytes, GIO_EOF, GIO_AGAIN or GIO_ERR. */
long gio_tls_read(SSL *ssl, void *buf, size_t len, unsigned *want);

/* Send from the batch, at most budget bytes (0: no cap), as gio_batch_send. */
long gio_tls_send(SSL *ssl, gio_batch_t *b, uint64_t budget, unsigned *want);

/* Is the kernel encrypting this session's output (kTLS)? */
int gio_tls_ktls_send(SSL *ssl);

#endif
