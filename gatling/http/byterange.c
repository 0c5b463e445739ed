/* Range header parsing: see byterange.h. */
#include "byterange.h"
#include "owfat.h"

/* Digits at *p (no sign, no overflow past 2^63); the count, or 0. */
static size_t digits(const char *p, const char *end, uint64_t *v)
{
    size_t k = 0;
    *v = 0;
    while (p + k < end && p[k] >= '0' && p[k] <= '9') {
        if (*v > (UINT64_MAX >> 1) / 10)
            return 0;
        *v = *v * 10 + (uint64_t)(p[k++] - '0');
    }
    return k;
}

static const char *skip_ows(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* One range-spec at *pp: 1 satisfiable (*r set), 0 unsatisfiable, -1 invalid. */
static int one_spec(const char **pp, const char *end, uint64_t size, byterange_t *r)
{
    const char *p = *pp;
    uint64_t a, b;
    size_t k;
    if (p < end && *p == '-') { /* suffix: the last b bytes */
        if (!(k = digits(p + 1, end, &b)))
            return -1;
        *pp = p + 1 + k;
        if (b == 0 || size == 0)
            return 0;
        *r = (byterange_t){b >= size ? 0 : size - b, size - 1};
        return 1;
    }
    if (!(k = digits(p, end, &a)) || p + k >= end || p[k] != '-')
        return -1;
    p += k + 1;
    k = digits(p, end, &b);
    *pp = p + k;
    if (k && b < a)
        return -1;
    if (a >= size)
        return 0;
    *r = (byterange_t){a, k && b < size ? b : size - 1};
    return 1;
}

int byterange_parse(const char *v, size_t n, uint64_t size, byterange_t *out, int max)
{
    const char *p = v, *end = v + n;
    int count = 0, specs = 0;
    if (n < 6 || !case_equalb(p, 6, "bytes="))
        return BYTERANGE_IGNORE;
    for (p += 6;;) {
        p = skip_ows(p, end);
        if (p < end && *p == ',') { /* empty list elements are allowed */
            p++;
            continue;
        }
        if (p == end)
            break;
        byterange_t r;
        int s = one_spec(&p, end, size, &r);
        if (s < 0 || ++specs > max)
            return BYTERANGE_IGNORE;
        if (s > 0)
            out[count++] = r;
        p = skip_ows(p, end);
        if (p < end && *p != ',')
            return BYTERANGE_IGNORE;
    }
    if (specs == 0)
        return BYTERANGE_IGNORE;
    if (count == 0)
        return BYTERANGE_UNSATISFIABLE;
    for (int i = 0; i < count; i++)
        for (int j = i + 1; j < count; j++)
            if (out[i].first <= out[j].last && out[j].first <= out[i].last)
                return BYTERANGE_IGNORE;
    return count;
}
