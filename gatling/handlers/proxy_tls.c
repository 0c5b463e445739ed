/*
 * TLS to h2/ backends (proxy_int.h): the client context made once from
 * --proxy-ca's file (read as root, before a chroot and -u, by
 * site/privfs.h's rules), a session per backend connection with SNI and the
 * name (or address) its certificate must be issued for, the handshake
 * stepped from the loop without blocking, and sends through io/gio_tls.h.
 * A certificate that does not verify fails the handshake (SSL_VERIFY_PEER:
 * OpenSSL sends the alert); the caller gets the verify result in words.
 * Only the named CAs are trusted: never the system's store unless the
 * admin names its bundle (gatling.8, REVERSE PROXY).
 */
#include "proxy_int.h"
#include "gio_tls.h"
#include "site/privfs.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PX_CA_FILE_MAX (4 << 20) /* a CA bundle (Debian's whole store is ~220 KiB) */

/* The CAs of the PEM file at fd into store: how many (fd closed). */
static int read_cas(int fd, X509_STORE *store)
{
    BIO *b = BIO_new_fd(fd, BIO_CLOSE);
    X509 *x;
    int n = 0;
    if (!b) {
        close(fd);
        return 0;
    }
    while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        n += X509_STORE_add_cert(store, x) == 1;
        X509_free(x);
    }
    ERR_clear_error(); /* the file's end, or what does not parse after the last */
    BIO_free(b);
    return n;
}

/* A client context trusting store (its own now), or NULL (store freed). */
static SSL_CTX *client_ctx(X509_STORE *store)
{
    static const unsigned char alpn[] = "\x02h2";
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        X509_STORE_free(store);
        return NULL;
    }
    SSL_CTX_set_cert_store(ctx, store);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); /* RFC 9113 9.2 */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    if (SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int px_tls_load(const config_t *cfg, struct ssl_ctx_st **ctx, int quiet)
{
    struct stat st;
    char why[PATH_MAX + 160] = "";
    SSL_CTX *made = NULL;
    if (!cfg->proxy_ca || (ctx && *ctx))
        return 0;
    int fd = pfs_open_file(cfg->proxy_ca, PFS_READ, &st, why, sizeof why);
    if (fd < 0) {
        if (!quiet)
            fprintf(stderr, "gatling: --proxy-ca %s: %s\n", cfg->proxy_ca,
                    why[0] ? why : strerror(errno));
        return -1;
    }
    X509_STORE *store = st.st_size <= PX_CA_FILE_MAX ? X509_STORE_new() : NULL;
    int n = store ? read_cas(fd, store) : (close(fd), 0);
    if (n <= 0 || !(made = client_ctx(store))) {
        if (n <= 0)
            X509_STORE_free(store);
        if (!quiet)
            fprintf(stderr, "gatling: --proxy-ca %s: %s\n", cfg->proxy_ca,
                    st.st_size > PX_CA_FILE_MAX ? "larger than 4 MiB"
                    : n <= 0                    ? "no CA certificate (PEM) in it"
                                                : "OpenSSL could not make a client context");
        return -1;
    }
    if (ctx)
        *ctx = made;
    else
        SSL_CTX_free(made);
    return 0;
}

/* An h2/ pool or rule (what, as given) needs --proxy-ca, and a name= for
   a unix socket: 0, or -1 after saying so. */
int px_tls_check(const config_t *cfg, const px_pooldef_t *pd, const char *opt,
                 const char *what)
{
    if (pd->kind != PX_H2)
        return 0;
    if (!cfg->proxy_ca) {
        fprintf(stderr, "gatling: %s %s: h2/ backends need --proxy-ca (the CAs their "
                "certificates must chain to)\n", opt, what);
        return -1;
    }
    for (int k = 0; k < pd->n && !pd->o.name[0]; k++)
        if (pd->m[k].addr.ss_family == AF_UNIX) {
            fprintf(stderr, "gatling: %s %s: an h2/ backend on a unix socket needs a --pool "
                    "with name= (the name its certificate is verified for)\n", opt, what);
            return -1;
        }
    return 0;
}

/* The address of m as an IP SAN to verify: 0, or -1 (a unix socket: a
   file: pool's line may name one after the start's check). */
static int verify_address(SSL *ssl, const px_member_t *m)
{
    X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
    const struct sockaddr_storage *a = &m->d.addr;
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)a;
    const void *ip = a->ss_family == AF_INET    ? (const void *)&v4->sin_addr
                     : a->ss_family == AF_INET6 ? (const void *)&v6->sin6_addr
                                                : NULL;
    size_t len = a->ss_family == AF_INET ? 4 : 16;
    return ip && X509_VERIFY_PARAM_set1_ip(vp, ip, len) == 1 ? 0 : -1;
}

SSL *px_tls_new(SSL_CTX *ctx, const px_member_t *m, int fd)
{
    const char *name = m->pool->o.name;
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    int ok = ssl && SSL_set_fd(ssl, fd) == 1, err = ENOMEM;
    if (ok && name[0]) /* SNI and the name (RFC 6125: DNS SANs, wildcards in the left label) */
        ok = SSL_set_tlsext_host_name(ssl, name) == 1 && SSL_set1_host(ssl, name) == 1;
    else if (ok && verify_address(ssl, m) < 0) /* (no SNI for an address: RFC 6066 3) */
        ok = 0, err = m->d.addr.ss_family == AF_UNIX ? EDESTADDRREQ : ENOMEM;
    if (!ok) {
        SSL_free(ssl);
        ERR_clear_error();
        errno = err;
        return NULL;
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

/* The handshake failed (SSL_ERROR_SSL): why, in words. */
static void why_failed(SSL *ssl, char *why, size_t cap)
{
    long vr = SSL_get_verify_result(ssl);
    unsigned long e = ERR_peek_last_error();
    char err[256] = "";
    if (e)
        ERR_error_string_n(e, err, sizeof err);
    if (vr != X509_V_OK)
        snprintf(why, cap, "the backend's certificate did not verify: %s",
                 X509_verify_cert_error_string(vr));
    else
        snprintf(why, cap, "TLS handshake with the backend failed: %s",
                 e ? ERR_reason_error_string(e) ? ERR_reason_error_string(e) : err
                   : "a protocol error");
}

int px_tls_handshake(SSL *ssl, unsigned *want, char *why, size_t cap)
{
    ERR_clear_error();
    errno = 0;
    int r = SSL_do_handshake(ssl);
    if (r == 1) {
        const unsigned char *p = NULL;
        unsigned n = 0;
        SSL_get0_alpn_selected(ssl, &p, &n);
        if (n == 2 && !memcmp(p, "h2", 2))
            return 1;
        snprintf(why, cap, "the backend did not choose h2 (ALPN) in its TLS handshake");
        SSL_set_quiet_shutdown(ssl, 1);
        return GIO_ERR;
    }
    switch (SSL_get_error(ssl, r)) {
    case SSL_ERROR_WANT_READ: *want = GIO_READ; return GIO_AGAIN;
    case SSL_ERROR_WANT_WRITE: *want = GIO_WRITE; return GIO_AGAIN;
    case SSL_ERROR_SYSCALL:
        snprintf(why, cap, "TLS handshake with the backend failed: %s",
                 errno ? strerror(errno) : "the backend closed the connection");
        break;
    default: why_failed(ssl, why, cap); break;
    }
    ERR_clear_error(); /* the error queue is the thread's: leave it empty */
    SSL_set_quiet_shutdown(ssl, 1);
    errno = EPROTO;
    return GIO_ERR;
}

long px_tls_send(SSL *ssl, const char *p, size_t n, unsigned *want)
{
    gio_batch_t b;
    gio_batch_init(&b);
    if (gio_batch_add_buf(&b, p, n, 0) < 0) {
        errno = ENOMEM;
        return GIO_ERR;
    }
    long r = gio_tls_send(ssl, &b, 0, want);
    gio_batch_free(&b);
    return r == 0 ? GIO_AGAIN : r;
}
