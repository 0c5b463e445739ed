/*
 * The caching rules (http/cachectl.c).  Input: a 36-byte head of numbers
 * (status, flags, times as offsets from a base, ttl, Age, a split point),
 * then one value that every function reads: as a response's
 * Cache-Control, an Age, a Vary and a field value to normalise.  Invariants: every delta in range; the same parse again, in
 * upper case, or as two field lines in either order; lifetime and age in
 * [0, 2^31]; storable never for what the RFC forbids; Vary names inside the
 * value, trimmed; a normalised value no longer, trimmed, stable, and
 * different from the value in whitespace only.
 */
#include "cachectl.h"
#include "fuzz.h"

#define HEAD 36
#define T0 1700000000LL

typedef struct nums {
    int status, has_expires, has_lm, auth;
    int64_t date, expires, lm, req_time, resp_time, ttl, age;
    size_t split;
} nums_t;

static int32_t i32(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return (int32_t)u;
}

/* A time near T0, or CC_NONE for INT32_MIN. */
static int64_t when(const uint8_t *p)
{
    int32_t v = i32(p);
    return v == INT32_MIN ? CC_NONE : T0 + v;
}

static nums_t read_nums(const uint8_t *d)
{
    nums_t m;
    m.status = (d[0] | d[1] << 8) % 1000;
    m.has_expires = d[2] & 1, m.has_lm = d[2] >> 1 & 1, m.auth = d[2] >> 2 & 1;
    m.date = when(d + 4), m.expires = when(d + 8), m.lm = when(d + 12);
    m.req_time = when(d + 16), m.resp_time = when(d + 20);
    m.ttl = i32(d + 24);
    m.age = d[3] & 1 ? CC_NONE : (int64_t)(uint32_t)i32(d + 28) << (d[3] >> 1 & 3);
    m.split = (uint32_t)i32(d + 32);
    return m;
}

static int in_range(int64_t v)
{
    return v == CC_NONE || (v >= 0 && v <= CC_DELTA_MAX);
}

static int resp_eq(const cc_resp_t *a, const cc_resp_t *b)
{
    return a->max_age == b->max_age && a->s_maxage == b->s_maxage &&
           a->stale_while_revalidate == b->stale_while_revalidate &&
           a->stale_if_error == b->stale_if_error && a->no_store == b->no_store &&
           a->no_cache == b->no_cache && a->private_ == b->private_ && a->public_ == b->public_ &&
           a->must_revalidate == b->must_revalidate && a->must_understand == b->must_understand &&
           a->immutable == b->immutable;
}

/* The value in a buffer of its exact size, in upper case (ASCII). */
static char *upper(const char *v, size_t n)
{
    char *u = fuzz_copy((const uint8_t *)v, n);
    for (size_t i = 0; i < n; i++)
        if (u[i] >= 'a' && u[i] <= 'z')
            u[i] = (char)(u[i] - 'a' + 'A');
    return u;
}

/*
 * v with a comma put in at k, in a buffer of its exact size: then the parse
 * of v[0..k) and v[k..n) as two field lines, in either order, is the parse
 * of the one line, when v[0..k) has no quote.
 */
static void check_split(const char *v, size_t n, size_t k)
{
    if (memchr(v, '"', k))
        return;
    char *j = malloc(n + 1);
    memcpy(j, v, k);
    j[k] = ',';
    memcpy(j + k + 1, v + k, n - k);
    cc_resp_t r1, r2, rj;
    cc_resp_init(&r1), cc_resp_init(&r2), cc_resp_init(&rj);
    cc_parse_resp(&rj, j, n + 1);
    cc_parse_resp(&r1, v, k), cc_parse_resp(&r1, v + k, n - k);
    cc_parse_resp(&r2, v + k, n - k), cc_parse_resp(&r2, v, k);
    CHECK(resp_eq(&rj, &r1));
    CHECK(resp_eq(&r1, &r2));
    free(j);
}

static void check_resp(const char *v, size_t n, const nums_t *m)
{
    cc_resp_t r, again;
    cc_resp_init(&r);
    cc_parse_resp(&r, v, n);
    CHECK(in_range(r.max_age) && in_range(r.s_maxage));
    CHECK(in_range(r.stale_while_revalidate) && in_range(r.stale_if_error));
    CHECK(r.no_store <= 1 && r.no_cache <= 1 && r.private_ <= 1 && r.public_ <= 1);
    CHECK(r.must_revalidate <= 1 && r.must_understand <= 1 && r.immutable <= 1);
    CHECK(r.s_maxage == CC_NONE || r.must_revalidate);
    again = r;
    cc_parse_resp(&again, v, n); /* the same line twice: nothing new */
    CHECK(resp_eq(&again, &r));
    char *u = upper(v, n);
    cc_resp_init(&again);
    cc_parse_resp(&again, u, n); /* names in any case; values that count are digits */
    CHECK(resp_eq(&again, &r));
    free(u);

    int st = cc_storable(m->status, &r, m->has_expires, m->has_lm, m->auth, m->ttl);
    CHECK(st == 0 || st == 1);
    if (st) {
        CHECK(m->status >= 200 && m->status <= 599 && m->status != 206 && m->status != 304);
        CHECK(!r.no_store && !r.private_);
        CHECK(!m->auth || r.public_ || r.must_revalidate || r.s_maxage != CC_NONE);
        CHECK(r.max_age != CC_NONE || r.s_maxage != CC_NONE || m->has_expires || r.public_ ||
              (cc_status_heuristic(m->status) && (m->ttl > 0 || m->has_lm)));
    }
    int64_t life = cc_lifetime(&r, m->status, m->date, m->expires, m->lm, m->resp_time, m->ttl);
    CHECK(life >= 0 && life <= CC_DELTA_MAX);
    CHECK(!r.no_cache || life == 0);
    CHECK(r.no_cache || r.s_maxage == CC_NONE || life == r.s_maxage);
    CHECK(r.no_cache || r.s_maxage != CC_NONE || r.max_age == CC_NONE || life == r.max_age);
}

static void check_age(const char *v, size_t n, const nums_t *m)
{
    int64_t d = cc_delta(v, n);
    CHECK(in_range(d));
    size_t a = 0, b = n; /* an independent reading: OWS, digits, OWS */
    while (a < b && (v[a] == ' ' || v[a] == '\t'))
        a++;
    while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
        b--;
    int digits = a < b;
    for (size_t i = a; i < b; i++)
        digits &= v[i] >= '0' && v[i] <= '9';
    CHECK(digits == (d != CC_NONE));
    if (digits) {
        while (a < b - 1 && v[a] == '0')
            a++;
        if (b - a > 10) {
            CHECK(d == CC_DELTA_MAX);
        } else {
            char num[11] = {0};
            memcpy(num, v + a, b - a);
            long long want = strtoll(num, NULL, 10);
            CHECK(d == (want > CC_DELTA_MAX ? CC_DELTA_MAX : want));
        }
    }
    int64_t age = cc_initial_age(m->age, m->date, m->req_time, m->resp_time);
    CHECK(age >= 0 && age <= CC_DELTA_MAX);
    CHECK(m->age == CC_NONE || age >= (m->age > CC_DELTA_MAX ? CC_DELTA_MAX : m->age));
    age = cc_initial_age(d, m->date, m->req_time, m->resp_time);
    CHECK(age >= 0 && age <= CC_DELTA_MAX && (d == CC_NONE || age >= d));
}

static int ows(char c)
{
    return c == ' ' || c == '\t';
}

static void check_vary(const char *v, size_t n)
{
    size_t pos = 0, len, last = 0, count = 0;
    const char *name;
    int star = 0;
    while ((len = cc_vary_next(v, n, &pos, &name))) {
        CHECK(inside(name, len, v, n) && pos <= n && pos > last);
        CHECK(!ows(name[0]) && !ows(name[len - 1]) && !memchr(name, ',', len));
        star |= len == 1 && name[0] == '*';
        last = pos;
        CHECK(++count <= n);
    }
    CHECK(pos == n);
    CHECK(cc_vary_star(v, n) == star);
}

/* v without its SP and HTAB, into out: the bytes that are not whitespace. */
static size_t squeeze(const char *v, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!ows(v[i]))
            out[k++] = v[i];
    return k;
}

static void check_norm(const char *v, size_t n)
{
    char *out = malloc(n ? n : 1), *again = malloc(n ? n : 1);
    size_t k = cc_vary_norm(v, n, out, n);
    CHECK(k <= n); /* never longer, so a buffer of n always does */
    CHECK(k == 0 || (!ows(out[0]) && !ows(out[k - 1])));
    CHECK(k == 0 || cc_vary_norm(v, n, again, k - 1) == (size_t)-1);
    CHECK(cc_vary_norm(v, n, again, k) == k && !memcmp(again, out, k));
    char *o2 = fuzz_copy((const uint8_t *)out, k); /* exact size: over-reads seen */
    CHECK(cc_vary_norm(o2, k, again, k) == k && !memcmp(again, out, k));
    char *s1 = malloc(n ? n : 1), *s2 = malloc(n ? n : 1);
    size_t l1 = squeeze(v, n, s1), l2 = squeeze(out, k, s2);
    CHECK(l1 == l2 && !memcmp(s1, s2, l1)); /* only whitespace changed */
    free(s1), free(s2), free(o2), free(again), free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEAD)
        return 0;
    nums_t m = read_nums(data);
    size_t n = size - HEAD;
    char *v = fuzz_copy(data + HEAD, n);
    check_resp(v, n, &m);
    check_split(v, n, m.split % (n + 1));
    check_age(v, n, &m);
    check_vary(v, n);
    check_norm(v, n);
    free(v);
    return 0;
}
