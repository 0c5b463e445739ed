/* _redirects and _headers as tables: see sitefiles_parse.h. */
#include "sitefiles_parse.h"
#include "http/path.h"
#include "site/siphash.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int name_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* ---- patterns ---- */

/* Is p[i] the start of a placeholder: ':' first in its segment, a name
   after it that ends the segment?  Its end (past the name), or 0. */
static size_t placeholder(const char *p, size_t n, size_t i)
{
    if (p[i] != ':' || (i && p[i - 1] != '/'))
        return 0;
    size_t k = i + 1;
    while (k < n && name_byte(p[k]))
        k++;
    return k > i + 1 && (k == n || p[k] == '/') ? k : 0;
}

/* Match p[0..pn) (literals and placeholders) against the start of x[0..xn):
   the bytes of x it took, or -1. */
static long match_part(const char *p, size_t pn, const char *x, size_t xn, sf_caps_t *c)
{
    size_t i = 0, j = 0;
    while (i < pn) {
        size_t k = placeholder(p, pn, i);
        if (k) {
            size_t e = j;
            while (e < xn && x[e] != '/')
                e++;
            if (e == j || c->n >= SF_CAPS_MAX)
                return -1;
            c->c[c->n].name = p + i + 1, c->c[c->n].nlen = k - i - 1;
            c->c[c->n].v = x + j, c->c[c->n].vlen = e - j;
            c->n++;
            i = k, j = e;
            continue;
        }
        if (j >= xn || p[i] != x[j])
            return -1;
        i++, j++;
    }
    return (long)j;
}

int sf_pat_match(const sf_pat_t *p, const char *path, size_t n, sf_caps_t *caps)
{
    caps->n = 0;
    caps->splat = NULL, caps->splatlen = 0;
    if (p->star < 0) {
        if (n > 1 && path[n - 1] == '/')
            n--; /* "/a/" is "/a"'s */
        return match_part(p->p, p->n, path, n, caps) == (long)n;
    }
    size_t pre = (size_t)p->star, suf = p->n - pre - 1;
    long j = match_part(p->p, pre, path, n, caps);
    if (j < 0 || n - (size_t)j < suf || memcmp(path + n - suf, p->p + pre + 1, suf))
        return 0;
    caps->splat = path + j;
    caps->splatlen = n - (size_t)j - suf;
    return 1;
}

/*
 * The pattern word w (NUL-terminated, in place) decoded and normalised into
 * out (room for strlen(w) + 2): NULL, or why not.
 */
static const char *pat_make(sf_pat_t *pt, char *w, char *out)
{
    size_t n = strlen(w);
    path_t pp;
    if (w[0] != '/')
        return "the path does not begin with '/' (no host or scheme: gatling.8, SITE FILES)";
    if (memchr(w, '?', n))
        return "a query in the path: queries are not matched (gatling.8, SITE FILES)";
    if (path_from_target(w, n, out, n + 2, &pp) != 0)
        return "a bad percent-escape in the path";
    size_t m = pp.len;
    if (m > 1 && out[m - 1] == '/')
        out[--m] = 0;
    char *star = memchr(out, '*', m);
    unsigned caps = 0;
    for (size_t i = 0; i < m; i++) {
        if (out[i] == '*' && out + i != star)
            return "more than one '*' in the path";
        if (placeholder(out, m, i)) {
            if (star && out + i > star)
                return "a placeholder after the '*'";
            if (++caps > SF_CAPS_MAX)
                return "more than 8 placeholders in the path";
        }
    }
    size_t upto = star ? (size_t)(star - out) : m;
    uint16_t slashes = 0;
    for (size_t i = 0; i < upto; i++)
        slashes += out[i] == '/';
    *pt = (sf_pat_t){out, (uint32_t)m, star ? (int32_t)(star - out) : -1, star || caps, slashes};
    return NULL;
}

/* ---- the index ---- */

/*
 * A path's bucket: eight bytes a multiply, from the table's random seed.
 * Not SipHash (four of them a request were 1% of a small file's cost): a
 * request only picks a bucket, it cannot lengthen a chain, and the seed
 * keeps a file's author from making its chains long on purpose.
 */
static uint32_t hash(const sf_index_t *ix, const char *p, size_t n)
{
    uint64_t h, w;
    memcpy(&h, ix->key, sizeof h);
    h ^= n;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
    }
    w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 32;
    return (uint32_t)h & ix->mask;
}

/* Room for npat patterns: 0, or -1. */
static int index_init(sf_index_t *ix, uint32_t npat)
{
    uint32_t b = 16;
    while (b < 2 * npat)
        b *= 2;
    memset(ix, 0, sizeof *ix);
    ix->mask = b - 1;
    ix->head = calloc(b, sizeof *ix->head);
    ix->dhead = calloc(b, sizeof *ix->dhead);
    ix->next = calloc(npat + 1, sizeof *ix->next);
    ix->any = calloc(SF_DYNAMIC_MAX, sizeof *ix->any);
    ix->afit = calloc(SF_DYNAMIC_MAX, sizeof *ix->afit);
    siphash_key(ix->key);
    return ix->head && ix->dhead && ix->next && ix->any && ix->afit ? 0 : -1;
}

static void index_free(sf_index_t *ix)
{
    free(ix->head), free(ix->dhead), free(ix->next), free(ix->any), free(ix->afit);
    memset(ix, 0, sizeof *ix);
}

/* The length of the first segment of path[0..n) (after its '/'). */
static size_t first_seg(const char *path, size_t n)
{
    const char *e = n > 1 ? memchr(path + 1, '/', n - 1) : NULL;
    return e ? (size_t)(e - path) - 1 : n > 0 ? n - 1 : 0;
}

/* Is p's first segment literal (no placeholder, no splat in it)?  Then a
   path it matches has that first segment. */
static int literal_first(const sf_pat_t *p)
{
    size_t k = first_seg(p->p, p->n);
    return k && !placeholder(p->p, p->n, 1) && !memchr(p->p + 1, '*', k);
}

/* Append pattern i to the chain at *at (the file's order kept). */
static void chain(sf_index_t *ix, uint32_t *at, uint32_t i)
{
    while (*at)
        at = &ix->next[*at - 1];
    *at = i + 1;
}

#define OVER_DYNAMIC                                                                           \
    "over 100 dynamic rules (with '*' or ':name'): Cloudflare's limit, the line is skipped"
#define OVER_STATIC "over 2,000 static rules: Cloudflare's limit, the line is skipped"

/* Pattern i (p) into the index, or NULL: why not (over a limit). */
static const char *index_add(sf_index_t *ix, const sf_pat_t *p, uint32_t i)
{
    if (p->dynamic) {
        if (ix->ndyn >= SF_DYNAMIC_MAX)
            return OVER_DYNAMIC;
        ix->ndyn++;
        if (literal_first(p))
            chain(ix, &ix->dhead[hash(ix, p->p + 1, first_seg(p->p, p->n))], i);
        else
            ix->afit[ix->nany] = (uint32_t)p->slashes << 1 | (p->star >= 0),
            ix->any[ix->nany++] = i;
        return NULL;
    }
    if (ix->nstatic >= SF_STATIC_MAX)
        return OVER_STATIC;
    ix->nstatic++;
    chain(ix, &ix->head[hash(ix, p->p, p->n)], i);
    return NULL;
}

/* The dynamic patterns a path may match, in the file's order: those of its
   first segment's chain (filtered) merged with the list. */
typedef struct dyn_walk {
    const sf_index_t *ix;
    const sf_pat_t *(*pat)(const void *, uint32_t);
    const void *t;
    const char *seg; /* the path's first segment */
    size_t segn;
    uint32_t c, a;          /* the chain's next + 1, the list's next */
    uint32_t slashes, bare; /* the path's '/'s, and without a trailing one */
} dyn_walk_t;

/* Can p match a path of w's, by their '/'s?  (One compare a rule: most of
   the list is left at that.) */
static int slashes_fit(const dyn_walk_t *w, const sf_pat_t *p)
{
    return p->star < 0 ? p->slashes == w->bare : p->slashes <= w->slashes;
}

static void walk_start(dyn_walk_t *w, const sf_index_t *ix,
                       const sf_pat_t *(*pat)(const void *, uint32_t), const void *t,
                       const char *path, size_t n)
{
    *w = (dyn_walk_t){ix, pat, t, path + 1, first_seg(path, n), 0, 0, 0, 0};
    w->c = ix->ndyn > ix->nany ? ix->dhead[hash(ix, w->seg, w->segn)] : 0;
    for (size_t i = 0; i < n; i++)
        w->slashes += path[i] == '/';
    w->bare = w->slashes - (n > 1 && path[n - 1] == '/');
}

/* The next dynamic pattern's number + 1, or 0: none left. */
static uint32_t walk_next(dyn_walk_t *w)
{
    while (w->c) { /* the chain's next one of this first segment */
        const sf_pat_t *p = w->pat(w->t, w->c - 1);
        if (slashes_fit(w, p) && first_seg(p->p, p->n) == w->segn &&
            !memcmp(p->p + 1, w->seg, w->segn))
            break;
        w->c = w->ix->next[w->c - 1];
    }
    for (uint32_t f; w->a < w->ix->nany; w->a++) /* slashes_fit, from the list's copy */
        if ((f = w->ix->afit[w->a]) & 1 ? f >> 1 <= w->slashes : f >> 1 == w->bare)
            break;
    uint32_t a = w->a < w->ix->nany ? w->ix->any[w->a] + 1 : 0;
    if (w->c && (!a || w->c < a)) {
        uint32_t k = w->c;
        w->c = w->ix->next[k - 1];
        return k;
    }
    if (a)
        w->a++;
    return a;
}

/* The static patterns equal to path[0..n) (its trailing '/' aside): the
   first's number + 1, the next by ix->next; 0: none. */
static uint32_t index_first(const sf_index_t *ix, const sf_pat_t *(*pat)(const void *, uint32_t),
                            const void *t, const char *path, size_t n)
{
    if (n > 1 && path[n - 1] == '/')
        n--;
    for (uint32_t k = ix->head[hash(ix, path, n)]; k; k = ix->next[k - 1]) {
        const sf_pat_t *p = pat(t, k - 1);
        if (p->n == n && !memcmp(p->p, path, n))
            return k;
    }
    return 0;
}

/* ---- lines ---- */

typedef struct lines {
    char *p, *end;
    int line;
} lines_t;

/* The next line (NUL-terminated in place, '\r' dropped), or NULL. */
static char *next_line(lines_t *ls, size_t *len)
{
    if (ls->p >= ls->end)
        return NULL;
    char *s = ls->p, *nl = memchr(s, '\n', (size_t)(ls->end - s));
    char *e = nl ? nl : ls->end;
    ls->p = e + 1;
    ls->line++;
    *e = 0;
    if (e > s && e[-1] == '\r')
        *--e = 0;
    *len = (size_t)(e - s);
    return s;
}

/* Split s into at most max words (in place): their number, or max + 1 when
   more; a word that begins with '#' ends the line. */
static int words(char *s, char **w, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, " \t", &save); t && *t != '#'; t = strtok_r(NULL, " \t", &save)) {
        if (n == max)
            return max + 1;
        w[n++] = t;
    }
    return n;
}

/* Is every byte of s one a target or a Location may carry? */
static int visible(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

/* ---- _redirects ---- */

/* "200", "301!", ...: the status and force, or why not. */
static const char *status_word(const char *w, sf_rule_t *r)
{
    char *e;
    long v = strtol(w, &e, 10);
    r->force = *e == '!';
    if (e == w || (*e && strcmp(e, "!")) || strlen(w) > 4)
        return "the status is not a number (200, 301, 302, 303, 307, 308, 404, ...)";
    if (!(v == 200 || v == 301 || v == 302 || v == 303 || v == 307 || v == 308 ||
          (v >= 400 && v <= 599)))
        return "not a status a rule may have (200, 301, 302, 303, 307, 308, 400-599)";
    r->status = (uint16_t)v;
    return NULL;
}

/* One line into t->r[t->n] (room for it), *added 1 when it is a rule:
   NULL, or why not. */
static const char *rule_line(sf_redirects_t *t, char *s, char *pat, int *added)
{
    char *w[3];
    int nw = words(s, w, 3);
    *added = 0;
    if (nw == 0)
        return NULL;
    if (nw == 1 || nw > 3)
        return nw == 1 ? "a path without a destination (from to [status])"
                       : "more than three words: query and condition matches are not "
                         "supported (from to [status])";
    sf_rule_t *r = &t->r[t->n];
    *r = (sf_rule_t){.status = 301, .to = w[1], .tolen = (uint32_t)strlen(w[1])};
    const char *no = nw == 3 ? status_word(w[2], r) : NULL;
    if (no || (no = pat_make(&r->from, w[0], pat)))
        return no;
    r->absolute = !strncmp(w[1], "https://", 8) || !strncmp(w[1], "http://", 7);
    if (!visible(w[1]) || (!r->absolute && (w[1][0] != '/' || w[1][1] == '/')))
        return "the destination is neither a path ('/...') nor an http(s):// URL";
    if (r->absolute && r->status != 301 && r->status != 302 && r->status != 303 &&
        r->status != 307 && r->status != 308)
        return "a rewrite or page from another server: a redirect (3xx) only, or -P";
    if ((no = index_add(&t->ix, &r->from, t->n)))
        return no;
    *added = 1;
    return NULL;
}

static const sf_pat_t *rule_pat(const void *t, uint32_t i)
{
    return &((const sf_redirects_t *)t)->r[i].from;
}

/* How many lines text[0..n) has, but at most cap. */
static uint32_t count_lines(const char *text, size_t n, uint32_t cap)
{
    uint32_t k = 1;
    for (const char *p = text; k < cap && (p = memchr(p, '\n', (size_t)(text + n - p))); p++)
        k++;
    return k;
}

#define SF_RULES_MAX (SF_STATIC_MAX + SF_DYNAMIC_MAX)
#define SF_FIELDS_TOTAL 16384 /* field lines of one _headers */

/* A rule line's kind seen from its first word alone, where that is sure (a
   path with no escape, dot segment or empty segment: decoding leaves it as
   it is): 1 static, 2 dynamic; 0: not sure (parsed to know), or no rule. */
static int plain_kind(const char *s, size_t len)
{
    size_t i = 0, e;
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
        i++;
    for (e = i; e < len && s[e] != ' ' && s[e] != '\t';)
        e++;
    if (e == i || s[i] != '/')
        return 0;
    int dyn = 0;
    for (size_t k = i; k < e; k++) {
        char c = s[k];
        if (c == '%' || c == '?' || (k > i && s[k - 1] == '/' && (c == '/' || c == '.')))
            return 0; /* (a segment that begins with '.' may be a dot segment: not sure) */
        dyn |= c == '*' || (c == ':' && placeholder(s + i, e - i, k - i));
    }
    return dyn ? 2 : 1;
}

/* Should line s (its kind plainly full) be refused unparsed: why, or NULL. */
static const char *over_unparsed(const sf_index_t *ix, const char *s, size_t len)
{
    int kind = ix->nstatic >= SF_STATIC_MAX || ix->ndyn >= SF_DYNAMIC_MAX ? plain_kind(s, len) : 0;
    return kind == 1 && ix->nstatic >= SF_STATIC_MAX  ? OVER_STATIC
           : kind == 2 && ix->ndyn >= SF_DYNAMIC_MAX ? OVER_DYNAMIC
                                                     : NULL;
}

int sf_redirects_parse(sf_redirects_t *t, const char *text, size_t n, sf_bad_fn *bad, void *arg)
{
    memset(t, 0, sizeof *t);
    uint32_t max = count_lines(text, n, SF_RULES_MAX); /* rules kept at most */
    t->text = malloc(n + 1);
    /* a pattern decoded is no longer than its word, plus its NUL; the word
       being read needs its length + 2: n + 2 a rule kept, + 2 for it */
    t->pats = malloc(n + 2 * (size_t)max + 8);
    t->r = malloc(((size_t)max + 1) * sizeof *t->r); /* + the line being read */
    if (!t->text || !t->pats || !t->r || index_init(&t->ix, max) < 0) {
        sf_redirects_free(t);
        return -1;
    }
    memcpy(t->text, text, n);
    t->text[n] = 0;
    lines_t ls = {t->text, t->text + n, 0};
    char *s, *pat = t->pats;
    size_t len;
    unsigned refused = 0;
    while (ls.p < ls.end) {
        if (refused >= SF_REFUSED_MAX ||
            (t->ix.nstatic >= SF_STATIC_MAX && t->ix.ndyn >= SF_DYNAMIC_MAX)) {
            t->stop_line = ls.line + 1; /* nothing more could be kept, or junk */
            t->unread = (size_t)(ls.end - ls.p);
            break;
        }
        s = next_line(&ls, &len);
        int added = 0;
        /* (t->n <= max: index_add refuses a rule past the limits) */
        const char *no = len > SF_LINE_MAX     ? "over 1,000 bytes"
                         : memchr(s, 0, len) ? "a NUL byte (the line is not what it shows)"
                                             : over_unparsed(&t->ix, s, len);
        if (!no && (no = rule_line(t, s, pat, &added)))
            refused++; /* (a line refused unparsed costs little: not counted) */
        if (no && bad)
            bad(arg, ls.line, no);
        if (added) {
            t->r[t->n].line = ls.line;
            pat += t->r[t->n].from.n + 1;
            t->n++;
        }
    }
    return 0;
}

void sf_redirects_free(sf_redirects_t *t)
{
    free(t->text), free(t->pats), free(t->r);
    index_free(&t->ix);
    memset(t, 0, sizeof *t);
}

const sf_rule_t *sf_redirects_match(const sf_redirects_t *t, const char *path, size_t n,
                                    sf_caps_t *caps)
{
    if (!t->n)
        return NULL;
    uint32_t k = index_first(&t->ix, rule_pat, t, path, n), d;
    dyn_walk_t w;
    walk_start(&w, &t->ix, rule_pat, t, path, n);
    while ((d = walk_next(&w)) && (!k || d < k))
        if (sf_pat_match(&t->r[d - 1].from, path, n, caps))
            return &t->r[d - 1];
    if (!k)
        return NULL;
    caps->n = 0, caps->splat = NULL, caps->splatlen = 0;
    return &t->r[k - 1];
}

/* ---- _headers ---- */

int sf_field_owned(const char *name)
{
    static const char *const own[] = {
        "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade",
        "proxy-connection", "te", "trailer", "content-encoding", "content-range", "date",
        "server", "location", "etag", "last-modified", "accept-ranges", "status"};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (!strcasecmp(name, own[i]))
            return 1;
    return 0;
}

/* RFC 9110 5.6.2: a token's byte. */
static int tchar(char c)
{
    return name_byte(c) || (c && strchr("!#$%&'*+-.^`|~", c));
}

/* Is v Basic-Auth's "user:password user2:password2" (each word with a
   user, a colon, at most 200 bytes: what an Authorization field carries)? */
static int auth_pairs(const char *v)
{
    int words = 0;
    for (size_t n; *(v += strspn(v, " \t")); v += n, words++) {
        n = strcspn(v, " \t");
        const char *colon = memchr(v, ':', n);
        if (!colon || colon == v || n > 200)
            return 0;
    }
    return words > 0;
}

/* An indented line of block b: "Name: value" or "! Name".  NULL, or why not. */
static const char *field_line(sf_headers_t *t, sf_block_t *b, char *s)
{
    sf_hfield_t f = {0};
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == '!') {
        f.detach = 1;
        for (s++; *s == ' ' || *s == '\t'; s++)
            ;
    }
    char *name = s;
    while (tchar(*s))
        s++;
    char *e = s;
    if (f.detach) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s)
            return "a detach line names one field (! Name)";
    } else {
        if (*s != ':')
            return "not a field line (Name: value, or ! Name)";
        for (s++; *s == ' ' || *s == '\t'; s++)
            ;
        f.value = s;
        size_t vl = strlen(s);
        while (vl && (s[vl - 1] == ' ' || s[vl - 1] == '\t'))
            s[--vl] = 0;
        for (size_t i = 0; i < vl; i++)
            if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
                return "a control character in the value";
    }
    if (e == name)
        return "no field name";
    *e = 0;
    f.name = name;
    if (!f.value)
        f.value = "";
    f.auth = !strcasecmp(name, "basic-auth");
    if (f.auth && (f.detach || !auth_pairs(f.value)))
        return "Basic-Auth takes user:password words (Netlify's), at most 200 bytes each";
    if (sf_field_owned(name))
        return "a field gatling sets itself (Content-Length, Transfer-Encoding, Connection, "
               "Content-Encoding, Date, ...: gatling.8, SITE FILES)";
    if (b->n >= SF_BLOCK_FIELDS_MAX)
        return "over 32 field lines in one block";
    if (t->nf >= t->fmax)
        return "over 16,384 field lines in the file";
    t->f[t->nf++] = f;
    t->nauth += f.auth;
    b->n++;
    return NULL;
}

static const sf_pat_t *block_pat(const void *t, uint32_t i)
{
    return &((const sf_headers_t *)t)->b[i].pat;
}

/* A path line: a block begins (*cur), or why not (*cur NULL: its fields
   are skipped with it). */
static const char *block_line(sf_headers_t *t, char *s, char *pat, sf_block_t **cur)
{
    char *w[2];
    *cur = NULL;
    int nw = words(s, w, 1);
    if (nw != 1)
        return nw ? "more than one word on a path line" : NULL;
    if (t->nb > SF_RULES_MAX) /* (cannot be: index_add refuses first; b has room for one more) */
        return "over 2,100 blocks";
    sf_block_t *b = &t->b[t->nb];
    *b = (sf_block_t){.first = t->nf};
    const char *no = pat_make(&b->pat, w[0], pat);
    if (!no)
        no = index_add(&t->ix, &b->pat, t->nb);
    if (!no)
        *cur = &t->b[t->nb++];
    return no;
}

int sf_headers_parse(sf_headers_t *t, const char *text, size_t n, sf_bad_fn *bad, void *arg)
{
    memset(t, 0, sizeof *t);
    uint32_t max = count_lines(text, n, SF_RULES_MAX), maxf = count_lines(text, n, SF_FIELDS_TOTAL);
    t->text = malloc(n + 1);
    t->pats = malloc(n + 2 * (size_t)max + 8); /* as sf_redirects_parse's */
    t->b = malloc(((size_t)max + 1) * sizeof *t->b);
    t->f = malloc((size_t)maxf * sizeof *t->f);
    t->fmax = maxf;
    if (!t->text || !t->pats || !t->b || !t->f || index_init(&t->ix, max) < 0) {
        sf_headers_free(t);
        return -1;
    }
    memcpy(t->text, text, n);
    t->text[n] = 0;
    lines_t ls = {t->text, t->text + n, 0};
    char *s, *pat = t->pats;
    sf_block_t *cur = NULL;
    int skipping = 0; /* the fields of a refused path line */
    size_t len;
    while ((s = next_line(&ls, &len))) {
        const char *no = NULL;
        size_t lead = strspn(s, " \t");
        if ((!s[lead] || s[lead] == '#') && !memchr(s, 0, len))
            continue;
        if (len > SF_LINE_MAX)
            no = "over 1,000 bytes";
        else if (memchr(s, 0, len)) {
            no = "a NUL byte (the line is not what it shows)";
            if (!lead) /* a path line's fields go with it */
                cur = NULL, skipping = 1;
        } else if (!lead) {
            no = block_line(t, s, pat, &cur);
            skipping = no != NULL;
            if (cur)
                pat += cur->pat.n + 1, cur->line = ls.line;
        } else if (cur)
            no = field_line(t, cur, s);
        else if (!skipping)
            no = "a field line before any path";
        if (no && bad)
            bad(arg, ls.line, no);
    }
    return 0;
}

void sf_headers_free(sf_headers_t *t)
{
    free(t->text), free(t->pats), free(t->b), free(t->f);
    index_free(&t->ix);
    memset(t, 0, sizeof *t);
}

unsigned sf_headers_match(const sf_headers_t *t, const char *path, size_t n, uint32_t *out,
                          unsigned max)
{
    if (!t->nb)
        return 0;
    unsigned k = 0;
    uint32_t s = index_first(&t->ix, block_pat, t, path, n);
    sf_caps_t caps;
    dyn_walk_t w;
    walk_start(&w, &t->ix, block_pat, t, path, n);
    uint32_t d = walk_next(&w);
    while (k < max && (s || d)) { /* the static and dynamic ones merged in order */
        if (d && (!s || d < s)) {
            if (sf_pat_match(&t->b[d - 1].pat, path, n, &caps))
                out[k++] = d - 1;
            d = walk_next(&w);
            continue;
        }
        out[k++] = s - 1;
        const sf_block_t *b = &t->b[s - 1];
        for (s = t->ix.next[s - 1]; s; s = t->ix.next[s - 1]) /* the next equal one */
            if (t->b[s - 1].pat.n == b->pat.n && !memcmp(t->b[s - 1].pat.p, b->pat.p, b->pat.n))
                break;
    }
    return k;
}

/* ---- substitution ---- */

/* The binding of the placeholder name[0..n) ("splat" too), or NULL. */
static const char *bound(const sf_caps_t *c, const char *name, size_t n, size_t *vlen)
{
    if (n == 5 && !memcmp(name, "splat", 5) && c->splat) {
        *vlen = c->splatlen;
        return c->splat;
    }
    for (unsigned i = 0; i < c->n; i++)
        if (c->c[i].nlen == n && !memcmp(c->c[i].name, name, n)) {
            *vlen = c->c[i].vlen;
            return c->c[i].v;
        }
    return NULL;
}

long sf_subst(char *out, size_t cap, const char *tmpl, size_t tn, const sf_caps_t *caps)
{
    return sf_subst_keep(out, cap, tmpl, tn, caps, PATH_KEEP);
}

long sf_subst_keep(char *out, size_t cap, const char *tmpl, size_t tn, const sf_caps_t *caps,
                   const char *keep)
{
    size_t o = 0;
    for (size_t i = 0; i < tn;) {
        size_t k = i + 1, vl = 0;
        while (tmpl[i] == ':' && k < tn && name_byte(tmpl[k]))
            k++;
        const char *v = k > i + 1 ? bound(caps, tmpl + i + 1, k - i - 1, &vl) : NULL;
        if (v) {
            if (3 * vl >= cap - o) /* path_encode writes 3 bytes a byte at most */
                return -1;
            o += path_encode(out + o, v, vl, keep);
            i = k;
            continue;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = tmpl[i++];
    }
    if (o >= cap)
        return -1;
    out[o] = 0;
    return (long)o;
}
