/*
 * conditional — the preconditions of RFC 9110 13 over a parsed request:
 * entity-tag comparison, If-Match, If-Unmodified-Since, If-None-Match,
 * If-Modified-Since (13.2.2, in that order) and If-Range (13.1.5).  Pure:
 * no I/O, no allocation.
 */
#ifndef GATLING_CONDITIONAL_H
#define GATLING_CONDITIONAL_H

#include "http_parse.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/*
 * Does the If-None-Match / If-Match / If-Range value h[0..n) match etag (as
 * site/encoding.c's enc_etag writes it, optionally with a "W/" prefix)?  h is "*" or a comma
 * list of entity-tags, each [W/]"opaque"; "*" matches (the caller calls this
 * only when a current representation exists).  weak != 0 selects the weak
 * comparison (If-None-Match: W/ ignored on both sides), 0 the strong one
 * (If-Match, If-Range: both must be strong and equal).  Returns 1 on a
 * match, 0 otherwise; a malformed value never matches (for each of the three
 * headers that is the safe answer: send the full 200, or 412).
 */
int cond_etag_match(const char *h, size_t n, const char *etag, int weak);

/*
 * The preconditions of req for a representation with strong ETag etag and
 * Last-Modified mtime, in 13.2.2's order: 0 to go on, 304 or 412.  A date
 * is any of RFC 9110 5.6.7's three forms (cachectl.h's cc_http_date, with
 * now, the wall clock's seconds, for an rfc850-date's century); one that
 * does not parse is ignored, as if absent.
 */
int cond_preconditions(const http_request_t *req, const char *etag, time_t mtime, int64_t now);

/*
 * Does If-Range (absent: yes) let the Range header apply?  One entity-tag
 * compared strongly (a weak tag, or a list, which the field does not allow,
 * never matches), or an HTTP-date equal to Last-Modified (read as
 * cond_preconditions reads one, with now).
 */
int cond_if_range(const http_request_t *req, const char *etag, time_t mtime, int64_t now);

#endif
