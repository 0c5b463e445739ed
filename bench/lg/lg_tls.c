/* The load generators' TLS client: see lg_tls.h. */
#include "lg_tls.h"
#include "gio.h"
#include "gio_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/* Keep the newest session the server gave (ex_data of the context). */
static int sess_idx = -1;

static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    SSL_CTX *ctx = SSL_get_SSL_CTX(ssl);
    SSL_SESSION *old = SSL_CTX_get_ex_data(ctx, sess_idx);
    SSL_CTX_set_ex_data(ctx, sess_idx, sess);
    SSL_SESSION_free(old);
    return 1; /* we keep the reference */
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
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
        SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    }
    return ctx;
}

void lg_tls_ctx_free(SSL_CTX *ctx)
{
    if (!ctx)
        return;
    SSL_SESSION_free(SSL_CTX_get_ex_data(ctx, sess_idx));
    SSL_CTX_set_ex_data(ctx, sess_idx, NULL);
    SSL_CTX_free(ctx);
}

SSL *lg_tls_new(SSL_CTX *ctx, int fd, const char *sni)
{
    int offered;
    return lg_tls_open(ctx, fd, sni, 1, &offered);
}

SSL *lg_tls_open(SSL_CTX *ctx, int fd, const char *sni, int offer, int *offered)
{
    *offered = 0;
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        return NULL;
    if (!SSL_set_fd(ssl, fd)) {
        SSL_free(ssl);
        return NULL;
    }
    if (sni)
        SSL_set_tlsext_host_name(ssl, sni);
    SSL_SESSION *sess = offer ? SSL_CTX_get_ex_data(ctx, sess_idx) : NULL;
    if (sess)
        *offered = SSL_set_session(ssl, sess) == 1;
    SSL_set_connect_state(ssl);
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
