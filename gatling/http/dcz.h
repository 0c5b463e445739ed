/*
 * dcz — the pure parts of Compression Dictionary Transport (RFC 9842) for
 * the dcz coding: the Available-Dictionary field (an RFC 8941 byte
 * sequence holding a SHA-256), the subset of URLPattern pathnames a static
 * site needs (a literal path with '*' wildcards), the 40-byte dcz header,
 * and one line of a .dictionary file.
 *
 * Pure: the caller's buffers in, results out; no allocation, no I/O, no
 * globals, so it is unit-tested and fuzzed byte by byte.  What uses it
 * (the index, the deltas, the choice of coding) is site/dict.c and
 * handlers/dictionary.c.
 */
#ifndef GATLING_DCZ_H
#define GATLING_DCZ_H

#include <stddef.h>
#include <stdint.h>

#define DCZ_HASH_LEN 32     /* SHA-256 */
#define DCZ_HEADER_LEN 40   /* RFC 9842 4.2: 8 bytes of magic, then the hash */
#define DCZ_PATTERN_MAX 256 /* a match pattern, a .dictionary name, an id */
#define DCZ_DEST_MAX 32     /* a match-dest value ("script", "style", ...) */

/*
 * The Available-Dictionary value v[0..n): optional OWS, ':', the base64 of
 * exactly 32 bytes (padding optional, as RFC 8941 4.2.7 lets a parser
 * accept), ':', optional parameters (';' ...), which are ignored, and OWS.
 * 0 with hash filled, -1 for anything else (bad base64, wrong length, a
 * list): the caller then serves the ordinary response.  Reads at most n
 * bytes, whatever n is.
 */
int dcz_parse_available(const char *v, size_t n, uint8_t hash[DCZ_HASH_LEN]);

/*
 * Does the Accept-Encoding value ae[0..n) (NULL: absent) list "dcz"
 * (case-insensitive) with a q other than 0?  A malformed q counts as 0.
 * 1 or 0.
 */
int dcz_accepted(const char *ae, size_t n);

/*
 * Is pat[0..pn) a pattern this server can give as a match: a path that
 * begins with '/', of printable ASCII without '"', '\\', '?', '#', ':', '(',
 * ')', '{', '}', '+' and space (URLPattern syntax beyond '*', which a static
 * site does not need and this matcher does not read)?  1 or 0.
 */
int dcz_pattern_ok(const char *pat, size_t pn);

/*
 * Does the path p[0..n) (decoded, normalised, no query) match pat[0..pn),
 * where '*' matches any run of characters, '/' included (URLPattern's
 * pathname "*" is ".*"), and every other byte itself?  1 or 0.  Linear
 * in practice: the classic backtracking to the last star.
 */
int dcz_match(const char *pat, size_t pn, const char *p, size_t n);

/* Write the dcz header: the magic 5e 2a 4d 18 20 00 00 00 (a zstd skippable
   frame of 32 bytes), then hash. */
void dcz_header(uint8_t out[DCZ_HEADER_LEN], const uint8_t hash[DCZ_HASH_LEN]);

/*
 * One rule of a .dictionary file: the files named by name (a file name in
 * the .dictionary's directory, '*' wildcards) are served with
 * Use-As-Dictionary: match="<match>", and match-dest, id if given.
 */
typedef struct dcz_rule {
    char name[DCZ_PATTERN_MAX];
    char match[DCZ_PATTERN_MAX]; /* "": the directory's URL + name */
    char dest[DCZ_DEST_MAX];     /* "": none */
    char id[DCZ_PATTERN_MAX];    /* "": none */
} dcz_rule_t;

/*
 * Parse the line l[0..n) (no newline): "NAME [match=PATTERN]
 * [match-dest=DEST] [id=ID]", words separated by blanks.  Returns 1 with r
 * filled, 0 for a blank line or a comment ('#'), -1 for a malformed one
 * (a name with '/', an unknown word, a value too long or with a character
 * a field value cannot carry, a match dcz_pattern_ok refuses).
 */
int dcz_rule_parse(const char *l, size_t n, dcz_rule_t *r);

/*
 * The Use-As-Dictionary value for rule r and the directory URL dir (with
 * its trailing '/') into out[0..cap): match="...", then match-dest=("...")
 * and id="..." if given (RFC 9842 2.1, an RFC 8941 dictionary).  Returns
 * its length, or 0 if it does not fit or the match is not dcz_pattern_ok.
 */
size_t dcz_use_value(const dcz_rule_t *r, const char *dir, char *out, size_t cap);

/*
 * The Use-As-Dictionary value (dcz_use_value) of the first rule of the
 * .dictionary text[0..n) whose name matches the file name `name`, for the
 * directory URL dir, into out[0..cap); its length, or 0: none.
 */
size_t dcz_rule_for(const char *text, size_t n, const char *name, const char *dir, char *out,
                    size_t cap);

/*
 * The match pattern inside a value dcz_use_value wrote: *pn bytes at the
 * returned pointer, or NULL if v is no such value.
 */
const char *dcz_use_match(const char *v, size_t *pn);

#endif
