/*
 * path — from request-target to a safe path below the document root.
 * Pure functions, no I/O.
 */
#ifndef GATLING_PATH_H
#define GATLING_PATH_H

#include <stddef.h>

#include "http_parse.h"

typedef struct path {
    char *path; /* decoded, normalised, starts with '/', NUL-terminated */
    size_t len;
    const char *query; /* after '?', into the target; NULL if none */
    size_t query_len;
    http_str_t authority; /* absolute-form "http://host:port/...": host:port */
} path_t;

/*
 * Split target into path and query, percent-decode the path and remove dot
 * segments and empty segments (RFC 3986 5.2.4), writing into out (size
 * outsz >= target_len + 2).  origin-form ("/a/b?q") and absolute-form
 * ("http://host/a") are accepted.  Returns 0, or the HTTP status to answer:
 * 400 for a bad escape, a decoded NUL or a target of another form.
 * The result can never climb above "/": ".." at the top is dropped.
 */
int path_from_target(const char *target, size_t target_len, char *out, size_t outsz, path_t *res);

/*
 * Is the normalised path p[0..n) one that is never served: has it a segment
 * that starts with '.' (a dotfile, .htaccess, .git, ...)?  The one exception
 * is the first segment ".well-known" (RFC 8615: ACME's HTTP-01 challenges,
 * security.txt, ...), below which dot names are hidden again.
 */
int path_hidden(const char *p, size_t n);

/* The RFC 8615 prefix, and the part of it ACME's HTTP-01 answers from. */
#define PATH_WELL_KNOWN "/.well-known/"
#define PATH_ACME_CHALLENGE "/.well-known/acme-challenge/"

/* Does the normalised path p[0..n) start with prefix (a literal)? */
int path_has_prefix(const char *p, size_t n, const char *prefix);

/* What stays literal in a URL path (RFC 3986 pchar and '/'), e.g. a Location. */
#define PATH_KEEP "-._~!$&'()*+,;=:@/"

/*
 * Percent-encode src[0..n): letters, digits and the characters in keep stay
 * as they are, every other byte becomes %XX.  dst needs 3 * n bytes.
 * Returns the length written.
 */
size_t path_encode(char *dst, const char *src, size_t n, const char *keep);

#endif
