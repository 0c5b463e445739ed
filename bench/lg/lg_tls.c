/* The load generators' TLS client: see lg_tls.h. */
#include "lg_tls.h"
#include "gio.h"
#include "gio_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/*
 * The newest sessions the server gave (ex_data of the context: a stack, newest on top, the
 * oldest dropped when full).  lg_tls_new offers the top one and leaves it there (--resume:
 * every connection resumes the last session); lg_tls_open takes it (bench --surge: each
 * ticket is used once, as RFC 8446 C.4 asks of clients, and servers that keep tickets
 * single-use against replay refuse a second use).  A TLS 1.3 server sends its tickets after
 * the handshake, one or two per connection, so the stack refills as visitors come.
 */
#define POOL_MAX 64

typedef struct sess_pool {
    SSL_SESSION *s[POOL_MAX];
    unsigned n;
} sess_pool_t;

static int sess_idx = -1;

static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    sess_pool_t *p = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), sess_idx);
    if (!p)
        return 0; /* not kept: OpenSSL frees it */
    if (p->n == POOL_MAX) { /* drop the oldest */
        SSL_SESSION_free(p->s[0]);
        memmove(p->s, p->s + 1, (POOL_MAX - 1) * sizeof p->s[0]);
        p->n--;
    }
    p->s[p->n++] = sess;
    return 1; /* we keep the reference */
}

/* The certificate chain is not verified (see lg_tls.h): accept it without building it. */
static int accept_any_chain(X509_STORE_CTX *x, void *arg)
{
    (void)x;
    (void)arg;
    return 1;
}

SSL_CTX *lg_tls_ctx(int resume, int h2, char *err, size_t errlen)
{
    if (sess_idx < 0 && (sess_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL)) < 0) {
        snprintf(err, errlen, "OpenSSL: no ex_data index");
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        snprintf(err, errlen, "OpenSSL: SSL_CTX_new failed");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    /* with VERIFY_NONE OpenSSL still builds and checks the chain, and ignores the result: skip
       it (bench --surge makes a full handshake per visitor, whose client side must stay
       cheap; parsing the certificate and checking its signature are left, and cost more) */
    SSL_CTX_set_cert_verify_callback(ctx, accept_any_chain, NULL);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_read_ahead(ctx, 1); /* one read(2) per record, not two */
    /* with h2, http/1.1 is offered second so that a server without HTTP/2
       finishes the handshake and is named (lg_tls_alpn_h2), not a TLS alert */
    static const unsigned char alpn_h1[] = "\x08http/1.1", alpn_h2[] = "\x02h2\x08http/1.1";
    if (h2)
        SSL_CTX_set_alpn_protos(ctx, alpn_h2, sizeof alpn_h2 - 1);
    else
        SSL_CTX_set_alpn_protos(ctx, alpn_h1, sizeof alpn_h1 - 1);
    if (resume) {
        sess_pool_t *p = calloc(1, sizeof *p);
        if (!p || !SSL_CTX_set_ex_data(ctx, sess_idx, p)) {
            free(p);
            SSL_CTX_free(ctx);
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
        SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    }
    return ctx;
}

int lg_tls_verify(SSL_CTX *ctx, const char *cafile, char *err, size_t errlen)
{
    if (SSL_CTX_load_verify_locations(ctx, cafile, NULL) != 1) {
        snprintf(err, errlen, "-C %s: no CA certificate could be read from it", cafile);
        return -1;
    }
    SSL_CTX_set_cert_verify_callback(ctx, NULL, NULL); /* OpenSSL's own check again */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    return 0;
}

void lg_tls_ctx_free(SSL_CTX *ctx)
{
    if (!ctx)
        return;
    sess_pool_t *p = SSL_CTX_get_ex_data(ctx, sess_idx);
    SSL_CTX_set_ex_data(ctx, sess_idx, NULL);
    SSL_CTX_free(ctx); /* first: no more new-session callbacks into the pool */
    if (p)
        for (unsigned i = 0; i < p->n; i++)
            SSL_SESSION_free(p->s[i]);
    free(p);
}

/* An SSL on fd with SNI; NULL when out of memory. */
static SSL *tls_on(SSL_CTX *ctx, int fd, const char *sni)
{
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        return NULL;
    if (!SSL_set_fd(ssl, fd)) {
        SSL_free(ssl);
        return NULL;
    }
    if (sni)
        SSL_set_tlsext_host_name(ssl, sni);
    if (sni && (SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_PEER) && !SSL_set1_host(ssl, sni)) {
        SSL_free(ssl); /* lg_tls_verify: the name is checked too */
        return NULL;
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

SSL *lg_tls_new(SSL_CTX *ctx, int fd, const char *sni)
{
    SSL *ssl = tls_on(ctx, fd, sni);
    sess_pool_t *p = SSL_CTX_get_ex_data(ctx, sess_idx);
    if (ssl && p && p->n)
        SSL_set_session(ssl, p->s[p->n - 1]);
    return ssl;
}

SSL *lg_tls_open(SSL_CTX *ctx, int fd, const char *sni, int offer, int *offered)
{
    *offered = 0;
    SSL *ssl = tls_on(ctx, fd, sni);
    sess_pool_t *p = SSL_CTX_get_ex_data(ctx, sess_idx);
    if (ssl && offer && p && p->n) {
        SSL_SESSION *sess = p->s[--p->n]; /* taken: used once */
        *offered = SSL_set_session(ssl, sess) == 1;
        SSL_SESSION_free(sess); /* the SSL holds its own reference now */
    }
    return ssl;
}

void lg_tls_free(SSL *ssl)
{
    if (ssl) {
        /* a load generator does not wait for goodbyes; marked as shut down, so that
           OpenSSL does not take the session for a broken one and forget it */
        SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
        SSL_free(ssl);
    }
}

int lg_tls_early_ok(SSL *ssl)
{
    SSL_SESSION *sess = SSL_get_session(ssl);
    return sess && SSL_SESSION_get_max_early_data(sess) > 0;
}

int lg_tls_write_early(SSL *ssl, const void *buf, size_t n, unsigned *want)
{
    size_t w = 0;
    ERR_clear_error();
    if (SSL_write_early_data(ssl, buf, n, &w) == 1)
        return w == n ? 1 : GIO_ERR;
    int e = SSL_get_error(ssl, 0);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want = e == SSL_ERROR_WANT_READ ? GIO_READ : GIO_WRITE;
        return GIO_AGAIN;
    }
    errno = EPROTO;
    return GIO_ERR;
}

int lg_tls_early_accepted(SSL *ssl)
{
    return SSL_get_early_data_status(ssl) == SSL_EARLY_DATA_ACCEPTED;
}

int lg_tls_resumed(SSL *ssl)
{
    return SSL_session_reused(ssl);
}

int lg_tls_alpn_h2(SSL *ssl)
{
    const unsigned char *p;
    unsigned n;
    SSL_get0_alpn_selected(ssl, &p, &n);
    return n == 2 && !memcmp(p, "h2", 2);
}

const char *lg_tls_sni(const char *authority, char *buf, size_t len)
{
    size_t n;
    if (authority[0] == '[')
        return NULL;
    n = strcspn(authority, ":");
    if (!n || n >= len)
        return NULL;
    memcpy(buf, authority, n);
    buf[n] = 0;
    unsigned char a[4];
    return inet_pton(AF_INET, buf, a) == 1 ? NULL : buf;
}
