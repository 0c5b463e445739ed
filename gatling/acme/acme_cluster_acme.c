/* acme_cluster_acme — see acme_cluster_acme.h. */
#define _GNU_SOURCE
#include "acme_cluster_acme.h"
#include "acme_crypto.h"
#include "acme_store.h"
#include "site/acme_chal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define LOCK_TTL 5      /* seconds a dead or cut-off holder keeps its locks */
#define CHAL_MAX 200    /* challenge files published or taken */
#define CERT_MAX (256 * 1024)
#define CERT_MAGIC "gatling-cert-1"
#define ACCOUNT_MAX 16384

static const char *const chal_dirs[2] = {ACME_CHAL_HTTP_DIR, ACME_CHAL_ALPN_DIR};
static const char *const chal_kinds[2] = {"http-01", "tls-alpn-01"};

static void say(cluster_acme_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(cluster_acme_t *a, const char *fmt, ...)
{
    char line[ELOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    elog_text(a->log, time(NULL), "cluster", line);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
    return h;
}

/* A bad value (key and bytes) said already?  Else noted: 1 the first time. */
static int first_time(cluster_acme_t *a, const etcd_kv_t *kv)
{
    uint64_t h = fnv(fnv(1469598103934665603ULL, kv->key, kv->klen), kv->value, kv->vlen);
    for (int i = 0; i < CLUSTER_SAID_MAX; i++)
        if (a->said[i] == h)
            return 0;
    a->said[a->nsaid++ % CLUSTER_SAID_MAX] = h;
    return 1;
}

int cluster_acme_open(cluster_acme_t *a, char *err, size_t errlen)
{
    a->state_fd = a->tls_fd = -1;
    if (!a->cfg->acme.email)
        return 0;
    a->state_fd = open(a->cfg->acme.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    a->tls_fd = open(a->tls_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (a->state_fd < 0 || a->tls_fd < 0) {
        snprintf(err, errlen, "--acme-dir %s or -C %s: %s", a->cfg->acme.state_dir,
                 a->tls_dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* A file name we write or publish: no '/', not hidden, not too long. */
static int file_ok(const char *s, size_t n)
{
    if (!n || n > 255 || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '/' || (unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

/* The kv whose key is pre + name, or NULL. */
static const etcd_kv_t *find(const etcd_kv_t *kv, int n, size_t pn, const char *name)
{
    for (int i = 0; i < n; i++)
        if (kv[i].klen > pn && !strcmp((char *)kv[i].key + pn, name))
            return &kv[i];
    return NULL;
}

/* The locks' lease kept alive; all of them gone when it expired (etcd
   unreachable: cluster_acme_down).  0, or -1 (etcd). */
static int keep_lease(cluster_acme_t *a, etcd_t *e, int64_t now, char *err, size_t errlen)
{
    if (!a->lease)
        return 0;
    int r = etcd_keepalive(e, a->lease, err, errlen);
    if (r > 0) {
        a->kept_at = now;
        return 0;
    }
    if (r < 0)
        return -1; /* cluster_acme_down lets go of them after LOCK_TTL */
    say(a, "the cluster's ACME locks held here were lost (their lease expired): another node "
        "may take them");
    a->lease = 0;
    cluster_set_acme_held(a->view, -1, 0);
    return 0;
}

static int cert_again(cluster_acme_t *a, etcd_t *e, const char *host, char *err, size_t errlen);

void cluster_acme_down(cluster_acme_t *a)
{
    int64_t now = (int64_t)time(NULL);
    if (a->lease && now - a->kept_at >= LOCK_TTL) {
        say(a, "the cluster's ACME locks held here were lost (etcd unreachable for the lease's "
            "time): another node may take them");
        a->lease = 0;
        cluster_set_acme_held(a->view, -1, 0);
    }
}

/* Take name's lock (absent in etcd) with the locks' lease.  0, or -1. */
static int take_lock(cluster_acme_t *a, etcd_t *e, int i, const char *key, size_t kn,
                     const char *name, int64_t now, char *err, size_t errlen)
{
    if (!a->lease) {
        int64_t lease = etcd_lease(e, LOCK_TTL, err, errlen);
        if (lease < 0)
            return -1;
        a->lease = lease, a->kept_at = now;
    }
    int r = etcd_put_if(e, key, kn, a->node, strlen(a->node), 0, a->lease, err, errlen);
    /* the last holder put its certificate before it let go: installed
       before the client is told, it orders nothing */
    if (r > 0 && (r = cert_again(a, e, name, err, errlen)) == 0) {
        cluster_set_acme_held(a->view, i, 1);
        say(a, "this node holds the cluster's ACME lock for %s: its ACME client orders it", name);
    }
    return r < 0 ? -1 : 0;
}

/* The locks of the client's names: each wanted one taken if free, each
   held one no longer wanted let go (its certificate was published before,
   by sync_certs), one not sealed with the cluster's secret removed.  0, or
   -1 (etcd). */
static int lock_round(cluster_acme_t *a, etcd_t *e, int64_t now, char *err, size_t errlen)
{
    char pre[400], key[700], name[CLUSTER_ACME_NAME_MAX];
    int pn = snprintf(pre, sizeof pre, "%sacme/lock/", a->prefix), held = 0, rc = 0;
    etcd_kv_t *kv;
    int n = etcd_range(e, pre, (size_t)pn, 1, 0, CLUSTER_ACME_NAMES * 4, &kv, NULL, err, errlen);
    if (n < 0)
        return -1;
    for (int i = 0, count = cluster_acme_count(a->view); i < count && rc == 0; i++) {
        if (!file_ok(name, cluster_acme_name(a->view, i, name)))
            continue;
        const etcd_kv_t *l = find(kv, n, (size_t)pn, name);
        int mine = l && a->lease && l->lease == a->lease && !strcmp((char *)l->value, a->node);
        int kn = snprintf(key, sizeof key, "%s%s", pre, name),
            want = cluster_acme_wanted(a->view, i);
        cluster_set_acme_held(a->view, i, mine);
        if (l && l->forged) { /* no node's: it would hold the name for good */
            if (first_time(a, l))
                say(a, "etcd key %.300s: not sealed with this cluster's secret (forged, or "
                    "another secret=): removed", l->key);
            rc = etcd_delete_if(e, key, (size_t)kn, l->mod_revision, err, errlen) < 0 ? -1 : 0;
        } else if (want && !l)
            rc = take_lock(a, e, i, key, (size_t)kn, name, now, err, errlen);
        else if (!want && mine &&
                 (rc = etcd_delete_if(e, key, (size_t)kn, l->mod_revision, err, errlen)) >= 0) {
            cluster_set_acme_held(a->view, i, 0);
            say(a, "the cluster's ACME lock for %s let go: its certificate is in etcd", name);
            rc = 0;
        }
        held += cluster_acme_held(a->view, i);
    }
    etcd_kvs_free(kv, n);
    if (!held && rc == 0)
        a->lease = 0; /* nothing on it: it runs out */
    return rc;
}

typedef struct item {
    char key[600];
    char *val;
    size_t len;
} item_t;

/* The challenge files this node's client wrote (not ACME_TAKEN_MODE), as items
   under acme/chal/NODE/. */
static int local_challenges(cluster_acme_t *a, item_t *it, int max)
{
    int n = 0;
    for (int k = 0; k < 2; k++) {
        int fd = openat(a->state_fd, chal_dirs[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        struct stat st;
        if (!d) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        while ((de = readdir(d)) && n < max) {
            if (!file_ok(de->d_name, strlen(de->d_name)) ||
                fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
                (st.st_mode & 07777) == ACME_TAKEN_MODE)
                continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s", chal_dirs[k], de->d_name);
            item_t *i = &it[n];
            if (!(i->val = acme_read_file(a->state_fd, path, ACME_ALPN_PEM_MAX, &i->len)))
                continue;
            snprintf(i->key, sizeof i->key, "%sacme/chal/%s/%s/%s", a->prefix, a->node,
                     chal_kinds[k], de->d_name);
            n++;
        }
        closedir(d);
    }
    return n;
}

/* This node's client's challenges to etcd (under the locks' lease) when
   they changed; the client waits for that before the CA validates. */
static int publish_challenges(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen)
{
    item_t *it = calloc(CHAL_MAX, sizeof *it);
    if (!it)
        return 0;
    int n = local_challenges(a, it, CHAL_MAX), rc = 0;
    uint64_t h = fnv(1469598103934665603ULL, &a->lease, sizeof a->lease);
    for (int i = 0; i < n; i++)
        h = fnv(fnv(h, it[i].key, strlen(it[i].key) + 1), it[i].val, it[i].len);
    if (h != a->published && (a->lease || !n)) {
        char chal[400];
        int cn = snprintf(chal, sizeof chal, "%sacme/chal/%s/", a->prefix, a->node);
        rc = etcd_delete(e, chal, (size_t)cn, 1, err, errlen);
        for (int i = 0; i < n && rc == 0; i++)
            rc = etcd_put(e, it[i].key, strlen(it[i].key), it[i].val, it[i].len, a->lease, err,
                          errlen);
        if (rc == 0) {
            a->published = h;
            cluster_note_published(a->view);
        }
    }
    for (int i = 0; i < n; i++)
        free(it[i].val);
    free(it);
    return rc;
}

/* Is dir k's file name among the other nodes' challenges? */
static int listed(const etcd_kv_t *kv, int n, size_t pn, int k, const char *name)
{
    for (int i = 0; i < n; i++) {
        const char *rel = (char *)kv[i].key + pn, *s1 = strchr(rel, '/');
        size_t kl = strlen(chal_kinds[k]);
        if (!kv[i].forged && kv[i].klen > pn && s1 && !strncmp(s1 + 1, chal_kinds[k], kl) &&
            s1[1 + kl] == '/' && !strcmp(s1 + 2 + kl, name))
            return 1;
    }
    return 0;
}

/* One other node's challenge (NODE/KIND/FILE) into our state directory.  0,
   or -1 (not what gatling writes: said by the caller). */
static int take_one(cluster_acme_t *a, const etcd_kv_t *kv, size_t pn)
{
    const char *rel = (char *)kv->key + pn, *s1 = strchr(rel, '/');
    const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    if (!s2 || !file_ok(rel, (size_t)(s1 - rel)) || !file_ok(s2 + 1, strlen(s2 + 1)) ||
        kv->vlen > ACME_ALPN_PEM_MAX)
        return -1;
    int k = !strncmp(s1 + 1, "http-01/", 8) ? 0 : !strncmp(s1 + 1, "tls-alpn-01/", 12) ? 1 : -1;
    if (k < 0 || (size_t)(s2 - s1 - 1) != strlen(chal_kinds[k]))
        return -1;
    if ((size_t)(s1 - rel) == strlen(a->node) && !strncmp(rel, a->node, strlen(a->node)))
        return 0; /* ours */
    char path[600];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", chal_dirs[k], s2 + 1);
    if (fstatat(a->state_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        (st.st_mode & 07777) != ACME_TAKEN_MODE)
        return 0; /* our client's own file of that name stays */
    size_t len;
    char *have = acme_read_file(a->state_fd, path, ACME_ALPN_PEM_MAX, &len);
    if (!have || len != kv->vlen || memcmp(have, kv->value, len))
        acme_write_atomic(a->state_fd, path, kv->value, kv->vlen, ACME_TAKEN_MODE);
    free(have);
    return 0;
}

/* The other nodes' challenges into our state directory, and those taken
   before that they no longer have removed. */
static int take_challenges(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen)
{
    char pre[400];
    int pn = snprintf(pre, sizeof pre, "%sacme/chal/", a->prefix);
    etcd_kv_t *kv;
    int n = etcd_range(e, pre, (size_t)pn, 1, 0, CHAL_MAX, &kv, NULL, err, errlen);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if ((kv[i].forged || take_one(a, &kv[i], (size_t)pn) < 0) && first_time(a, &kv[i]))
            say(a, "etcd key %.300s: %s: skipped", kv[i].key,
                kv[i].forged ? "not sealed with this cluster's secret (forged, or another "
                               "secret=)"
                             : "not a challenge gatling wrote");
    for (int k = 0; k < 2; k++) {
        int fd = openat(a->state_fd, chal_dirs[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        struct stat st;
        while (d && (de = readdir(d)))
            if (file_ok(de->d_name, strlen(de->d_name)) &&
                fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                (st.st_mode & 07777) == ACME_TAKEN_MODE && !listed(kv, n, (size_t)pn, k, de->d_name))
                unlinkat(fd, de->d_name, 0);
        if (d)
            closedir(d);
        else if (fd >= 0)
            close(fd);
    }
    etcd_kvs_free(kv, n);
    return 0;
}

/* The key in key_pem is the one of the chain's first certificate. */
static int key_matches(const char *chain, size_t cl, const char *key, size_t kl)
{
    BIO *cb = BIO_new_mem_buf(chain, (int)cl), *kb = BIO_new_mem_buf(key, (int)kl);
    X509 *x = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    int ok = x && k && X509_check_private_key(x, k) == 1;
    X509_free(x);
    EVP_PKEY_free(k);
    BIO_free(cb);
    BIO_free(kb);
    return ok;
}

/* A cert/HOST value: "gatling-cert-1 SERIAL CHAINLEN KEYLEN\n" CHAIN KEY. */
typedef struct cert {
    const char *chain, *key;
    size_t cl, kl;
    acme_cert_info_t info;
} cert_t;

/* Parse and check v (the chain parses, the key is its own, the serial is
   the chain's).  0, or -1 (written half, hostile or foreign: not used). */
static int parse_cert(const char *v, size_t len, cert_t *c)
{
    char magic[20], serial[80];
    int hl = 0;
    if (strlen(v) != len ||
        sscanf(v, "%19s %79s %zu %zu\n%n", magic, serial, &c->cl, &c->kl, &hl) != 4 ||
        strcmp(magic, CERT_MAGIC) || c->cl > CERT_MAX || c->kl > CERT_MAX ||
        (size_t)hl + c->cl + c->kl != len)
        return -1;
    c->chain = v + hl, c->key = v + hl + c->cl;
    if (acme_cert_info(c->chain, c->cl, &c->info) < 0 || strcmp(c->info.serial, serial) ||
        !key_matches(c->chain, c->cl, c->key, c->kl))
        return -1;
    return 0;
}

/* Does x name host: an IP literal (RFC 8738) or a DNS name, a wildcard
   name ("*.example.com", as --acme-names gives it) matching a SAN exactly? */
static int names_host(X509 *x, const char *host)
{
    if (X509_check_ip_asc(x, host, 0) == 1)
        return 1;
    if (strncmp(host, "*.", 2))
        return X509_check_host(x, host, 0, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) == 1;
    GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    int found = 0;
    for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans) && !found; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
        found = g->type == GEN_DNS &&
                (size_t)ASN1_STRING_length(g->d.dNSName) == strlen(host) &&
                !strncasecmp((const char *)ASN1_STRING_get0_data(g->d.dNSName), host,
                             strlen(host));
    }
    GENERAL_NAMES_free(sans);
    return found;
}

/* Why ctx's chain did not verify against roots, into why: a root it lacks
   is named (a private CA's issuing root left out of --acme-ca-root makes
   every node refuse the others' certificates and order its own). */
static void unverified(X509_STORE_CTX *ctx, const char *roots, char *why, size_t wl)
{
    int e = X509_STORE_CTX_get_error(ctx);
    STACK_OF(X509) *chain = X509_STORE_CTX_get0_chain(ctx);
    X509 *last = chain && sk_X509_num(chain) ? sk_X509_value(chain, sk_X509_num(chain) - 1)
                                             : NULL;
    char top[256];
    if (last && (e == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                 e == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT) &&
        X509_NAME_oneline(X509_get_issuer_name(last), top, sizeof top))
        snprintf(why, wl, "its chain's issuing root %.200s is not in %.300s (add it there, "
                 "the CA's chain's root and not only its API's, or every node orders its own)",
                 top, roots ? roots : "the system's roots");
    else
        snprintf(why, wl, "%s (not a certificate from a CA of %s, or not valid now)",
                 X509_verify_cert_error_string(e), roots ? roots : "the system's roots");
}

/* Would gatling take c for host from the CA: its chain leads to a root of
   --acme-ca-root's file (else the system's: the roots the ACME client
   trusts), it is valid now, for a TLS server, and names host?  1, or 0 with
   why in why. */
static int trusted(const cluster_acme_t *a, const char *host, const cert_t *c, char *why,
                   size_t wl)
{
    BIO *b = BIO_new_mem_buf(c->chain, (int)c->cl);
    X509 *leaf = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL, *x;
    STACK_OF(X509) *rest = sk_X509_new_null();
    while (b && rest && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
        if (!sk_X509_push(rest, x))
            X509_free(x);
    X509_STORE *st = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    const char *roots = a->cfg->acme.ca_root;
    int ok = 0;
    if (!leaf || !rest || !st || !ctx)
        snprintf(why, wl, "out of memory");
    else if (roots ? X509_STORE_load_file(st, roots) != 1 : X509_STORE_set_default_paths(st) != 1)
        snprintf(why, wl, "the CA roots (%s) did not load", roots ? roots : "the system's");
    else if (X509_STORE_CTX_init(ctx, st, leaf, rest) != 1 ||
             X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER) != 1 ||
             X509_verify_cert(ctx) != 1)
        unverified(ctx, roots, why, wl);
    else if (!names_host(leaf, host))
        snprintf(why, wl, "it does not name %s", host);
    else
        ok = 1;
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
    sk_X509_pop_free(rest, X509_free);
    X509_free(leaf);
    BIO_free(b);
    return ok;
}

/* Is a newer than b (issued later; the serial decides a tie)? */
static int newer(const acme_cert_info_t *a, const acme_cert_info_t *b)
{
    return a->not_before > b->not_before ||
           (a->not_before == b->not_before && strcmp(a->serial, b->serial) > 0);
}

/* What -C holds for host, if it is the client's symlink (or NULL with
   nothing read): the value to publish, malloc'd, and its certificate. */
static char *local_cert(cluster_acme_t *a, const char *host, acme_cert_info_t *info, size_t *len)
{
    char path[600], *chain = NULL, *key = NULL, *v = NULL, target[8];
    size_t cl, kl;
    if (!file_ok(host, strlen(host)) || !acme_replaceable(a->tls_fd, host) ||
        readlinkat(a->tls_fd, host, target, sizeof target) <= 0)
        return NULL;
    snprintf(path, sizeof path, "%s/fullchain.pem", host);
    chain = acme_read_file(a->tls_fd, path, CERT_MAX, &cl);
    snprintf(path, sizeof path, "%s/privkey.pem", host);
    key = chain ? acme_read_file(a->tls_fd, path, CERT_MAX, &kl) : NULL;
    if (key && acme_cert_info(chain, cl, info) == 0) {
        char head[200];
        int hl = snprintf(head, sizeof head, "%s %s %zu %zu\n", CERT_MAGIC, info->serial, cl, kl);
        if ((v = malloc((size_t)hl + cl + kl + 1))) {
            memcpy(v, head, (size_t)hl);
            memcpy(v + hl, chain, cl);
            memcpy(v + hl + cl, key, kl);
            *len = (size_t)hl + cl + kl;
            v[*len] = 0;
        }
    }
    free(chain);
    if (key)
        memset(key, 0, kl);
    free(key);
    return v;
}

/* host's slot among the client's names, or -1. */
static int slot_of(cluster_acme_t *a, const char *host)
{
    char name[CLUSTER_ACME_NAME_MAX];
    for (int i = 0, n = cluster_acme_count(a->view); i < n; i++) {
        cluster_acme_name(a->view, i, name);
        if (!strcmp(name, host))
            return i;
    }
    return -1;
}

/* Install etcd's certificate for host (checked by parse_cert) into -C. */
static void install(cluster_acme_t *a, const char *host, const cert_t *c)
{
    char *chain = strndup(c->chain, c->cl), *key = strndup(c->key, c->kl);
    int r =
        chain && key ? acme_install(a->tls_fd, host, c->info.serial, chain, c->cl, key, c->kl) : -1;
    /* one that failed (a full disk) is tried next round */
    if (r == 0) {
        say(a, "certificate for %s (serial %s) installed from the cluster", host, c->info.serial);
        kill(a->notify, SIGUSR1); /* the loops load it now, as after the client's own */
        /* the client wanted the name before it had this: it says again
           (within a second) if it still does, so the lock the last holder
           just let go is not taken for nothing */
        cluster_acme_want(a->view, slot_of(a, host), 0);
    }
    free(chain);
    if (key)
        memset(key, 0, c->kl);
    free(key);
}

/* One host: the newer of -C's and etcd's certificate wins on both sides
   (a compare-and-put: a newer one put meanwhile is not overwritten).  A
   value that is not a whole certificate and its key, or one a CA gatling
   trusts would not have issued for host now, is said, never installed, and
   replaced only by this name's lock holder; one not sealed with the
   cluster's secret by any node that has a certificate (an upgrade's
   unsealed values heal at once).  0, or -1. */
static int sync_one(cluster_acme_t *a, etcd_t *e, const char *key, size_t kn, const char *host,
                    const etcd_kv_t *kv, int held, char *err, size_t errlen)
{
    cert_t c;
    acme_cert_info_t mine;
    size_t len = 0;
    char why[1024] = "";
    char *v = local_cert(a, host, &mine, &len);
    int good = kv && !kv->forged && parse_cert((char *)kv->value, kv->vlen, &c) == 0, rc = 0;
    /* a value gatling sealed, whole, is still checked as the CA's would be
       (the secret may have leaked); the one this node holds is not again */
    if (good && !(v && !strcmp(mine.serial, c.info.serial)) && !trusted(a, host, &c, why,
                                                                         sizeof why))
        good = 0;
    if (kv && !good && first_time(a, kv))
        say(a, "etcd key %.300s: %s: not installed, %s/%s kept", kv->key,
            kv->forged ? "not sealed with this cluster's secret (forged, or another secret=)"
            : why[0]   ? why
                       : "not a whole certificate and key gatling wrote (written half, or the "
                         "key is not the certificate's)",
            a->tls_dir, host);
    if (good && (!v || newer(&c.info, &mine)) && acme_replaceable(a->tls_fd, host))
        install(a, host, &c);
    else if (v && (!kv || (good && newer(&mine, &c.info)) || (!good && (held || kv->forged))) &&
             (rc = etcd_put_if(e, key, kn, v, len, kv ? kv->mod_revision : 0, 0, err, errlen)) > 0)
        say(a, "certificate for %s (serial %s) put in etcd for the cluster", host, mine.serial);
    if (v)
        memset(v, 0, len);
    free(v);
    return rc < 0 ? -1 : 0;
}

/* The certificates: etcd's (acme/cert/HOST) and -C's client symlinks
   (each of the client's names), the newer kept on both sides. */
static int sync_certs(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen)
{
    char pre[400], key[700], host[CLUSTER_ACME_NAME_MAX];
    int pn = snprintf(pre, sizeof pre, "%sacme/cert/", a->prefix), rc = 0;
    etcd_kv_t *kv;
    int n = etcd_range(e, pre, (size_t)pn, 1, 0, CONFIG_ACME_NAMES, &kv, NULL, err, errlen);
    if (n < 0)
        return -1;
    for (int i = 0; i < n && rc == 0; i++) {
        const char *h = (char *)kv[i].key + pn;
        if (!file_ok(h, strlen(h))) {
            if (first_time(a, &kv[i]))
                say(a, "etcd key %.300s: not a certificate's name: skipped", kv[i].key);
            continue;
        }
        rc = sync_one(a, e, (char *)kv[i].key, kv[i].klen, h, &kv[i],
                      cluster_acme_held(a->view, slot_of(a, h)), err, errlen);
    }
    for (int i = 0, count = cluster_acme_count(a->view); i < count && rc == 0; i++) {
        size_t hl = cluster_acme_name(a->view, i, host);
        int kn = snprintf(key, sizeof key, "%s%s", pre, host);
        if (file_ok(host, hl) && !find(kv, n, (size_t)pn, host))
            rc = sync_one(a, e, key, (size_t)kn, host, NULL, 0, err, errlen);
    }
    etcd_kvs_free(kv, n);
    return rc;
}

/* host's certificate synced again (just after its lock was taken).  0, or
   -1 (etcd). */
static int cert_again(cluster_acme_t *a, etcd_t *e, const char *host, char *err, size_t errlen)
{
    char key[700];
    int kn = snprintf(key, sizeof key, "%sacme/cert/%s", a->prefix, host);
    etcd_kv_t *kv;
    int n = etcd_range(e, key, (size_t)kn, 0, 0, 1, &kv, NULL, err, errlen);
    if (n < 0)
        return -1;
    int rc = sync_one(a, e, key, (size_t)kn, host, n ? kv : NULL, 1, err, errlen);
    etcd_kvs_free(kv, n);
    return rc;
}

int cluster_acme_round(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen)
{
    int64_t now = (int64_t)time(NULL);
    if (a->state_fd < 0 || now < a->next)
        return 0;
    a->next = now + 1;
    if (keep_lease(a, e, now, err, errlen) < 0 || sync_certs(a, e, err, errlen) < 0 ||
        lock_round(a, e, now, err, errlen) < 0 || publish_challenges(a, e, err, errlen) < 0)
        return -1;
    return take_challenges(a, e, err, errlen);
}

void acme_cluster_spread(cluster_view_t *view, const volatile sig_atomic_t *stop)
{
    if (!view)
        return;
    uint64_t before = cluster_acme_published(view);
    for (int i = 0; i < 50 && !*stop && cluster_acme_published(view) == before; i++)
        usleep(100000); /* the side process's next round puts it (5 s at most: etcd down) */
    for (int i = 0; i < 15 && !*stop; i++)
        usleep(100000); /* and the other nodes' next rounds write it down */
}

char *acme_cluster_account(const config_t *cfg, etcd_t *e, const char *cahash, const char *mine,
                           size_t mlen, size_t *len, char *err, size_t errlen)
{
    char key[400];
    int kn = snprintf(key, sizeof key, "/gatling/%s/acme/account/%s", cfg->cluster_name, cahash);
    for (int tries = 0; tries < 3; tries++) {
        etcd_kv_t *kv;
        int n = etcd_range(e, key, (size_t)kn, 0, 0, 1, &kv, NULL, err, errlen);
        if (n < 0)
            return NULL;
        if (n && kv->forged) {
            snprintf(err, errlen, "etcd key %s: not sealed with this cluster's secret (forged, "
                     "or another secret=): not used", key);
            etcd_kvs_free(kv, n);
            return NULL;
        }
        if (n) {
            char *pem = kv->vlen < ACCOUNT_MAX ? strndup((char *)kv->value, kv->vlen) : NULL;
            *len = kv->vlen;
            memset(kv->value, 0, kv->vlen);
            etcd_kvs_free(kv, n);
            if (!pem)
                snprintf(err, errlen, "etcd key %s: too long for an account key", key);
            return pem;
        }
        etcd_kvs_free(kv, n);
        /* the compare-and-put is the account's lock: of the nodes that make
           the cluster's account at once, one puts its key, the others read it */
        if (etcd_put_if(e, key, (size_t)kn, mine, mlen, 0, 0, err, errlen) < 0)
            return NULL;
    }
    snprintf(err, errlen, "etcd key %s: changed under us three times", key);
    return NULL;
}
