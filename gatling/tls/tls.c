/*
 * HTTPS with OpenSSL: the certificate store (loading, SNI, reloading), the
 * session tickets shared by -W workers, and the connection layer that conn.c
 * reads and sends through.  See tls.h.
 */
#define _GNU_SOURCE
#include "tls.h"
#include "site/acme_chal.h"
#include "site/cluster.h"
#include "site/config.h"
#include "gio.h"
#include "gio_tls.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TLS_FILE_MAX (1 << 20) /* a certificate chain, key or OCSP file */
#define TLS_DIR_MAX 4096       /* entries looked at in the certificate directory */
#define TLS_NAMES_MAX 256      /* names one certificate answers for */
#define TICKET_PERIOD 3600     /* seconds a ticket key encrypts; it decrypts one more */
#define CHECK_PERIOD 60        /* seconds between looks at the certificate files */
#define SESSION_CACHE 10000    /* sessions kept for clients without tickets */

/* One certificate: what its SSL_CTX answers for.  Hangs off the context as
   ex_data and lives as long as it does (connections keep old contexts). */
typedef struct tls_cert {
    char id[256]; /* file or directory name without .pem; "" for server.pem */
    char **names; /* lower case; "*.example.com" for wildcards */
    int nnames;
    unsigned char *ocsp; /* a DER OCSP response to staple, or NULL */
    long ocsp_len;
    int64_t not_after; /* the certificate's expiry (unix seconds), for /metrics */
} tls_cert_t;

typedef struct ticket_key {
    uint64_t epoch;
    int set;
    unsigned char master[32]; /* what it derives from: ours, or --cluster's */
    unsigned char name[16], aes[32], mac[32];
} ticket_key_t;

struct tls_store {
    int dirfd; /* the certificate directory, opened at start (survives a chroot) */
    char dir[PATH_MAX];
    const config_t *cfg;
    char docroot[PATH_MAX];
    SSL_CTX **ctx;            /* one per certificate */
    SSL_CTX *bare;            /* --acme: no certificate, for handshakes while there is none
                                 (TLS-ALPN-01 challenges only: on_hello refuses the rest) */
    int n, def;               /* def: the index of the default */
    uint64_t signature;       /* of the files, to see a change */
    int64_t checked;          /* when they were last looked at */
    int check_s;              /* CHECK_PERIOD, or GATLING_TEST_CERT_CHECK's */
    int ticket_s;             /* TICKET_PERIOD, or GATLING_TEST_TICKET_PERIOD's */
    unsigned char master[32]; /* ticket keys derive from it: shared by -W workers */
    ticket_key_t keys[4]; /* by epoch's parity, and which master (--cluster: previous) */
};

static int cert_idx = -1; /* the ex_data index of tls_cert_t, set once */
static int acme_idx = -1; /* SSL ex_data: TLS_ACME_* as a pointer, for --acme's handshakes */

/* ---- the certificate files ---- */

/* A host name as a file name may hold it: letters, digits, '-', '.'. */
static int valid_name(const char *s, size_t n)
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

/* A -C entry's name: a host name, or "*." and one (--acme's wildcard
   certificates, named by what they serve). */
static int valid_file_name(const char *s, size_t n)
{
    return n > 2 && s[0] == '*' && s[1] == '.' ? valid_name(s + 2, n - 2) : valid_name(s, n);
}

/* An IPv6 address as a directory name (--acme's certificate for one, RFC 8738). */
static int is_ipv6(const char *s)
{
    unsigned char a[16];
    return strchr(s, ':') && inet_pton(AF_INET6, s, a) == 1;
}

/* Read a small file below dirfd; NUL-terminated.  NULL with errno set. */
static char *read_file(int dirfd, const char *path, size_t *len, struct stat *sb)
{
    /* O_NONBLOCK: a FIFO swapped in after scan()'s check must not hang a start */
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    char *buf = NULL;
    if (fstat(fd, sb) < 0)
        goto out;
    if (!S_ISREG(sb->st_mode) || sb->st_size > TLS_FILE_MAX) {
        errno = S_ISREG(sb->st_mode) ? EFBIG : EINVAL;
        goto out;
    }
    if (!(buf = malloc((size_t)sb->st_size + 1)))
        goto out;
    size_t got = 0;
    while (got < (size_t)sb->st_size) {
        ssize_t r = read(fd, buf + got, (size_t)sb->st_size - got);
        if (r <= 0) {
            if (r == 0)
                errno = EIO;
            free(buf);
            buf = NULL;
            goto out;
        }
        got += (size_t)r;
    }
    buf[got] = 0;
    *len = got;
out:
    if (!buf) {
        int e = errno;
        close(fd);
        errno = e;
    } else {
        close(fd);
    }
    return buf;
}

static int is_file(int dirfd, const char *path, struct stat *sb)
{
    return fstatat(dirfd, path, sb, 0) == 0 && S_ISREG(sb->st_mode);
}

/* One certificate found in the directory: which files make it. */
typedef struct found {
    char id[256];
    char chain[300], key[300], ocsp[300];
} found_t;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The certificates in the directory, sorted by name (server.pem first), at
 * most max; and a signature of their files (names, sizes, times, inodes),
 * so that a later look can tell whether anything changed.  -1 on error.
 */
static int scan(int dirfd, found_t *out, int max, uint64_t *sig)
{
    /* a description of our own: a dup() shares its offset with every process that
       forked from ours, and -W's workers scan at once (at start, on SIGHUP): one's
       readdir() went on from where another's stopped and found no file at all */
    int dup_fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return -1;
    }
    rewinddir(d);
    char *names[TLS_DIR_MAX];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < TLS_DIR_MAX)
        if (e->d_name[0] != '.' && (names[nn] = strdup(e->d_name)))
            nn++;
    closedir(d);
    qsort(names, (size_t)nn, sizeof names[0], cmp_str);
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over what identifies the files */
#define MIX(p, n) \
    for (size_t i_ = 0; i_ < (size_t)(n); i_++) \
        h = (h ^ ((const unsigned char *)(p))[i_]) * 1099511628211ULL;
    int n = 0;
    for (int pass = 0; pass < 2; pass++) /* server.pem first */
        for (int i = 0; i < nn && n < max; i++) {
            const char *nm = names[i];
            size_t len = strlen(nm);
            int is_server = !strcmp(nm, "server.pem");
            if ((pass == 0) != is_server)
                continue;
            found_t f;
            memset(&f, 0, sizeof f);
            struct stat sb;
            if (len > 4 && len - 4 < sizeof f.id && !strcmp(nm + len - 4, ".pem") &&
                is_file(dirfd, nm, &sb) && (is_server || valid_file_name(nm, len - 4))) {
                memcpy(f.id, nm, is_server ? 0 : len - 4);
                snprintf(f.chain, sizeof f.chain, "%s", nm);
                snprintf(f.key, sizeof f.key, "%s", nm);
                snprintf(f.ocsp, sizeof f.ocsp, "%.*s.ocsp", (int)(len - 4), nm);
            } else if (len < sizeof f.id && (valid_file_name(nm, len) || is_ipv6(nm)) &&
                       fstatat(dirfd, nm, &sb, 0) == 0 && S_ISDIR(sb.st_mode)) {
                snprintf(f.chain, sizeof f.chain, "%s/fullchain.pem", nm);
                snprintf(f.key, sizeof f.key, "%s/privkey.pem", nm);
                struct stat s2;
                /* one of the two without the other is a broken certificate: kept, so
                   that its load says which file is missing */
                if (fstatat(dirfd, f.chain, &s2, 0) < 0 && fstatat(dirfd, f.key, &s2, 0) < 0)
                    continue; /* not a certificate directory */
                memcpy(f.id, nm, len);
                snprintf(f.ocsp, sizeof f.ocsp, "%s/ocsp.der", nm);
            } else {
                continue;
            }
            const char *files[3] = {f.chain, f.key, f.ocsp};
            for (int k = 0; k < 3; k++) {
                struct stat s3;
                MIX(files[k], strlen(files[k]) + 1);
                if (fstatat(dirfd, files[k], &s3, 0) == 0) {
                    uint64_t v[4] = {(uint64_t)s3.st_ino, (uint64_t)s3.st_size,
                                     (uint64_t)s3.st_mtim.tv_sec, (uint64_t)s3.st_mtim.tv_nsec};
                    MIX(v, sizeof v);
                }
            }
            out[n++] = f;
        }
#undef MIX
    for (int i = 0; i < nn; i++)
        free(names[i]);
    *sig = h;
    return n;
}

/* ---- contexts ---- */

static void cert_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
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

static tls_cert_t *cert_of(SSL_CTX *ctx)
{
    return ctx ? SSL_CTX_get_ex_data(ctx, cert_idx) : NULL;
}

static void add_name(tls_cert_t *c, const char *s, size_t n)
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
static void cert_names(tls_cert_t *c, X509 *x)
{
    GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    if (sans) {
        for (int i = 0; i < sk_GENERAL_NAME_num(sans); i++) {
            const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
            if (g->type == GEN_DNS)
                add_name(c, (const char *)ASN1_STRING_get0_data(g->d.dNSName),
                         (size_t)ASN1_STRING_length(g->d.dNSName));
        }
        GENERAL_NAMES_free(sans);
        return;
    }
    char cn[256];
    int k = X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof cn);
    if (k > 0)
        add_name(c, cn, (size_t)k);
}

static const SSL_CTX *lookup_ctx(const tls_store_t *st, const char *host, size_t len);

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
    if (!valid_name(name, len))
        return SSL_TLSEXT_ERR_OK; /* the default answers */
    SSL_CTX *ctx = (SSL_CTX *)lookup_ctx(st, name, len);
    if (ctx && ctx != SSL_get_SSL_CTX(ssl))
        SSL_set_SSL_CTX(ssl, ctx);
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
    tls_cert_t *c = cert_of(SSL_get_SSL_CTX(ssl));
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
    int n = st->cfg && st->cfg->cluster ? cluster_tickets(st->cfg->cluster, m) : 0;
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

static int no_passphrase(char *buf, int size, int rw, void *u)
{
    (void)buf, (void)size, (void)rw, (void)u;
    return -1; /* an encrypted key cannot be unlocked by a daemon */
}

/* OpenSSL's reason for the last failure, or fallback. */
static const char *ssl_why(const char *fallback)
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
    return acme_idx < 0 ? 0 : (int)(intptr_t)SSL_get_ex_data(ssl, acme_idx);
}

static void acme_mark(SSL *ssl, int state)
{
    SSL_set_ex_data(ssl, acme_idx, (void *)(intptr_t)state);
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
    EVP_PKEY *k = x ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    int ok = k && SSL_use_certificate(ssl, x) == 1 && SSL_use_PrivateKey(ssl, k) == 1 &&
             SSL_check_private_key(ssl) == 1;
    EVP_PKEY_free(k);
    X509_free(x);
    BIO_free(bio);
    ERR_clear_error();
    return ok ? 0 : -1;
}

/*
 * --acme, before anything else of a ClientHello (SNI and ALPN are both
 * visible here, not yet acted on): one whose ALPN is exactly acme-tls/1
 * gets the challenge certificate for its server name, if one is outstanding
 * (its PEM is read only for such hellos), else a handshake_failure alert;
 * while the store has no certificate (the connection's context is the bare
 * one) every other hello is refused with internal_error, as tls_refuse does.
 */
static int on_hello(SSL *ssl, int *alert, void *arg)
{
    tls_store_t *st = arg;
    const unsigned char *p;
    size_t n;
    if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &p,
                                   &n) ||
        !alpn_acme_only(p, n)) {
        if (SSL_get_SSL_CTX(ssl) != st->bare)
            return SSL_CLIENT_HELLO_SUCCESS;
        acme_mark(ssl, TLS_ACME_NO_CERT);
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    char name[256];
    size_t nl = SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &n)
                    ? hello_sni(p, n, name, sizeof name)
                    : 0;
    size_t pemlen = 0;
    char *pem = nl ? acme_chal_alpn_pem(st->cfg->acme_chal, name, nl, &pemlen) : NULL;
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
static int ctx_setup(SSL_CTX *ctx, tls_store_t *st, char *err, size_t errlen)
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
                 ssl_why("see openssl ciphers"));
        return -1;
    }
    if (!SSL_CTX_set_ciphersuites(ctx, suites)) {
        snprintf(err, errlen, "-O %s: no usable TLS 1.3 cipher suite (%s)", suites,
                 ssl_why("see openssl ciphers -tls1_3"));
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
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    if (cfg && cfg->acme_chal)
        SSL_CTX_set_client_hello_cb(ctx, on_hello, st);
    return 0;
}

/* Is path (below the store's directory) inside the document root? */
static int inside_docroot(const tls_store_t *st, const char *path)
{
    char full[PATH_MAX * 2], real[PATH_MAX];
    if (!st->docroot[0])
        return 0;
    snprintf(full, sizeof full, "%s/%s", st->dir, path);
    if (!realpath(full, real))
        return 0;
    size_t n = strlen(st->docroot);
    return !strncmp(real, st->docroot, n) && (real[n] == '/' || real[n] == 0 || n == 1);
}

/* f's chain and key files, read; the key is refused where the document root
   would publish it.  0, or -1 with why in err; either way the caller frees
   *chain and *key (cleansing the key). */
static int read_pair(tls_store_t *st, const found_t *f, char **chain, size_t *clen, char **key,
                     size_t *klen, char *err, size_t errlen)
{
    struct stat sb, kb;
    if (!(*chain = read_file(st->dirfd, f->chain, clen, &sb))) {
        snprintf(err, errlen, "%s/%s: %s", st->dir, f->chain, strerror(errno));
        return -1;
    }
    if (!(*key = read_file(st->dirfd, f->key, klen, &kb))) {
        snprintf(err, errlen, "%s/%s: %s", st->dir, f->key, strerror(errno));
        return -1;
    }
    if ((kb.st_mode & S_IROTH) && inside_docroot(st, f->key)) {
        snprintf(err, errlen,
                 "%s/%s: the private key is inside the document root and readable by "
                 "everyone, so this server would publish it: move it out, or chmod o-r it",
                 st->dir, f->key);
        return -1;
    }
    return 0;
}

/* The certificate and its chain, from the PEM text of f->chain, into ctx, and
   the certificate's names into c.  The certificate, which the caller frees, or
   NULL with why in err. */
static X509 *use_chain(tls_store_t *st, const found_t *f, SSL_CTX *ctx, tls_cert_t *c,
                       const char *chain, size_t clen, char *err, size_t errlen)
{
    X509 *leaf = NULL, *ca;
    BIO *bio = BIO_new_mem_buf(chain, (int)clen);
    if (!bio || !(leaf = PEM_read_bio_X509_AUX(bio, NULL, NULL, NULL)) ||
        !SSL_CTX_use_certificate(ctx, leaf)) {
        snprintf(err, errlen, "%s/%s: no certificate (%s)", st->dir, f->chain,
                 ssl_why("no PEM CERTIFICATE block"));
        goto fail;
    }
    cert_names(c, leaf);
    struct tm tm;
    if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm) == 1)
        c->not_after = (int64_t)timegm(&tm);
    while ((ca = PEM_read_bio_X509(bio, NULL, NULL, NULL)))
        if (!SSL_CTX_add0_chain_cert(ctx, ca)) {
            X509_free(ca);
            snprintf(err, errlen, "%s/%s: the chain (%s)", st->dir, f->chain, ssl_why("?"));
            goto fail;
        }
    ERR_clear_error(); /* the end of the chain */
    BIO_free(bio);
    return leaf;
fail:
    BIO_free(bio);
    X509_free(leaf);
    return NULL;
}

/* Does pkey belong to one of the intermediates of ctx's chain (a chain file
   in the wrong order)? */
static int key_in_chain(SSL_CTX *ctx, EVP_PKEY *pkey)
{
    STACK_OF(X509) *sk = NULL;
    if (!SSL_CTX_get0_chain_certs(ctx, &sk) || !sk)
        return 0;
    for (int i = 0; i < sk_X509_num(sk); i++)
        if (X509_check_private_key(sk_X509_value(sk, i), pkey))
            return 1;
    return 0;
}

/* The private key, from the PEM text of f->key, into ctx, if it belongs to
   leaf.  0, or -1 with why in err. */
static int use_key(tls_store_t *st, const found_t *f, SSL_CTX *ctx, X509 *leaf, const char *key,
                   size_t klen, char *err, size_t errlen)
{
    EVP_PKEY *pkey = NULL;
    int rc = -1;
    BIO *bio = BIO_new_mem_buf(key, (int)klen);
    if (!bio || !(pkey = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL))) {
        snprintf(err, errlen, "%s/%s: no usable private key (%s)", st->dir, f->key,
                 ssl_why("no PEM PRIVATE KEY block"));
    } else if (!X509_check_private_key(leaf, pkey) || !SSL_CTX_use_PrivateKey(ctx, pkey) ||
               !SSL_CTX_check_private_key(ctx)) {
        snprintf(err, errlen, "%s: the private key in %s does not belong to the certificate%s",
                 st->dir, f->key,
                 key_in_chain(ctx, pkey) ? " (it belongs to another one of the chain: the "
                                           "certificate must come first, then its intermediates)"
                                         : "");
        ERR_clear_error();
    } else {
        rc = 0;
    }
    BIO_free(bio);
    EVP_PKEY_free(pkey);
    return rc;
}

/* One certificate's context from its files; NULL with why in err. */
static SSL_CTX *load_one(tls_store_t *st, const found_t *f, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    tls_cert_t *c = calloc(1, sizeof *c);
    char *chain = NULL, *key = NULL;
    size_t clen = 0, klen = 0;
    X509 *leaf = NULL;
    if (!ctx || !c || !SSL_CTX_set_ex_data(ctx, cert_idx, c)) {
        snprintf(err, errlen, "out of memory");
        free(c);
        SSL_CTX_free(ctx);
        return NULL;
    }
    snprintf(c->id, sizeof c->id, "%s", f->id);
    if (ctx_setup(ctx, st, err, errlen) < 0 ||
        read_pair(st, f, &chain, &clen, &key, &klen, err, errlen) < 0 ||
        !(leaf = use_chain(st, f, ctx, c, chain, clen, err, errlen)) ||
        use_key(st, f, ctx, leaf, key, klen, err, errlen) < 0) {
        SSL_CTX_free(ctx); /* frees c through the ex_data */
        ctx = NULL;
    } else {
        if (f->id[0])
            add_name(c, f->id, strlen(f->id));
        size_t olen;
        struct stat ob;
        char *ocsp = read_file(st->dirfd, f->ocsp, &olen, &ob);
        if (ocsp) {
            c->ocsp = (unsigned char *)ocsp;
            c->ocsp_len = (long)olen;
        }
    }
    if (key)
        OPENSSL_cleanse(key, klen);
    free(key);
    free(chain);
    X509_free(leaf);
    return ctx;
}

/*
 * Load every certificate of the directory into fresh contexts.  How many
 * (0: none there, *out NULL, and why in err for a caller to whom that is an
 * error), or -1 with why in err.
 */
static int load_all(tls_store_t *st, SSL_CTX ***out, int *nout, int *def, uint64_t *sig, char *err,
                    size_t errlen)
{
    enum { MAXF = 512 };
    found_t *f = calloc(MAXF, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int n = scan(st->dirfd, f, MAXF, sig);
    if (n <= 0) {
        snprintf(err, errlen,
                 n < 0 ? "%s: %s"
                       : "%s: no certificate (server.pem, NAME.pem or "
                         "NAME/fullchain.pem + NAME/privkey.pem)",
                 st->dir, strerror(errno));
        free(f);
        *out = NULL, *nout = 0, *def = 0;
        return n;
    }
    SSL_CTX **ctx = calloc((size_t)n, sizeof *ctx);
    if (!ctx) {
        free(f);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!(ctx[i] = load_one(st, &f[i], err, errlen))) {
            while (i-- > 0)
                SSL_CTX_free(ctx[i]);
            free(ctx);
            free(f);
            return -1;
        }
    *def = 0; /* server.pem sorts first; else the first name */
    *out = ctx;
    *nout = n;
    free(f);
    return n;
}

int tls_store_pems(tls_store_t *st, tls_pem_fn fn, void *arg, char *err, size_t errlen)
{
    enum { MAXF = 512 };
    uint64_t sig;
    found_t *f = calloc(MAXF, sizeof *f);
    int n = f ? scan(st->dirfd, f, MAXF, &sig) : -1;
    if (n < 0)
        snprintf(err, errlen, "%s: %s", st->dir, f ? strerror(errno) : "out of memory");
    for (int i = 0; i < n; i++) {
        char *chain = NULL, *key = NULL;
        size_t clen = 0, klen = 0;
        int r = read_pair(st, &f[i], &chain, &clen, &key, &klen, err, errlen);
        if (r == 0 && fn(arg, f[i].id, chain, clen, key, klen) < 0) {
            snprintf(err, errlen, "%s/%s: not taken by the other TLS library", st->dir,
                     f[i].chain);
            r = -1;
        }
        if (key)
            OPENSSL_cleanse(key, klen);
        free(key);
        free(chain);
        if (r < 0) {
            n = -1;
            break;
        }
    }
    free(f);
    return n;
}

/* The certificates of ctx[0..n) that clients refuse for their dates (expired,
   or not valid yet), named with the date, into out ("" when none): they are
   served all the same -- refusing them would take the site down until a
   renewal comes -- but the administrator is told. */
static void validity_notes(SSL_CTX **ctx, int n, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n && used < outlen; i++) {
        X509 *x = SSL_CTX_get0_certificate(ctx[i]);
        const tls_cert_t *c = cert_of(ctx[i]);
        const ASN1_TIME *nb = x ? X509_get0_notBefore(x) : NULL;
        const ASN1_TIME *na = x ? X509_get0_notAfter(x) : NULL;
        int early = nb && X509_cmp_current_time(nb) > 0;
        int late = na && X509_cmp_current_time(na) < 0;
        struct tm tm;
        char when[32];
        if ((!early && !late) || ASN1_TIME_to_tm(early ? nb : na, &tm) != 1 ||
            !strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm))
            continue;
        int k =
            snprintf(out + used, outlen - used, "%s%s: the certificate %s %s: clients refuse it",
                     used ? "; " : "", c && c->id[0] ? c->id : "server.pem",
                     early ? "is not valid before" : "expired on", when);
        used = k < 0 ? outlen : used + (size_t)k;
    }
}

static void drop_contexts(SSL_CTX **ctx, int n)
{
    for (int i = 0; i < n; i++)
        SSL_CTX_free(ctx[i]); /* connections still using one keep it alive */
    free(ctx);
}

/* --acme: the context of no certificate, for TLS-ALPN-01 challenges while
   the store has none (a certificate comes from on_hello).  0, or -1. */
static int bare_ctx(tls_store_t *st, char *err, size_t errlen)
{
    if (!(st->bare = SSL_CTX_new(TLS_server_method()))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (ctx_setup(st->bare, st, err, errlen) < 0) {
        SSL_CTX_free(st->bare);
        st->bare = NULL;
        return -1;
    }
    return 0;
}

/*
 * A period from a testing variable (gatling(8), ENVIRONMENT): def when it is
 * unset, else whole seconds in lo..def -- it can only make the period
 * shorter, never weaken what production gets -- announced on stderr so that
 * a server started with it by mistake says so.  -1 (with a message) when
 * the value is not such a number.
 */
static int test_period(const char *name, int lo, int def, const char *what)
{
    const char *v = getenv(name);
    if (!v)
        return def;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > def) {
        fprintf(stderr, "gatling: %s=%s: a number of seconds from %d to %d\n", name, v, lo, def);
        return -1;
    }
    fprintf(stderr, "gatling: HTTPS: %s=%ld: %s every %ld s instead of %d (for tests)\n", name,
            n, what, n, def);
    return (int)n;
}

tls_store_t *tls_store_load(const char *dir, const config_t *cfg, const char *docroot_real,
                            int *missing)
{
    *missing = 0;
    if ((cert_idx < 0 &&
         (cert_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, cert_free)) < 0) ||
        (acme_idx < 0 && (acme_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL)) < 0)) {
        fprintf(stderr, "gatling: OpenSSL: %s\n", ssl_why("no ex_data index"));
        return NULL;
    }
    if (!dir) {
        struct stat sb;
        if (stat("server.pem", &sb) < 0) {
            *missing = 1;
            return NULL;
        }
    }
    tls_store_t *st = calloc(1, sizeof *st);
    if (!st) {
        fprintf(stderr, "gatling: out of memory\n");
        return NULL;
    }
    st->cfg = cfg;
    st->check_s = test_period("GATLING_TEST_CERT_CHECK", 1, CHECK_PERIOD,
                              "the certificate files are looked at");
    st->ticket_s = test_period("GATLING_TEST_TICKET_PERIOD", 2, TICKET_PERIOD,
                               "the ticket key changes");
    if (st->check_s < 0 || st->ticket_s < 0) {
        free(st);
        return NULL;
    }
    snprintf(st->dir, sizeof st->dir, "%s", dir ? dir : ".");
    if (docroot_real)
        snprintf(st->docroot, sizeof st->docroot, "%s", docroot_real);
    if ((st->dirfd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "gatling: -C %s: %s\n", st->dir, strerror(errno));
        free(st);
        return NULL;
    }
    char err[PATH_MAX + 512];
    if (RAND_bytes(st->master, sizeof st->master) != 1) {
        fprintf(stderr, "gatling: OpenSSL: no random bytes for the ticket keys\n");
        goto fail;
    }
    /* -C DIR with no certificate yet (certbot's live/ before the first issuance) is a
       store that waits for them; a server.pem that holds none is an error */
    int n = load_all(st, &st->ctx, &st->n, &st->def, &st->signature, err, sizeof err);
    if (n < 0 || (n == 0 && !dir)) {
        fprintf(stderr, "gatling: HTTPS: %s\n", err);
        goto fail;
    }
    if (cfg && cfg->acme_chal && bare_ctx(st, err, sizeof err) < 0) {
        fprintf(stderr, "gatling: HTTPS: %s\n", err);
        drop_contexts(st->ctx, st->n);
        goto fail;
    }
    validity_notes(st->ctx, st->n, err, sizeof err);
    if (err[0])
        fprintf(stderr, "gatling: HTTPS: %s: %s\n", st->dir, err);
    st->checked = (int64_t)time(NULL);
    return st;
fail:
    close(st->dirfd);
    free(st);
    return NULL;
}

int tls_store_count(const tls_store_t *st)
{
    return st ? st->n : 0;
}

int tls_store_check_period(const tls_store_t *st)
{
    return st->check_s;
}

int tls_store_check(tls_store_t *st, int64_t now_s, int force, char *err, size_t errlen)
{
    err[0] = 0;
    if (!force && now_s - st->checked < st->check_s)
        return 0;
    st->checked = now_s;
    found_t *f = calloc(512, sizeof *f);
    uint64_t sig = 0;
    if (!f)
        return 0;
    int n = scan(st->dirfd, f, 512, &sig);
    free(f);
    if (n >= 0 && sig == st->signature)
        return 0; /* unchanged, or still none there */
    SSL_CTX **ctx;
    int nc, def;
    int k = load_all(st, &ctx, &nc, &def, &sig, err, errlen);
    if (k < 0 || (k == 0 && st->n > 0))
        return -1; /* keep serving the old ones */
    if (k == 0) {  /* still waiting for the first */
        st->signature = sig;
        return 0;
    }
    validity_notes(ctx, nc, err, errlen);
    drop_contexts(st->ctx, st->n);
    st->ctx = ctx;
    st->n = nc;
    st->def = def;
    st->signature = sig;
    return 1;
}

void tls_store_free(tls_store_t *st)
{
    if (!st)
        return;
    drop_contexts(st->ctx, st->n);
    SSL_CTX_free(st->bare);
    close(st->dirfd);
    OPENSSL_cleanse(st->master, sizeof st->master);
    OPENSSL_cleanse(st->keys, sizeof st->keys);
    free(st);
}

/* The context for a host name: exact, then a wildcard one label up; else
   NULL. */
static const SSL_CTX *find_ctx(const tls_store_t *st, const char *host, size_t len)
{
    const char *dot = memchr(host, '.', len);
    for (int wild = 0; wild < 2; wild++) {
        if (wild && !dot)
            break;
        const char *p = wild ? dot : host;
        size_t n = wild ? len - (size_t)(dot - host) : len;
        for (int i = 0; i < st->n; i++) {
            const tls_cert_t *c = cert_of(st->ctx[i]);
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
static const SSL_CTX *lookup_ctx(const tls_store_t *st, const char *host, size_t len)
{
    const SSL_CTX *ctx = find_ctx(st, host, len);
    return ctx ? ctx : st->n ? st->ctx[st->def] : NULL;
}

int tls_store_covers(const tls_store_t *st, const char *host, size_t len)
{
    if (len && host[len - 1] == '.')
        len--;
    return st && len && find_ctx(st, host, len) != NULL;
}

int tls_misdirected(tls_store_t *st, SSL *ssl, const char *host, size_t len)
{
    if (len && host[len - 1] == '.')
        len--;
    const tls_cert_t *want = cert_of((SSL_CTX *)lookup_ctx(st, host, len));
    const tls_cert_t *have = cert_of(SSL_get_SSL_CTX(ssl));
    /* by id, not pointer: a reload makes new contexts for the same files */
    return want && have && strcmp(want->id, have->id) != 0;
}

int tls_misdirected_name(tls_store_t *st, const char *sni, size_t snilen, const char *host,
                         size_t len)
{
    if (!st || !st->n)
        return 0;
    if (len && host[len - 1] == '.')
        len--;
    if (snilen && sni[snilen - 1] == '.')
        snilen--;
    const tls_cert_t *want = cert_of((SSL_CTX *)lookup_ctx(st, host, len));
    const SSL_CTX *by_name = sni && snilen ? lookup_ctx(st, sni, snilen) : NULL;
    const tls_cert_t *have = cert_of((SSL_CTX *)(by_name ? by_name : st->ctx[st->def]));
    return want && have && strcmp(want->id, have->id) != 0;
}

/* ---- connections ---- */

int tls_store_expiry(const tls_store_t *st, int i, const char **name, int64_t *not_after)
{
    const tls_cert_t *c = st && i >= 0 && i < st->n ? cert_of(st->ctx[i]) : NULL;
    if (!c)
        return 0;
    *name = c->id[0] ? c->id : c->nnames ? c->names[0] : "server.pem";
    *not_after = c->not_after;
    return 1;
}

int tls_store_accepts(const tls_store_t *st)
{
    return st && (st->n || st->bare);
}

SSL *tls_new(tls_store_t *st, int fd)
{
    if (!st->n && !st->bare)
        return NULL;
    SSL *ssl = SSL_new(st->n ? st->ctx[st->def] : st->bare);
    if (!ssl)
        return NULL;
    if (!SSL_set_fd(ssl, fd)) {
        SSL_free(ssl);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_accept_state(ssl);
    return ssl;
}

void tls_free(SSL *ssl)
{
    SSL_free(ssl);
}

int tls_looks_like_hello(int fd)
{
    unsigned char b[2];
    ssize_t r = recv(fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : 0;
    if (r == 0)
        return 0;
    /* a handshake record (22), record version 3.x */
    return b[0] == 22 && (r < 2 || b[1] == 3);
}

void tls_refuse(int fd)
{
    /* RFC 8446 6: a fatal alert in a plaintext record, as before any handshake;
       internal_error (80), since what is missing is ours, not the client's */
    static const unsigned char alert[] = {21, 3, 3, 0, 2, 2, 80};
    unsigned char junk[4096];
    /* read what came (the ClientHello): unread bytes at close() would send a
       reset, which can discard the alert before the client reads it */
    for (int i = 0; i < 16 && recv(fd, junk, sizeof junk, MSG_DONTWAIT) == (ssize_t)sizeof junk;
         i++)
        ;
    (void)!send(fd, alert, sizeof alert, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
}

int tls_pending(SSL *ssl)
{
    return SSL_has_pending(ssl);
}

void tls_send_small(SSL *ssl, const void *buf, size_t len)
{
    gio_tls_write_small(ssl, buf, len);
}

void tls_close_notify(SSL *ssl)
{
    gio_tls_shutdown(ssl);
}

int tls_resumed(SSL *ssl)
{
    return SSL_session_reused(ssl);
}

int tls_alpn_h2(SSL *ssl)
{
    const unsigned char *p;
    unsigned n;
    SSL_get0_alpn_selected(ssl, &p, &n);
    return n == 2 && !memcmp(p, "h2", 2);
}
