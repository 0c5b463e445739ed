/* acme_proto — see acme_proto.h. */
#include "acme_proto.h"
#include "acme_cluster_acme.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/sha.h>

#include "acme_dns.h"
#include "acme_store.h"
#include "site/acme_chal.h"

#define KEY_FILE_MAX 16384

static void fail(acme_client_t *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(acme_client_t *cl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cl->err, sizeof cl->err, fmt, ap);
    va_end(ap);
}

int acme_client_init(acme_client_t *cl, const config_t *cfg, int state_fd, int http01,
                     const volatile sig_atomic_t *stop)
{
    memset(cl, 0, sizeof *cl);
    cl->cfg = cfg;
    cl->state_fd = state_fd;
    cl->http01 = http01;
    cl->stop = stop;
    cl->retry_after = -1;
    if (acme_http_init(&cl->http, cfg->acme.ca_root, stop) < 0)
        return -1;
    acme_client_use(cl, 0);
    return 0;
}

void acme_client_use(acme_client_t *cl, int ca)
{
    const config_acme_t *a = &cl->cfg->acme;
    unsigned char md[SHA256_DIGEST_LENGTH];
    if (cl->url && cl->ca == ca)
        return;
    cl->ca = ca >= 0 && ca < a->ncas ? ca : 0;
    cl->url = a->ncas ? a->cas[cl->ca].url : a->ca;
    cl->have_dir = 0;
    memset(&cl->dir, 0, sizeof cl->dir);
    cl->nonce[0] = cl->kid[0] = cl->thumb[0] = 0;
    EVP_PKEY_free(cl->key);
    cl->key = NULL;
    SHA256((const unsigned char *)cl->url, strlen(cl->url), md);
    for (int i = 0; i < 8; i++)
        snprintf(cl->cahash + 2 * i, 3, "%02x", md[i]);
    cl->http.plain_ok = strncmp(cl->url, "http://", 7) == 0;
}

void acme_client_free(acme_client_t *cl)
{
    acme_http_free(&cl->http);
    EVP_PKEY_free(cl->key);
    cl->key = NULL;
}

void acme_issued_free(acme_issued_t *out)
{
    free(out->chain);
    if (out->key)
        OPENSSL_cleanse(out->key, out->key_len);
    free(out->key);
    memset(out, 0, sizeof *out);
}

/* Interruptible sleep: SIGTERM ends it (the handler sets *stop). */
static void nap(acme_client_t *cl, long ms)
{
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
    while (!*cl->stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

#define ACME_ERROR "urn:ietf:params:acme:error:"

/* A failed answer: its problem document in cl->err after what, and its
   Retry-After.  1 when it is a badNonce (send again), 2 when the CA does not
   know the account (register it again: a CA that lost its state). */
static int answer_failed(acme_client_t *cl, const char *what, const acme_resp_t *r)
{
    acme_problem_t p;
    cl->retry_after = r->head.retry_after;
    cl->ptype[0] = 0;
    if (r->status >= 500 || r->status == 429) /* the CA's own fault, or its limit */
        cl->ca_fault = 1;
    if (r->body && acme_parse_problem(r->body, r->len, &p) == 0) {
        fail(cl, "%s: HTTP %ld: %s: %s", what, r->status, p.type, p.detail);
        snprintf(cl->ptype, sizeof cl->ptype, "%s", p.type);
        cl->ca_fault |= strcmp(p.type, ACME_ERROR "rateLimited") == 0;
        if (strcmp(p.type, ACME_ERROR "accountDoesNotExist") == 0)
            return 2;
        return strcmp(p.type, ACME_ERROR "badNonce") == 0;
    }
    if (r->status >= 300 && r->status < 400)
        fail(cl, "%s: HTTP %ld: a redirect to %s, not followed", what, r->status,
             r->head.location[0] ? r->head.location : "(none)");
    else
        fail(cl, "%s: HTTP %ld (no problem document)", what, r->status);
    return 0;
}

static int new_account(acme_client_t *cl);

static int get_nonce(acme_client_t *cl)
{
    acme_resp_t r;
    char err[ACME_ERR_MAX];
    int ok = acme_http_do(&cl->http, cl->dir.new_nonce, NULL, 1, &r, err, sizeof err) == 0;
    if (ok && r.head.nonce[0] && r.status >= 200 && r.status < 300)
        strcpy(cl->nonce, r.head.nonce);
    else if (ok && (r.status < 200 || r.status >= 300))
        answer_failed(cl, "newNonce", &r); /* a HEAD: no problem document, but Retry-After */
    else if (ok)
        fail(cl, "newNonce: HTTP %ld without a Replay-Nonce", r.status);
    else
        fail(cl, "newNonce: %s", err);
    acme_resp_free(&r);
    return cl->nonce[0] ? 0 : -1;
}

/*
 * POST payload (NULL: POST-as-GET) to url, signed by the account (with its
 * JWK when there is no kid yet).  0 with r filled on a 2xx answer; -1 with
 * cl->err set otherwise (r freed).  A badNonce answer is sent again with
 * the nonce it carried, ACME_NONCE_TRIES times at most.
 */
static int post(acme_client_t *cl, const char *what, const char *url, const char *payload,
                acme_resp_t *r)
{
    char err[ACME_ERR_MAX];
    cl->ptype[0] = 0;
    for (int tries = 0; tries < ACME_NONCE_TRIES && !*cl->stop; tries++) {
        if (!cl->nonce[0] && get_nonce(cl) < 0)
            return -1;
        char *jws = acme_jws(cl->key, cl->kid[0] ? cl->kid : NULL, cl->nonce, url,
                             payload ? payload : "");
        cl->nonce[0] = 0;
        if (!jws) {
            fail(cl, "%s: cannot sign the request", what);
            return -1;
        }
        int rc = acme_http_do(&cl->http, url, jws, 0, r, err, sizeof err);
        free(jws);
        if (rc < 0) {
            cl->ca_fault = 1; /* no answer: unreachable, or a broken answer */
            fail(cl, "%s: %s", what, err);
            acme_resp_free(r);
            return -1;
        }
        if (r->head.nonce[0])
            strcpy(cl->nonce, r->head.nonce);
        if (r->status >= 200 && r->status < 300)
            return 0;
        int again = answer_failed(cl, what, r);
        acme_resp_free(r);
        if (again == 2 && cl->kid[0] && strcmp(url, cl->dir.new_account)) {
            char path[96];
            snprintf(path, sizeof path, "account/%s/url", cl->cahash);
            unlinkat(cl->state_fd, path, 0);
            if (new_account(cl) < 0)
                return -1;
        } else if (!again)
            return -1;
    }
    if (*cl->stop)
        fail(cl, "%s: stopped", what);
    return -1;
}

static int load_dir(acme_client_t *cl)
{
    acme_resp_t r;
    char err[ACME_ERR_MAX];
    if (acme_http_do(&cl->http, cl->url, NULL, 0, &r, err, sizeof err) < 0) {
        cl->ca_fault = 1;
        fail(cl, "directory: %s", err);
        acme_resp_free(&r);
        return -1;
    }
    int rc = -1;
    if (r.status != 200)
        cl->ca_fault = 1, answer_failed(cl, "directory", &r);
    else if (!r.body || acme_parse_dir(r.body, r.len, &cl->dir) < 0)
        fail(cl, "directory %s: not an ACME directory (JSON with newNonce, newAccount, newOrder)",
             cl->url);
    else
        rc = 0;
    acme_resp_free(&r);
    cl->have_dir = rc == 0;
    return rc;
}

/* The PEM of the account key in path, or of a new one (*made set); NULL
   with why in cl->err. */
static char *own_key(acme_client_t *cl, const char *path, size_t *len, int *made)
{
    char *pem = acme_read_file(cl->state_fd, path, KEY_FILE_MAX, len);
    if (pem || errno != ENOENT) {
        if (!pem)
            fail(cl, "account: open %s: %s", path, strerror(errno));
        return pem;
    }
    EVP_PKEY *k = acme_key_new(CONFIG_ACME_EC256);
    pem = k ? acme_key_pem(k, len) : NULL;
    EVP_PKEY_free(k);
    if (!pem)
        fail(cl, "account: cannot make a key");
    *made = 1;
    return pem;
}

/* --cluster: the cluster's key in place of pem (this node's put in etcd
   if it has none: acme_cluster_account); *made set when it is not the one
   in the file.  The PEM, or NULL with why in cl->err (pem freed). */
static char *cluster_key(acme_client_t *cl, char *pem, size_t *len, int *made)
{
    char err[ACME_ERR_MAX];
    size_t elen;
    char *shared =
        acme_cluster_account(cl->cfg, cl->etcd, cl->cahash, pem, *len, &elen, err, sizeof err);
    if (!shared)
        fail(cl, "account: the cluster's key in etcd: %s", err);
    else if (elen != *len || memcmp(shared, pem, elen))
        *made = 1;
    OPENSSL_cleanse(pem, *len);
    free(pem);
    if (shared)
        *len = elen;
    return shared;
}

/* The account key from account/CAHASH/key.pem, made (0600) the first time;
   with --cluster the cluster's (etcd's), kept in key.pem too. */
static int load_key(acme_client_t *cl)
{
    char dir[64], path[96];
    size_t len = 0;
    int made = 0;
    snprintf(dir, sizeof dir, "account/%s", cl->cahash);
    snprintf(path, sizeof path, "%s/key.pem", dir);
    if (mkdirat(cl->state_fd, dir, 0700) < 0 && errno != EEXIST) {
        fail(cl, "account: mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    char *pem = own_key(cl, path, &len, &made);
    if (pem && cl->etcd)
        pem = cluster_key(cl, pem, &len, &made);
    if (!pem)
        return -1;
    cl->key = acme_key_from_pem(pem, len);
    int rc = 0;
    if (!cl->key || !acme_jws_alg(cl->key)) {
        fail(cl, "account: %s is no EC P-256 or RSA private key", cl->etcd ? "etcd's" : path);
        EVP_PKEY_free(cl->key);
        cl->key = NULL;
        rc = -1;
    } else if (made && acme_write_atomic(cl->state_fd, path, pem, len, 0600) < 0) {
        fail(cl, "account: write %s: %s", path, strerror(errno));
        rc = -1;
    }
    OPENSSL_cleanse(pem, len);
    free(pem);
    return rc;
}

/* newAccount's payload: terms agreed, the contact, EAB when configured. */
static char *account_payload(acme_client_t *cl)
{
    const config_acme_t *a = &cl->cfg->acme;
    const config_acme_ca_t *ca = a->ncas ? &a->cas[cl->ca] : NULL;
    json_object *o = json_object_new_object(), *c = json_object_new_array();
    char mail[512];
    json_object_object_add(o, "termsOfServiceAgreed", json_object_new_boolean(1));
    if (a->email && a->email[0]) {
        snprintf(mail, sizeof mail, "mailto:%s", a->email);
        json_object_array_add(c, json_object_new_string(mail));
    }
    json_object_object_add(o, "contact", c);
    if (ca && ca->eab_kid && ca->eab_hmac) {
        char *eab = acme_eab(cl->key, ca->eab_kid, ca->eab_hmac, cl->dir.new_account);
        json_object *e = eab ? json_tokener_parse(eab) : NULL;
        free(eab);
        if (!e) {
            json_object_put(o);
            return NULL;
        }
        json_object_object_add(o, "externalAccountBinding", e);
    }
    char *s = strdup(json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return s;
}

/* newAccount: made, or the existing one found (200): its URL is the kid. */
static int new_account(acme_client_t *cl)
{
    char path[96];
    char *payload = account_payload(cl);
    acme_resp_t r;
    if (!payload) {
        fail(cl, "newAccount: cannot build the request (the EAB key is no base64url?)");
        return -1;
    }
    cl->kid[0] = 0;
    int rc = post(cl, "newAccount", cl->dir.new_account, payload, &r);
    free(payload);
    if (rc < 0)
        return -1;
    if (!r.head.location[0]) {
        fail(cl, "newAccount: HTTP %ld without a Location", r.status);
        rc = -1;
    } else {
        char line[ACME_URL_MAX + ACME_THUMB_LEN + 2];
        strcpy(cl->kid, r.head.location);
        snprintf(path, sizeof path, "account/%s/url", cl->cahash);
        snprintf(line, sizeof line, "%s %s", cl->kid, cl->thumb);
        /* only a cache: without it the next start asks newAccount again */
        acme_write_atomic(cl->state_fd, path, line, strlen(line), 0600);
    }
    acme_resp_free(&r);
    return rc;
}

int acme_client_dir(acme_client_t *cl)
{
    cl->retry_after = -1;
    return cl->have_dir ? 0 : load_dir(cl);
}

/* The account's URL from account/CAHASH/url ("URL THUMBPRINT"), when it is
   this key's: a key replaced (by hand, or by another client) is registered
   again, not signed with another account's URL. */
static void cached_kid(acme_client_t *cl)
{
    char path[96];
    size_t len;
    snprintf(path, sizeof path, "account/%s/url", cl->cahash);
    char *url = acme_read_file(cl->state_fd, path, ACME_URL_MAX + ACME_THUMB_LEN + 1, &len);
    char *sp = url && !memchr(url, '\n', len) && strlen(url) == len ? strrchr(url, ' ') : NULL;
    if (sp && strcmp(sp + 1, cl->thumb) == 0 && sp - url > 0 && sp - url < ACME_URL_MAX) {
        *sp = 0;
        strcpy(cl->kid, url);
    }
    free(url);
}

int acme_client_ready(acme_client_t *cl)
{
    char jwk[ACME_JWK_MAX];
    if (acme_client_dir(cl) < 0)
        return -1;
    if (!cl->key && load_key(cl) < 0)
        return -1;
    if (!cl->thumb[0] && (acme_jwk(cl->key, jwk, sizeof jwk) < 0 ||
                          acme_thumbprint(jwk, cl->thumb, sizeof cl->thumb) < 0)) {
        fail(cl, "account: no JWK for the key");
        return -1;
    }
    if (!cl->kid[0])
        cached_kid(cl);
    return cl->kid[0] ? 0 : new_account(cl);
}

int acme_client_ari(acme_client_t *cl, const char *certid, time_t *start, time_t *end,
                    long *retry_after)
{
    char url[ACME_URL_MAX + ACME_CERTID_MAX + 2], err[ACME_ERR_MAX];
    acme_resp_t r;
    const char *base = cl->dir.renewal_info;
    size_t bl = strlen(base);
    *retry_after = -1;
    if (!cl->have_dir || !base[0] || !certid[0])
        return -1;
    snprintf(url, sizeof url, "%s%s%s", base, bl && base[bl - 1] == '/' ? "" : "/", certid);
    if (acme_http_do(&cl->http, url, NULL, 0, &r, err, sizeof err) < 0) {
        fail(cl, "renewalInfo: %s", err);
        acme_resp_free(&r);
        return -1;
    }
    int rc = -1;
    *retry_after = r.head.retry_after;
    if (r.status != 200)
        answer_failed(cl, "renewalInfo", &r);
    else if (!r.body || acme_parse_ari(r.body, r.len, start, end) < 0)
        fail(cl, "renewalInfo: no suggestedWindow in the answer");
    else
        rc = 0;
    acme_resp_free(&r);
    return rc;
}

/* newOrder's payload: one identifier, the profile when the CA lists it, and
   the certificate it replaces (RFC 9773 5). */
static char *order_payload(acme_client_t *cl, const char *name, const char *replaces)
{
    json_object *o = json_object_new_object(), *ids = json_object_new_array();
    json_object *id = json_object_new_object();
    const char *prof = cl->cfg->acme.profile;
    json_object_object_add(id, "type", json_object_new_string(acme_is_ip(name) ? "ip" : "dns"));
    json_object_object_add(id, "value", json_object_new_string(name));
    json_object_array_add(ids, id);
    json_object_object_add(o, "identifiers", ids);
    for (int i = 0; prof && i < cl->dir.nprofiles; i++)
        if (strcmp(cl->dir.profiles[i], prof) == 0)
            json_object_object_add(o, "profile", json_object_new_string(prof));
    if (replaces && replaces[0])
        json_object_object_add(o, "replaces", json_object_new_string(replaces));
    char *s = strdup(json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return s;
}

/* The milliseconds to wait before poll i: the CA's Retry-After (kept to
   1..30 s); without one a quick first look (0 when retry_after is 0: the
   state has moved already), then ACME_POLL_DEFAULT. */
static long poll_wait(long retry_after, int i)
{
    if (retry_after > 0)
        return (retry_after > 30 ? 30 : retry_after) * 1000L;
    if (i == 0)
        return retry_after == 0 ? 0 : ACME_POLL_FIRST_MS;
    return ACME_POLL_DEFAULT * 1000L;
}

/* POST-as-GET an authorization into a: 0, or -1. */
static int get_authz(acme_client_t *cl, const char *url, acme_authz_t *a, long *retry)
{
    acme_resp_t r;
    if (post(cl, "authorization", url, NULL, &r) < 0)
        return -1;
    int rc = r.body && acme_parse_authz(r.body, r.len, a) == 0 ? 0 : -1;
    if (rc < 0)
        fail(cl, "authorization %s: not an authorization object", url);
    *retry = r.head.retry_after;
    acme_resp_free(&r);
    return rc;
}

/* The challenge file's name (under the state directory) and contents. */
static char *chal_file(acme_client_t *cl, const char *name, const acme_authz_t *a, int http,
                       char *path, size_t cap, size_t *len)
{
    char keyauth[ACME_KEYAUTH_MAX];
    const char *token = http ? a->http_token : a->alpn_token;
    snprintf(keyauth, sizeof keyauth, "%s.%s", token, cl->thumb);
    if (http) {
        snprintf(path, cap, "%s/%s", ACME_CHAL_HTTP_DIR, token);
        *len = strlen(keyauth);
        return strdup(keyauth);
    }
    snprintf(path, cap, "%s/%s.pem", ACME_CHAL_ALPN_DIR, name);
    return acme_alpn_cert(name, keyauth, len);
}

/* Poll an authorization until it leaves "pending" (bounded): 0 when valid. */
static int poll_authz(acme_client_t *cl, const char *name, const char *url, long retry)
{
    acme_authz_t a;
    time_t until = time(NULL) + ACME_POLL_SECS;
    for (int i = 0; !*cl->stop && time(NULL) < until; i++) {
        nap(cl, poll_wait(retry, i));
        if (get_authz(cl, url, &a, &retry) < 0)
            return -1;
        if (strcmp(a.status, "valid") == 0)
            return 0;
        if (strcmp(a.status, "pending") != 0) {
            fail(cl, "%s: authorization %s: %s", name, a.status,
                 a.error[0] ? a.error : "(no error given)");
            return -1;
        }
    }
    fail(cl, "%s: authorization still pending after %d s", name, ACME_POLL_SECS);
    return -1;
}

/* The challenge to answer in a: CONFIG_ACME_HTTP01 or CONFIG_ACME_TLSALPN01,
   or -1.  --acme-challenge decides when given; else HTTP-01 when the CA
   offers it and the HTTP port listens, unless it is the one that failed last
   for this name (cl->avoid) and the CA offers TLS-ALPN-01 too. */
static int pick_challenge(const acme_client_t *cl, const acme_authz_t *a)
{
    int want = cl->cfg->acme.challenge;
    int http = a->http_url[0] && cl->http01 && want != CONFIG_ACME_TLSALPN01;
    int alpn = a->alpn_url[0] && want != CONFIG_ACME_HTTP01;
    if (http && (!alpn || cl->avoid != CONFIG_ACME_HTTP01))
        return CONFIG_ACME_HTTP01;
    return alpn ? CONFIG_ACME_TLSALPN01 : -1;
}

/* DNS-01 (acme_dns.h): the TXT record published, the challenge answered,
   the record removed whatever the outcome (a removal that fails after a
   valid authorization fails nothing: the record is only stale). */
static int authorize_dns(acme_client_t *cl, const char *name, const char *url,
                         const acme_authz_t *a)
{
    char keyauth[ACME_KEYAUTH_MAX], err[ACME_ERR_MAX];
    acme_dns_rec_t rec;
    acme_resp_t r;
    if (!a->dns_url[0]) {
        fail(cl, "%s: the CA offers no dns-01 challenge", name);
        return -1;
    }
    snprintf(keyauth, sizeof keyauth, "%s.%s", a->dns_token, cl->thumb);
    int rc = acme_dns_publish(&cl->cfg->acme, name, keyauth, cl->stop, &rec, cl->err,
                              sizeof cl->err);
    if (rc == 0 && (rc = post(cl, "challenge", a->dns_url, "{}", &r)) == 0) {
        acme_resp_free(&r);
        rc = poll_authz(cl, name, url, r.head.retry_after);
    }
    if (acme_dns_remove(&cl->cfg->acme, &rec, err, sizeof err) < 0 && rc < 0) {
        size_t n = strlen(cl->err);
        snprintf(cl->err + n, sizeof cl->err - n, "; and %s", err);
    }
    return rc;
}

/* Answer one authorization (a valid one the CA reuses is left alone). */
static int authorize(acme_client_t *cl, const char *name, const char *url)
{
    acme_authz_t a;
    long retry;
    if (get_authz(cl, url, &a, &retry) < 0)
        return -1;
    if (strcmp(a.status, "valid") == 0)
        return 0;
    if (strcmp(a.status, "pending") != 0) {
        fail(cl, "%s: authorization is %s", name, a.status);
        return -1;
    }
    if (acme_dns_wanted(&cl->cfg->acme, name))
        return authorize_dns(cl, name, url, &a);
    int type = pick_challenge(cl, &a);
    if (type < 0) {
        fail(cl, "%s: no challenge offered that may be answered (%s)", name,
             cl->http01 ? "http-01, tls-alpn-01" : "tls-alpn-01: the HTTP port is closed");
        return -1;
    }
    int http = type == CONFIG_ACME_HTTP01;
    char path[ACME_URL_MAX];
    size_t len;
    char *data = chal_file(cl, name, &a, http, path, sizeof path, &len);
    if (!data || acme_write_atomic(cl->state_fd, path, data, len, 0644) < 0) {
        fail(cl, "%s: write %s: %s", name, path, data ? strerror(errno) : "no memory");
        free(data);
        return -1;
    }
    free(data);
    acme_cluster_spread(cl->cluster, cl->stop); /* --cluster: every node answers it */
    acme_resp_t r;
    int rc = post(cl, "challenge", http ? a.http_url : a.alpn_url, "{}", &r);
    if (rc == 0) {
        acme_resp_free(&r);
        rc = poll_authz(cl, name, url, r.head.retry_after);
        if (rc < 0)
            cl->chal_failed = type; /* the CA tried it: the next attempt takes another */
    }
    unlinkat(cl->state_fd, path, 0);
    return rc;
}

/* An order the CA made invalid: its error (RFC 8555 7.1.3) in cl->err; -1. */
static int order_invalid(acme_client_t *cl, const char *name, const acme_order_t *ord)
{
    fail(cl, "%s: order invalid: %s", name, ord->error[0] ? ord->error : "(no error given)");
    return -1;
}

/* POST-as-GET the order until its status is neither pending nor processing
   (bounded), into ord: 0, or -1. */
static int poll_order(acme_client_t *cl, const char *name, const char *url, acme_order_t *ord,
                      long retry)
{
    time_t until = time(NULL) + ACME_POLL_SECS;
    for (int i = 0; !*cl->stop && time(NULL) < until; i++) {
        if (strcmp(ord->status, "pending") && strcmp(ord->status, "processing"))
            return strcmp(ord->status, "invalid") ? 0 : order_invalid(cl, name, ord);
        nap(cl, poll_wait(retry, i));
        acme_resp_t r;
        if (post(cl, "order", url, NULL, &r) < 0)
            return -1;
        retry = r.head.retry_after;
        int bad = !r.body || acme_parse_order(r.body, r.len, ord) < 0;
        acme_resp_free(&r);
        if (bad) {
            fail(cl, "%s: order %s: not an order object", name, url);
            return -1;
        }
    }
    fail(cl, "%s: order still %s after %d s", name, ord->status, ACME_POLL_SECS);
    return -1;
}

/* newOrder for name: the order in ord, its URL in url. */
static int new_order(acme_client_t *cl, const char *name, const char *replaces,
                     acme_order_t *ord, char *url)
{
    char *payload = order_payload(cl, name, replaces);
    acme_resp_t r;
    if (!payload) {
        fail(cl, "%s: newOrder: no memory", name);
        return -1;
    }
    cl->orders++;
    int rc = post(cl, "newOrder", cl->dir.new_order, payload, &r);
    free(payload);
    if (rc < 0)
        return -1;
    if (!r.head.location[0] || !r.body || acme_parse_order(r.body, r.len, ord) < 0) {
        fail(cl, "%s: newOrder: HTTP %ld without an order or its Location", name, r.status);
        rc = -1;
    } else
        strcpy(url, r.head.location);
    acme_resp_free(&r);
    return rc;
}

/* POST-as-GET a chain: the body (a PEM chain) moved into *chain, with the
   alternates' URLs in head. */
static int get_chain(acme_client_t *cl, const char *url, char **chain, size_t *len,
                     acme_head_t *head)
{
    acme_resp_t r;
    if (post(cl, "certificate", url, NULL, &r) < 0)
        return -1;
    if (!r.body || !strstr(r.body, "-----BEGIN CERTIFICATE-----")) {
        fail(cl, "certificate %s: no PEM chain in the answer", url);
        acme_resp_free(&r);
        return -1;
    }
    *chain = r.body;
    *len = r.len;
    *head = r.head;
    return 0;
}

/* Download the chain, or an alternate that names --acme-issuer. */
static int download(acme_client_t *cl, const char *url, acme_issued_t *out)
{
    acme_head_t head;
    const char *issuer = cl->cfg->acme.issuer;
    if (get_chain(cl, url, &out->chain, &out->chain_len, &head) < 0)
        return -1;
    if (!issuer || acme_chain_has_issuer(out->chain, out->chain_len, issuer))
        return 0;
    for (int i = 0; i < head.nalt; i++) {
        char *alt;
        size_t len;
        acme_head_t h2;
        if (get_chain(cl, head.alt[i], &alt, &len, &h2) < 0)
            continue;
        if (acme_chain_has_issuer(alt, len, issuer)) {
            free(out->chain);
            out->chain = alt;
            out->chain_len = len;
            return 0;
        }
        free(alt);
    }
    return 0; /* none names it: the default chain serves */
}

/* Finalize with a CSR over a new key; then wait for the certificate. */
static int finalize(acme_client_t *cl, const char *name, const char *url, acme_order_t *ord,
                    acme_issued_t *out)
{
    EVP_PKEY *key = acme_key_new(cl->cfg->acme.key_type);
    const char *names[1] = {name};
    char *csr = key ? acme_csr(key, names, 1) : NULL;
    char *payload = NULL;
    if (csr && (payload = malloc(strlen(csr) + 16)))
        sprintf(payload, "{\"csr\":\"%s\"}", csr);
    free(csr);
    out->key = key && payload ? acme_key_pem(key, &out->key_len) : NULL;
    if (!out->key) {
        fail(cl, "%s: cannot make the key and CSR", name);
        free(payload);
        EVP_PKEY_free(key);
        return -1;
    }
    acme_resp_t r;
    int rc = post(cl, "finalize", ord->finalize, payload, &r);
    free(payload);
    if (rc == 0) {
        rc = r.body && acme_parse_order(r.body, r.len, ord) == 0 ? 0 : -1;
        if (rc < 0)
            fail(cl, "%s: finalize: not an order object", name);
        long retry = r.head.retry_after;
        acme_resp_free(&r);
        if (rc == 0)
            rc = poll_order(cl, name, url, ord, retry);
    }
    if (rc == 0 && (strcmp(ord->status, "valid") || !ord->certificate[0])) {
        fail(cl, "%s: order %s without a certificate", name, ord->status);
        rc = -1;
    }
    if (rc == 0 && (rc = download(cl, ord->certificate, out)) == 0 &&
        !acme_cert_matches_key(out->chain, out->chain_len, key)) {
        fail(cl, "%s: the certificate is not for the key sent", name);
        rc = -1;
    }
    EVP_PKEY_free(key);
    return rc;
}

int acme_client_issue(acme_client_t *cl, const char *name, const char *replaces,
                      acme_issued_t *out)
{
    acme_order_t ord;
    char url[ACME_URL_MAX];
    memset(out, 0, sizeof *out);
    cl->retry_after = -1;
    cl->chal_failed = 0;
    /* DNS-01: a key or a server that cannot update the zone orders nothing */
    if (acme_dns_wanted(&cl->cfg->acme, name) &&
        acme_dns_check(&cl->cfg->acme, name, cl->err, sizeof cl->err) < 0)
        return -1;
    int rc = new_order(cl, name, replaces, &ord, url);
    if (rc < 0 && replaces && replaces[0] && cl->ptype[0] &&
        strcmp(cl->ptype, ACME_ERROR "rateLimited") != 0) {
        /* the CA refused the order that names the certificate it replaces:
           a plain order.  Whatever the problem's type: CAs say it in many
           ways (alreadyReplaced, conflict; malformed or unauthorized at
           Boulder; serverInternal at Pebble 2.10, which cannot find the
           order of a serial with a leading zero byte), and the same
           `replaces` sent again after the back-off would fail again, so the
           name would never renew.  A rate limit is the CA's to end. */
        rc = new_order(cl, name, NULL, &ord, url);
    }
    for (int i = 0; rc == 0 && i < ord.nauthz; i++)
        rc = authorize(cl, name, ord.authz[i]);
    if (rc == 0) /* the authorizations are valid: the order is ready by now */
        rc = poll_order(cl, name, url, &ord, 0);
    if (rc == 0 && strcmp(ord.status, "ready")) {
        fail(cl, "%s: order is %s, not ready, after its authorizations%s%s", name, ord.status,
             ord.error[0] ? ": " : "", ord.error);
        rc = -1;
    }
    if (rc == 0)
        rc = finalize(cl, name, url, &ord, out);
    if (rc < 0)
        acme_issued_free(out);
    return rc;
}
