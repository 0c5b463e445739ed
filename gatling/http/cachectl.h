/*
 * cachectl — the HTTP caching rules of a shared cache (RFC 9111, RFC 5861):
 * a response's Cache-Control (a request's is not obeyed: gatling.8's cache
 * section), what may be stored, freshness lifetime, age, and the Vary list.
 * Pure: no I/O, no allocation, no globals; every input is a pointer/length
 * pair, every time a count of seconds since the epoch (int64_t).  route/cache.c applies them;
 * site/rstore.c holds what they allowed.
 */
#ifndef GATLING_CACHECTL_H
#define GATLING_CACHECTL_H

#include <stddef.h>
#include <stdint.h>

#define CC_NONE (-1) /* a delta-seconds directive that is absent */
/* delta-seconds larger than this are this (RFC 9111 1.2.2: 2^31) */
#define CC_DELTA_MAX 2147483648LL

/* A response's Cache-Control (RFC 9111 5.2.2, RFC 5861). */
typedef struct cc_resp {
    int64_t max_age, s_maxage;      /* CC_NONE or seconds */
    int64_t stale_while_revalidate; /* CC_NONE or seconds */
    int64_t stale_if_error;         /* CC_NONE or seconds */
    uint8_t no_store, no_cache;     /* no-cache with or without field names */
    uint8_t private_;               /* private, with or without field names */
    uint8_t public_;
    uint8_t must_revalidate; /* must-/proxy-revalidate, or s-maxage (9111 5.2.2.10) */
    uint8_t must_understand;
    uint8_t immutable;
} cc_resp_t;

/* Empty directives: every delta CC_NONE, every flag 0. */
void cc_resp_init(cc_resp_t *cc);

/*
 * Add the directives of one Cache-Control field line v[0..n) (a comma list
 * of token[=token|quoted-string], case-insensitive names) to cc: call once
 * per field line, after cc_resp_init.  Unknown directives are ignored.
 * Whitespace may surround commas and "="; empty members are skipped.  A
 * quoted-string is one when it opens right after "=", closes, and only
 * whitespace follows it: commas inside it do not split (private="a, b"); an
 * unclosed or trailed quote is an ordinary byte, so it cannot hide the
 * directives after it.  A directive given twice keeps the most restrictive
 * value (RFC 9111 4.2.1): the smaller number.  A max-age, s-maxage,
 * stale-while-revalidate or stale-if-error whose value is not delta-seconds
 * ("abc", "-1", "1.5", empty) counts as 0 (the reading that allows least),
 * as does one without "=".
 * max-age="10" (quoted) is read as 10; digits past 2^31 are CC_DELTA_MAX.
 * Lines "a" and "b" parse as the one line "a, b" does when no value in "a"
 * opens a quote it does not close; the order of lines and of directives
 * does not matter.  Never reads past v + n; any bytes are accepted.
 */
void cc_parse_resp(cc_resp_t *cc, const char *v, size_t n);

/* What a response is, for cc_storable: statuses cacheable by default
   (RFC 9110 15.1: 200 203 204 206 300 301 308 404 405 410 414 501). */
int cc_status_heuristic(int status);

/*
 * May a shared cache store this response to a GET (RFC 9111 3, 3.5)?
 * cc: its Cache-Control; has_expires: an Expires field is present (even
 * invalid: it then means already expired); authorization: the request
 * carried Authorization; ttl: the operator's lifetime for responses without
 * explicit freshness (0: none).  No for no-store, private, a status other
 * than 200 203 204 300 301 308 404 405 410 414 501 (206 and 304 are never
 * stored whole here; a status outside 200..599 never) unless it has explicit
 * freshness (max-age, s-maxage, Expires) or public; with Authorization only
 * when must-revalidate, public or s-maxage allow it; with must-understand
 * only for those statuses (5.2.2.3: no-store still wins, the safe reading of
 * a SHOULD).  A response with explicit freshness or public is storable (no-cache
 * too: it is revalidated before use); one without is storable when
 * cc_status_heuristic(status) and ttl > 0, or last_modified says a heuristic
 * lifetime applies (has_last_modified).  1 or 0.
 */
int cc_storable(int status, const cc_resp_t *cc, int has_expires, int has_last_modified,
                int authorization, int64_t ttl);

/*
 * The freshness lifetime (RFC 9111 4.2.1), in seconds, >= 0: s-maxage,
 * else max-age, else Expires - Date (expires CC_NONE: absent; an invalid
 * Expires is passed as 0: already expired; date CC_NONE: the response time
 * stands for Date), else, for a cc_status_heuristic status, the operator's
 * ttl if > 0, else 10% of (Date - Last-Modified) (last_modified CC_NONE:
 * none) capped at a day, else 0.  no-cache makes it 0.  Never more than
 * CC_DELTA_MAX (so age + lifetime cannot overflow); Expires with neither
 * Date nor response time is 0.
 */
int64_t cc_lifetime(const cc_resp_t *cc, int status, int64_t date, int64_t expires,
                    int64_t last_modified, int64_t response_time, int64_t ttl);

/*
 * The age the response had when it arrived (RFC 9111 4.2.3,
 * corrected_initial_age): age_value the Age field's seconds (CC_NONE:
 * absent; a bad value is CC_NONE), date_value its Date (CC_NONE: absent),
 * request_time and response_time when the request went out and the
 * response head came back (CC_NONE: unknown; the delay is then 0, and so is
 * the apparent age without response_time).  An absent Age is age_value 0
 * (the delay still counts), a Date after the response time an apparent age
 * of 0.  >= 0, at most CC_DELTA_MAX (RFC 9111 5.1: an age that overflows
 * is 2^31).
 */
int64_t cc_initial_age(int64_t age_value, int64_t date_value, int64_t request_time,
                       int64_t response_time);

/* Seconds in an Age field value p[0..n) (delta-seconds, whitespace around
   it allowed, capped at CC_DELTA_MAX), or CC_NONE if it is not that ("",
   "-1", "+1", "1.5", "1, 2"). */
int64_t cc_delta(const char *p, size_t n);

/*
 * The Age of a response (RFC 9111 5.1) from its first Age field line
 * p[0..n): the first member of the list (a cache "SHOULD use the first
 * member of the field value, discarding subsequent ones"), as cc_delta
 * reads it; CC_NONE when that member is not delta-seconds ("abc", "-1",
 * "1.5", "1;a=b"): the field is then ignored ("If the field value (after
 * discarding additional members, as per above) is invalid (e.g., it
 * contains something other than a non-negative integer), a cache SHOULD
 * ignore the field").  The caller passes only the first line: two lines
 * are the list "line1, line2".
 */
int64_t cc_age_value(const char *p, size_t n);

/*
 * The one HTTP-date parser (the preconditions', http/conditional.c, and the
 * proxy's backend Date, handlers/proxy_http.c, read theirs here too: libowfat's
 * scan_httpdate knows no rfc850-date and takes 31 April, hour 24, month "Foo").
 * An HTTP-date p[0..n) (RFC 9110 5.6.7; whitespace around it allowed) as
 * seconds since the epoch: IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"),
 * rfc850-date ("Sunday, 06-Nov-94 08:49:37 GMT": a two-digit year that
 * would be more than 50 years after now is the latest past year with those
 * digits) or asctime-date ("Sun Nov  6 08:49:37 1994").  Names of days,
 * months and GMT in any case; otherwise exact: one space where the grammar
 * has one, two-digit day, hour, minute and second, a real day of that month,
 * a four-digit year in the IMF and asctime forms (so "Thu, 18 Aug 50 ..." is
 * not a date), "GMT" and nothing else.  The day name is not checked against
 * the date.  -1 when it is none of them; a date before 1970 is 0.
 */
int64_t cc_http_date(const char *p, size_t n, int64_t now);

/*
 * A targeted cache-control field (RFC 9213), such as CDN-Cache-Control,
 * v[0..n) (its lines joined with ", "): a Dictionary Structured Field
 * (RFC 9651) whose members are Cache-Control directives.  1 with *cc set
 * (from cc_resp_init, then the members as cc_parse_resp applies them) when
 * the value parses and has a member; 0, *cc untouched, when it is empty or
 * a parse error ("that field SHOULD be ignored by the cache", RFC 9213 2.2):
 * then Cache-Control speaks.  Keys are lower case (MAX-AGE is a parse error);
 * parameters are read and ignored; an Integer is a delta (more than 2^31 is
 * CC_DELTA_MAX, a negative one 0), a true Boolean a bare directive, a false
 * one no directive; a value of another type (max-age="10") makes a delta 0
 * and a flag set (private=("a")), the readings that allow least.
 */
int cc_parse_targeted(cc_resp_t *cc, const char *v, size_t n);

/*
 * The field names of a Vary value v[0..n), one per call: *pos starts at 0;
 * returns the length of the next name (set at *name, inside v[0..n)) or 0
 * at the end (*name untouched).  Names are tokens; whitespace around them
 * and empty list members are skipped; a member that is not a token ("a b",
 * "*") is returned as it is (it then matches no request field).
 */
size_t cc_vary_next(const char *v, size_t n, size_t *pos, const char **name);

/* Does the Vary value v[0..n) list "*" (never matches, RFC 9111 4.1)? */
int cc_vary_star(const char *v, size_t n);

/*
 * A request field value for comparing under Vary (RFC 9111 4.1): the
 * value p[0..n) with whitespace (SP, HTAB) around commas and at both ends
 * removed and runs of it inside made one space, into out (cap bytes, no
 * NUL).  A quoted-string is copied as it is (whitespace in it means
 * something); an unclosed one is copied to the end, less trailing
 * whitespace.  The result is at most n bytes, and normalising it again
 * gives it unchanged.  Returns the length, or (size_t)-1 if it does not
 * fit (the caller does not cache).
 */
size_t cc_vary_norm(const char *p, size_t n, char *out, size_t cap);

#endif
