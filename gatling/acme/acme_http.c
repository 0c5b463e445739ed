/* acme_http — see acme_http.h. */
#include "acme_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

int acme_http_init(acme_http_t *h, const char *ca_root, const volatile sig_atomic_t *stop)
{
    h->ca_root = ca_root;
    h->stop = stop;
    h->curl = curl_easy_init();
    return h->curl ? 0 : -1;
}

void acme_http_free(acme_http_t *h)
{
    if (h->curl)
        curl_easy_cleanup(h->curl);
    h->curl = NULL;
}

void acme_resp_free(acme_resp_t *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    acme_resp_t *r = arg;
    size_t add = size * n;
    if (add > ACME_BODY_MAX - r->len) {
        r->too_long = 1;
        return 0; /* curl stops: CURLE_WRITE_ERROR */
    }
    char *b = realloc(r->body, r->len + add + 1);
    if (!b)
        return 0;
    memcpy(b + r->len, p, add);
    r->len += add;
    b[r->len] = 0;
    r->body = b;
    return add;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    acme_resp_t *r = arg;
    size_t len = size * n;
    /* a new head (after a 100 Continue) starts afresh */
    if (len > 5 && memcmp(p, "HTTP/", 5) == 0) {
        memset(&r->head, 0, sizeof r->head);
        r->head.retry_after = -1;
    }
    acme_parse_header(&r->head, p, len, time(NULL));
    return len;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    const acme_http_t *h = arg;
    (void)dt, (void)dn, (void)ut, (void)un;
    return h->stop && *h->stop;
}

/* The options every transfer gets: the limits a CA is held to. */
static void set_limits(acme_http_t *h, CURL *c, acme_resp_t *r)
{
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, h->plain_ok ? "http,https" : "https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)ACME_CONNECT_SECS);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)ACME_TRANSFER_SECS);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE, (long)ACME_BODY_MAX);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gatling-acme/1");
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, NULL);
    if (h->ca_root)
        curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_root);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, h);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
}

int acme_http_do(acme_http_t *h, const char *url, const char *post, int head, acme_resp_t *r,
                 char *err, size_t errlen)
{
    CURL *c = h->curl;
    struct curl_slist *hdrs = NULL;
    memset(r, 0, sizeof *r);
    r->head.retry_after = -1;
    if (!h->plain_ok && strncasecmp(url, "https://", 8) != 0) {
        snprintf(err, errlen, "%.200s: not an https:// URL (RFC 8555 6.1): refused", url);
        return -1;
    }
    curl_easy_reset(c);
    set_limits(h, c, r);
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (head)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    if (post) {
        hdrs = curl_slist_append(NULL, "Content-Type: application/jose+json");
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(post));
    }
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "%s: %s", url,
                 r->too_long || rc == CURLE_FILESIZE_EXCEEDED ? "the answer is longer than 1 MiB"
                                                              : curl_easy_strerror(rc));
        r->status = 0;
        return -1;
    }
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(r->ctype, sizeof r->ctype, "%s", ct ? ct : "");
    return 0;
}
