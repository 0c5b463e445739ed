/*
 * gio_tls — TLS on gio's terms: OpenSSL's non-blocking calls mapped to gio's
 * return convention, and output batches sent through a TLS session.  The
 * server (gatling/tls/tls.c) and the load generators (bench/lg/lg_tls.c)
 * share it; each sets up its own contexts.
 *
 * Every call returns what gio's data calls return: bytes (> 0), GIO_EOF (the
 * peer closed: close_notify, or an EOF OpenSSL was told to accept),
 * GIO_AGAIN with *want set to the readiness to wait for (a read may need the
 * socket writable and a write readable), or GIO_ERR with errno set (EPROTO
 * for a TLS protocol error; the session is then made quiet, so that no
 * close_notify follows a fatal alert).
 *
 * Sending (without kTLS): the batch's pending bytes are copied out (buffers
 * with memcpy, the file ranges that continue each other with one preadv),
 * encrypted in full 16 KiB records (the TLS maximum) by SSL_write into a
 * sink (a write-only memory BIO of ours, swapped in for the call), and the
 * records leave together with one send(2), where SSL_write into the socket
 * made one write(2) per record.  A call sends in rounds of GIO_TLS_FIRST
 * records, twice as many each next round while the socket takes each whole
 * and less than GIO_TLS_BACKLOG bytes wait unsent for the peer's window,
 * up to GIO_TLS_GATHER.
 *
 * Why GIO_TLS_GATHER is 2 (32 KiB a send, half the system calls of one
 * record each): measured side by side on loopback (server CPU per MB, 1 MiB
 * responses, old = one record per write): 2 records 0.93x over HTTPS/1.1
 * and 1.04x over h2, 4 records 1.23x and 0.91x, 8 records 1.18x and 0.94x,
 * rounds of 2 doubling to 16 1.22x and 1.06x.  What grows with the send is
 * the receiving side's work done in the server's time: a send of a full
 * 64 KiB segment or more is transmitted at once, and on loopback the
 * client's TCP receive runs inside that transmit, where smaller writes are
 * corked and go out later in the client's time (perf: the server's
 * softirq and irq-restore samples went from 3% to 24% of its time with 8
 * records a send).  Copying the records out of OpenSSL into the sink costs
 * ~5% a MB (memcpy of the ciphertext), which two records a send repay.
 * Over a network card the receive is not the server's; rounds up to 16
 * records (256 KiB) may then pay: raise GIO_TLS_GATHER and measure.  A
 * client that does not read makes a session hold the round the socket
 * refused in part: GIO_TLS_GATHER records at most.
 *
 * Nothing is consumed from the batch until every byte of the record that
 * carries it was taken by the kernel: a batch's part is done (its buffer
 * freed, its file closed, the response complete) only once it left, and
 * the bytes returned (the -B rate's progress) are bytes the kernel took,
 * as with SSL_write before.  What the socket did not take stays with the
 * session (SSL ex_data, a buffer of its size) and goes first next call; so
 * the caller must present the same unsent bytes at the front of the batch
 * again, as OpenSSL required of a retried SSL_write.  A session that holds
 * nothing holds no buffer: the sink and the plaintext copy belong to the
 * thread (a round's worth each, once), and an idle connection costs no
 * more than its SSL.  Whatever else OpenSSL writes while ciphertext is
 * held (a KeyUpdate's answer in SSL_read, an alert, close_notify,
 * gio_tls_write_small) queues behind it, in order.  A session made with
 * SSL_MODE_RELEASE_BUFFERS has the mode off for the records of one send
 * call and its buffers freed once at the call's end (SSL_free_buffers,
 * with a libssl that has CVE-2024-4741 fixed; older ones keep the mode):
 * OpenSSL otherwise freed and allocated its write buffer around every
 * record.
 *
 * When the kernel does the encryption (kTLS: BIO_get_ktls_send), file
 * ranges go out with SSL_sendfile instead, without the copy, and buffers by
 * SSL_write through the socket (the kernel frames the records); so does a
 * session inside its handshake (kTLS is switched on by the socket BIO then).
 *
 * The completion path (io_uring): the sink is a memory BIO on the write
 * side, so what it holds could go out as a memory batch by gio_send() on
 * the ring.  Not done: the buffer would have to stay with the session until
 * the completion arrives (each busy connection then holds a round of
 * records, where today only the ones the socket refused stay),
 * and reads would need the read side too (ciphertext received by the ring
 * written into a read BIO), which is where the memory goes for idle
 * connections.  The readiness path's send(2) costs one call per round of
 * records, which is what the gathering was for.
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
#define GIO_TLS_GATHER 2     /* records encrypted for one send(2), at most */
#define GIO_TLS_FIRST 2      /* records in a call's first send(2); each next doubles */
#define GIO_TLS_BACKLOG (64 * 1024) /* bytes unsent (peer's window full): rounds stay small */
#define GIO_TLS_SINK (GIO_TLS_GATHER * (GIO_TLS_RECORD + 64)) /* a sink's first size */

/* SSL_do_handshake: 1 done, GIO_AGAIN, or GIO_ERR (an EOF in it too).  GIO_AGAIN
   with *want 0: paused by the ClientHello callback (SSL_CLIENT_HELLO_RETRY),
   waiting for nothing the socket brings: the caller calls again later. */
int gio_tls_handshake(SSL *ssl, unsigned *want);

/*
 * A server's first flight with early data (TLS 1.3's 0-RTT): SSL_read_early_data
 * in place of gio_tls_handshake until it returns 0.  Bytes of early data (the
 * server's flight is then out: until the early data ends, gio_tls_send
 * answers with SSL_write_early_data, 0.5-RTT data); 0 when the early data is
 * over (none sent, refused, or the client's EndOfEarlyData read: the
 * handshake goes on with gio_tls_handshake; 0 again on every later call);
 * GIO_AGAIN (*want 0: paused as gio_tls_handshake says) or GIO_ERR.
 */
long gio_tls_read_early(SSL *ssl, void *buf, size_t len, unsigned *want);

/* SSL_read: bytes, GIO_EOF, GIO_AGAIN or GIO_ERR. */
long gio_tls_read(SSL *ssl, void *buf, size_t len, unsigned *want);

/* Send from the batch, at most budget bytes (0: no cap), as gio_batch_send. */
long gio_tls_send(SSL *ssl, gio_batch_t *b, uint64_t budget, unsigned *want);

/* close_notify (once the handshake is done), best effort, behind whatever
   ciphertext the session still holds. */
void gio_tls_shutdown(SSL *ssl);

/* A small message (100 Continue, 408) on a quiet connection, best effort,
   behind whatever ciphertext the session still holds. */
void gio_tls_write_small(SSL *ssl, const void *buf, size_t len);

/* Is the kernel encrypting this session's output (kTLS)? */
int gio_tls_ktls_send(SSL *ssl);

/* Is SSL_free_buffers safe in the libssl of this OpenSSL_version_num()?
   Before 3.0.14, 3.1.6, 3.2.2 and 3.3.1 it could free a read buffer that
   held part of a record (CVE-2024-4741); sending keeps
   SSL_MODE_RELEASE_BUFFERS as it is with those. */
int gio_tls_free_buffers_safe(unsigned long version);

#endif
