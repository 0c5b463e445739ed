/* The HTTP caching rules of a shared cache (RFC 9111, RFC 5861): see cachectl.h. */
#include "cachectl.h"

#include <string.h>

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

int64_t cc_age_value(const char *p, size_t n)
{
    const char *comma = memchr(p, ',', n);
    return cc_delta(p, comma ? (size_t)(comma - p) : n);
}

/* ---- HTTP-date (RFC 9110 5.6.7) ---- */

/* Exactly k digits at p: their value, or -1. */
static int ndigits(const char *p, int k)
{
    int v = 0;
    for (int i = 0; i < k; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* The index of the 3 (or more) letters at p among names (any case), or -1. */
static int name_at(const char *p, size_t n, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (word_is(p, n, names[i]))
            return i;
    return -1;
}

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec"};

/* "HH:MM:SS" at p (8 bytes): seconds into the day, or -1. */
static int64_t time_of_day(const char *p)
{
    int h = ndigits(p, 2), m = ndigits(p + 3, 2), s = ndigits(p + 6, 2);
    if (p[2] != ':' || p[5] != ':' || h < 0 || m < 0 || s < 0 || h > 23 || m > 59 || s > 60)
        return -1;
    return h * 3600 + m * 60 + s;
}

#define BAD_DATE INT64_MIN

/* Seconds since the epoch of a day (proleptic Gregorian; days_from_civil; negative
   before 1970), or BAD_DATE for no month, a day past the month's 31, 30 or 29, or no time. */
static int64_t civil(int64_t y, int mon, int d, int64_t tod)
{
    static const unsigned char mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mon < 0 || d < 1 || d > mdays[mon] || tod < 0)
        return BAD_DATE;
    if (mon == 1 && d == 29 && (y % 4 || (y % 100 == 0 && y % 400)))
        return BAD_DATE;
    int m = mon + 1;
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return (era * 146097 + doe - 719468) * 86400 + tod;
}

/* IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" after the day name and ", " (25 bytes). */
static int64_t imf_fixdate(const char *p, size_t n)
{
    if (n != 24 || p[2] != ' ' || p[6] != ' ' || p[11] != ' ' || p[20] != ' ' ||
        !word_is(p + 21, 3, "gmt"))
        return BAD_DATE;
    int d = ndigits(p, 2), y = ndigits(p + 7, 4);
    if (d < 0 || y < 0)
        return BAD_DATE;
    return civil(y, name_at(p + 3, 3, month_names, 12), d, time_of_day(p + 12));
}

/* rfc850-date "06-Nov-94 08:49:37 GMT" after "Sunday, ": a year more than 50 years
   ahead of now is the latest past year with those two digits (RFC 9110 5.6.7). */
static int64_t rfc850_date(const char *p, size_t n, int64_t now)
{
    if (n != 22 || p[2] != '-' || p[6] != '-' || p[9] != ' ' || p[18] != ' ' ||
        !word_is(p + 19, 3, "gmt"))
        return BAD_DATE;
    int d = ndigits(p, 2), yy = ndigits(p + 7, 2);
    if (d < 0 || yy < 0)
        return BAD_DATE;
    int64_t this_year = now / 31556952 + 1970; /* mean Gregorian year: close enough for this */
    int64_t y = this_year - this_year % 100 + yy;
    if (y > this_year + 50)
        y -= 100;
    else if (y < this_year - 49)
        y += 100;
    return civil(y, name_at(p + 3, 3, month_names, 12), d, time_of_day(p + 10));
}

/* asctime-date "Nov  6 08:49:37 1994" after "Sun ": day is 2DIGIT or SP DIGIT. */
static int64_t asctime_date(const char *p, size_t n)
{
    if (n != 20 || p[3] != ' ' || p[6] != ' ' || p[15] != ' ')
        return BAD_DATE;
    int d = p[4] == ' ' ? ndigits(p + 5, 1) : ndigits(p + 4, 2);
    int y = ndigits(p + 16, 4);
    if (d < 0 || y < 0)
        return BAD_DATE;
    return civil(y, name_at(p, 3, month_names, 12), d, time_of_day(p + 7));
}

int64_t cc_http_date(const char *p, size_t n, int64_t now)
{
    static const char *const days[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
    static const char *const long_days[] = {"monday", "tuesday",  "wednesday", "thursday",
                                            "friday", "saturday", "sunday"};
    while (n && is_ows(*p))
        p++, n--;
    n = trim_end(p, n);
    int64_t t = BAD_DATE;
    const char *comma = memchr(p, ',', n);
    if (n > 5 && comma == p + 3 && p[4] == ' ' && name_at(p, 3, days, 7) >= 0)
        t = imf_fixdate(p + 5, n - 5);
    else if (comma && comma + 1 < p + n && comma[1] == ' ' &&
             name_at(p, (size_t)(comma - p), long_days, 7) >= 0)
        t = rfc850_date(comma + 2, (size_t)(p + n - comma - 2), now);
    else if (n > 4 && p[3] == ' ' && name_at(p, 3, days, 7) >= 0)
        t = asctime_date(p + 4, n - 4);
    return t == BAD_DATE ? -1 : t < 0 ? 0 : t;
}

/* ---- Targeted cache-control fields (RFC 9213): a Dictionary Structured Field ---- */

/* A parse of v[0..n) at *i; every step returns 0 on a parse error. */
typedef struct sf_in {
    const char *v;
    size_t n, i;
} sf_in_t;

static int sf_lcalpha(char c)
{
    return c >= 'a' && c <= 'z';
}

static int sf_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int sf_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || sf_digit(c) ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int sf_at(const sf_in_t *in, char c)
{
    return in->i < in->n && in->v[in->i] == c;
}

/* key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" ) */
static int sf_key(sf_in_t *in, cc_dir_t *d)
{
    size_t s = in->i;
    if (in->i >= in->n || !(sf_lcalpha(in->v[in->i]) || in->v[in->i] == '*'))
        return 0;
    while (in->i < in->n) {
        char c = in->v[in->i];
        if (!(sf_lcalpha(c) || sf_digit(c) || (c && strchr("_-.*", c))))
            break;
        in->i++;
    }
    d->name = in->v + s;
    d->nlen = in->i - s;
    return 1;
}

/* sf-integer (at most 15 digits) or sf-decimal (12.3); *integer says which. */
static int sf_number(sf_in_t *in, int *integer)
{
    size_t s = in->i, dot = 0;
    if (sf_at(in, '-'))
        in->i++;
    if (!(in->i < in->n && sf_digit(in->v[in->i])))
        return 0;
    while (in->i < in->n && (sf_digit(in->v[in->i]) || (!dot && in->v[in->i] == '.'))) {
        if (in->v[in->i] == '.')
            dot = in->i;
        in->i++;
    }
    size_t len = in->i - s - (in->v[s] == '-');
    *integer = !dot;
    if (!dot)
        return len <= 15;
    size_t frac = in->i - dot - 1;
    return dot - s - (in->v[s] == '-') <= 12 && frac >= 1 && frac <= 3;
}

/* sf-string, sf-token, sf-binary, sf-boolean, sf-date: *kind is the first byte
   that told ('0'..'9' for a number: 'i' integer, 'd' decimal). */
static int sf_bare(sf_in_t *in, char *kind)
{
    if (in->i >= in->n)
        return 0;
    char c = in->v[in->i];
    *kind = c;
    if (c == '-' || sf_digit(c)) {
        int integer;
        if (!sf_number(in, &integer))
            return 0;
        *kind = integer ? 'i' : 'd';
        return 1;
    }
    if (c == '"') {
        for (in->i++; in->i < in->n && in->v[in->i] != '"'; in->i++) {
            unsigned char b = (unsigned char)in->v[in->i];
            if (b == '\\' && !(++in->i < in->n && strchr("\"\\", in->v[in->i])))
                return 0;
            if (b < 0x20 || b > 0x7e)
                return 0;
        }
        return in->i++ < in->n;
    }
    if (c == '?') {
        in->i += 2;
        *kind = in->i <= in->n && in->v[in->i - 1] == '1' ? 't' : 'f';
        return in->i <= in->n && (in->v[in->i - 1] == '0' || in->v[in->i - 1] == '1');
    }
    if (c == ':') {
        for (in->i++; in->i < in->n && in->v[in->i] != ':'; in->i++) {
            char b = in->v[in->i]; /* base64 */
            if (!((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || sf_digit(b) || b == '+' ||
                  b == '/' || b == '='))
                return 0;
        }
        return in->i++ < in->n;
    }
    if (c == '@') {
        int integer;
        in->i++;
        return sf_number(in, &integer) && integer;
    }
    if (!(c == '*' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
        return 0;
    while (in->i < in->n && (sf_tchar(in->v[in->i]) || strchr(":/", in->v[in->i])))
        in->i++;
    return 1;
}

/* parameters = *( ";" *SP key [ "=" bare-item ] ): read and ignored (RFC 9213 2.2). */
static int sf_params(sf_in_t *in)
{
    while (sf_at(in, ';')) {
        cc_dir_t k;
        char kind;
        in->i++;
        while (sf_at(in, ' '))
            in->i++;
        if (!sf_key(in, &k))
            return 0;
        if (sf_at(in, '=')) {
            in->i++;
            if (!sf_bare(in, &kind))
                return 0;
        }
    }
    return 1;
}

/* An Item or an Inner List after "=": *kind 'l' for a list, else sf_bare's. */
static int sf_member_value(sf_in_t *in, char *kind)
{
    if (!sf_at(in, '(')) {
        return sf_bare(in, kind) && sf_params(in);
    }
    *kind = 'l';
    for (in->i++;;) {
        while (sf_at(in, ' '))
            in->i++;
        if (sf_at(in, ')'))
            break;
        char k;
        if (!sf_bare(in, &k) || !sf_params(in))
            return 0;
        if (!sf_at(in, ' ') && !sf_at(in, ')'))
            return 0;
    }
    in->i++;
    return sf_params(in);
}

/*
 * One dictionary member as the Cache-Control directive resp_dir applies:
 * a true Boolean is the bare directive; an Integer its delta-seconds (a
 * negative one "-1", which dir_delta reads as 0); any other value is given
 * as "" (a delta then reads as 0, the reading that allows least; a flag is
 * set: no-cache and private with field names).  A false Boolean is no
 * directive.
 */
static void sf_apply(cc_resp_t *cc, cc_dir_t *d, const char *val, size_t vlen, char kind)
{
    if (kind == 'f')
        return;
    d->val = kind == 't' ? NULL : kind == 'i' ? val : "";
    d->vlen = kind == 'i' ? vlen : 0;
    resp_dir(cc, d);
}

int cc_parse_targeted(cc_resp_t *cc, const char *v, size_t n)
{
    sf_in_t in = {v, n, 0};
    cc_resp_t t;
    int members = 0;
    cc_resp_init(&t);
    while (in.i < in.n && in.v[in.i] == ' ')
        in.i++;
    while (in.n > in.i && in.v[in.n - 1] == ' ')
        in.n--;
    while (in.i < in.n) {
        cc_dir_t d;
        char kind = 't';
        if (!sf_key(&in, &d))
            return 0;
        size_t vs = in.i + 1;
        if (sf_at(&in, '=')) {
            in.i++;
            if (!sf_member_value(&in, &kind))
                return 0;
        } else if (!sf_params(&in)) {
            return 0;
        }
        /* the value's bytes without parameters: only an integer's are read */
        size_t ve = vs;
        while (kind == 'i' && ve < in.n && (sf_digit(v[ve]) || v[ve] == '-'))
            ve++;
        sf_apply(&t, &d, v + vs, ve - vs, kind);
        members++;
        while (in.i < in.n && is_ows(in.v[in.i]))
            in.i++;
        if (in.i >= in.n)
            break;
        if (in.v[in.i++] != ',')
            return 0;
        while (in.i < in.n && is_ows(in.v[in.i]))
            in.i++;
        if (in.i >= in.n)
            return 0; /* a trailing comma */
    }
    if (!members)
        return 0;
    *cc = t;
    return 1;
}
