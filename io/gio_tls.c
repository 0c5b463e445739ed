/* TLS on gio's terms: see gio_tls.h. */
#include "gio_tls.h"
#include "gio.h"
#include "gio_os.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/* A failed call: AGAIN with what to wait for, EOF, or a broken session. */
static long failed(SSL *ssl, int r, unsigned *want)
{
    switch (SSL_get_error(ssl, r)) {
    case SSL_ERROR_WANT_READ: *want = GIO_READ; return GIO_AGAIN;
    case SSL_ERROR_WANT_WRITE: *want = GIO_WRITE; return GIO_AGAIN;
    case SSL_ERROR_WANT_CLIENT_HELLO_CB: *want = 0; return GIO_AGAIN; /* paused: gio_tls.h */
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        /* the peer's TCP stream ended without a close_notify (the socket BIO
           read its EOF; SSL_OP_IGNORE_UNEXPECTED_EOF made it a clean close):
           the peer is gone, so none of ours either, as nginx does; written
           to a closed socket it only drew a reset (a surge visitor's last
           send(2), 3% of the server's time with the reset on loopback) */
        if (BIO_eof(SSL_get_rbio(ssl)) > 0)
            SSL_set_quiet_shutdown(ssl, 1);
        return GIO_EOF;
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

/* ---- sending: records gathered into one buffer, sent by one send(2) ---- */

/* Ciphertext on its way out: bytes [off, len) of buf are still to send;
   records [first, n) each end at rec[].end and carry rec[].plain bytes of
   the batch, consumed when the record has left in full. */
typedef struct tls_sink {
    char *buf;
    size_t len, off, cap;
    unsigned first, n;
    struct {
        size_t end, plain;
    } rec[GIO_TLS_GATHER];
} tls_sink_t;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static BIO_METHOD *sink_method; /* NULL if OpenSSL could not make it: records one by one */
static int held_idx = -1;       /* SSL ex_data: the session's tls_sink_t left over, or NULL */
static int early_idx = -1;      /* SSL ex_data: EARLY_* (gio_tls_read_early) */
static int free_ok;             /* SSL_free_buffers is safe in this libssl: see send_gathered */

/* Where a session is in its early data (early_idx): reading it, the server's
   flight sent (SSL_write_early_data may answer); or read to its end (the
   handshake goes on: SSL_read_early_data may not be called again). */
enum { EARLY_NONE, EARLY_READING, EARLY_OVER };

/* One loop per thread: its scratch sink and the BIO that writes into a sink. */
static __thread tls_sink_t scratch;
static __thread BIO *gather;

static int sink_write(BIO *bio, const char *p, int len)
{
    tls_sink_t *s = BIO_get_data(bio);
    if (len <= 0)
        return 0;
    if (s->cap - s->len < (size_t)len) {
        size_t cap = s->cap ? s->cap : GIO_TLS_SINK;
        while (cap - s->len < (size_t)len)
            cap *= 2;
        char *nb = realloc(s->buf, cap);
        if (!nb)
            return -1;
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, (size_t)len);
    s->len += (size_t)len;
    return len;
}

static long sink_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
    (void)bio, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH; /* nothing else (kTLS included) is asked of a sink */
}

static int sink_create(BIO *bio)
{
    BIO_set_init(bio, 1);
    return 1;
}

static void held_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    tls_sink_t *h = ptr;
    if (h) {
        free(h->buf);
        free(h);
    }
}

int gio_tls_free_buffers_safe(unsigned long v)
{
    switch (v >> 20) { /* 0xMNN00PP0: major and minor */
    case 0x300: return v >= 0x300000e0UL;
    case 0x301: return v >= 0x30100060UL;
    case 0x302: return v >= 0x30200020UL;
    case 0x303: return v >= 0x30300010UL;
    default: return v >= 0x30400000UL;
    }
}

static void init_once(void)
{
#ifndef LIBRESSL_VERSION_NUMBER
    free_ok = gio_tls_free_buffers_safe(OpenSSL_version_num());
#endif
    held_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, held_free);
    early_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "gio_tls sink");
    if (held_idx < 0 || early_idx < 0 || !m || !BIO_meth_set_write(m, sink_write) ||
        !BIO_meth_set_ctrl(m, sink_ctrl) || !BIO_meth_set_create(m, sink_create)) {
        BIO_meth_free(m);
        return;
    }
    sink_method = m;
}

/* Can this thread gather?  (Makes its BIO on first use.) */
static int gather_ready(void)
{
    pthread_once(&once, init_once);
    if (!gather && sink_method)
        gather = BIO_new(sink_method);
    return gather != NULL;
}

/* Make s the session's write BIO's target; returns the socket BIO to put back. */
static BIO *sink_in(SSL *ssl, tls_sink_t *s)
{
    BIO *sock = SSL_get_wbio(ssl);
    BIO_up_ref(sock); /* SSL_set0_wbio drops a reference of the one it replaces */
    BIO_up_ref(gather);
    BIO_set_data(gather, s);
    SSL_set0_wbio(ssl, gather);
    return sock;
}

static void sink_out(SSL *ssl, BIO *sock)
{
    SSL_set0_wbio(ssl, sock);
    BIO_set_data(gather, NULL);
}

/* The session's held sink is drained: an idle session holds nothing. */
static void held_drop(SSL *ssl, tls_sink_t *h)
{
    free(h->buf);
    free(h);
    SSL_set_ex_data(ssl, held_idx, NULL);
}

/*
 * Send what s holds to fd; every record that left in full consumes its
 * plaintext from b and counts in *sent.  0 when s is empty, GIO_AGAIN when
 * the socket took less (or nothing), GIO_ERR with errno set.
 */
static long drain(int fd, tls_sink_t *s, gio_batch_t *b, uint64_t *sent)
{
    while (s->off < s->len) {
        size_t len = s->len - s->off;
        ssize_t w = send(fd, s->buf + s->off, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? GIO_AGAIN : GIO_ERR;
        s->off += (size_t)w;
        for (; s->first < s->n && s->rec[s->first].end <= s->off; s->first++) {
            if (b)
                gio_batch_consume(b, s->rec[s->first].plain);
            *sent += s->rec[s->first].plain;
        }
        if ((size_t)w < len)
            return GIO_AGAIN; /* the socket buffer is full: wait for it */
    }
    s->len = s->off = 0;
    s->first = s->n = 0;
    return 0;
}

/*
 * Encrypt the batch's pending bytes into s: one copy of up to recs
 * records' worth (the file ranges that continue each other: one preadv),
 * then one full record per SSL_write (a short one only at the batch's
 * end).  Returns the plaintext bytes encrypted, or GIO_ERR (errno set) if
 * none could be.
 */
static long gather_records(SSL *ssl, gio_batch_t *b, tls_sink_t *s, uint64_t max,
                           unsigned recs)
{
    static __thread char *plain; /* GIO_TLS_GATHER records of plaintext */
    if (!plain && !(plain = malloc((size_t)GIO_TLS_GATHER * GIO_TLS_RECORD))) {
        errno = ENOMEM;
        return GIO_ERR;
    }
    size_t cap = (size_t)recs * GIO_TLS_RECORD;
    long got = gio_batch_copy_full(b, plain, max < cap ? (size_t)max : cap);
    if (got <= 0)
        return got < 0 ? got : (errno = EIO, GIO_ERR);
    if ((uint64_t)got < b->bytes_left && got > GIO_TLS_RECORD)
        got -= got % GIO_TLS_RECORD; /* a short read: full records, the rest next time */
    size_t enc = 0;
    long r = 0;
    BIO *sock = sink_in(ssl, s);
    while (s->n < recs && enc < (size_t)got) {
        size_t n = (size_t)got - enc < GIO_TLS_RECORD ? (size_t)got - enc : GIO_TLS_RECORD;
        size_t done = 0;
        errno = 0;
        if (!SSL_write_ex(ssl, plain + enc, n, &done)) { /* a sink takes everything: */
            unsigned want;
            r = failed(ssl, 0, &want); /* only out of memory gets here */
            if (r != GIO_ERR)
                errno = ENOMEM, r = GIO_ERR;
            break;
        }
        s->rec[s->n].end = s->len;
        s->rec[s->n].plain = done;
        s->n++;
        enc += done;
    }
    sink_out(ssl, sock);
    return s->n ? (long)enc : r;
}

/* The session's ciphertext left over from an earlier call, sent first. */
static long drain_held(SSL *ssl, int fd, gio_batch_t *b, uint64_t *sent)
{
    tls_sink_t *h = SSL_get_ex_data(ssl, held_idx);
    if (!h)
        return 0;
    long r = drain(fd, h, b, sent);
    if (!r)
        held_drop(ssl, h);
    return r;
}

/* What the scratch sink could not send stays with the session, copied to
   a buffer of its size (at most what the socket took before it, plus a
   round: see send_gathered); the scratch stays with the thread.  -1 if out
   of memory. */
static int hold(SSL *ssl)
{
    tls_sink_t *h = malloc(sizeof *h);
    size_t len = scratch.len - scratch.off;
    if (!h || !(h->buf = malloc(len)) || !SSL_set_ex_data(ssl, held_idx, h)) {
        if (h)
            free(h->buf);
        free(h);
        return -1;
    }
    memcpy(h->buf, scratch.buf + scratch.off, len);
    h->len = h->cap = len;
    h->off = 0;
    h->first = 0;
    h->n = scratch.n - scratch.first;
    for (unsigned i = 0; i < h->n; i++) {
        h->rec[i].end = scratch.rec[scratch.first + i].end - scratch.off;
        h->rec[i].plain = scratch.rec[scratch.first + i].plain;
    }
    scratch.len = scratch.off = 0;
    scratch.first = scratch.n = 0;
    return 0;
}

/*
 * Rounds of GIO_TLS_FIRST records, doubling up to GIO_TLS_GATHER while the
 * socket takes each round whole and the peer keeps up (less than
 * GIO_TLS_BACKLOG bytes wait unsent for its window; one ioctl a round that
 * may grow).  The round the socket refuses in part is what the session
 * holds: with rounds of 16 and no such check a client that does not read
 * left ~110 KiB per connection (its socket took ~130 KiB).
 */
static long send_gathered(SSL *ssl, gio_batch_t *b, uint64_t budget, unsigned *want)
{
    int fd = SSL_get_wfd(ssl);
    uint64_t sent = 0;
    /* SSL_MODE_RELEASE_BUFFERS frees OpenSSL's write buffer (a record's
       size) after every SSL_write and allocates it again for the next: off
       for the call's records, the buffers released once at its end (an
       idle session holds none, as before) */
    int release = free_ok && (SSL_get_mode(ssl) & SSL_MODE_RELEASE_BUFFERS);
    if (release)
        SSL_clear_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
    long r = drain_held(ssl, fd, b, &sent);
    for (unsigned recs = GIO_TLS_FIRST; !r && !gio_batch_done(b) && sent < budget;) {
        r = gather_records(ssl, b, &scratch, budget - sent, recs);
        if (r < 0)
            break;
        r = drain(fd, &scratch, b, &sent);
        if (r && hold(ssl) < 0) {
            errno = ENOMEM;
            r = GIO_ERR;
        }
        if (recs < GIO_TLS_GATHER && !r && !gio_batch_done(b))
            recs = gio_unsent(fd) >= GIO_TLS_BACKLOG ? GIO_TLS_FIRST /* peer's window full */
                   : recs * 2 < GIO_TLS_GATHER   ? recs * 2
                                                 : GIO_TLS_GATHER;
    }
    if (release) {
        SSL_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
        (void)SSL_free_buffers(ssl); /* refused (kept) only while a read is half done */
    }
    if (r == GIO_ERR) {
        SSL_set_quiet_shutdown(ssl, 1); /* the stream is broken: no close_notify after it */
        scratch.len = scratch.off = 0;
        scratch.first = scratch.n = 0;
    }
    *want = GIO_WRITE;
    return sent ? (long)sent : r < 0 ? r : 0;
}

/* While the session holds ciphertext, whatever else OpenSSL writes (a
   KeyUpdate's answer, an alert, close_notify, a small message) must queue
   behind it, or the records would leave out of order. */
static tls_sink_t *held_of(SSL *ssl)
{
    return held_idx < 0 ? NULL : SSL_get_ex_data(ssl, held_idx);
}

long gio_tls_read(SSL *ssl, void *buf, size_t len, unsigned *want)
{
    size_t got = 0;
    tls_sink_t *h = held_of(ssl);
    BIO *sock = h ? sink_in(ssl, h) : NULL;
    errno = 0;
    int ok = SSL_read_ex(ssl, buf, len, &got);
    long r = ok ? (long)got : failed(ssl, 0, want);
    if (h) {
        sink_out(ssl, sock);
        uint64_t none = 0;
        int e = errno;
        if (h->first == h->n && !drain(SSL_get_wfd(ssl), h, NULL, &none))
            held_drop(ssl, h); /* no record of a batch in it: nothing to account */
        errno = e;
    }
    return r;
}

static int early_state(SSL *ssl)
{
    return early_idx < 0 ? EARLY_NONE : (int)(intptr_t)SSL_get_ex_data(ssl, early_idx);
}

static void early_set(SSL *ssl, int v)
{
    SSL_set_ex_data(ssl, early_idx, (void *)(intptr_t)v);
}

long gio_tls_read_early(SSL *ssl, void *buf, size_t len, unsigned *want)
{
    pthread_once(&once, init_once);
    if (early_idx < 0 || early_state(ssl) == EARLY_OVER)
        return 0;
    size_t got = 0;
    errno = 0;
    int r = SSL_read_early_data(ssl, buf, len, &got);
    if (r == SSL_READ_EARLY_DATA_FINISH) {
        early_set(ssl, EARLY_OVER);
        return 0;
    }
    if (r == SSL_READ_EARLY_DATA_SUCCESS) {
        early_set(ssl, EARLY_READING);
        return (long)got;
    }
    long f = failed(ssl, 0, want);
    return f == GIO_EOF ? GIO_ERR : f;
}

int gio_tls_handshake(SSL *ssl, unsigned *want)
{
    errno = 0;
    int r = SSL_do_handshake(ssl);
    if (r == 1) {
        /* a verify callback that lets a failed client certificate through
           leaves its errors queued: the next SSL_read's "want read" would
           read as SSL_ERROR_SSL (SSL_get_error looks at the queue first) */
        ERR_clear_error();
        return 1;
    }
    long f = failed(ssl, r, want);
    return f == GIO_EOF ? GIO_ERR : (int)f;
}

int gio_tls_ktls_send(SSL *ssl)
{
    return BIO_get_ktls_send(SSL_get_wbio(ssl)) > 0;
}

/* One SSL_write (or SSL_sendfile) per record, OpenSSL writing the socket:
   with kTLS, inside a handshake, or where the sink could not be made. */
static long send_records(SSL *ssl, gio_batch_t *b, uint64_t budget, unsigned *want)
{
    /* 0.5-RTT: the server's flight is out, the client's Finished not yet in:
       SSL_write refuses, SSL_write_early_data writes under the server's keys */
    int early = early_state(ssl) == EARLY_READING && !SSL_is_init_finished(ssl);
    /* one loop per thread: the record is rebuilt from the batch on a retry,
       so nothing lives in it between calls */
    static __thread char record[GIO_TLS_RECORD];
    uint64_t sent = 0;
    int ktls = !early && gio_tls_ktls_send(ssl); /* SSL_sendfile waits for the handshake */
    *want = GIO_WRITE;
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
            uint64_t room = budget - sent < sizeof record ? budget - sent : sizeof record;
            long n = gio_batch_copy(b, record, (size_t)room); /* the budget holds here too */
            if (n <= 0)
                return sent ? (long)sent : GIO_ERR;
            if (!(early ? SSL_write_early_data(ssl, record, (size_t)n, &done)
                        : SSL_write_ex(ssl, record, (size_t)n, &done))) {
                long f = failed(ssl, 0, want);
                return sent ? (long)sent : f == GIO_EOF ? GIO_ERR : f;
            }
        }
        gio_batch_consume(b, done);
        sent += done;
    }
    return (long)sent;
}

long gio_tls_send(SSL *ssl, gio_batch_t *b, uint64_t budget, unsigned *want)
{
    if (!budget)
        budget = UINT64_MAX;
    if (gio_tls_ktls_send(ssl) || !SSL_is_init_finished(ssl) || !gather_ready())
        return send_records(ssl, b, budget, want);
    return send_gathered(ssl, b, budget, want);
}

/* Another write of OpenSSL's (close_notify, a small message), queued behind
   what the session holds. */
static void write_other(SSL *ssl, const void *buf, size_t len)
{
    if (!SSL_is_init_finished(ssl) || SSL_get_quiet_shutdown(ssl))
        return; /* quiet: the stream broke, nothing more goes out */
    tls_sink_t *h = held_of(ssl);
    BIO *sock = h ? sink_in(ssl, h) : NULL;
    size_t done;
    if (buf ? !SSL_write_ex(ssl, buf, len, &done) : SSL_shutdown(ssl) < 0)
        ERR_clear_error();
    if (h) {
        sink_out(ssl, sock);
        uint64_t none = 0;
        (void)drain(SSL_get_wfd(ssl), h, NULL, &none); /* best effort, as the call itself */
    }
}

void gio_tls_shutdown(SSL *ssl)
{
    write_other(ssl, NULL, 0);
}

void gio_tls_write_small(SSL *ssl, const void *buf, size_t len)
{
    if (len)
        write_other(ssl, buf, len);
}
