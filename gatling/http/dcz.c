/* The pure parts of RFC 9842's dcz: see dcz.h. */
#include "dcz.h"

#include <string.h>

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* 43 base64 characters (with an optional '=') are 32 bytes: 42 whole
   characters give 31.5 bytes, the 43rd its last 2 bits must be zero. */
static int b64_hash(const char *s, size_t n, uint8_t out[DCZ_HASH_LEN])
{
    if (n == 44 && s[43] == '=')
        n = 43;
    if (n != 43)
        return -1;
    uint32_t acc = 0;
    size_t bits = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)s[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (k < DCZ_HASH_LEN)
                out[k++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return k == DCZ_HASH_LEN && acc == 0 ? 0 : -1; /* non-zero pad bits: not canonical */
}

int dcz_parse_available(const char *v, size_t n, uint8_t hash[DCZ_HASH_LEN])
{
    size_t i = 0;
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    while (n > i && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (i >= n || v[i] != ':')
        return -1;
    const char *end = memchr(v + i + 1, ':', n - i - 1);
    if (!end)
        return -1;
    size_t after = (size_t)(end - v) + 1;
    if (after < n && v[after] != ';') /* parameters may follow; a list may not */
        return -1;
    for (size_t k = after; k < n; k++)
        if (v[k] == ',')
            return -1;
    return b64_hash(v + i + 1, (size_t)(end - (v + i + 1)), hash);
}

/* Is the item's q (its parameters par[0..n)) zero or malformed? */
static int q_zero(const char *par, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if ((par[i] != 'q' && par[i] != 'Q') || (i && par[i - 1] != ';' && par[i - 1] != ' '))
            continue;
        size_t j = i + 1;
        while (j < n && par[j] == ' ')
            j++;
        if (j >= n || par[j] != '=')
            continue;
        for (j++; j < n && par[j] == ' '; j++)
            ;
        if (j >= n || (par[j] != '0' && par[j] != '1'))
            return 1;
        if (par[j] == '1')
            return 0;
        for (j++; j < n && (par[j] == '.' || par[j] == '0'); j++)
            ;
        return !(j < n && par[j] >= '1' && par[j] <= '9');
    }
    return 0;
}

int dcz_accepted(const char *ae, size_t n)
{
    size_t i = 0;
    while (ae && i < n) {
        while (i < n && (ae[i] == ' ' || ae[i] == '\t' || ae[i] == ','))
            i++;
        size_t name = i;
        while (i < n && ae[i] != ',' && ae[i] != ';' && ae[i] != ' ' && ae[i] != '\t')
            i++;
        size_t nl = i - name, par = i;
        while (i < n && ae[i] != ',')
            i++;
        if (nl == 3 && (ae[name] | 0x20) == 'd' && (ae[name + 1] | 0x20) == 'c' &&
            (ae[name + 2] | 0x20) == 'z')
            return !q_zero(ae + par, i - par);
    }
    return 0;
}

int dcz_pattern_ok(const char *pat, size_t pn)
{
    if (pn == 0 || pn >= DCZ_PATTERN_MAX || pat[0] != '/')
        return 0;
    for (size_t i = 0; i < pn; i++) {
        unsigned char c = (unsigned char)pat[i];
        if (c <= 0x20 || c > 0x7e || strchr("\"\\?#:(){}+", c))
            return 0;
    }
    return 1;
}

int dcz_match(const char *pat, size_t pn, const char *p, size_t n)
{
    size_t i = 0, j = 0, star = SIZE_MAX, mark = 0;
    while (j < n) {
        if (i < pn && pat[i] == '*') {
            star = i++;
            mark = j;
        } else if (i < pn && pat[i] == p[j]) {
            i++, j++;
        } else if (star != SIZE_MAX) {
            i = star + 1;
            j = ++mark;
        } else {
            return 0;
        }
    }
    while (i < pn && pat[i] == '*')
        i++;
    return i == pn;
}

void dcz_header(uint8_t out[DCZ_HEADER_LEN], const uint8_t hash[DCZ_HASH_LEN])
{
    static const uint8_t magic[8] = {0x5e, 0x2a, 0x4d, 0x18, 0x20, 0x00, 0x00, 0x00};
    memcpy(out, magic, sizeof magic);
    memcpy(out + sizeof magic, hash, DCZ_HASH_LEN);
}

/* Copy the word w[0..n) into out[cap] if it fits and every byte may stand in
   a quoted sf-string (printable ASCII, no '"' or '\\').  0 or -1. */
static int word(const char *w, size_t n, char *out, size_t cap)
{
    if (n == 0 || n >= cap)
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)w[i] <= 0x20 || (unsigned char)w[i] > 0x7e || w[i] == '"' ||
            w[i] == '\\')
            return -1;
    memcpy(out, w, n);
    out[n] = 0;
    return 0;
}

/* The option w[0..n) ("key=value") into r.  0 or -1. */
static int option(const char *w, size_t n, dcz_rule_t *r)
{
    static const struct {
        const char *key;
        size_t off, cap;
    } keys[] = {
        {"match=", offsetof(dcz_rule_t, match), DCZ_PATTERN_MAX},
        {"match-dest=", offsetof(dcz_rule_t, dest), DCZ_DEST_MAX},
        {"id=", offsetof(dcz_rule_t, id), DCZ_PATTERN_MAX},
    };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        size_t kl = strlen(keys[k].key);
        if (n > kl && !memcmp(w, keys[k].key, kl))
            return word(w + kl, n - kl, (char *)r + keys[k].off, keys[k].cap);
    }
    return -1;
}

int dcz_rule_parse(const char *l, size_t n, dcz_rule_t *r)
{
    memset(r, 0, sizeof *r);
    size_t i = 0, nwords = 0;
    while (n && (l[n - 1] == '\r' || l[n - 1] == ' ' || l[n - 1] == '\t'))
        n--;
    while (i < n && (l[i] == ' ' || l[i] == '\t'))
        i++;
    if (i == n || l[i] == '#')
        return 0;
    while (i < n) {
        size_t w = i;
        while (i < n && l[i] != ' ' && l[i] != '\t')
            i++;
        int bad = nwords++ ? option(l + w, i - w, r)
                           : word(l + w, i - w, r->name, sizeof r->name) < 0 ||
                                 memchr(r->name, '/', strlen(r->name)) != NULL;
        if (bad)
            return -1;
        while (i < n && (l[i] == ' ' || l[i] == '\t'))
            i++;
    }
    if (r->match[0] && !dcz_pattern_ok(r->match, strlen(r->match)))
        return -1;
    return 1;
}

/* Append s to out[*len..cap); 0, or -1 when it does not fit (NUL included). */
static int put(char *out, size_t cap, size_t *len, const char *s)
{
    size_t k = strlen(s);
    if (*len + k >= cap)
        return -1;
    memcpy(out + *len, s, k + 1);
    *len += k;
    return 0;
}

size_t dcz_use_value(const dcz_rule_t *r, const char *dir, char *out, size_t cap)
{
    size_t len = 0;
    int bad = put(out, cap, &len, "match=\"");
    if (r->match[0])
        bad |= put(out, cap, &len, r->match);
    else
        bad |= put(out, cap, &len, dir) | put(out, cap, &len, r->name);
    if (bad || !dcz_pattern_ok(out + 7, len - 7))
        return 0;
    bad |= put(out, cap, &len, "\"");
    if (r->dest[0])
        bad |= put(out, cap, &len, ", match-dest=(\"") | put(out, cap, &len, r->dest) |
               put(out, cap, &len, "\")");
    if (r->id[0])
        bad |=
            put(out, cap, &len, ", id=\"") | put(out, cap, &len, r->id) | put(out, cap, &len, "\"");
    return bad ? 0 : len;
}

size_t dcz_rule_for(const char *text, size_t n, const char *name, const char *dir, char *out,
                    size_t cap)
{
    for (const char *p = text, *end = text + n; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        dcz_rule_t r;
        int ok = dcz_rule_parse(p, (size_t)(eol - p), &r);
        p = nl ? nl + 1 : end;
        if (ok == 1 && dcz_match(r.name, strlen(r.name), name, strlen(name)))
            return dcz_use_value(&r, dir, out, cap);
    }
    return 0;
}

const char *dcz_use_match(const char *v, size_t *pn)
{
    if (strncmp(v, "match=\"", 7))
        return NULL;
    const char *q = strchr(v + 7, '"');
    if (!q)
        return NULL;
    *pn = (size_t)(q - (v + 7));
    return v + 7;
}
