/* acme_etcd — see acme_etcd.h. */
#include "acme_etcd.h"
#include "site/privfs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#define ETCD_BODY_MAX (4 * 1024 * 1024) /* a response: a range of ETCD_VALUE_MAX values */
#define ETCD_URL_MAX 256
#define ETCD_USER_MAX 128
#define ETCD_TOKEN_MAX 1024
#define SECRET_MIN 16   /* bytes of secret=FILE: less is a password, not a key */
#define SECRET_MAX 4096
#define SEAL_MAGIC "gatling-sealed-1 "
#define SEAL_MLEN (sizeof SEAL_MAGIC - 1)
#define SEAL_NONCE 12
#define SEAL_TAG 16
#define SEAL_OVER (SEAL_MLEN + SEAL_NONCE + SEAL_TAG)

typedef struct body {
    char *p;
    size_t len;
} body_t;

struct etcd {
    CURL *curl;
    char url[ETCD_URLS_MAX][ETCD_URL_MAX];
    int n, cur;    /* cur: the one that answered last */
    body_t tls[3]; /* ca=, cert=, key=: the files' bytes */
    char user[ETCD_USER_MAX];   /* user=: "" for none */
    body_t password;            /* password-file=: its first line */
    char token[ETCD_TOKEN_MAX]; /* the member's answer to /v3/auth/authenticate */
    int token_at;               /* ... which member: a simple token is one member's */
    unsigned char seal[32];     /* secret=: SHA-256 of the file, the AES-256-GCM key */
};

static size_t on_body(char *p, size_t size, size_t n, void *arg);

/* FILE of a "NAME=FILE" item, read whole into *blob by site/privfs.h's rules
   for a file root reads (ca=, cert=: a link of another user's on the way is
   not followed), a secret's for key= and password-file=.  0, or -1 with why. */
static int read_item(const char *item, size_t len, int secret, body_t *blob, char *err,
                     size_t errlen)
{
    char path[ETCD_URL_MAX], why[256] = "";
    const char *eq = memchr(item, '=', len);
    size_t n = len - (size_t)(eq + 1 - item);
    memcpy(path, eq + 1, n);
    path[n] = 0;
    struct stat st;
    int fd = pfs_open_file(path, secret ? PFS_SECRET : PFS_READ, &st, why, sizeof why);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    char buf[4096];
    size_t k;
    if (!f && fd >= 0)
        close(fd);
    free(blob->p);
    blob->p = NULL, blob->len = 0;
    while (f && (k = fread(buf, 1, sizeof buf, f)) > 0)
        if (!on_body(buf, 1, k, blob)) {
            fclose(f);
            snprintf(err, errlen, "%s: too long", path);
            return -1;
        }
    if (!f || !blob->len)
        snprintf(err, errlen, "%s: %s", path, f ? "empty" : *why ? why : strerror(errno));
    if (f)
        fclose(f);
    return blob->len ? 0 : -1;
}

/* user=NAME, password-file=FILE (its first line; no secret on a command
   line).  1 taken, 0 not one of these, -1 with why in err. */
static int auth_item(etcd_t *e, const char *p, size_t len, char *err, size_t errlen)
{
    if (len > 5 && !strncmp(p, "user=", 5)) {
        if (len - 5 >= sizeof e->user || memchr(p + 5, '"', len - 5)) {
            snprintf(err, errlen, "user=: 1 to %zu characters, no '\"'", sizeof e->user - 1);
            return -1;
        }
        memcpy(e->user, p + 5, len - 5);
        e->user[len - 5] = 0;
        return 1;
    }
    if (len <= 14 || strncmp(p, "password-file=", 14) || len >= ETCD_URL_MAX)
        return 0;
    if (read_item(p, len, 1, &e->password, err, errlen) < 0)
        return -1;
    e->password.len = strcspn(e->password.p, "\r\n");
    if (!e->password.len || e->password.len > 1024) {
        snprintf(err, errlen, "%.*s: no password on its first line (or one too long)",
                 (int)(len < 200 ? len : 200), p);
        return -1;
    }
    return 1;
}

/* secret=FILE: a secret file (site/privfs.h's PFS_SECRET: regular, one
   link, root's or the caller's, no group or other bit, as sshd's
   StrictModes wants a key), whose SHA-256 is the sealing key.  0, or -1
   with why in err. */
static int secret_item(etcd_t *e, const char *p, size_t len, char *err, size_t errlen)
{
    char path[ETCD_URL_MAX], why[256] = "";
    unsigned char buf[SECRET_MAX + 1];
    struct stat st;
    snprintf(path, sizeof path, "%.*s", (int)(len - 7), p + 7);
    int fd = pfs_open_file(path, PFS_SECRET, &st, why, sizeof why);
    if (fd < 0) {
        snprintf(err, errlen, "secret=%s: %s", path, why[0] ? why : strerror(errno));
        return -1;
    }
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    const char *w = n < 0            ? strerror(errno)
                    : n < SECRET_MIN ? "shorter than 16 bytes (openssl rand -hex 32 > FILE)"
                    : n > SECRET_MAX ? "longer than 4096 bytes"
                                     : NULL;
    if (w) {
        snprintf(err, errlen, "secret=%s: %s", path, w);
        OPENSSL_cleanse(buf, sizeof buf);
        return -1;
    }
    SHA256(buf, (size_t)n, e->seal);
    OPENSSL_cleanse(buf, sizeof buf);
    return 0;
}

/* Is the http:// URL p[0..len) one of this host's loopback addresses
   (127.0.0.0/8, [::1], localhost)?  Its traffic then never leaves the host. */
static int loopback(const char *p, size_t len)
{
    size_t s = strlen("http://"), h = strcspn(p + s, ":/");
    if (h > len - s)
        h = len - s;
    if (memchr(p, '@', len)) /* http://127.0.0.1:1@host/: curl's host is after the '@' */
        return 0;
    if (p[s] == '[')
        return len - s >= 5 && !strncmp(p + s, "[::1]", 5);
    if (h == 9 && !strncmp(p + s, "localhost", 9))
        return 1;
    if (h < 4 || strncmp(p + s, "127.", 4))
        return 0;
    for (size_t i = s; i < s + h; i++)
        if (!(p[i] == '.' || (p[i] >= '0' && p[i] <= '9')))
            return 0;
    return 1;
}

int etcd_check(const char *urls, char *err, size_t errlen)
{
    int secret = 0, insecure = 0;
    const char *plain = NULL;
    size_t plen = 0;
    for (const char *p = urls; *p;) {
        size_t len = strcspn(p, ",");
        if (len > 7 && !strncmp(p, "secret=", 7))
            secret = 1;
        else if (len == 8 && !strncmp(p, "insecure", 8))
            insecure = 1;
        else if (len > 7 && !strncmp(p, "http://", 7) && !loopback(p, len) && !plain)
            plain = p, plen = len;
        p += len;
        p += *p == ',';
    }
    if (!secret) {
        snprintf(err, errlen, "no secret=FILE: the key every node shares, which seals what "
                 "it puts in etcd (gatling(8)'s CLUSTER)");
        return -1;
    }
    if (plain && !insecure) {
        snprintf(err, errlen, "%.*s: plain http to a host other than this one (the password "
                 "and every value in clear): https://, or add ',insecure'",
                 (int)(plen < 200 ? plen : 200), plain);
        return -1;
    }
    if (plain)
        snprintf(err, errlen, "%.*s", (int)(plen < 200 ? plen : 200), plain);
    return plain ? 1 : 0;
}

/* One item of the list: a URL, or ca=, cert=, key=, user=,
   password-file=, secret=, insecure.  0, or -1. */
static int add_item(etcd_t *e, const char *p, size_t len, char *err, size_t errlen)
{
    static const char *const files[3] = {"ca=", "cert=", "key="};
    for (int i = 0; i < 3; i++)
        if (len > strlen(files[i]) && !strncmp(p, files[i], strlen(files[i])) &&
            len < ETCD_URL_MAX)
            return read_item(p, len, i == 2, &e->tls[i], err, errlen);
    int r = auth_item(e, p, len, err, errlen);
    if (r)
        return r < 0 ? -1 : 0;
    if (len > 7 && !strncmp(p, "secret=", 7))
        return len < ETCD_URL_MAX ? secret_item(e, p, len, err, errlen)
                                  : (snprintf(err, errlen, "secret=: a path too long"), -1);
    if (len == 8 && !strncmp(p, "insecure", 8))
        return 0; /* etcd_check's */
    if (e->n == ETCD_URLS_MAX || len >= ETCD_URL_MAX - 16 ||
        (strncmp(p, "http://", 7) && strncmp(p, "https://", 8))) {
        snprintf(err, errlen, "%.*s: not an http:// or https:// URL (at most %d), nor ca=, "
                 "cert= or key=FILE", (int)(len < 200 ? len : 200), p, ETCD_URLS_MAX);
        return -1;
    }
    memcpy(e->url[e->n], p, len);
    while (len && e->url[e->n][len - 1] == '/')
        len--;
    e->url[e->n++][len] = 0;
    return 0;
}

etcd_t *etcd_new(const char *urls, char *err, size_t errlen)
{
    if (etcd_check(urls, err, errlen) < 0)
        return NULL;
    etcd_t *e = calloc(1, sizeof *e);
    if (!e || !(e->curl = curl_easy_init())) {
        snprintf(err, errlen, "out of memory");
        free(e);
        return NULL;
    }
    for (const char *p = urls; *p;) {
        size_t len = strcspn(p, ",");
        if (add_item(e, p, len, err, errlen) < 0) {
            etcd_free(e);
            return NULL;
        }
        p += len;
        p += *p == ',';
    }
    if (!e->n || (!e->tls[1].p != !e->tls[2].p) || (!e->user[0] != !e->password.p)) {
        snprintf(err, errlen,
                 !e->n                          ? "no URL"
                 : !e->tls[1].p != !e->tls[2].p ? "cert= and key= go together"
                                                : "user= and password-file= go together");
        etcd_free(e);
        return NULL;
    }
    return e;
}

void etcd_free(etcd_t *e)
{
    if (!e)
        return;
    if (e->curl)
        curl_easy_cleanup(e->curl);
    for (int i = 0; i < 3; i++) {
        if (e->tls[i].p)
            memset(e->tls[i].p, 0, e->tls[i].len);
        free(e->tls[i].p);
    }
    if (e->password.p)
        memset(e->password.p, 0, e->password.len);
    free(e->password.p);
    memset(e->token, 0, sizeof e->token);
    OPENSSL_cleanse(e->seal, sizeof e->seal);
    free(e);
}

const char *etcd_url(const etcd_t *e)
{
    return e->url[e->cur];
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    body_t *b = arg;
    size_t add = size * n;
    if (add > ETCD_BODY_MAX - b->len)
        return 0;
    char *q = realloc(b->p, b->len + add + 1);
    if (!q)
        return 0;
    memcpy(q + b->len, p, add);
    b->len += add;
    q[b->len] = 0;
    b->p = q;
    return add;
}

/* ca=, cert=, key=: from memory (the side process runs as -u's user, who
   may not read the files). */
static void set_tls(etcd_t *e, CURL *c)
{
    static const CURLoption opt[3] = {CURLOPT_CAINFO_BLOB, CURLOPT_SSLCERT_BLOB,
                                      CURLOPT_SSLKEY_BLOB};
    for (int i = 0; i < 3; i++)
        if (e->tls[i].p) {
            struct curl_blob b = {e->tls[i].p, e->tls[i].len, CURL_BLOB_COPY};
            curl_easy_setopt(c, opt[i], &b);
        }
    if (e->tls[1].p) {
        curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
}

/* One POST of req to url's path: the HTTP status (0: no answer). */
static long post(etcd_t *e, const char *url, const char *path, const char *req, body_t *b,
                 char *err, size_t errlen)
{
    char full[ETCD_URL_MAX + 64];
    snprintf(full, sizeof full, "%s%s", url, path);
    CURL *c = e->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    set_tls(e, c);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    char auth[ETCD_TOKEN_MAX + 20];
    if (e->token[0] && !strcmp(url, e->url[e->token_at])) {
        snprintf(auth, sizeof auth, "Authorization: %s", e->token);
        h = curl_slist_append(h, auth);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(h);
    long status = 0;
    if (rc != CURLE_OK)
        snprintf(err, errlen, "%s: %s", full, curl_easy_strerror(rc));
    else
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

/* POST text to path on member k: 1 with its answer in *o, 0 the member is
   down (or has no leader), -1 it answered an error (*unauth: one about the
   auth token, which a new one may cure), with why in err. */
static int one(etcd_t *e, int k, const char *path, const char *text, json_object **o, int *unauth,
               char *err, size_t errlen)
{
    body_t b = {NULL, 0};
    long status = post(e, e->url[k], path, text, &b, err, errlen);
    if (!status || status >= 500) {
        if (status)
            snprintf(err, errlen, "%s%s: HTTP %ld", e->url[k], path, status);
        free(b.p);
        return 0;
    }
    *o = b.p ? json_tokener_parse(b.p) : NULL;
    free(b.p);
    json_object *msg;
    const char *m = "?";
    if (!*o || !json_object_is_type(*o, json_type_object)) {
        snprintf(err, errlen, "%s%s: HTTP %ld, not a JSON object", e->url[k], path, status);
    } else if (status != 200) {
        if (json_object_object_get_ex(*o, "message", &msg))
            m = json_object_get_string(msg);
        /* etcd: "invalid auth token" (expired, or another member's), "user
           name is empty" (none sent) */
        *unauth = status == 401 || strstr(m, "auth token") || strstr(m, "user name is empty");
        snprintf(err, errlen, "%s%s: HTTP %ld: %.200s", e->url[k], path, status, m);
    } else {
        return 1;
    }
    json_object_put(*o);
    *o = NULL;
    return -1;
}

/* user= and password-file=: a token from member k (/v3/auth/authenticate).
   1, 0 the member is down, -1 refused (why in err). */
static int login(etcd_t *e, int k, char *err, size_t errlen)
{
    json_object *req = json_object_new_object(), *o = NULL, *t;
    json_object_object_add(req, "name", json_object_new_string(e->user));
    json_object_object_add(req, "password",
                           json_object_new_string_len(e->password.p, (int)e->password.len));
    char *text = strdup(json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN));
    json_object_put(req);
    int unauth = 0;
    e->token[0] = 0;
    int r = text ? one(e, k, "/v3/auth/authenticate", text, &o, &unauth, err, errlen) : -1;
    if (text)
        memset(text, 0, strlen(text));
    free(text);
    if (r > 0) {
        const char *tok =
            json_object_object_get_ex(o, "token", &t) ? json_object_get_string(t) : "";
        if (!tok[0] || strlen(tok) >= sizeof e->token || strpbrk(tok, "\r\n"))
            r = -1, snprintf(err, errlen, "%s/v3/auth/authenticate: no token", e->url[k]);
        else
            snprintf(e->token, sizeof e->token, "%s", tok), e->token_at = k;
        json_object_put(o);
    }
    if (r < 0)
        snprintf(err + strlen(err), errlen - strlen(err), " (user %s)", e->user);
    return r;
}

/* POST req to path on the members in turn (with user=, logged in to the
   member first, and again once if its token has expired): the answer's
   JSON object, or NULL with why in err (no member answered, or one
   answered an error). */
static json_object *call(etcd_t *e, const char *path, json_object *req, char *err, size_t errlen)
{
    const char *text = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
    for (int i = 0; i < e->n; i++) {
        int k = (e->cur + i) % e->n, r = 1, unauth = 0;
        json_object *o = NULL;
        if (e->user[0] && (!e->token[0] || e->token_at != k))
            r = login(e, k, err, errlen);
        if (r > 0)
            r = one(e, k, path, text, &o, &unauth, err, errlen);
        if (r < 0 && unauth && e->user[0] && (r = login(e, k, err, errlen)) > 0)
            r = one(e, k, path, text, &o, &unauth, err, errlen);
        if (r == 0)
            continue; /* down, or no leader there: the next one */
        e->cur = k;
        return r > 0 ? o : NULL;
    }
    return NULL;
}

static json_object *b64(const void *p, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out)
        return NULL;
    EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    json_object *o = json_object_new_string(out);
    free(out);
    return o;
}

/* AES-256-GCM of val under the secret, with key as its associated data (a
   value moved to another key does not open): SEAL_MAGIC NONCE CIPHER TAG,
   malloc'd, its length in *out_len; NULL if OpenSSL failed. */
static unsigned char *seal(const etcd_t *e, const void *key, size_t klen, const void *val,
                           size_t vlen, size_t *out_len)
{
    unsigned char *out = malloc(SEAL_OVER + vlen + 1);
    if (!out)
        return NULL;
    unsigned char *iv = out + SEAL_MLEN;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int n = 0, f = 0, ok = c && RAND_bytes(iv, SEAL_NONCE) == 1 &&
                            EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, e->seal, iv) == 1 &&
                            EVP_EncryptUpdate(c, NULL, &n, key, (int)klen) == 1 &&
                            EVP_EncryptUpdate(c, iv + SEAL_NONCE, &n, val, (int)vlen) == 1 &&
                            EVP_EncryptFinal_ex(c, iv + SEAL_NONCE + n, &f) == 1 &&
                            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, SEAL_TAG,
                                                iv + SEAL_NONCE + vlen) == 1;
    EVP_CIPHER_CTX_free(c);
    if (!ok) {
        free(out);
        return NULL;
    }
    memcpy(out, SEAL_MAGIC, SEAL_MLEN);
    *out_len = SEAL_OVER + vlen;
    return out;
}

/* kv's value opened in place (what seal made for this key under this
   secret): 0, or -1 (forged, another cluster's secret, or not sealed). */
static int unseal(const etcd_t *e, etcd_kv_t *kv)
{
    if (kv->vlen < SEAL_OVER || memcmp(kv->value, SEAL_MAGIC, SEAL_MLEN))
        return -1;
    size_t n = kv->vlen - SEAL_OVER;
    unsigned char *iv = kv->value + SEAL_MLEN, *ct = iv + SEAL_NONCE, *plain = malloc(n + 1);
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int k = 0, f = 0, ok = plain && c &&
                           EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, e->seal, iv) == 1 &&
                           EVP_DecryptUpdate(c, NULL, &k, kv->key, (int)kv->klen) == 1 &&
                           EVP_DecryptUpdate(c, plain, &k, ct, (int)n) == 1 &&
                           EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, SEAL_TAG, ct + n) == 1 &&
                           EVP_DecryptFinal_ex(c, plain + k, &f) == 1;
    EVP_CIPHER_CTX_free(c);
    if (!ok) {
        free(plain);
        return -1;
    }
    plain[n] = 0;
    OPENSSL_cleanse(kv->value, kv->vlen);
    free(kv->value);
    kv->value = plain, kv->vlen = n;
    return 0;
}

/* val sealed for key, as base64 (NULL if OpenSSL failed: the put then
   fails, as json-c drops a NULL member's value). */
static json_object *sealed_b64(const etcd_t *e, const void *key, size_t klen, const void *val,
                               size_t vlen)
{
    size_t n;
    unsigned char *v = seal(e, key, klen, val, vlen, &n);
    json_object *o = v ? b64(v, n) : NULL;
    free(v);
    return o;
}

/* The bytes of base64 text s (NUL-terminated too): NULL if it is not. */
static unsigned char *unb64(const char *s, size_t *len)
{
    size_t n = strlen(s);
    if (n % 4 || n / 4 * 3 > ETCD_VALUE_MAX)
        return NULL;
    unsigned char *out = malloc(n / 4 * 3 + 1);
    if (!out)
        return NULL;
    int k = n ? EVP_DecodeBlock(out, (const unsigned char *)s, (int)n) : 0;
    if (k < 0) {
        free(out);
        return NULL;
    }
    size_t pad = n && s[n - 1] == '=' ? (n > 1 && s[n - 2] == '=' ? 2 : 1) : 0;
    *len = (size_t)k - pad;
    out[*len] = 0;
    return out;
}

/* An int64 that the gateway writes as a string (or a number); absent: 0. */
static int64_t num(json_object *o, const char *name)
{
    json_object *v;
    if (!json_object_object_get_ex(o, name, &v))
        return 0;
    if (json_object_is_type(v, json_type_string))
        return strtoll(json_object_get_string(v), NULL, 10);
    return json_object_get_int64(v);
}

static int64_t header_rev(json_object *o)
{
    json_object *h;
    return json_object_object_get_ex(o, "header", &h) ? num(h, "revision") : 0;
}

/* One of a range's kvs into kv: 0, or -1 if it is not one. */
static int parse_kv(const etcd_t *e, json_object *o, etcd_kv_t *kv)
{
    json_object *k, *v;
    memset(kv, 0, sizeof *kv);
    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "key", &k) ||
        !json_object_is_type(k, json_type_string))
        return -1;
    kv->key = unb64(json_object_get_string(k), &kv->klen);
    if (!json_object_object_get_ex(o, "value", &v)) /* the gateway leaves out "" */
        kv->value = (unsigned char *)calloc(1, 1);
    else if (json_object_is_type(v, json_type_string))
        kv->value = unb64(json_object_get_string(v), &kv->vlen);
    kv->mod_revision = num(o, "mod_revision");
    kv->lease = num(o, "lease");
    if (!kv->key || !kv->value)
        return -1;
    if (unseal(e, kv) < 0) { /* said by the caller, never used */
        free(kv->value);
        kv->value = (unsigned char *)calloc(1, 1), kv->vlen = 0, kv->forged = 1;
    }
    return kv->value ? 0 : -1;
}

void etcd_kvs_free(etcd_kv_t *kvs, int n)
{
    for (int i = 0; kvs && i < n; i++)
        free(kvs[i].key), free(kvs[i].value);
    free(kvs);
}

/* A prefix's range_end: the prefix with its last byte below 0xff raised. */
static json_object *range_end(const unsigned char *key, size_t klen)
{
    unsigned char end[1024];
    size_t n = klen < sizeof end ? klen : sizeof end;
    memcpy(end, key, n);
    while (n && end[n - 1] == 0xff)
        n--;
    if (!n)
        return b64("\0", 1);
    end[n - 1]++;
    return b64(end, n);
}

static int parse_kvs(const etcd_t *e, json_object *res, int max, etcd_kv_t **kvs, char *err,
                     size_t errlen)
{
    json_object *arr;
    *kvs = NULL;
    if (!json_object_object_get_ex(res, "kvs", &arr))
        return 0;
    size_t n = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
    if (n > (size_t)max) /* the gateway gave more than the limit asked */
        n = (size_t)max;
    if (!(*kvs = calloc(n ? n : 1, sizeof **kvs))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (parse_kv(e, json_object_array_get_idx(arr, i), &(*kvs)[i]) < 0) {
            snprintf(err, errlen, "a key or value that is not base64 (or longer than %d)",
                     ETCD_VALUE_MAX);
            etcd_kvs_free(*kvs, (int)i + 1);
            *kvs = NULL;
            return -1;
        }
    return (int)n;
}

int etcd_range(etcd_t *e, const void *key, size_t klen, int prefix, int64_t min_rev, int max,
               etcd_kv_t **kvs, int64_t *rev, char *err, size_t errlen)
{
    json_object *req = json_object_new_object();
    json_object_object_add(req, "key", b64(key, klen));
    if (prefix)
        json_object_object_add(req, "range_end", range_end(key, klen));
    if (min_rev > 0) { /* the oldest first: a caller that got max goes on from the last */
        json_object_object_add(req, "min_mod_revision", json_object_new_int64(min_rev));
        json_object_object_add(req, "sort_order", json_object_new_string("ASCEND"));
        json_object_object_add(req, "sort_target", json_object_new_string("MOD"));
    }
    json_object_object_add(req, "limit", json_object_new_int64(max));
    json_object *res = call(e, "/v3/kv/range", req, err, errlen);
    json_object_put(req);
    if (!res)
        return -1;
    int n = parse_kvs(e, res, max, kvs, err, errlen);
    if (rev)
        *rev = header_rev(res);
    json_object_put(res);
    return n;
}

/* A transaction of one compare (key's MOD or CREATE revision equal to rev)
   and one op (name: request_put, request_delete_range).  1 done, 0 the
   compare failed, -1 error. */
static int txn(etcd_t *e, const void *key, size_t klen, int64_t mod_rev, const char *name,
               json_object *op_body, char *err, size_t errlen)
{
    json_object *cmp = json_object_new_object();
    json_object_object_add(cmp, "key", b64(key, klen));
    json_object_object_add(cmp, "result", json_object_new_string("EQUAL"));
    json_object_object_add(cmp, "target", json_object_new_string(mod_rev ? "MOD" : "CREATE"));
    json_object_object_add(cmp, mod_rev ? "mod_revision" : "create_revision",
                           json_object_new_int64(mod_rev));
    json_object *op = json_object_new_object(), *req = json_object_new_object();
    json_object_object_add(op, name, op_body);
    json_object *cmps = json_object_new_array(), *ops = json_object_new_array();
    json_object_array_add(cmps, cmp);
    json_object_array_add(ops, op);
    json_object_object_add(req, "compare", cmps);
    json_object_object_add(req, "success", ops);
    json_object *res = call(e, "/v3/kv/txn", req, err, errlen);
    json_object_put(req);
    if (!res)
        return -1;
    json_object *ok;
    int done = json_object_object_get_ex(res, "succeeded", &ok) && json_object_get_boolean(ok);
    json_object_put(res);
    return done;
}

int etcd_put_if(etcd_t *e, const void *key, size_t klen, const void *val, size_t vlen,
                int64_t mod_rev, int64_t lease, char *err, size_t errlen)
{
    json_object *put = json_object_new_object();
    json_object_object_add(put, "key", b64(key, klen));
    json_object_object_add(put, "value", sealed_b64(e, key, klen, val, vlen));
    if (lease)
        json_object_object_add(put, "lease", json_object_new_int64(lease));
    return txn(e, key, klen, mod_rev, "request_put", put, err, errlen);
}

int etcd_delete_if(etcd_t *e, const void *key, size_t klen, int64_t mod_rev, char *err,
                   size_t errlen)
{
    json_object *del = json_object_new_object();
    json_object_object_add(del, "key", b64(key, klen));
    return txn(e, key, klen, mod_rev, "request_delete_range", del, err, errlen);
}

int64_t etcd_lease(etcd_t *e, int ttl, char *err, size_t errlen)
{
    json_object *req = json_object_new_object();
    json_object_object_add(req, "TTL", json_object_new_int64(ttl));
    json_object *res = call(e, "/v3/lease/grant", req, err, errlen);
    json_object_put(req);
    if (!res)
        return -1;
    int64_t id = num(res, "ID");
    json_object_put(res);
    if (id <= 0)
        snprintf(err, errlen, "/v3/lease/grant: no lease ID in the answer");
    return id > 0 ? id : -1;
}

int etcd_keepalive(etcd_t *e, int64_t id, char *err, size_t errlen)
{
    json_object *req = json_object_new_object();
    json_object_object_add(req, "ID", json_object_new_int64(id));
    json_object *res = call(e, "/v3/lease/keepalive", req, err, errlen);
    json_object_put(req);
    if (!res)
        return -1;
    /* the gateway streams: {"result":{"ID":..,"TTL":..}}; TTL 0 or none: gone */
    json_object *r;
    int alive = json_object_object_get_ex(res, "result", &r) && num(r, "TTL") > 0;
    json_object_put(res);
    return alive;
}

int etcd_delete(etcd_t *e, const void *key, size_t klen, int prefix, char *err, size_t errlen)
{
    json_object *req = json_object_new_object();
    json_object_object_add(req, "key", b64(key, klen));
    if (prefix)
        json_object_object_add(req, "range_end", range_end(key, klen));
    json_object *res = call(e, "/v3/kv/deleterange", req, err, errlen);
    json_object_put(req);
    json_object_put(res);
    return res ? 0 : -1;
}

int etcd_put(etcd_t *e, const void *key, size_t klen, const void *val, size_t vlen, int64_t lease,
             char *err, size_t errlen)
{
    json_object *req = json_object_new_object();
    json_object_object_add(req, "key", b64(key, klen));
    json_object_object_add(req, "value", sealed_b64(e, key, klen, val, vlen));
    if (lease)
        json_object_object_add(req, "lease", json_object_new_int64(lease));
    json_object *res = call(e, "/v3/kv/put", req, err, errlen);
    json_object_put(req);
    json_object_put(res);
    return res ? 0 : -1;
}
