/*
 * acme_etcd — a small client of etcd v3's JSON gateway (etcd 3.4: POST
 * /v3/kv/range, /v3/kv/txn, /v3/kv/put, /v3/kv/deleterange, /v3/lease/grant),
 * for the cluster's side process (acme_cluster.h) and the ACME client.  It
 * blocks (libcurl, short timeouts) and so never runs on a serving loop.
 * Keys and values are bytes (base64 on the wire); the URLs are tried in
 * turn from the last one that answered, so one member down costs one
 * connect timeout, once.
 */
#ifndef GATLING_ACME_ETCD_H
#define GATLING_ACME_ETCD_H

#include <stddef.h>
#include <stdint.h>

#define ETCD_URLS_MAX 8
#define ETCD_VALUE_MAX (256 * 1024) /* a value we accept; more is hostile */

typedef struct etcd etcd_t;

/* One key and value of a range (both NUL-terminated too, for text). */
typedef struct etcd_kv {
    unsigned char *key, *value;
    size_t klen, vlen;
    int64_t mod_revision, lease;
    int forged; /* not sealed with the cluster's secret for this key: value "" */
} etcd_kv_t;

/* The list of etcd_new's, checked without reading a file: a secret= is
   there, and no http:// URL names a host other than this one (loopback)
   unless the item insecure is there too.  0; 1 with the first such URL in
   err (to warn of); -1 with why in err. */
int etcd_check(const char *urls, char *err, size_t errlen);

/* A client of the comma-separated http:// or https:// URLs (at most
   ETCD_URLS_MAX), among which ca=FILE (the roots that etcd's https
   certificates chain to; else the system's), cert=FILE and key=FILE (a
   client certificate for etcd's --client-cert-auth), user= and
   password-file=, secret=FILE (required: the cluster's shared secret; every
   value put is sealed with it, AES-256-GCM with the key as associated data,
   and every value read is opened with it, or marked forged) and insecure
   (plain http to another host allowed: etcd_check).  The files are read
   now (before -u).  NULL with why in err. */
etcd_t *etcd_new(const char *urls, char *err, size_t errlen);
void etcd_free(etcd_t *e);

/* The URL that answered last (for logs). */
const char *etcd_url(const etcd_t *e);

/*
 * The keys from key[0..klen) (prefix: every key that starts so) whose
 * mod_revision is at least min_rev (0: any; else sorted by it, oldest
 * first), the first max of them, in *kvs (an array to free with
 * etcd_kvs_free).  The store's revision in *rev if not
 * NULL.  The count (0: none), or -1 with why in err.
 */
int etcd_range(etcd_t *e, const void *key, size_t klen, int prefix, int64_t min_rev, int max,
               etcd_kv_t **kvs, int64_t *rev, char *err, size_t errlen);
void etcd_kvs_free(etcd_kv_t *kvs, int n);

/* Put value at key if its mod_revision is still mod_rev (0: if it does not
   exist), with lease (0: none).  1 done, 0 someone was first, -1 error. */
int etcd_put_if(etcd_t *e, const void *key, size_t klen, const void *val, size_t vlen,
                int64_t mod_rev, int64_t lease, char *err, size_t errlen);

/* Delete key if its mod_revision is still mod_rev (> 0): 1 done, 0 it
   changed (or is gone), -1 error. */
int etcd_delete_if(etcd_t *e, const void *key, size_t klen, int64_t mod_rev, char *err,
                   size_t errlen);

/* Put value at key, with lease (0: none).  0, or -1 with why in err. */
int etcd_put(etcd_t *e, const void *key, size_t klen, const void *val, size_t vlen, int64_t lease,
             char *err, size_t errlen);

/* A lease of ttl seconds: its id, or -1 with why in err. */
int64_t etcd_lease(etcd_t *e, int ttl, char *err, size_t errlen);

/* Keep lease id alive for its ttl again: 1, 0 if it is gone (expired), -1
   with why in err. */
int etcd_keepalive(etcd_t *e, int64_t id, char *err, size_t errlen);

/* Delete key (prefix: every key that starts so): 0, or -1 with why. */
int etcd_delete(etcd_t *e, const void *key, size_t klen, int prefix, char *err, size_t errlen);

#endif
