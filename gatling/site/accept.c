/* Accept-Encoding, the names of the codings and which types are worth coding: see
   accept.h. */
#include "accept.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

/* ---- Accept-Encoding ---------------------------------------------------- */

/* What a list item can name. */
enum { SLOT_BR, SLOT_ZSTD, SLOT_GZIP, SLOT_IDENTITY, SLOT_STAR, NSLOTS };
static const unsigned char slot_enc[SLOT_IDENTITY] = {ENC_BR, ENC_ZSTD, ENC_GZIP};

/* The order that breaks ties between codings of equal q: a stored variant's
   smallest first (br); a coding made for this answer alone, its cheapest
   (zstd 3 codes a 50 KB page in ~91 us for 1.3% more bytes than br 4's
   ~476 us; Caddy prefers zstd too). */
static const unsigned char tie_stored[SLOT_IDENTITY] = {SLOT_BR, SLOT_ZSTD, SLOT_GZIP};
static const unsigned char tie_coded[SLOT_IDENTITY] = {SLOT_ZSTD, SLOT_BR, SLOT_GZIP};

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static int is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static size_t skip_ows(const char *s, size_t i, size_t n)
{
    while (i < n && is_ows(s[i]))
        i++;
    return i;
}

static size_t skip_token(const char *s, size_t i, size_t n)
{
    while (i < n && is_tchar((unsigned char)s[i]))
        i++;
    return i;
}

/* Past the quoted-string starting at s[i] == '"', or SIZE_MAX if unterminated. */
static size_t skip_quoted(const char *s, size_t i, size_t n)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return SIZE_MAX;
}

/*
 * qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) (RFC 9110
 * 12.4.2), in thousandths; -1 if malformed ("0.5000", ".5", "1.5", "").
 */
static int parse_qvalue(const char *s, size_t n)
{
    if (n == 0 || (s[0] != '0' && s[0] != '1'))
        return -1;
    if (n == 1)
        return s[0] == '1' ? 1000 : 0;
    if (s[1] != '.' || n > 5)
        return -1;
    int q = 0, scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        q += (s[i] - '0') * scale;
    }
    if (s[0] == '1')
        return q == 0 ? 1000 : -1;
    return q;
}

static int slot_of(const char *s, size_t n)
{
    static const struct {
        const char *name;
        int slot;
    } names[] = {
        {"gzip", SLOT_GZIP}, {"x-gzip", SLOT_GZIP},       {"br", SLOT_BR},
        {"zstd", SLOT_ZSTD}, {"identity", SLOT_IDENTITY}, {"*", SLOT_STAR},
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (strlen(names[k].name) == n && !strncasecmp(names[k].name, s, n))
            return names[k].slot;
    return -1;
}

/*
 * Parse the list item at s[i..n), which starts with neither OWS nor a comma.
 * Sets *slot (-1: no name, or a coding we cannot serve) and *q in
 * thousandths, 0 if anything after the name is malformed: an item we cannot
 * read must not make a coding acceptable.  Returns the index of the comma
 * that ends the item, or n.
 */
static size_t parse_item(const char *s, size_t i, size_t n, int *slot, int *q)
{
    size_t name = i;
    i = skip_token(s, i, n);
    *slot = i > name ? slot_of(s + name, i - name) : -1;
    *q = 1000;
    int bad = i == name;
    i = skip_ows(s, i, n);
    while (!bad && i < n && s[i] == ';') {
        size_t pn = skip_ows(s, i + 1, n);
        size_t pe = skip_token(s, pn, n);
        i = skip_ows(s, pe, n); /* BWS around '=' is not in the grammar; be lenient */
        if (pe == pn || i >= n || s[i] != '=') {
            bad = 1;
            break;
        }
        size_t v = skip_ows(s, i + 1, n);
        i = v < n && s[v] == '"' ? skip_quoted(s, v, n) : skip_token(s, v, n);
        if (i == SIZE_MAX) {
            bad = 1;
            i = n;
            break;
        }
        if (pe - pn == 1 && (s[pn] == 'q' || s[pn] == 'Q')) {
            int qv = v < n && s[v] == '"' ? -1 : parse_qvalue(s + v, i - v);
            if (qv < 0)
                bad = 1;
            else
                *q = qv;
        }
        i = skip_ows(s, i, n);
    }
    if (i < n && s[i] != ',')
        bad = 1;
    if (bad) {
        *q = 0;
        while (i < n && s[i] != ',')
            i++;
    }
    return i;
}

/* Sort the codings of q > 0 and identity into e, best first, ties in the
   order tie; returns how many. */
static int rank(const int q[NSLOTS], const unsigned char tie[SLOT_IDENTITY],
                unsigned char e[ENC_PREFER_MAX])
{
    /* Insertion sort by q, stable, so tie's order breaks ties and codings
       come before an identity of equal q; an unranked identity (-1) is last. */
    int w[ENC_PREFER_MAX] = {0}, k = 0; /* {0}: cppcheck cannot see w[j - 1] written first */
    for (int i = 0; i <= SLOT_IDENTITY; i++) {
        int s = i < SLOT_IDENTITY ? tie[i] : SLOT_IDENTITY;
        int qs = q[s] > 0 ? q[s] : -1;
        if (s != SLOT_IDENTITY && qs < 0)
            continue;
        int j = k++;
        for (; j > 0 && w[j - 1] < qs; j--)
            e[j] = e[j - 1], w[j] = w[j - 1];
        e[j] = s == SLOT_IDENTITY ? ENC_IDENTITY : slot_enc[s];
        w[j] = qs;
    }
    return k;
}

static unsigned accepted(const char *ae, size_t n, const unsigned char tie[SLOT_IDENTITY],
                         unsigned char prefer[ENC_PREFER_MAX], int *nprefer)
{
    int q[NSLOTS] = {0}, listed[NSLOTS] = {0};
    if (!ae)
        n = 0;
    for (size_t i = 0; i < n;) {
        if (is_ows(ae[i]) || ae[i] == ',') { /* empty list elements are allowed */
            i++;
            continue;
        }
        int slot, qv;
        i = parse_item(ae, i, n, &slot, &qv);
        if (slot >= 0 && !listed[slot])
            listed[slot] = 1, q[slot] = qv;
    }
    /* "*" matches any available coding not explicitly listed (12.5.3). */
    for (int s = 0; s < SLOT_STAR && listed[SLOT_STAR]; s++)
        if (!listed[s])
            listed[s] = 1, q[s] = q[SLOT_STAR];

    unsigned mask = 0;
    for (int s = 0; s < SLOT_IDENTITY; s++)
        if (q[s] > 0)
            mask |= slot_enc[s];
    if (listed[SLOT_IDENTITY] && q[SLOT_IDENTITY] == 0)
        mask |= ENC_NO_IDENTITY;

    unsigned char e[ENC_PREFER_MAX];
    int k = rank(q, tie, e);
    if (prefer)
        memcpy(prefer, e, (size_t)k);
    if (nprefer)
        *nprefer = k;
    return mask;
}

unsigned enc_accepted(const char *ae, size_t n, unsigned char prefer[ENC_PREFER_MAX], int *nprefer)
{
    return accepted(ae, n, tie_stored, prefer, nprefer);
}

static int choose(const char *ae, size_t n, unsigned available,
                  const unsigned char tie[SLOT_IDENTITY])
{
    unsigned char pref[ENC_PREFER_MAX];
    int np;
    accepted(ae, n, tie, pref, &np);
    for (int i = 0; i < np; i++)
        if (pref[i] == ENC_IDENTITY || (available & pref[i]))
            return pref[i];
    return ENC_IDENTITY;
}

int enc_choose(const char *ae, size_t n, unsigned available)
{
    return choose(ae, n, available, tie_stored);
}

int enc_choose_coded(const char *ae, size_t n, unsigned available)
{
    return choose(ae, n, available, tie_coded);
}

const char *enc_name(int enc)
{
    switch (enc) {
    case ENC_GZIP: return "gzip";
    case ENC_BR: return "br";
    case ENC_ZSTD: return "zstd";
    default: return NULL;
    }
}

const char *enc_suffix(int enc)
{
    switch (enc) {
    case ENC_GZIP: return ".gz";
    case ENC_BR: return ".br";
    case ENC_ZSTD: return ".zst";
    default: return NULL;
    }
}

int enc_compressible(const char *ctype)
{
#define T(s) {s, sizeof s - 1} /* lengths counted once, not per request */
    static const struct {
        const char *s;
        size_t n;
    } types[] = {
        T("text/html"),        T("text/css"),        T("text/plain"),
        T("text/javascript"),  T("text/xml"),        T("application/javascript"),
        T("application/json"), T("application/xml"), T("image/svg+xml"),
    };
#undef T
    if (!ctype)
        return 0;
    while (is_ows(*ctype))
        ctype++;
    size_t n = strcspn(ctype, ";");
    while (n > 0 && is_ows(ctype[n - 1]))
        n--;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        if (types[k].n == n && !strncasecmp(types[k].s, ctype, n))
            return 1;
    return 0;
}
