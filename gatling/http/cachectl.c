/* The HTTP caching rules of a shared cache (RFC 9111, RFC 5861): see cachectl.h. */
#include "cachectl.h"

/* One directive of a Cache-Control or Pragma list, pointers into the value. */
typedef struct cc_dir {
    const char *name, *val; /* val: NULL when there is no "=" */
    size_t nlen, vlen;
} cc_dir_t;

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* The length of p[0..n) without its trailing whitespace. */
static size_t trim_end(const char *p, size_t n)
{
    while (n && is_ows(p[n - 1]))
        n--;
    return n;
}

/* p[0..n) is the lower-case word w in any case (ASCII only, so no locale). */
static int word_is(const char *p, size_t n, const char *w)
{
    size_t i = 0;
    for (; i < n && w[i]; i++) {
        char c = p[i] >= 'A' && p[i] <= 'Z' ? (char)(p[i] - 'A' + 'a') : p[i];
        if (c != w[i])
            return 0;
    }
    return i == n && !w[i];
}

/* delta-seconds = 1*DIGIT, exactly p[0..n), capped at CC_DELTA_MAX; else CC_NONE. */
static int64_t digits(const char *p, size_t n)
{
    int64_t v = 0;
    if (n == 0)
        return CC_NONE;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return CC_NONE;
        v = v * 10 + (p[i] - '0');
        if (v > CC_DELTA_MAX) /* RFC 9111 1.2.2; v * 10 stays far from overflow */
            v = CC_DELTA_MAX;
    }
    return v;
}

/*
 * The value after "=" at v[i..n): a quoted-string when one opens at i,
 * closes, and only whitespace follows it before a comma (its content, escapes
 * as sent, is the value: commas inside do not split); else the bytes up to the
 * next comma, so a stray quote never hides the directives after it.  Returns
 * where the value ends.
 */
static size_t dir_value(const char *v, size_t n, size_t i, cc_dir_t *d)
{
    if (i < n && v[i] == '"') {
        size_t e = i + 1;
        while (e < n && v[e] != '"')
            e += v[e] == '\\' ? 2 : 1;
        size_t next = e + 1;
        while (next < n && is_ows(v[next]))
            next++;
        if (e < n && (next >= n || v[next] == ',')) {
            d->val = v + i + 1;
            d->vlen = e - i - 1;
            return next;
        }
        /* unclosed, or bytes after it: not a quoted-string, so commas split */
    }
    size_t e = i;
    while (e < n && v[e] != ',')
        e++;
    d->val = v + i;
    d->vlen = trim_end(v + i, e - i);
    return e;
}

/*
 * The next directive of the list v[0..n) from *pos (token [ "=" value ],
 * whitespace allowed around "=" and commas, empty members skipped): 1 with
 * *d set and *pos past it, or 0 at the end.
 */
static int next_dir(const char *v, size_t n, size_t *pos, cc_dir_t *d)
{
    size_t i = *pos;
    while (i < n && (is_ows(v[i]) || v[i] == ','))
        i++;
    if (i >= n) {
        *pos = n;
        return 0;
    }
    size_t s = i;
    while (i < n && v[i] != '=' && v[i] != ',')
        i++;
    d->name = v + s;
    d->nlen = trim_end(v + s, i - s);
    d->val = NULL;
    d->vlen = 0;
    if (i < n && v[i] == '=') {
        i++;
        while (i < n && is_ows(v[i]))
            i++;
        i = dir_value(v, n, i, d);
    }
    while (i < n && v[i] != ',')
        i++;
    *pos = i;
    return 1;
}

static int dir_is(const cc_dir_t *d, const char *w)
{
    return word_is(d->name, d->nlen, w);
}

/* The directive's delta-seconds; bad, empty or missing: 0, the reading that allows least. */
static int64_t dir_delta(const cc_dir_t *d)
{
    int64_t v = d->val ? digits(d->val, d->vlen) : CC_NONE;
    return v == CC_NONE ? 0 : v;
}

/* A directive given again: the most restrictive value is the smaller (RFC 9111 4.2.1). */
static void keep_min(int64_t *f, int64_t v)
{
    if (*f == CC_NONE || v < *f)
        *f = v;
}

void cc_resp_init(cc_resp_t *cc)
{
    *cc = (cc_resp_t){.max_age = CC_NONE,
                      .s_maxage = CC_NONE,
                      .stale_while_revalidate = CC_NONE,
                      .stale_if_error = CC_NONE};
}

void cc_req_init(cc_req_t *cc)
{
    *cc = (cc_req_t){.max_age = CC_NONE, .min_fresh = CC_NONE, .max_stale = CC_NONE};
}

static void resp_dir(cc_resp_t *cc, const cc_dir_t *d)
{
    if (dir_is(d, "max-age")) {
        keep_min(&cc->max_age, dir_delta(d));
    } else if (dir_is(d, "s-maxage")) {
        keep_min(&cc->s_maxage, dir_delta(d));
        cc->must_revalidate = 1; /* s-maxage implies proxy-revalidate (RFC 9111 5.2.2.10) */
    } else if (dir_is(d, "stale-while-revalidate")) {
        keep_min(&cc->stale_while_revalidate, dir_delta(d));
    } else if (dir_is(d, "stale-if-error")) {
        keep_min(&cc->stale_if_error, dir_delta(d));
    } else if (dir_is(d, "no-store")) {
        cc->no_store = 1;
    } else if (dir_is(d, "no-cache")) {
        cc->no_cache = 1; /* with field names too: a shared cache revalidates the whole */
    } else if (dir_is(d, "private")) {
        cc->private_ = 1;
    } else if (dir_is(d, "public")) {
        cc->public_ = 1;
    } else if (dir_is(d, "must-revalidate") || dir_is(d, "proxy-revalidate")) {
        cc->must_revalidate = 1;
    } else if (dir_is(d, "must-understand")) {
        cc->must_understand = 1;
    } else if (dir_is(d, "immutable")) {
        cc->immutable = 1;
    }
}

void cc_parse_resp(cc_resp_t *cc, const char *v, size_t n)
{
    cc_dir_t d;
    for (size_t pos = 0; next_dir(v, n, &pos, &d);)
        resp_dir(cc, &d);
}

static void req_dir(cc_req_t *cc, const cc_dir_t *d)
{
    if (dir_is(d, "max-age")) {
        keep_min(&cc->max_age, dir_delta(d));
    } else if (dir_is(d, "max-stale")) {
        keep_min(&cc->max_stale, d->val ? dir_delta(d) : CC_DELTA_MAX);
    } else if (dir_is(d, "min-fresh")) {
        /* asks for more freshness than the response has: the larger restricts more */
        int64_t v = d->val ? digits(d->val, d->vlen) : CC_NONE;
        if (v != CC_NONE && v > cc->min_fresh)
            cc->min_fresh = v;
    } else if (dir_is(d, "no-store")) {
        cc->no_store = 1;
    } else if (dir_is(d, "no-cache")) {
        cc->no_cache = 1;
    } else if (dir_is(d, "only-if-cached")) {
        cc->only_if_cached = 1;
    }
}

void cc_parse_req(cc_req_t *cc, const char *v, size_t n)
{
    cc_dir_t d;
    for (size_t pos = 0; next_dir(v, n, &pos, &d);)
        req_dir(cc, &d);
}

void cc_parse_pragma(cc_req_t *cc, const char *p, size_t n)
{
    cc_dir_t d;
    for (size_t pos = 0; next_dir(p, n, &pos, &d);)
        if (dir_is(&d, "no-cache"))
            cc->no_cache = 1;
}

int cc_status_heuristic(int status)
{
    static const short heuristic[] = {200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501};
    for (size_t i = 0; i < sizeof heuristic / sizeof *heuristic; i++)
        if (heuristic[i] == status)
            return 1;
    return 0;
}

int cc_storable(int status, const cc_resp_t *cc, int has_expires, int has_last_modified,
                int authorization, int64_t ttl)
{
    /* final responses only; 206 and 304 complete or refresh a stored response */
    if (status < 200 || status > 599 || status == 206 || status == 304)
        return 0;
    if (cc->no_store || cc->private_)
        return 0;
    /* RFC 9111 5.2.2.3: only a cache that implements the status code's rules */
    if (cc->must_understand && !cc_status_heuristic(status))
        return 0;
    /* RFC 9111 3.5 (must_revalidate is also set by s-maxage) */
    if (authorization && !cc->must_revalidate && !cc->public_ && cc->s_maxage == CC_NONE)
        return 0;
    if (cc->max_age != CC_NONE || cc->s_maxage != CC_NONE || has_expires || cc->public_)
        return 1;
    return cc_status_heuristic(status) && (ttl > 0 || has_last_modified);
}

/* How many seconds a is after b: 0 if it is not, at most CC_DELTA_MAX; never overflows. */
static int64_t after(int64_t a, int64_t b)
{
    if (a <= b)
        return 0;
    uint64_t d = (uint64_t)a - (uint64_t)b;
    return d > (uint64_t)CC_DELTA_MAX ? CC_DELTA_MAX : (int64_t)d;
}

static int64_t cap(int64_t v)
{
    return v < 0 ? 0 : v > CC_DELTA_MAX ? CC_DELTA_MAX : v;
}

int64_t cc_lifetime(const cc_resp_t *cc, int status, int64_t date, int64_t expires,
                    int64_t last_modified, int64_t response_time, int64_t ttl)
{
    if (cc->no_cache)
        return 0;
    if (cc->s_maxage >= 0)
        return cap(cc->s_maxage);
    if (cc->max_age >= 0)
        return cap(cc->max_age);
    if (date == CC_NONE) /* RFC 9110 6.6.1: the time it was received stands for Date */
        date = response_time;
    if (expires != CC_NONE)
        return date == CC_NONE ? 0 : after(expires, date);
    if (!cc_status_heuristic(status))
        return 0;
    if (ttl > 0)
        return cap(ttl);
    if (last_modified == CC_NONE || date == CC_NONE)
        return 0;
    int64_t h = after(date, last_modified) / 10; /* RFC 9111 4.2.2: 10% */
    return h > 86400 ? 86400 : h;
}

int64_t cc_initial_age(int64_t age_value, int64_t date_value, int64_t request_time,
                       int64_t response_time)
{
    int64_t apparent = 0, delay = 0;
    if (response_time != CC_NONE && date_value != CC_NONE)
        apparent = after(response_time, date_value);
    if (response_time != CC_NONE && request_time != CC_NONE)
        delay = after(response_time, request_time);
    /* both terms are at most 2^31: the sum cannot overflow */
    int64_t corrected = (age_value > 0 ? cap(age_value) : 0) + delay;
    return cap(apparent > corrected ? apparent : corrected);
}

int64_t cc_delta(const char *p, size_t n)
{
    while (n && is_ows(*p))
        p++, n--;
    return digits(p, trim_end(p, n));
}

size_t cc_vary_next(const char *v, size_t n, size_t *pos, const char **name)
{
    size_t i = *pos < n ? *pos : n;
    while (i < n && (is_ows(v[i]) || v[i] == ','))
        i++;
    size_t s = i;
    while (i < n && v[i] != ',')
        i++;
    *pos = i;
    if (i == s)
        return 0;
    *name = v + s;
    return trim_end(v + s, i - s);
}

int cc_vary_star(const char *v, size_t n)
{
    const char *name;
    size_t len;
    for (size_t pos = 0; (len = cc_vary_next(v, n, &pos, &name));)
        if (len == 1 && *name == '*')
            return 1;
    return 0;
}

/* A quoted-string opening at p[i] ('"'), copied as it is: returns where it ends. */
static size_t norm_quoted(const char *p, size_t n, size_t i, char *out, size_t cap, size_t *k)
{
    size_t e = i + 1;
    while (e < n && p[e] != '"')
        e += p[e] == '\\' ? 2 : 1;
    int closed = e < n;
    e = closed ? e + 1 : n;
    size_t len = e - i;
    if (!closed) /* not a quoted-string after all: at least no trailing whitespace */
        len = trim_end(p + i, len);
    if (len > cap - *k)
        return (size_t)-1;
    for (size_t j = 0; j < len; j++)
        out[(*k)++] = p[i + j];
    return e;
}

size_t cc_vary_norm(const char *p, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    int space = 0, lead = 1; /* lead: at the start or after a comma */
    for (size_t i = 0; i < n;) {
        char c = p[i];
        if (is_ows(c)) {
            space = !lead;
            i++;
            continue;
        }
        if (c != ',' && space) {
            if (k == cap)
                return (size_t)-1;
            out[k++] = ' ';
        }
        space = 0;
        lead = c == ',';
        if (c == '"') {
            if ((i = norm_quoted(p, n, i, out, cap, &k)) == (size_t)-1)
                return (size_t)-1;
            continue;
        }
        if (k == cap)
            return (size_t)-1;
        out[k++] = c;
        i++;
    }
    return k;
}
