/* acme_parse — see acme_parse.h. */
#include "acme_parse.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <json-c/json.h>

#define JSON_DEPTH 16 /* ACME's objects nest three deep */

/* The JSON object in json[0..len), or NULL. */
static json_object *parse_object(const char *json, size_t len)
{
    if (len > (1u << 24))
        return NULL;
    json_tokener *tok = json_tokener_new_ex(JSON_DEPTH);
    if (!tok)
        return NULL;
    json_object *o = json_tokener_parse_ex(tok, json, (int)len);
    if (json_tokener_get_error(tok) != json_tokener_success ||
        !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        o = NULL;
    }
    json_tokener_free(tok);
    return o;
}

/* A string member into out: 0, or -1 when absent, not a string or too long
   (or holding a NUL). */
static int get_str(json_object *o, const char *key, char *out, size_t cap)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return -1;
    size_t n = (size_t)json_object_get_string_len(v);
    const char *s = json_object_get_string(v);
    if (n >= cap || strlen(s) != n)
        return -1;
    memcpy(out, s, n + 1);
    return 0;
}

static void dir_profiles(json_object *o, acme_dir_t *d)
{
    json_object *meta, *prof;
    if (!json_object_object_get_ex(o, "meta", &meta) ||
        !json_object_object_get_ex(meta, "profiles", &prof) ||
        !json_object_is_type(prof, json_type_object))
        return;
    json_object_object_foreach(prof, key, val)
    {
        (void)val;
        if (d->nprofiles < ACME_PROFILES_MAX && strlen(key) < ACME_PROFILE_LEN)
            strcpy(d->profiles[d->nprofiles++], key);
    }
}

int acme_parse_dir(const char *json, size_t len, acme_dir_t *d)
{
    json_object *o = parse_object(json, len);
    memset(d, 0, sizeof *d);
    int r = o && get_str(o, "newNonce", d->new_nonce, sizeof d->new_nonce) == 0 &&
                    get_str(o, "newAccount", d->new_account, sizeof d->new_account) == 0 &&
                    get_str(o, "newOrder", d->new_order, sizeof d->new_order) == 0
                ? 0
                : -1;
    if (r == 0) {
        if (get_str(o, "renewalInfo", d->renewal_info, sizeof d->renewal_info) < 0)
            d->renewal_info[0] = 0;
        dir_profiles(o, d);
    }
    json_object_put(o);
    return r;
}

/* An object's error (a challenge's, an order's), "type: detail", into out. */
static void obj_error(json_object *c, char *out, size_t cap)
{
    json_object *e;
    acme_problem_t p = {"", ""};
    if (!json_object_object_get_ex(c, "error", &e) || !json_object_is_type(e, json_type_object))
        return;
    get_str(e, "type", p.type, sizeof p.type);
    get_str(e, "detail", p.detail, sizeof p.detail);
    snprintf(out, cap, "%s: %s", p.type, p.detail);
}

int acme_parse_order(const char *json, size_t len, acme_order_t *ord)
{
    json_object *o = parse_object(json, len), *az;
    memset(ord, 0, sizeof *ord);
    int r = o && get_str(o, "status", ord->status, sizeof ord->status) == 0 &&
                    get_str(o, "finalize", ord->finalize, sizeof ord->finalize) == 0 &&
                    json_object_object_get_ex(o, "authorizations", &az) &&
                    json_object_is_type(az, json_type_array)
                ? 0
                : -1;
    for (size_t i = 0; r == 0 && i < json_object_array_length(az); i++) {
        json_object *u = json_object_array_get_idx(az, i);
        const char *s = json_object_get_string(u);
        if (ord->nauthz >= ACME_AUTHZ_MAX || !json_object_is_type(u, json_type_string) ||
            strlen(s) >= ACME_URL_MAX)
            r = -1;
        else
            strcpy(ord->authz[ord->nauthz++], s);
    }
    if (r == 0 && get_str(o, "certificate", ord->certificate, sizeof ord->certificate) < 0)
        ord->certificate[0] = 0;
    if (r == 0)
        obj_error(o, ord->error, sizeof ord->error);
    json_object_put(o);
    return r;
}

static void authz_challenge(json_object *c, acme_authz_t *a)
{
    char type[32], url[ACME_URL_MAX], token[ACME_TOKEN_MAX + 1];
    if (!json_object_is_type(c, json_type_object) || get_str(c, "type", type, sizeof type) < 0 ||
        get_str(c, "url", url, sizeof url) < 0)
        return;
    if (!a->error[0])
        obj_error(c, a->error, sizeof a->error);
    if (get_str(c, "token", token, sizeof token) < 0 || !acme_token_ok(token))
        return;
    if (strcmp(type, "http-01") == 0) {
        strcpy(a->http_url, url);
        strcpy(a->http_token, token);
    } else if (strcmp(type, "tls-alpn-01") == 0) {
        strcpy(a->alpn_url, url);
        strcpy(a->alpn_token, token);
    } else if (strcmp(type, "dns-01") == 0) {
        strcpy(a->dns_url, url);
        strcpy(a->dns_token, token);
    }
}

int acme_parse_authz(const char *json, size_t len, acme_authz_t *a)
{
    json_object *o = parse_object(json, len), *id, *ch;
    memset(a, 0, sizeof *a);
    int r = o && get_str(o, "status", a->status, sizeof a->status) == 0 &&
                    json_object_object_get_ex(o, "identifier", &id) &&
                    json_object_is_type(id, json_type_object) &&
                    get_str(id, "value", a->ident, sizeof a->ident) == 0 &&
                    json_object_object_get_ex(o, "challenges", &ch) &&
                    json_object_is_type(ch, json_type_array)
                ? 0
                : -1;
    for (size_t i = 0; r == 0 && i < json_object_array_length(ch) && i < 16; i++)
        authz_challenge(json_object_array_get_idx(ch, i), a);
    json_object_put(o);
    return r;
}

int acme_parse_problem(const char *json, size_t len, acme_problem_t *p)
{
    json_object *o = parse_object(json, len);
    memset(p, 0, sizeof *p);
    int r = o && get_str(o, "type", p->type, sizeof p->type) == 0 ? 0 : -1;
    if (r == 0 && get_str(o, "detail", p->detail, sizeof p->detail) < 0) {
        /* a detail too long for the line is cut, not dropped */
        json_object *d;
        if (json_object_object_get_ex(o, "detail", &d) && json_object_is_type(d, json_type_string))
            snprintf(p->detail, sizeof p->detail, "%s", json_object_get_string(d));
    }
    json_object_put(o);
    return r;
}

/* digits of s[0..n) as a number: -1 when any is no digit */
static int num(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + s[i] - '0';
    }
    return v;
}

int acme_parse_time(const char *s, time_t *t)
{
    if (strlen(s) < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
        s[13] != ':' || s[16] != ':')
        return -1;
    struct tm tm = {.tm_year = num(s, 4) - 1900, .tm_mon = num(s + 5, 2) - 1,
                    .tm_mday = num(s + 8, 2), .tm_hour = num(s + 11, 2),
                    .tm_min = num(s + 14, 2), .tm_sec = num(s + 17, 2)};
    if (tm.tm_year < 70 || tm.tm_year > 1100 || tm.tm_mon < 0 || tm.tm_mon > 11 ||
        tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour < 0 || tm.tm_hour > 23 ||
        tm.tm_min < 0 || tm.tm_min > 59 || tm.tm_sec < 0 || tm.tm_sec > 60)
        return -1;
    const char *p = s + 19;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            ;
    long off = 0;
    if ((*p == 'Z' || *p == 'z') && !p[1])
        off = 0;
    else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':' && num(p + 1, 2) >= 0 &&
             num(p + 4, 2) >= 0)
        off = (*p == '-' ? -1 : 1) * (num(p + 1, 2) * 3600L + num(p + 4, 2) * 60L);
    else
        return -1;
    *t = timegm(&tm) - off;
    return 0;
}

int acme_parse_ari(const char *json, size_t len, time_t *start, time_t *end)
{
    json_object *o = parse_object(json, len), *w;
    char a[64], b[64];
    int r = o && json_object_object_get_ex(o, "suggestedWindow", &w) &&
                    json_object_is_type(w, json_type_object) &&
                    get_str(w, "start", a, sizeof a) == 0 && get_str(w, "end", b, sizeof b) == 0 &&
                    acme_parse_time(a, start) == 0 && acme_parse_time(b, end) == 0 &&
                    *start <= *end
                ? 0
                : -1;
    json_object_put(o);
    return r;
}

/* Copy v[0..n) trimmed of blanks into out, or nothing when it does not fit. */
static void header_value(const char *v, size_t n, char *out, size_t cap)
{
    while (n && (*v == ' ' || *v == '\t'))
        v++, n--;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r' || v[n - 1] == '\n'))
        n--;
    if (n < cap && !memchr(v, 0, n)) {
        memcpy(out, v, n);
        out[n] = 0;
    }
}

/* Link: <url>;rel="alternate", possibly several comma-separated. */
static void header_links(acme_head_t *h, const char *v, size_t n)
{
    const char *end = v + n;
    while (v < end && h->nalt < ACME_ALTS_MAX) {
        const char *lt = memchr(v, '<', (size_t)(end - v));
        const char *gt = lt ? memchr(lt, '>', (size_t)(end - lt)) : NULL;
        if (!gt)
            return;
        const char *next = memchr(gt, '<', (size_t)(end - gt));
        const char *pend = next ? next : end;
        char params[256] = "";
        header_value(gt + 1, (size_t)(pend - gt - 1), params, sizeof params);
        if ((strstr(params, "rel=\"alternate\"") || strstr(params, "rel=alternate")) &&
            (size_t)(gt - lt - 1) < ACME_URL_MAX) {
            memcpy(h->alt[h->nalt], lt + 1, (size_t)(gt - lt - 1));
            h->alt[h->nalt++][gt - lt - 1] = 0;
        }
        v = pend;
    }
}

void acme_parse_header(acme_head_t *h, const char *line, size_t len, time_t now)
{
    const char *colon = memchr(line, ':', len);
    if (!colon)
        return;
    size_t kl = (size_t)(colon - line), vl = len - kl - 1;
    const char *v = colon + 1;
    if (kl == 12 && strncasecmp(line, "Replay-Nonce", 12) == 0)
        header_value(v, vl, h->nonce, sizeof h->nonce);
    else if (kl == 8 && strncasecmp(line, "Location", 8) == 0)
        header_value(v, vl, h->location, sizeof h->location);
    else if (kl == 4 && strncasecmp(line, "Link", 4) == 0)
        header_links(h, v, vl);
    else if (kl == 11 && strncasecmp(line, "Retry-After", 11) == 0) {
        char s[64] = "";
        header_value(v, vl, s, sizeof s);
        char *e;
        long secs = strtol(s, &e, 10); /* LONG_MAX when past it: saturated below */
        if (s[0] && !*e && secs >= 0)
            h->retry_after = secs < ACME_RETRY_AFTER_CAP ? secs : ACME_RETRY_AFTER_CAP;
        else if (s[0]) {
            time_t t = curl_getdate(s, NULL);
            if (t != -1)
                h->retry_after = t <= now ? 0
                                 : t - now < ACME_RETRY_AFTER_CAP ? (long)(t - now)
                                                                  : ACME_RETRY_AFTER_CAP;
        }
    }
}

int acme_token_ok(const char *s)
{
    size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
    return n > 0 && n <= ACME_TOKEN_MAX && !s[n];
}
