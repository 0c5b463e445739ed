/*
 * HTTPS with OpenSSL: the certificate store (loading, reloading, 421's
 * questions) and the connection layer that conn.c reads and sends through;
 * the contexts' settings and handshake callbacks (SNI, the session tickets
 * shared by -W workers) are tls_ctx.c's.  See tls.h.
 */
#define _GNU_SOURCE
#include "tls.h"
#include "tls_int.h"
#include "tls_client.h"
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

/* ---- the certificate files ---- */

/* A -C entry's name: a host name, or "*." and one (--acme's wildcard
   certificates, named by what they serve). */
static int valid_file_name(const char *s, size_t n)
{
    return n > 2 && s[0] == '*' && s[1] == '.' ? tls_valid_name(s + 2, n - 2)
                                               : tls_valid_name(s, n);
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
    char client_ca[300], client_crl[300], client_verify[300]; /* tls_client.h */
} found_t;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The client certificates' files beside the certificate named nm[0..n):
   NAME/client-ca.pem (sep "/client-") or NAME.client-ca (".client-"), and
   the CRL and verify files alike (tls_client.h). */
static void client_files(found_t *f, const char *nm, size_t n, const char *sep)
{
    const char *ext = sep[0] == '/' ? ".pem" : "";
    snprintf(f->client_ca, sizeof f->client_ca, "%.*s%sca%s", (int)n, nm, sep, ext);
    snprintf(f->client_crl, sizeof f->client_crl, "%.*s%scrl%s", (int)n, nm, sep, ext);
    snprintf(f->client_verify, sizeof f->client_verify, "%.*s%sverify", (int)n, nm, sep);
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
                client_files(&f, nm, len - 4, ".client-");
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
                client_files(&f, nm, len, "/client-");
            } else {
                continue;
            }
            const char *files[6] = {f.chain,     f.key,        f.ocsp,
                                    f.client_ca, f.client_crl, f.client_verify};
            for (int k = 0; k < 6; k++) {
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
                 tls_ssl_why("no PEM CERTIFICATE block"));
        goto fail;
    }
    tls_cert_names(c, leaf);
    struct tm tm;
    if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm) == 1)
        c->not_after = (int64_t)timegm(&tm);
    if (ASN1_TIME_to_tm(X509_get0_notBefore(leaf), &tm) == 1)
        c->not_before = (int64_t)timegm(&tm);
    while ((ca = PEM_read_bio_X509(bio, NULL, NULL, NULL)))
        if (!SSL_CTX_add0_chain_cert(ctx, ca)) {
            X509_free(ca);
            snprintf(err, errlen, "%s/%s: the chain (%s)", st->dir, f->chain, tls_ssl_why("?"));
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
    if (!bio || !(pkey = PEM_read_bio_PrivateKey(bio, NULL, tls_no_passphrase, NULL))) {
        snprintf(err, errlen, "%s/%s: no usable private key (%s)", st->dir, f->key,
                 tls_ssl_why("no PEM PRIVATE KEY block"));
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
    if (!ctx || !c || !SSL_CTX_set_ex_data(ctx, tls_cert_idx, c)) {
        snprintf(err, errlen, "out of memory");
        free(c);
        SSL_CTX_free(ctx);
        return NULL;
    }
    snprintf(c->id, sizeof c->id, "%s", f->id);
    if (tls_ctx_setup(ctx, st, err, errlen) < 0 || tls_early_setup(ctx, st, err, errlen) < 0 ||
        read_pair(st, f, &chain, &clen, &key, &klen, err, errlen) < 0 ||
        !(leaf = use_chain(st, f, ctx, c, chain, clen, err, errlen)) ||
        use_key(st, f, ctx, leaf, key, klen, err, errlen) < 0 ||
        tls_client_ctx(ctx, st->dirfd, st->dir, f->client_ca, f->client_crl, f->client_verify,
                       st->client_def, st->cfg, err, errlen) < 0) {
        SSL_CTX_free(ctx); /* frees c through the ex_data */
        ctx = NULL;
    } else {
        if (f->id[0])
            tls_add_name(c, f->id, strlen(f->id));
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
        const tls_cert_t *c = tls_cert_of(ctx[i]);
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
    if (tls_ctx_setup(st->bare, st, err, errlen) < 0 ||
        tls_early_setup(st->bare, st, err, errlen) < 0) {
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

tls_store_t *tls_store_load(const char *dir, const config_t *cfg, const proc_t *p,
                            const char *docroot_real, int *missing)
{
    *missing = 0;
    if ((tls_cert_idx < 0 &&
         (tls_cert_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, tls_cert_free)) < 0) ||
        (tls_acme_idx < 0 &&
         (tls_acme_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL)) < 0)) {
        fprintf(stderr, "gatling: OpenSSL: %s\n", tls_ssl_why("no ex_data index"));
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
    st->cfg = cfg, st->proc = p;
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
    if (RAND_bytes(st->master, sizeof st->master) != 1 ||
        RAND_bytes(st->node, sizeof st->node) != 1) {
        fprintf(stderr, "gatling: OpenSSL: no random bytes for the ticket keys\n");
        goto fail;
    }
    if (tls_client_defaults(cfg, &st->client_def, err, sizeof err) < 0) {
        fprintf(stderr, "gatling: HTTPS: %s\n", err);
        goto fail;
    }
    /* -C DIR with no certificate yet (certbot's live/ before the first issuance) is a
       store that waits for them; a server.pem that holds none is an error */
    int n = load_all(st, &st->ctx, &st->n, &st->def, &st->signature, err, sizeof err);
    if (n < 0 || (n == 0 && !dir)) {
        fprintf(stderr, "gatling: HTTPS: %s\n", err);
        goto fail;
    }
    if (p && p->acme_chal && bare_ctx(st, err, sizeof err) < 0) {
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
    tls_client_defaults_free(st->client_def);
    close(st->dirfd);
    free(st);
    return NULL;
}

int tls_store_count(const tls_store_t *st)
{
    return st ? st->n : 0;
}

int tls_store_asks_client(const tls_store_t *st, int i)
{
    return st && i >= 0 && i < st->n && tls_client_asks(st->ctx[i]);
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
    tls_client_defaults_free(st->client_def);
    close(st->dirfd);
    OPENSSL_cleanse(st->master, sizeof st->master);
    OPENSSL_cleanse(st->keys, sizeof st->keys);
    free(st);
}

int tls_store_covers(const tls_store_t *st, const char *host, size_t len)
{
    if (len && host[len - 1] == '.')
        len--;
    return st && len && tls_find_ctx(st, host, len) != NULL;
}

int tls_ondemand_covers(tls_store_t *st, const char *host, size_t len, const char *addr)
{
    if (len && host[len - 1] == '.')
        len--;
    const SSL_CTX *ctx = st && len ? tls_find_ctx(st, host, len) : NULL;
    if (ctx)
        tls_ondemand_seen(st, ctx, host, len, addr);
    return ctx != NULL;
}

int tls_misdirected(tls_store_t *st, SSL *ssl, const char *host, size_t len)
{
    if (len && host[len - 1] == '.')
        len--;
    const tls_cert_t *want = tls_cert_of((SSL_CTX *)tls_lookup_ctx(st, host, len));
    const tls_cert_t *have = tls_cert_of(SSL_get_SSL_CTX(ssl));
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
    const tls_cert_t *want = tls_cert_of((SSL_CTX *)tls_lookup_ctx(st, host, len));
    const SSL_CTX *by_name = sni && snilen ? tls_lookup_ctx(st, sni, snilen) : NULL;
    const tls_cert_t *have = tls_cert_of((SSL_CTX *)(by_name ? by_name : st->ctx[st->def]));
    return want && have && strcmp(want->id, have->id) != 0;
}


/* The context HTTP/3's GnuTLS serves the server name sni[0..snilen) with. */
static const SSL_CTX *quic_ctx(tls_store_t *st, const char *sni, size_t snilen)
{
    if (!st || !st->n)
        return NULL;
    if (snilen && sni[snilen - 1] == '.')
        snilen--;
    const SSL_CTX *by_name = sni && snilen ? tls_lookup_ctx(st, sni, snilen) : NULL;
    return by_name ? by_name : st->ctx[st->def];
}

int tls_client_asks_name(tls_store_t *st, const char *sni, size_t snilen)
{
    return tls_client_asks(quic_ctx(st, sni, snilen));
}

ex_client_t *tls_client_quic(tls_store_t *st, const char *sni, size_t snilen,
                             const unsigned char *const *der, const size_t *len, unsigned n)
{
    return tls_client_chain(quic_ctx(st, sni, snilen), der, len, n);
}

const ex_client_t *tls_client_name(tls_store_t *st, const char *sni, size_t snilen)
{
    return tls_client_none(quic_ctx(st, sni, snilen));
}

/* ---- connections ---- */

int tls_store_expiry(const tls_store_t *st, int i, const char **name, int64_t *not_after)
{
    const tls_cert_t *c = st && i >= 0 && i < st->n ? tls_cert_of(st->ctx[i]) : NULL;
    if (!c)
        return 0;
    *name = c->id[0] ? c->id : c->nnames ? c->names[0] : "server.pem";
    *not_after = c->not_after;
    return 1;
}

int tls_store_link(const tls_store_t *st, int i, char *target, size_t cap)
{
    const tls_cert_t *c = st && i >= 0 && i < st->n ? tls_cert_of(st->ctx[i]) : NULL;
    ssize_t n = c && c->id[0] && cap ? readlinkat(st->dirfd, c->id, target, cap - 1) : -1;
    if (n < 0)
        return -1;
    target[n] = 0;
    return (int)n;
}

int tls_store_root_missing(const tls_store_t *st, int i, X509_STORE *roots, char *top,
                           size_t cap)
{
    if (!st || i < 0 || i >= st->n)
        return -1;
    X509 *leaf = SSL_CTX_get0_certificate(st->ctx[i]);
    STACK_OF(X509) *rest = NULL;
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int missing = 0;
    SSL_CTX_get0_chain_certs(st->ctx[i], &rest);
    if (leaf && ctx && X509_STORE_CTX_init(ctx, roots, leaf, rest) == 1 &&
        X509_verify_cert(ctx) != 1) {
        int e = X509_STORE_CTX_get_error(ctx);
        STACK_OF(X509) *built = X509_STORE_CTX_get0_chain(ctx);
        X509 *last = built && sk_X509_num(built) ? sk_X509_value(built, sk_X509_num(built) - 1)
                                                 : leaf;
        missing = e == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                  e == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT ||
                  e == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
                  e == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT;
        if (missing && !X509_NAME_oneline(X509_get_issuer_name(last), top, (int)cap))
            snprintf(top, cap, "?");
    }
    X509_STORE_CTX_free(ctx);
    return missing;
}

int tls_store_name(const tls_store_t *st, int i, int k, const char **name)
{
    const tls_cert_t *c = st && i >= 0 && i < st->n ? tls_cert_of(st->ctx[i]) : NULL;
    if (!c || k < 0 || k >= c->nnames)
        return 0;
    *name = c->names[k];
    return 1;
}

int64_t tls_store_issued(const tls_store_t *st, int i)
{
    const tls_cert_t *c = st && i >= 0 && i < st->n ? tls_cert_of(st->ctx[i]) : NULL;
    return c ? c->not_before : 0;
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
