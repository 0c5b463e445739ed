/*
 * The contexts: the settings every SSL_CTX shares and the callbacks of its
 * handshakes (SNI, ALPN, OCSP stapling, session tickets, --acme's TLS-ALPN-01),
 * and the lookup of a host name's context.  tls.c loads the store.  See
 * tls_ctx.h and tls_int.h.
 */
#define _GNU_SOURCE
#include "tls_int.h"
#include "tls_client.h"
#include "site/acme_chal.h"
#include "site/cluster.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

int tls_cert_idx = -1; /* the ex_data index of tls_cert_t, set once */
int tls_acme_idx = -1; /* SSL ex_data: TLS_ACME_* as a pointer, for --acme's handshakes */
/* SSL ex_data: --acme-on-demand's wait: 0 the handshake may not pause (it
   asks and goes on), 1 it may (tls_may_pause), else when it began (ms + 2) */
static int tls_od_idx = -1;

/* A host name as a file name may hold it: letters, digits, '-', '.'. */
int tls_valid_name(const char *s, size_t n)
{
    if (!n || n > 253 || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '.'))
            return 0;
        if (ch == '.' && i + 1 < n && s[i + 1] == '.')
            return 0;
    }
    return 1;
}

/* ---- contexts ---- */

void tls_cert_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    tls_cert_t *c = ptr;
    if (!c)
        return;
    for (int i = 0; i < c->nnames; i++)
        free(c->names[i]);
    free(c->names);
    free(c->ocsp);
    free(c);
}

tls_cert_t *tls_cert_of(SSL_CTX *ctx)
{
    return ctx ? SSL_CTX_get_ex_data(ctx, tls_cert_idx) : NULL;
}

void tls_add_name(tls_cert_t *c, const char *s, size_t n)
{
    if (c->nnames >= TLS_NAMES_MAX || !n || n > 253)
        return;
    char *p = strndup(s, n);
    if (!p)
        return;
    for (char *q = p; *q; q++)
        if (*q >= 'A' && *q <= 'Z')
            *q += 'a' - 'A';
    char **nv = realloc(c->names, (size_t)(c->nnames + 1) * sizeof *nv);
    if (!nv) {
        free(p);
        return;
    }
    c->names = nv;
    c->names[c->nnames++] = p;
}

/* The DNS names of the subjectAltName, or the CN when there is none. */
void tls_cert_names(tls_cert_t *c, X509 *x)
{
    GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    if (sans) {
        for (int i = 0; i < sk_GENERAL_NAME_num(sans); i++) {
            const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
            if (g->type == GEN_DNS)
                tls_add_name(c, (const char *)ASN1_STRING_get0_data(g->d.dNSName),
                         (size_t)ASN1_STRING_length(g->d.dNSName));
        }
        GENERAL_NAMES_free(sans);
        return;
    }
    char cn[256];
    int k = X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof cn);
    if (k > 0)
        tls_add_name(c, cn, (size_t)k);
}

/* SNI: switch to the certificate for the name the client asked for. */
static int on_servername(SSL *ssl, int *alert, void *arg)
{
    (void)alert;
    tls_store_t *st = arg;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (!name || tls_acme_state(ssl)) /* a challenge keeps its certificate (on_hello) */
        return SSL_TLSEXT_ERR_OK;
    size_t len = strlen(name);
    if (len && name[len - 1] == '.')
        len--; /* an absolute name */
    if (!tls_valid_name(name, len))
        return SSL_TLSEXT_ERR_OK; /* the default answers */
    SSL_CTX *ctx = (SSL_CTX *)tls_lookup_ctx(st, name, len);
    if (ctx && ctx != SSL_get_SSL_CTX(ssl)) {
        SSL_set_SSL_CTX(ssl, ctx);
        tls_client_sni(ssl, ctx); /* its client certificates (or none) */
    }
    return SSL_TLSEXT_ERR_OK;
}

/* ALPN: h2 if offered (and not turned off, -2), else http/1.1; neither
   offered: no ALPN at all (as nginx does). */
static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg)
{
    const tls_store_t *st = arg;
    int h2 = st->cfg && !st->cfg->h2_off, found = 0;
    if (tls_acme_state(ssl) == TLS_ACME_SERVED) { /* on_hello saw the list: acme-tls/1 alone */
        *out = in + 1;
        *outlen = in[0];
        return SSL_TLSEXT_ERR_OK;
    }
    for (unsigned i = 0; i < inlen;) {
        unsigned n = in[i];
        if (i + 1 + n > inlen)
            break;
        if (h2 && n == 2 && !memcmp(in + i + 1, "h2", 2)) {
            *out = in + i + 1;
            *outlen = 2;
            return SSL_TLSEXT_ERR_OK;
        }
        if (!found && n == 8 && !memcmp(in + i + 1, "http/1.1", 8)) {
            *out = in + i + 1;
            *outlen = 8;
            found = 1;
        }
        i += 1 + n;
    }
    return found ? SSL_TLSEXT_ERR_OK : SSL_TLSEXT_ERR_NOACK;
}

static int on_status(SSL *ssl, void *arg)
{
    (void)arg;
    tls_cert_t *c = tls_cert_of(SSL_get_SSL_CTX(ssl));
    if (!c || !c->ocsp || tls_acme_state(ssl)) /* the context's OCSP is not the challenge's */
        return SSL_TLSEXT_ERR_NOACK;
    unsigned char *copy = OPENSSL_memdup(c->ocsp, (size_t)c->ocsp_len);
    if (!copy || !SSL_set_tlsext_status_ocsp_resp(ssl, copy, c->ocsp_len)) {
        OPENSSL_free(copy);
        return SSL_TLSEXT_ERR_NOACK;
    }
    return SSL_TLSEXT_ERR_OK;
}

/* The ticket keys of an hour, derived from a master secret: every -W
   worker (with --cluster, every node) computes the same ones, so a ticket
   works on any of them.  slot: which master (0 current, 1 previous). */
static const ticket_key_t *ticket_key(tls_store_t *st, const unsigned char *master, int slot,
                                      uint64_t epoch)
{
    ticket_key_t *k = &st->keys[(epoch & 1) | (unsigned)slot << 1];
    if (k->set && k->epoch == epoch && !CRYPTO_memcmp(k->master, master, sizeof k->master))
        return k;
    unsigned char msg[9], out[EVP_MAX_MD_SIZE];
    size_t outlen;
    for (int i = 0; i < 8; i++)
        msg[1 + i] = (unsigned char)(epoch >> (56 - 8 * i));
    unsigned char *dst[3] = {k->name, k->aes, k->mac};
    size_t len[3] = {sizeof k->name, sizeof k->aes, sizeof k->mac};
    k->set = 0;
    for (int i = 0; i < 3; i++) {
        msg[0] = (unsigned char)("nam"[i]);
        if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, master, 32, msg, sizeof msg, out,
                       sizeof out, &outlen) ||
            outlen < len[i])
            return NULL;
        memcpy(dst[i], out, len[i]);
    }
    memcpy(k->master, master, sizeof k->master);
    k->epoch = epoch;
    k->set = 1;
    return k;
}

/* The masters tickets derive from: --cluster's current and previous once
   its side process has them (site/cluster.h), else our own.  How many. */
static int ticket_masters(const tls_store_t *st, unsigned char m[64])
{
    int n = st->proc && st->proc->cluster ? cluster_tickets(st->proc->cluster, m) : 0;
    if (!n)
        memcpy(m, st->master, sizeof st->master), n = 1;
    return n;
}

static int ticket_mac_key(EVP_MAC_CTX *hctx, const ticket_key_t *k)
{
    OSSL_PARAM p[3];
    p[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->mac, sizeof k->mac);
    p[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    p[2] = OSSL_PARAM_construct_end();
    return EVP_MAC_CTX_set_params(hctx, p);
}

static int on_ticket(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *ectx,
                     EVP_MAC_CTX *hctx, int enc)
{
    tls_store_t *st = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    uint64_t now = (uint64_t)time(NULL) / (uint64_t)st->ticket_s;
    if (tls_acme_state(ssl))
        return enc ? -1 : 0; /* a challenge is never resumed, nor resumes */
    unsigned char m[64];
    int nm = ticket_masters(st, m);
    if (enc) {
        const ticket_key_t *k = ticket_key(st, m, 0, now);
        OPENSSL_cleanse(m, sizeof m);
        if (!k || RAND_bytes(iv, 16) != 1)
            return -1;
        memcpy(name, k->name, 16);
        if (!EVP_EncryptInit_ex(ectx, EVP_aes_256_cbc(), NULL, k->aes, iv) ||
            !ticket_mac_key(hctx, k))
            return -1;
        return 1;
    }
    for (int i = 0; i < 2 * nm; i++) { /* this hour's and the last, of each master */
        const ticket_key_t *k = ticket_key(st, m + 32 * (i >> 1), i >> 1, now - (uint64_t)(i & 1));
        if (!k || memcmp(name, k->name, 16))
            continue;
        OPENSSL_cleanse(m, sizeof m);
        if (!ticket_mac_key(hctx, k) ||
            !EVP_DecryptInit_ex(ectx, EVP_aes_256_cbc(), NULL, k->aes, iv))
            return -1;
        /* 2: go on, and issue a fresh ticket.  Always: TLS 1.3 clients use a
           ticket once (RFC 8446 C.4), and without a new one the next
           connection would be a full handshake; with an old key it also
           moves the client to the current one */
        return 2;
    }
    OPENSSL_cleanse(m, sizeof m);
    return 0; /* unknown or expired: a full handshake */
}

int tls_no_passphrase(char *buf, int size, int rw, void *u)
{
    (void)buf, (void)size, (void)rw, (void)u;
    return -1; /* an encrypted key cannot be unlocked by a daemon */
}

/* OpenSSL's reason for the last failure, or fallback. */
const char *tls_ssl_why(const char *fallback)
{
    static char buf[256];
    unsigned long e = ERR_peek_last_error();
    if (!e)
        return fallback;
    ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return buf;
}

/* ---- TLS-ALPN-01 (RFC 8737) ---- */

int tls_acme_state(SSL *ssl)
{
    return tls_acme_idx < 0 ? 0 : (int)(intptr_t)SSL_get_ex_data(ssl, tls_acme_idx);
}

static void acme_mark(SSL *ssl, int state)
{
    SSL_set_ex_data(ssl, tls_acme_idx, (void *)(intptr_t)state);
}

/* Is the ClientHello's ALPN list (the extension's body) exactly "acme-tls/1"? */
static int alpn_acme_only(const unsigned char *p, size_t n)
{
    const size_t k = sizeof ACME_ALPN_PROTO - 1;
    return n == 3 + k && p[0] == 0 && p[1] == k + 1 && p[2] == k &&
           !memcmp(p + 3, ACME_ALPN_PROTO, k);
}

/* The host_name of the ClientHello's server_name extension p[0..n), into
   out (cap bytes, NUL-terminated): its length, 0 if there is none. */
static size_t hello_sni(const unsigned char *p, size_t n, char *out, size_t cap)
{
    if (n < 2 || (size_t)(p[0] << 8 | p[1]) != n - 2)
        return 0;
    for (size_t i = 2; i + 3 <= n;) {
        size_t len = (size_t)(p[i + 1] << 8 | p[i + 2]);
        if (i + 3 + len > n)
            return 0;
        if (p[i] == TLSEXT_NAMETYPE_host_name) {
            if (!len || len >= cap || memchr(p + i + 3, 0, len))
                return 0;
            memcpy(out, p + i + 3, len);
            out[len] = 0;
            return len;
        }
        i += 3 + len;
    }
    return 0;
}

/* The challenge certificate, then its key, from pem onto this ssl alone.  0, or -1. */
static int use_challenge(SSL *ssl, const char *pem, size_t len)
{
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = x ? PEM_read_bio_PrivateKey(bio, NULL, tls_no_passphrase, NULL) : NULL;
    int ok = k && SSL_use_certificate(ssl, x) == 1 && SSL_use_PrivateKey(ssl, k) == 1 &&
             SSL_check_private_key(ssl) == 1;
    EVP_PKEY_free(k);
    X509_free(x);
    BIO_free(bio);
    ERR_clear_error();
    return ok ? 0 : -1;
}

/* ---- --acme-on-demand ---- */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The client's address in text, for the ask ("-" when unknown). */
static void peer_text(SSL *ssl, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    const void *a = NULL;
    snprintf(out, cap, "-");
    if (getpeername(SSL_get_fd(ssl), (struct sockaddr *)&ss, &len) < 0)
        return;
    int af = ss.ss_family;
    if (af == AF_INET)
        a = &((struct sockaddr_in *)&ss)->sin_addr;
    else if (af == AF_INET6)
        a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
    if (af == AF_INET6 && IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)a)) /* as -K counts */
        af = AF_INET, a = (const unsigned char *)a + 12;
    if (a && !inet_ntop(af, a, out, (socklen_t)cap))
        snprintf(out, cap, "-");
}

/*
 * A hello for a host name no certificate answers, under --acme-on-demand:
 * the ACME client is asked for one (once per handshake) and the handshake
 * pauses (SSL_CLIENT_HELLO_RETRY: conn/ looks again soon, the loop goes on)
 * until the certificate is loaded (it is then this handshake's), the client
 * refused the name, or -s passed since the first look: then it goes on as
 * without the option (the default certificate, or the refusal of a store
 * that has none).  A name that may not be asked for (acme_chal_ondemand_ok:
 * an IP address, one label) goes on at once, and so does a handshake that
 * may not pause (ftp/'s AUTH TLS: it asks all the same).
 */
static int on_demand(SSL *ssl, tls_store_t *st)
{
    const unsigned char *p;
    size_t n;
    char name[256], addr[64];
    size_t nl = SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &n)
                    ? hello_sni(p, n, name, sizeof name)
                    : 0;
    if (nl && name[nl - 1] == '.')
        name[--nl] = 0;
    if (!nl || !acme_chal_ondemand_ok(name, nl))
        return SSL_CLIENT_HELLO_SUCCESS;
    const SSL_CTX *ctx = tls_find_ctx(st, name, nl);
    if (ctx) { /* loaded (now, or before): this handshake's */
        peer_text(ssl, addr, sizeof addr);
        tls_ondemand_seen(st, ctx, name, nl, addr);
        if (ctx != SSL_get_SSL_CTX(ssl)) {
            SSL_set_SSL_CTX(ssl, (SSL_CTX *)ctx);
            tls_client_sni(ssl, (SSL_CTX *)ctx); /* its client certificates, if it asks */
        }
        return SSL_CLIENT_HELLO_SUCCESS;
    }
    int64_t now = mono_ms(), v = (int64_t)(intptr_t)SSL_get_ex_data(ssl, tls_od_idx);
    if (acme_chal_refused(st->proc->acme_chal, name, nl, (long long)time(NULL)))
        return SSL_CLIENT_HELLO_SUCCESS;
    if (v <= 1) {
        peer_text(ssl, addr, sizeof addr);
        if (acme_chal_ask(st->proc->acme_chal, name, nl, addr) < 0 || !v)
            return SSL_CLIENT_HELLO_SUCCESS; /* no client to ask (or too far behind), or no pause */
        SSL_set_ex_data(ssl, tls_od_idx, (void *)(intptr_t)(now + 2));
        return SSL_CLIENT_HELLO_RETRY;
    }
    return now - (v - 2) < (int64_t)st->cfg->head_timeout * 1000 ? SSL_CLIENT_HELLO_RETRY
                                                                  : SSL_CLIENT_HELLO_SUCCESS;
}

void tls_ondemand_seen(tls_store_t *st, const SSL_CTX *ctx, const char *name, size_t len,
                       const char *addr)
{
    tls_cert_t *c = tls_cert_of((SSL_CTX *)ctx);
    int64_t now = mono_ms(), every = (int64_t)st->cfg->acme.od_forget * 1000 / 4;
    every = every > 3600000 || every <= 0 ? 3600000 : every;
    if (!c || (c->told_ms && now - c->told_ms < every))
        return;
    c->told_ms = now; /* an ask of a name the client keeps is its "in use" (acme_ondemand.h) */
    acme_chal_ask(st->proc->acme_chal, name, len, addr);
}

void tls_may_pause(SSL *ssl)
{
    if (tls_od_idx >= 0)
        SSL_set_ex_data(ssl, tls_od_idx, (void *)(intptr_t)1);
}

/*
 * The context of the ClientHello's server name, taken before the session
 * it offers is looked up (on_servername comes after): a session resumes only
 * where its session ID context matches, and a context that asks for client
 * certificates has one of its own (tls_client.h), so a session made where
 * none or others were asked is not resumed there.
 */
static void early_sni(SSL *ssl, tls_store_t *st)
{
    const unsigned char *p;
    size_t n;
    char name[256];
    size_t len = SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &n)
                     ? hello_sni(p, n, name, sizeof name)
                     : 0;
    if (len && name[len - 1] == '.')
        len--;
    if (!len || !tls_valid_name(name, len) || SSL_get_SSL_CTX(ssl) == st->bare)
        return;
    SSL_CTX *ctx = (SSL_CTX *)tls_lookup_ctx(st, name, len);
    if (ctx && ctx != SSL_get_SSL_CTX(ssl)) {
        SSL_set_SSL_CTX(ssl, ctx);
        tls_client_sni(ssl, ctx);
    }
}

/*
 * --acme, before anything else of a ClientHello (SNI and ALPN are both
 * visible here, not yet acted on): one whose ALPN is exactly acme-tls/1
 * gets the challenge certificate for its server name, if one is outstanding
 * (its PEM is read only for such hellos), else a handshake_failure alert;
 * while the store has no certificate (the connection's context is the bare
 * one) every other hello is refused with internal_error, as tls_refuse does.
 * Every other hello (and every hello without --acme) takes its server
 * name's context here (early_sni).
 */
static int on_hello(SSL *ssl, int *alert, void *arg)
{
    tls_store_t *st = arg;
    const unsigned char *p;
    size_t n;
    if (!st->proc || !st->proc->acme_chal ||
        !SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &p,
                                   &n) ||
        !alpn_acme_only(p, n)) {
        if (st->proc && acme_chal_ondemand(st->proc->acme_chal) &&
            on_demand(ssl, st) != SSL_CLIENT_HELLO_SUCCESS)
            return SSL_CLIENT_HELLO_RETRY;
        if (SSL_get_SSL_CTX(ssl) != st->bare) {
            early_sni(ssl, st);
            return SSL_CLIENT_HELLO_SUCCESS;
        }
        acme_mark(ssl, TLS_ACME_NO_CERT);
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    char name[256];
    size_t nl = SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &n)
                    ? hello_sni(p, n, name, sizeof name)
                    : 0;
    size_t pemlen = 0;
    char *pem = nl ? acme_chal_alpn_pem(st->proc->acme_chal, name, nl, &pemlen) : NULL;
    int ok = pem && use_challenge(ssl, pem, pemlen) == 0;
    if (pem)
        OPENSSL_cleanse(pem, pemlen); /* its key is throwaway, but a key all the same */
    free(pem);
    if (!ok) {
        acme_mark(ssl, TLS_ACME_REFUSED);
        *alert = SSL_AD_HANDSHAKE_FAILURE;
        return SSL_CLIENT_HELLO_ERROR;
    }
    acme_mark(ssl, TLS_ACME_SERVED);
    /* no session to resume it by, none issued: a validation is a handshake of its own */
    SSL_set_session_id_context(ssl, (const unsigned char *)"acme-tls/1", 10);
    SSL_set_options(ssl, SSL_OP_NO_TICKET);
    SSL_set_num_tickets(ssl, 0);
    return SSL_CLIENT_HELLO_SUCCESS;
}

/* The settings every context shares. */
int tls_ctx_setup(SSL_CTX *ctx, tls_store_t *st, char *err, size_t errlen)
{
    const config_t *cfg = st->cfg;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* SSL_OP_ENABLE_KTLS: the kernel encrypts when it can (CONFIG_TLS, an OpenSSL built
       with kTLS, a cipher it supports); then file bodies go out by SSL_sendfile.  Where it
       cannot, OpenSSL quietly stays in user space. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TLSv1 |
                                 SSL_OP_NO_TLSv1_1 | SSL_OP_ENABLE_KTLS);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    const char *ciphers = cfg && cfg->tls_ciphers ? cfg->tls_ciphers : TLS_DEFAULT_CIPHERS;
    const char *suites = cfg && cfg->tls_suites ? cfg->tls_suites : TLS_DEFAULT_SUITES;
    if (!SSL_CTX_set_cipher_list(ctx, ciphers)) {
        snprintf(err, errlen, "-o %s: no usable TLS 1.2 cipher (%s)", ciphers,
                 tls_ssl_why("see openssl ciphers"));
        return -1;
    }
    if (!SSL_CTX_set_ciphersuites(ctx, suites)) {
        snprintf(err, errlen, "-O %s: no usable TLS 1.3 cipher suite (%s)", suites,
                 tls_ssl_why("see openssl ciphers -tls1_3"));
        return -1;
    }
    /* read whole records (and what follows) in one read(2), not a 5-byte header
       first and then the rest: one system call per request instead of two or three */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set1_groups_list(ctx, "X25519:P-256:P-384");
    SSL_CTX_set_dh_auto(ctx, 1);
    SSL_CTX_set_app_data(ctx, st);
    SSL_CTX_set_tlsext_servername_callback(ctx, on_servername);
    SSL_CTX_set_tlsext_servername_arg(ctx, st);
    SSL_CTX_set_alpn_select_cb(ctx, on_alpn, st);
    SSL_CTX_set_tlsext_status_cb(ctx, on_status);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, on_ticket);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"gatling", 7);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, SESSION_CACHE);
    SSL_CTX_set_timeout(ctx, st->ticket_s); /* a ticket lives as long as its key encrypts */
    SSL_CTX_set_num_tickets(ctx, 1);
    SSL_CTX_set_default_passwd_cb(ctx, tls_no_passphrase);
    SSL_CTX_set_client_hello_cb(ctx, on_hello, st); /* --acme's, on demand's, SNI's early */
    if (tls_od_idx < 0)
        tls_od_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    return 0;
}

/* Is path (below the store's directory) inside the document root? */
/* The context for a host name: exact, then a wildcard one label up; else
   NULL. */
const SSL_CTX *tls_find_ctx(const tls_store_t *st, const char *host, size_t len)
{
    const char *dot = memchr(host, '.', len);
    for (int wild = 0; wild < 2; wild++) {
        if (wild && !dot)
            break;
        const char *p = wild ? dot : host;
        size_t n = wild ? len - (size_t)(dot - host) : len;
        for (int i = 0; i < st->n; i++) {
            const tls_cert_t *c = tls_cert_of(st->ctx[i]);
            for (int k = 0; c && k < c->nnames; k++) {
                const char *nm = c->names[k];
                if (wild ? (nm[0] == '*' && strlen(nm + 1) == n && !strncasecmp(nm + 1, p, n))
                         : (strlen(nm) == n && !strncasecmp(nm, p, n)))
                    return st->ctx[i];
            }
        }
    }
    return NULL;
}

/* ... else the default. */
const SSL_CTX *tls_lookup_ctx(const tls_store_t *st, const char *host, size_t len)
{
    const SSL_CTX *ctx = tls_find_ctx(st, host, len);
    return ctx ? ctx : st->n ? st->ctx[st->def] : NULL;
}

