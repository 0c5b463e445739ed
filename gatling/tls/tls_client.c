/*
 * Client certificates (mutual TLS): a context's trust store, CRLs, mode
 * and depth from the files beside its certificate or the options, and what
 * a connection's client sent.  See tls_client.h.
 */
#define _GNU_SOURCE
#include "tls_client.h"
#include "site/privfs.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CLIENT_DEPTH 1            /* as nginx's ssl_verify_depth: the CA's own clients */
#define CLIENT_FILE_MAX (1 << 20) /* a CA bundle or CRL file */
#define CLIENT_DN_CAP 1024        /* a subject or issuer as text; a longer one fails */

static int set_verify(config_t *cfg, const optdef_t *o, char *arg)
{
    (void)o;
    if (!strcmp(arg, "required") || !strcmp(arg, "optional"))
        return cfg->tls_client_optional = arg[0] == 'o', 0;
    return -1;
}

const optdef_t tls_client_opts[] = {
    OPT_ROW_STR(0, "tls-client-ca", OPT_PATH, PATH_MAX - 1, tls_client_ca,
                "not a usable file name",
        "  --tls-client-ca file  ask HTTPS clients for a certificate from these CAs (PEM)\n"
        "            where a certificate of -C has no client-ca file of its own\n"),
    OPT_ROW_STR(0, "tls-client-crl", OPT_PATH, PATH_MAX - 1, tls_client_crl,
                "not a usable file name",
        "  --tls-client-crl file  CRLs (PEM) that revoke --tls-client-ca's clients\n"),
    OPT_ROW_FN(0, "tls-client-verify", OPT_WORD, OPT_ANY, 0, set_verify, 0,
               "not required or optional",
        "  --tls-client-verify required|optional  without a valid client certificate:\n"
        "            400, or served (default: required; a client-verify file overrides)\n"),
    OPT_ROW_NUM(0, "tls-client-depth", OPT_NUMBER, 1, 16, tls_client_depth,
                "not a number from 1 to 16",
        "  --tls-client-depth n  CAs a client's chain may have above it (default 1)\n"),
    OPT_LAST};

/* A context's settings, as its ex_data. */
typedef struct client_conf {
    int required, depth;
} client_conf_t;

/* A connection's facts, as its SSL's ex_data. */
typedef struct client_facts {
    ex_client_t ex;
    char verify[160], s_dn[CLIENT_DN_CAP], i_dn[CLIENT_DN_CAP], serial[80], fp[65];
} client_facts_t;

struct tls_client_def {
    char *ca, *crl; /* PEM text, NUL-terminated (crl NULL: none) */
    size_t calen, crllen;
};

static int conf_idx = -1, facts_idx = -1;

static const ex_client_t none_required = {.required = 1, .verify = "NONE", .s_dn = "",
                                          .i_dn = "", .serial = "", .fingerprint = ""};
static const ex_client_t none_optional = {.verify = "NONE", .s_dn = "", .i_dn = "",
                                          .serial = "", .fingerprint = ""};

static void free_ex(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    free(ptr);
}

static int indexes(void)
{
    if (conf_idx < 0)
        conf_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, free_ex);
    if (facts_idx < 0)
        facts_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, free_ex);
    return conf_idx < 0 || facts_idx < 0 ? -1 : 0;
}

/* What fd holds, a regular file of at most CLIENT_FILE_MAX, NUL-terminated;
   NULL with errno.  fd is closed. */
static char *slurp_fd(int fd, size_t *len)
{
    struct stat sb;
    char *buf = NULL;
    size_t got = 0;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > CLIENT_FILE_MAX) {
        int e = errno;
        close(fd);
        errno = S_ISREG(sb.st_mode) ? sb.st_size > CLIENT_FILE_MAX ? EFBIG : e : EINVAL;
        return NULL;
    }
    if ((buf = malloc((size_t)sb.st_size + 1)))
        while (got < (size_t)sb.st_size) {
            ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
            if (r <= 0) {
                free(buf);
                buf = NULL;
                errno = r ? errno : EIO;
                break;
            }
            got += (size_t)r;
        }
    int e = errno;
    close(fd);
    errno = e;
    if (buf)
        buf[got] = 0, *len = got;
    return buf;
}

/* A file below dirfd (the -C directory, opened at start), as slurp_fd;
   NULL with errno (ENOENT: there is none). */
static char *slurp(int dirfd, const char *path, size_t *len)
{
    /* O_NONBLOCK: a FIFO put there must not hang a start */
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    return fd < 0 ? NULL : slurp_fd(fd, len);
}

/* An option's file, read as root reads one (site/privfs.h: no link or file
   another user could have planted): 0, or -1 with why in err. */
static int slurp_option(const char *opt, const char *path, char **out, size_t *len, char *err,
                        size_t errlen)
{
    struct stat st;
    char why[PATH_MAX + 160] = "";
    int fd = pfs_open_file(path, PFS_READ, &st, why, sizeof why);
    if (fd >= 0 && (*out = slurp_fd(fd, len)))
        return 0;
    snprintf(err, errlen, "%s %s: %s", opt, path, why[0] && fd < 0 ? why : strerror(errno));
    return -1;
}

/* A file that may be absent: 0 (*out NULL if absent), or -1 with why in err. */
static int read_opt(int dirfd, const char *dir, const char *path, char **out, size_t *len,
                    char *err, size_t errlen)
{
    *out = NULL;
    if (!path || !path[0])
        return 0;
    if ((*out = slurp(dirfd, path, len)) || errno == ENOENT)
        return 0;
    snprintf(err, errlen, "%s%s%s: %s", dir ? dir : "", dir ? "/" : "", path, strerror(errno));
    return -1;
}

int tls_client_defaults(const config_t *cfg, tls_client_def_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg || (!cfg->tls_client_ca && !cfg->tls_client_crl))
        return 0;
    if (!cfg->tls_client_ca) {
        snprintf(err, errlen, "--tls-client-crl %s: without --tls-client-ca", cfg->tls_client_crl);
        return -1;
    }
    tls_client_def_t *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (slurp_option("--tls-client-ca", cfg->tls_client_ca, &d->ca, &d->calen, err, errlen) <
            0 ||
        (cfg->tls_client_crl && slurp_option("--tls-client-crl", cfg->tls_client_crl, &d->crl,
                                             &d->crllen, err, errlen) < 0)) {
        tls_client_defaults_free(d);
        return -1;
    }
    *out = d;
    return 0;
}

void tls_client_defaults_free(tls_client_def_t *d)
{
    if (d) {
        free(d->ca);
        free(d->crl);
        free(d);
    }
}

/* A client-verify file's words into cc: 0, or -1. */
static int parse_verify(const char *text, client_conf_t *cc)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *w = strtok_r(buf, " \t\r\n", &save); w;
         w = strtok_r(NULL, " \t\r\n", &save)) {
        char *end;
        if (!strcmp(w, "required") || !strcmp(w, "optional"))
            cc->required = w[0] == 'r';
        else if (!strncmp(w, "depth=", 6) && (cc->depth = (int)strtol(w + 6, &end, 10)) >= 1 &&
                 cc->depth <= 16 && !*end && end > w + 6)
            continue;
        else
            return -1;
    }
    return strlen(text) < sizeof buf ? 0 : -1;
}

/* The CAs of ca (PEM) into store and names; how many. */
static int add_cas(X509_STORE *store, STACK_OF(X509_NAME) *names, const char *ca, size_t len)
{
    BIO *b = BIO_new_mem_buf(ca, (int)len);
    X509 *x;
    int n = 0;
    while (b && (x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        X509_NAME *nm = X509_NAME_dup(X509_get_subject_name(x));
        X509_STORE_add_cert(store, x); /* (a CA twice fails: it is there) */
        n++;
        if (nm && !sk_X509_NAME_push(names, nm))
            X509_NAME_free(nm);
        X509_free(x);
    }
    ERR_clear_error(); /* the end of the file */
    BIO_free(b);
    return n;
}

/* The CRLs of crl (PEM) into store; how many. */
static int add_crls(X509_STORE *store, const char *crl, size_t len)
{
    BIO *b = BIO_new_mem_buf(crl, (int)len);
    X509_CRL *c;
    int n = 0;
    while (b && (c = PEM_read_bio_X509_CRL(b, NULL, NULL, NULL))) {
        n += X509_STORE_add_crl(store, c) == 1;
        X509_CRL_free(c);
    }
    ERR_clear_error();
    BIO_free(b);
    return n;
}

/* ctx's trust store and CA list from the PEM texts: 0, or -1 with why. */
static int trust(SSL_CTX *ctx, const char *ca, size_t calen, const char *crl, size_t crllen,
                 const char **why)
{
    X509_STORE *store = X509_STORE_new();
    STACK_OF(X509_NAME) *names = sk_X509_NAME_new_null();
    *why = "out of memory";
    if (!store || !names)
        goto fail;
    *why = "no CA certificate (PEM) in it";
    if (add_cas(store, names, ca, calen) <= 0)
        goto fail;
    *why = "no CRL (PEM) in it";
    if (crl && add_crls(store, crl, crllen) <= 0)
        goto fail;
    /* as nginx's ssl_crl: every certificate of the chain checked, so a CA that
       issues clients must publish a CRL there */
    if (crl)
        X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
    SSL_CTX_set_cert_store(ctx, store);
    SSL_CTX_set_client_CA_list(ctx, names);
    return 0;
fail:
    X509_STORE_free(store);
    sk_X509_NAME_pop_free(names, X509_NAME_free);
    return -1;
}

/* The handshake completes whatever the client sends (the verdict is kept
   for the request: a 400 the client can read, not an alert). */
static int accept_any(int ok, X509_STORE_CTX *x)
{
    (void)x;
    if (!ok) /* what the failed check queued must not fail the connection's next call */
        ERR_clear_error();
    return 1;
}

/* The session ID context of ctx's settings, so that no session crosses to a
   context that asks otherwise (or trusts other CAs or CRLs). */
static void session_context(SSL_CTX *ctx, const client_conf_t *cc, const char *ca, size_t calen,
                            const char *crl, size_t crllen)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    if (m && EVP_DigestInit_ex(m, EVP_sha256(), NULL) &&
        EVP_DigestUpdate(m, "gatling mtls", 12) && EVP_DigestUpdate(m, cc, sizeof *cc) &&
        EVP_DigestUpdate(m, ca, calen) && (!crl || EVP_DigestUpdate(m, crl, crllen)) &&
        EVP_DigestFinal_ex(m, md, &mdlen) && mdlen >= SSL_MAX_SID_CTX_LENGTH)
        SSL_CTX_set_session_id_context(ctx, md, SSL_MAX_SID_CTX_LENGTH);
    EVP_MD_CTX_free(m);
}

/* ctx asks for client certificates of cc's mode with these CAs and CRLs. */
static int client_on(SSL_CTX *ctx, const client_conf_t *cc, const char *ca, size_t calen,
                     const char *crl, size_t crllen, const char **why)
{
    client_conf_t *keep = malloc(sizeof *keep);
    *why = "out of memory";
    if (!keep || indexes() < 0 || trust(ctx, ca, calen, crl, crllen, why) < 0) {
        free(keep);
        return -1;
    }
    *keep = *cc;
    if (!SSL_CTX_set_ex_data(ctx, conf_idx, keep)) {
        free(keep);
        return -1;
    }
    /* SSL_VERIFY_PEER alone: asked in the handshake (TLS 1.3 too: no
       post-handshake auth), never required there (the 400 is the request's) */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_any);
    SSL_CTX_set_verify_depth(ctx, cc->depth);
    session_context(ctx, cc, ca, calen, crl, crllen);
    *why = NULL;
    return 0;
}

int tls_client_ctx(SSL_CTX *ctx, int dirfd, const char *dir, const char *ca, const char *crl,
                   const char *verify, const tls_client_def_t *def, const config_t *cfg,
                   char *err, size_t errlen)
{
    char *capem = NULL, *crlpem = NULL, *vtext = NULL;
    size_t calen = 0, crllen = 0, vlen = 0;
    int rc = -1;
    const char *why = NULL, *file = ca;
    client_conf_t cc = {.required = !cfg || !cfg->tls_client_optional,
                        .depth = cfg && cfg->tls_client_depth ? cfg->tls_client_depth
                                                              : CLIENT_DEPTH};
    if (read_opt(dirfd, dir, ca, &capem, &calen, err, errlen) < 0 ||
        read_opt(dirfd, dir, crl, &crlpem, &crllen, err, errlen) < 0 ||
        read_opt(dirfd, dir, verify, &vtext, &vlen, err, errlen) < 0)
        goto out;
    rc = 0;
    if (!capem && crlpem) { /* a CRL of the options' CAs would be half of a setting */
        why = "needs a client-ca file beside it", file = crl;
    } else if (vtext && parse_verify(vtext, &cc) < 0) {
        why = "not \"required\" or \"optional\", and \"depth=N\" (1-16)", file = verify;
    } else if (capem) {
        rc = client_on(ctx, &cc, capem, calen, crlpem, crllen, &why);
    } else if (def) {
        if ((rc = client_on(ctx, &cc, def->ca, def->calen, def->crl, def->crllen, &why)) < 0)
            snprintf(err, errlen, "--tls-client-ca %s: %s", cfg->tls_client_ca, why);
        goto out;
    } else if (vtext) {
        why = "needs a client-ca file beside it (or --tls-client-ca)", file = verify;
    }
    if (why) {
        rc = -1;
        snprintf(err, errlen, "%s/%s: %s", dir, file, why);
    }
out:
    free(capem);
    free(crlpem);
    free(vtext);
    return rc;
}

void tls_client_sni(SSL *ssl, SSL_CTX *ctx)
{
    SSL_set_verify(ssl, SSL_CTX_get_verify_mode(ctx), SSL_CTX_get_verify_callback(ctx));
    SSL_set_verify_depth(ssl, SSL_CTX_get_verify_depth(ctx));
}

/* name as an RFC 2253 string into out (cap bytes): 0, or -1 if it is longer. */
static int dn_text(const X509_NAME *name, char *out, size_t cap)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *p;
    long n = b && X509_NAME_print_ex(b, name, 0, XN_FLAG_RFC2253) >= 0
                 ? BIO_get_mem_data(b, &p)
                 : -1;
    int rc = n >= 0 && (size_t)n < cap ? 0 : -1;
    if (!rc) {
        memcpy(out, p, (size_t)n);
        out[n] = 0;
        for (long i = 0; i < n; i++) /* escaped already (ESC_CTRL, ESC_MSB): for certain */
            if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
                out[i] = '?';
    }
    BIO_free(b);
    return rc;
}

/* x's serial number (upper-case hex) and SHA-256 (lower-case hex) into f. */
static int serial_and_hash(X509 *x, client_facts_t *f)
{
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    char *hex = bn ? BN_bn2hex(bn) : NULL;
    int rc = hex && strlen(hex) < sizeof f->serial ? 0 : -1;
    if (!rc)
        strcpy(f->serial, hex);
    OPENSSL_free(hex);
    BN_free(bn);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (rc || !X509_digest(x, EVP_sha256(), md, &n) || n != 32)
        return -1;
    for (unsigned i = 0; i < n; i++)
        snprintf(f->fp + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* The client's certificate x (NULL: none) and its verdict vr into f. */
static void facts_of(X509 *x, long vr, client_facts_t *f)
{
    f->ex.s_dn = f->s_dn, f->ex.i_dn = f->i_dn, f->ex.serial = f->serial;
    f->ex.fingerprint = f->fp, f->ex.verify = f->verify;
    snprintf(f->verify, sizeof f->verify, "NONE");
    if (!x)
        return;
    f->ex.cert = 1;
    if (dn_text(X509_get_subject_name(x), f->s_dn, sizeof f->s_dn) < 0 ||
        dn_text(X509_get_issuer_name(x), f->i_dn, sizeof f->i_dn) < 0 ||
        serial_and_hash(x, f) < 0) {
        f->s_dn[0] = f->i_dn[0] = f->serial[0] = f->fp[0] = 0;
        snprintf(f->verify, sizeof f->verify, "FAILED:certificate too large to describe");
    } else if (vr != X509_V_OK) {
        snprintf(f->verify, sizeof f->verify, "FAILED:%s", X509_verify_cert_error_string(vr));
    } else {
        snprintf(f->verify, sizeof f->verify, "SUCCESS");
        f->ex.verified = 1;
    }
}

const ex_client_t *tls_client(SSL *ssl)
{
    const client_conf_t *cc = ssl && conf_idx >= 0
                                  ? SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), conf_idx)
                                  : NULL;
    if (!cc || !SSL_is_init_finished(ssl))
        return NULL;
    client_facts_t *f = SSL_get_ex_data(ssl, facts_idx);
    if (f)
        return &f->ex;
    if (!(f = calloc(1, sizeof *f)) || !SSL_set_ex_data(ssl, facts_idx, f)) {
        free(f);
        return cc->required ? &none_required : &none_optional; /* refused, not let in */
    }
    f->ex.required = (uint8_t)cc->required;
    facts_of(SSL_get0_peer_certificate(ssl), SSL_get_verify_result(ssl), f);
    return &f->ex;
}

const ex_client_t *tls_client_none(const SSL_CTX *ctx)
{
    const client_conf_t *cc = ctx && conf_idx >= 0 ? SSL_CTX_get_ex_data(ctx, conf_idx) : NULL;
    return !cc ? NULL : cc->required ? &none_required : &none_optional;
}

int tls_client_asks(const SSL_CTX *ctx)
{
    return tls_client_none(ctx) != NULL;
}

/* The chain der[0..n) (the client's certificate first) as OpenSSL's: the
   leaf, the rest into *rest.  NULL if it does not parse. */
static X509 *chain_of(const unsigned char *const *der, const size_t *len, unsigned n,
                      STACK_OF(X509) **rest)
{
    X509 *leaf = NULL;
    *rest = sk_X509_new_null();
    for (unsigned i = 0; *rest && i < n; i++) {
        const unsigned char *p = der[i];
        X509 *x = d2i_X509(NULL, &p, (long)len[i]);
        if (!x || (i && !sk_X509_push(*rest, x))) {
            X509_free(x);
            X509_free(leaf);
            return NULL;
        }
        if (!i)
            leaf = x;
    }
    return leaf;
}

/* leaf's verdict against ctx's CAs, CRLs and depth, as a handshake's. */
static long verify_chain(const SSL_CTX *ctx, X509 *leaf, STACK_OF(X509) *rest, int depth)
{
    X509_STORE_CTX *v = X509_STORE_CTX_new();
    long vr = X509_V_ERR_OUT_OF_MEM;
    if (v && X509_STORE_CTX_init(v, SSL_CTX_get_cert_store(ctx), leaf, rest) == 1) {
        X509_STORE_CTX_set_default(v, "ssl_client"); /* as OpenSSL's server side */
        X509_STORE_CTX_set_depth(v, depth);
        X509_STORE_CTX_set_verify_cb(v, accept_any);
        X509_verify_cert(v);
        vr = X509_STORE_CTX_get_error(v);
    }
    X509_STORE_CTX_free(v);
    ERR_clear_error();
    return vr;
}

ex_client_t *tls_client_chain(const SSL_CTX *ctx, const unsigned char *const *der,
                              const size_t *len, unsigned n)
{
    const client_conf_t *cc = ctx && conf_idx >= 0 ? SSL_CTX_get_ex_data(ctx, conf_idx) : NULL;
    client_facts_t *f = cc ? calloc(1, sizeof *f) : NULL;
    if (!f)
        return NULL;
    f->ex.required = (uint8_t)cc->required;
    STACK_OF(X509) *rest = NULL;
    X509 *leaf = n ? chain_of(der, len, n, &rest) : NULL;
    if (n && !leaf) {
        facts_of(NULL, 0, f);
        f->ex.cert = 1;
        snprintf(f->verify, sizeof f->verify, "FAILED:certificate does not parse");
    } else {
        facts_of(leaf, leaf ? verify_chain(ctx, leaf, rest, cc->depth) : 0, f);
    }
    X509_free(leaf);
    sk_X509_pop_free(rest, X509_free);
    return &f->ex;
}
