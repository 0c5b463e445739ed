/*
 * sitefiles_parse — a static site's _redirects and _headers files (the
 * conventions of Netlify, Cloudflare Pages, GitLab and Codeberg Pages) as
 * tables, and the matching of a request's path against them.  Pure: no
 * I/O, no globals; what a table holds it owns (one copy of the file's
 * text, a few arrays), made once per change of the file.
 *
 * A pattern is a path ("/blog/post"), with placeholders (a whole segment
 * ":name", one segment's bytes), at most one splat ("*": any bytes, '/'
 * too; after it only literal bytes) or both.  Patterns are decoded and
 * normalised as a request's path is (http/path.h), and a trailing '/' is
 * not part of one ("/a/" and "/a" are the same rule; a request for "/a/"
 * matches "/a" too); a splat's pattern matches the path as it came.
 * Patterns with neither are static: found by a keyed hash of the path.
 * The others are dynamic: walked in order, only those before the first
 * static match (first match wins, in the file's order).  Cloudflare's
 * limits: SF_STATIC_MAX static and SF_DYNAMIC_MAX dynamic rules (and
 * blocks of _headers), SF_LINE_MAX bytes a line; a line over them is
 * refused with the others: each bad line is told to bad() and skipped.
 */
#ifndef GATLING_SITEFILES_PARSE_H
#define GATLING_SITEFILES_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define SF_LINE_MAX 1000
#define SF_STATIC_MAX 2000
#define SF_DYNAMIC_MAX 100
#define SF_CAPS_MAX 8           /* placeholders in one pattern */
#define SF_BLOCK_FIELDS_MAX 32  /* field lines in one _headers block */
#define SF_REDIRECTS_FILE_MAX (4u << 20) /* bytes of _redirects read at most */
#define SF_REFUSED_MAX 1000 /* _redirects' lines refused, then the rest is not read */
#define SF_HEADERS_FILE_MAX (1u << 20)   /* bytes of _headers read at most */

/* A bad line: its number and why (a constant string). */
typedef void sf_bad_fn(void *arg, int line, const char *why);

typedef struct sf_pat {
    const char *p; /* decoded, normalised, no trailing '/' (but "/"): the table's */
    uint32_t n;
    int32_t star;   /* the splat's offset, or -1 */
    uint8_t dynamic; /* a placeholder or a splat */
    uint16_t slashes; /* its '/'s (before the splat): a path it matches has as many
                         (at least as many) */
} sf_pat_t;

/* What a match bound: placeholders by name, the splat (pointers into the
   pattern and the path matched). */
typedef struct sf_caps {
    unsigned n;
    struct {
        const char *name, *v;
        size_t nlen, vlen;
    } c[SF_CAPS_MAX];
    const char *splat;
    size_t splatlen;
} sf_caps_t;

/* The index of a table's patterns: static ones by hash of the path,
   chained in the file's order; the dynamic ones whose first segment is
   literal ("/blog/:slug") by hash of that segment, chained the same way;
   the other dynamic ones ("/:lang/x", a splat first) in a list, in order.  A path
   is put only to the dynamic patterns of its first segment and the list. */
typedef struct sf_index {
    uint32_t mask;   /* buckets - 1 (a power of two) */
    uint32_t *head;  /* a bucket's first static pattern + 1, 0: none */
    uint32_t *dhead; /* a bucket's first dynamic pattern (by first segment) + 1 */
    uint32_t *next;  /* a pattern's next in its bucket + 1 */
    uint32_t *any;   /* the dynamic patterns of no literal first segment, in order */
    uint32_t *afit;  /* ... each one's '/'s (sf_pat_t's slashes), << 1 | 1 with a splat */
    uint32_t ndyn, nstatic, nany;
    uint8_t key[16];
} sf_index_t;

/* A _redirects rule: from to [status[!]] */
typedef struct sf_rule {
    sf_pat_t from;
    const char *to; /* a path ("/x", with :name and :splat) or http(s)://... */
    uint32_t tolen;
    uint16_t status; /* 200, 301, 302, 303, 307, 308, or 400..599 */
    uint8_t force;   /* "!": applies over an existing file */
    uint8_t absolute;
    int line;
} sf_rule_t;

typedef struct sf_redirects {
    char *text; /* the file's copy, its words NUL-terminated */
    char *pats; /* the patterns, decoded */
    sf_rule_t *r;
    uint32_t n;
    sf_index_t ix;
    int stop_line;   /* the line reading stopped at (SF_REFUSED_MAX, limits full), 0: none */
    size_t unread;   /* ... the bytes from it on, not read */
} sf_redirects_t;

/* A _headers field line: "Name: value", or "! Name" (detach). */
typedef struct sf_hfield {
    const char *name, *value; /* value "" when detach */
    uint8_t detach;
    uint8_t auth; /* Netlify's Basic-Auth: "user:password ..." asked for, never sent */
} sf_hfield_t;

typedef struct sf_block {
    sf_pat_t pat;
    int line;
    uint32_t first, n; /* its fields in sf_headers_t's f */
} sf_block_t;

typedef struct sf_headers {
    char *text;
    char *pats;
    sf_block_t *b;
    uint32_t nb;
    sf_hfield_t *f;
    uint32_t nf, fmax;
    uint32_t nauth; /* its Basic-Auth lines */
    sf_index_t ix;
} sf_headers_t;

/*
 * Parse the _redirects text[0..n) into t (its own copy of the text); the
 * bad lines go to bad(arg, line, why) and are skipped (bad may be NULL).
 * The cost is bounded whatever the file: a line plainly of a kind whose
 * limit is full is refused unparsed, and reading stops (t->stop_line,
 * t->unread) once both limits are full or SF_REFUSED_MAX lines were refused.
 * 0, or -1 on ENOMEM (t empty then).  sf_redirects_free lets it go.
 */
int sf_redirects_parse(sf_redirects_t *t, const char *text, size_t n, sf_bad_fn *bad, void *arg);
void sf_redirects_free(sf_redirects_t *t);

/* The first rule whose pattern matches the decoded, normalised path[0..n),
   its bindings in caps; or NULL.  Costs a hash and the dynamic rules
   before the static match, never a walk over the static ones. */
const sf_rule_t *sf_redirects_match(const sf_redirects_t *t, const char *path, size_t n,
                                    sf_caps_t *caps);

/* The same for _headers: its blocks, the fields each names. */
int sf_headers_parse(sf_headers_t *t, const char *text, size_t n, sf_bad_fn *bad, void *arg);
void sf_headers_free(sf_headers_t *t);

/* The blocks that match path[0..n), in the file's order, into out (at most
   max of them): their number. */
unsigned sf_headers_match(const sf_headers_t *t, const char *path, size_t n, uint32_t *out,
                          unsigned max);

/* Does p match path[0..n)?  1 with its bindings in caps, or 0. */
int sf_pat_match(const sf_pat_t *p, const char *path, size_t n, sf_caps_t *caps);

/*
 * tmpl[0..tn) with ":splat" and each ":name" caps bound replaced by the
 * bound bytes, percent-encoded (what a path keeps stays: http/path.h's
 * PATH_KEEP), into out[0..cap) with a NUL: its length, or -1 when it does
 * not fit.
 */
long sf_subst(char *out, size_t cap, const char *tmpl, size_t tn, const sf_caps_t *caps);

/* sf_subst with the bytes that stay named (keep, as path_encode's): a
   _headers value keeps SF_FIELD_KEEP, so that a placeholder adds no list
   element, parameter or attribute (, ; =) to a field such as Set-Cookie. */
#define SF_FIELD_KEEP "-._~!$&'()*+:@/"
long sf_subst_keep(char *out, size_t cap, const char *tmpl, size_t tn, const sf_caps_t *caps,
                   const char *keep);

/* Is the field name (any case) one gatling sets itself, which _headers may
   neither set nor detach (Content-Length, Transfer-Encoding, Date, ...)? */
int sf_field_owned(const char *name);

#endif
