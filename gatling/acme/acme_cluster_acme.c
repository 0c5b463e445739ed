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
#include <time.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#define LOCK_TTL 5      /* seconds a dead holder keeps the lock */
#define CHAL_MAX 200    /* challenge files published or taken */
#define CERT_MAX (256 * 1024)
#define CERT_MAGIC "gatling-cert-1"

static const char *const chal_dirs[2] = {ACME_CHAL_HTTP_DIR, ACME_CHAL_ALPN_DIR};

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

int cluster_acme_open(cluster_acme_t *a, char *err, size_t errlen)
{
    a->state_fd = a->tls_fd = -1;
    if (!a->cfg->acme.email)
        return 0;
    a->state_fd = open(a->cfg->acme.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    a->tls_fd = open(a->cfg->tls_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (a->state_fd < 0 || a->tls_fd < 0) {
        snprintf(err, errlen, "--acme-dir %s or -C %s: %s", a->cfg->acme.state_dir,
                 a->cfg->tls_dir, strerror(errno));
        return -1;
    }
    return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
    return h;
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

/* The lock: kept alive if held, else taken if free.  0, or -1 (etcd). */
static int lock_round(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen)
{
    char key[400];
    int kn = snprintf(key, sizeof key, "%sacme/lock", a->prefix);
    if (a->lease) {
        int r = etcd_keepalive(e, a->lease, err, errlen);
        if (r < 0)
            return -1;
        if (!r) {
            say(a, "the cluster's ACME lock was lost (its lease expired)");
            a->lease = 0;
        }
    }
    if (!a->lease) {
        etcd_kv_t *kv;
        int n = etcd_range(e, key, (size_t)kn, 0, 0, 1, &kv, NULL, err, errlen);
        etcd_kvs_free(kv, n > 0 ? n : 0);
        if (n < 0)
            return -1;
        int64_t lease = n ? 0 : etcd_lease(e, LOCK_TTL, err, errlen);
        if (lease < 0)
            return -1;
        int r = lease ? etcd_put_if(e, key, (size_t)kn, a->node, strlen(a->node), 0, lease, err,
                                    errlen)
                      : 0;
        if (r < 0)
            return -1;
        if (r > 0) {
            a->lease = lease;
            a->published = 0;
            say(a, "this node holds the cluster's ACME lock: its ACME client orders");
        }
    }
    cluster_set_acme_holder(a->view, a->lease != 0);
    return 0;
}

typedef struct item {
    char key[600];
    char *val;
    size_t len;
    int leased; /* a challenge: lives with the lock */
} item_t;

/* The challenge files of this node's client, as items. */
static int local_challenges(cluster_acme_t *a, item_t *it, int n, int max)
{
    for (int k = 0; k < 2; k++) {
        int fd = openat(a->state_fd, chal_dirs[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        if (!d) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        while ((de = readdir(d)) && n < max) {
            if (!file_ok(de->d_name, strlen(de->d_name)))
                continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s", chal_dirs[k], de->d_name);
            item_t *i = &it[n];
            if (!(i->val = acme_read_file(a->state_fd, path, ACME_ALPN_PEM_MAX, &i->len)))
                continue;
            snprintf(i->key, sizeof i->key, "%sacme/chal/%s", a->prefix, path + 11);
            i->leased = 1;
            n++;
        }
        closedir(d);
    }
    return n;
}

/* The certificates the client installed in -C (NAME -> .acme/NAME.SERIAL). */
static int local_certs(cluster_acme_t *a, item_t *it, int n, int max)
{
    int fd = dup(a->tls_fd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *de;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return n;
    }
    rewinddir(d);
    while ((de = readdir(d)) && n < max) {
        char target[600], path[600], *chain, *key;
        size_t nl = strlen(de->d_name), cl, kl;
        ssize_t tl = readlinkat(a->tls_fd, de->d_name, target, sizeof target - 1);
        if (!file_ok(de->d_name, nl) || tl <= 6 || strncmp(target, ".acme/", 6))
            continue;
        target[tl] = 0;
        const char *serial = target + 6 + nl + 1;
        if (strncmp(target + 6, de->d_name, nl) || target[6 + nl] != '.')
            continue;
        snprintf(path, sizeof path, "%s/fullchain.pem", de->d_name);
        chain = acme_read_file(a->tls_fd, path, CERT_MAX, &cl);
        snprintf(path, sizeof path, "%s/privkey.pem", de->d_name);
        key = chain ? acme_read_file(a->tls_fd, path, CERT_MAX, &kl) : NULL;
        item_t *i = &it[n];
        char head[200];
        int hl = snprintf(head, sizeof head, "%s %s %zu %zu\n", CERT_MAGIC, serial, cl, kl);
        if (key && hl < (int)sizeof head && (i->val = malloc((size_t)hl + cl + kl))) {
            memcpy(i->val, head, (size_t)hl);
            memcpy(i->val + hl, chain, cl);
            memcpy(i->val + hl + cl, key, kl);
            i->len = (size_t)hl + cl + kl;
            snprintf(i->key, sizeof i->key, "%sacme/cert/%s", a->prefix, de->d_name);
            i->leased = 0;
            n++;
        }
        free(chain);
        if (key)
            memset(key, 0, kl);
        free(key);
    }
    closedir(d);
    return n;
}

/* The holder: what its client wrote, to etcd when it changed. */
static int publish(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen)
{
    item_t *it = calloc(CHAL_MAX + 100, sizeof *it);
    if (!it)
        return 0;
    int n = local_certs(a, it, local_challenges(a, it, 0, CHAL_MAX), CHAL_MAX + 100), rc = 0;
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++)
        h = fnv(fnv(h, it[i].key, strlen(it[i].key) + 1), it[i].val, it[i].len);
    if (h != a->published) {
        char chal[400];
        int cn = snprintf(chal, sizeof chal, "%sacme/chal/", a->prefix);
        rc = etcd_delete(e, chal, (size_t)cn, 1, err, errlen);
        for (int i = 0; i < n && rc == 0; i++)
            rc = etcd_put(e, it[i].key, strlen(it[i].key), it[i].val, it[i].len,
                          it[i].leased ? a->lease : 0, err, errlen);
        if (rc == 0) {
            a->published = h;
            cluster_note_published(a->view);
        }
    }
    for (int i = 0; i < n; i++) {
        memset(it[i].val, 0, it[i].len);
        free(it[i].val);
    }
    free(it);
    return rc;
}

/* Is name[0..n) among the kvs' keys after skip bytes? */
static int listed(const etcd_kv_t *kv, int n, size_t skip, const char *name)
{
    for (int i = 0; i < n; i++)
        if (kv[i].klen > skip && !strcmp((char *)kv[i].key + skip, name))
            return 1;
    return 0;
}

/* A follower: the holder's challenges into our state directory, and ours
   that it no longer has removed. */
static int take_challenges(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen)
{
    char pre[400];
    int pn = snprintf(pre, sizeof pre, "%sacme/chal/", a->prefix);
    etcd_kv_t *kv;
    int n = etcd_range(e, pre, (size_t)pn, 1, 0, CHAL_MAX, &kv, NULL, err, errlen);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        const char *rel = (char *)kv[i].key + pn, *slash = strchr(rel, '/');
        char path[600];
        int k = slash && !strncmp(rel, "http-01/", 8) ? 0
                : slash && !strncmp(rel, "tls-alpn-01/", 12) ? 1 : -1;
        if (k < 0 || !file_ok(slash + 1, strlen(slash + 1)) || kv[i].vlen > ACME_ALPN_PEM_MAX) {
            say(a, "etcd key %.300s: not a challenge gatling wrote: skipped", kv[i].key);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", chal_dirs[k], slash + 1);
        size_t len;
        char *have = acme_read_file(a->state_fd, path, ACME_ALPN_PEM_MAX, &len);
        if (!have || len != kv[i].vlen || memcmp(have, kv[i].value, len))
            acme_write_atomic(a->state_fd, path, kv[i].value, kv[i].vlen, 0644);
        free(have);
    }
    for (int k = 0; k < 2; k++) { /* what the holder no longer has */
        int fd = openat(a->state_fd, chal_dirs[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        char name[600];
        while (d && (de = readdir(d))) {
            snprintf(name, sizeof name, "%s/%s", k ? "tls-alpn-01" : "http-01", de->d_name);
            if (file_ok(de->d_name, strlen(de->d_name)) && !listed(kv, n, (size_t)pn, name))
                unlinkat(fd, de->d_name, 0);
        }
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

/* One cert/HOST value, checked, installed if its serial is new.  0, or -1
   (hostile or broken: said by the caller). */
static int install_one(cluster_acme_t *a, const char *host, const char *v, size_t len)
{
    char magic[20], serial[80], target[600], want[600];
    size_t cl, kl;
    int hl;
    acme_cert_info_t info;
    if (sscanf(v, "%19s %79s %zu %zu\n%n", magic, serial, &cl, &kl, &hl) != 4 ||
        strcmp(magic, CERT_MAGIC) || !file_ok(serial, strlen(serial)) || cl > CERT_MAX ||
        kl > CERT_MAX || (size_t)hl + cl + kl != len || !file_ok(host, strlen(host)) ||
        acme_cert_info(v + hl, cl, &info) < 0 || !key_matches(v + hl, cl, v + hl + cl, kl))
        return -1;
    snprintf(want, sizeof want, ".acme/%s.%s", host, serial);
    ssize_t tl = readlinkat(a->tls_fd, host, target, sizeof target - 1);
    if (tl > 0 && (target[tl] = 0, !strcmp(target, want)))
        return 0; /* installed already */
    char *chain = strndup(v + hl, cl), *key = strndup(v + hl + cl, kl);
    int r = chain && key ? acme_install(a->tls_fd, host, serial, chain, cl, key, kl) : -1;
    if (r == 0) {
        say(a, "certificate for %s (serial %s) installed from the cluster", host, serial);
        kill(a->notify, SIGUSR1); /* the loops load it now, as after the client's own */
    }
    free(chain);
    if (key)
        memset(key, 0, kl);
    free(key);
    return 0; /* an install that failed (a full disk) is tried next round */
}

static int install_certs(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen)
{
    char pre[400];
    int pn = snprintf(pre, sizeof pre, "%sacme/cert/", a->prefix);
    etcd_kv_t *kv;
    int n = etcd_range(e, pre, (size_t)pn, 1, 0, CONFIG_ACME_NAMES, &kv, NULL, err, errlen);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (install_one(a, (char *)kv[i].key + pn, (char *)kv[i].value, kv[i].vlen) < 0)
            say(a, "etcd key %.300s: not a certificate and key gatling wrote (or they do not "
                "match): not installed", kv[i].key);
    etcd_kvs_free(kv, n);
    return 0;
}

int cluster_acme_round(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen)
{
    int64_t now = (int64_t)time(NULL);
    if (a->state_fd < 0 || now < a->next)
        return 0;
    a->next = now + 1;
    if (lock_round(a, e, err, errlen) < 0)
        return -1;
    if (a->lease)
        return publish(a, e, err, errlen);
    return take_challenges(a, e, err, errlen) < 0 ? -1 : install_certs(a, e, err, errlen);
}

int acme_cluster_turn(const config_t *cfg, const volatile sig_atomic_t *stop, elog_t *log)
{
    if (!cfg->cluster || cluster_acme_holder(cfg->cluster))
        return 0;
    elog_text(log, time(NULL), "acme",
              "another node of the cluster holds its ACME lock: this client waits (the "
              "cluster's side process installs what that node gets)");
    while (!*stop && !cluster_acme_holder(cfg->cluster))
        usleep(200000);
    if (*stop)
        return -1;
    elog_text(log, time(NULL), "acme", "this node holds the cluster's ACME lock now: it orders");
    return 0;
}

void acme_cluster_spread(const config_t *cfg, const volatile sig_atomic_t *stop)
{
    if (!cfg->cluster)
        return;
    uint64_t before = cluster_acme_published(cfg->cluster);
    for (int i = 0; i < 50 && !*stop && cluster_acme_published(cfg->cluster) == before; i++)
        usleep(100000); /* the side process's next round puts it (5 s at most: etcd down) */
    for (int i = 0; i < 15 && !*stop; i++)
        usleep(100000); /* and the other nodes' next rounds write it down */
}
