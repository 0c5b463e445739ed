/* TLS on gio's terms: see gio_tls.h. */
#include "gio_tls.h"
#include "gio.h"

#include <errno.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/* A failed call: AGAIN with what to wait for, EOF, or a broken session. */
static long failed(SSL *ssl, int r, unsigned *want)
{
    switch (SSL_get_error(ssl, r)) {
    case SSL_ERROR_WANT_READ: *want = GIO_READ; return GIO_AGAIN;
    case SSL_ERROR_WANT_WRITE: *want = GIO_WRITE; return GIO_AGAIN;
    case SSL_ERROR_ZERO_RETURN: ERR_clear_error(); return GIO_EOF;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        SSL_set_quiet_shutdown(ssl, 1);
        if (!errno)
            errno = ECONNRESET;
        return GIO_ERR;
    default:
        ERR_clear_error(); /* the error queue is per thread: leave it empty */
        SSL_set_quiet_shutdown(ssl, 1);
        errno = EPROTO;
        return GIO_ERR;
    }
}

int gio_tls_handshake(SSL *ssl, unsigned *want)
{
    errno = 0;
    int r = SSL_do_handshake(ssl);
    if (r == 1)
        return 1;
    long f = failed(ssl, r, want);
    return f == GIO_EOF ? GIO_ERR : (int)f;
}

long gio_tls_read(SSL *ssl, void *buf, size_t len, unsigned *want)
{
    size_t got = 0;
    errno = 0;
    if (SSL_read_ex(ssl, buf, len, &got))
        return (long)got;
    return failed(ssl, 0, want);
}

int gio_tls_ktls_send(SSL *ssl)
{
    return BIO_get_ktls_send(SSL_get_wbio(ssl)) > 0;
}

long gio_tls_send(SSL *ssl, gio_batch_t *b, uint64_t budget, unsigned *want)
{
    /* one loop per thread: the record is rebuilt from the batch on a retry,
       so nothing lives in it between calls */
    static __thread char record[GIO_TLS_RECORD];
    uint64_t sent = 0;
    int ktls = gio_tls_ktls_send(ssl);
    *want = GIO_WRITE;
    if (!budget)
        budget = UINT64_MAX;
    while (!gio_batch_done(b) && sent < budget) {
        const gio_chunk_t *c = &b->c[b->first];
        size_t done = 0;
        errno = 0;
        if (ktls && !c->buf) { /* the kernel encrypts: file pages go out by sendfile */
            uint64_t len = c->left < budget - sent ? c->left : budget - sent;
            if (len > (1u << 30))
                len = 1u << 30;
            ossl_ssize_t r = SSL_sendfile(ssl, c->fd, (off_t)c->off, (size_t)len, 0);
            if (r <= 0) {
                long f = failed(ssl, (int)r, want);
                return sent ? (long)sent : f == GIO_EOF ? GIO_ERR : f;
            }
            done = (size_t)r;
        } else {
            long n = gio_batch_copy(b, record, sizeof record);
            if (n <= 0)
                return sent ? (long)sent : GIO_ERR;
            if (!SSL_write_ex(ssl, record, (size_t)n, &done)) {
                long f = failed(ssl, 0, want);
                return sent ? (long)sent : f == GIO_EOF ? GIO_ERR : f;
            }
        }
        gio_batch_consume(b, done);
        sent += done;
    }
    return (long)sent;
}
