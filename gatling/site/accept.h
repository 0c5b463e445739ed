/*
 * accept — Accept-Encoding (RFC 9110 12.5.3): which coding a client takes,
 * the codings' names, and which types are worth coding.  A pure parser over
 * the caller's bytes: no I/O, no allocation, no globals (accept.c).
 */
#ifndef GATLING_ACCEPT_H
#define GATLING_ACCEPT_H

#include <stddef.h>

/* Content codings, as bits so that sets of them are masks. */
enum { ENC_IDENTITY = 0, ENC_GZIP = 1, ENC_BR = 2, ENC_ZSTD = 4 };
#define ENC_ALL (ENC_GZIP | ENC_BR | ENC_ZSTD)

/* Flag in enc_accepted()'s result: "identity;q=0" or "*;q=0" without identity. */
#define ENC_NO_IDENTITY 8

/* Entries of enc_accepted()'s preference list: the three codings + identity. */
#define ENC_PREFER_MAX 4

/*
 * Parse the Accept-Encoding value ae[0..n) (ae == NULL: header absent).
 * Returns the mask of codings (ENC_GZIP/BR/ZSTD) acceptable with q > 0, plus
 * ENC_NO_IDENTITY if identity was refused.  Rules: names are
 * case-insensitive, "x-gzip" is gzip, OWS anywhere between items, empty list
 * items are skipped; "*" gives its q to every coding (identity included) that
 * is not listed by name; the first mention of a coding counts; an item whose
 * q (or other syntax) is malformed counts as listed with q=0.  A header that
 * is absent, empty or all garbage accepts identity only, as browsers and
 * other servers expect (RFC 9110 would allow anything when it is absent).
 *
 * If prefer is not NULL it receives, best first, the accepted codings and
 * ENC_IDENTITY: by q, ties broken br > zstd > gzip; identity goes after every
 * coding with a q at least its own if the client gave it a q (by name or
 * "*"), else last.  The count is returned through *nprefer (if not NULL):
 * popcount(result & ENC_ALL) + 1.  Identity is listed even when refused: it
 * is the fallback of last resort.
 */
unsigned enc_accepted(const char *ae, size_t n, unsigned char prefer[ENC_PREFER_MAX], int *nprefer);

/*
 * The coding to serve given the Accept-Encoding value ae[0..n) (NULL:
 * absent) and the mask of codings the server can produce for this file
 * (precompressed siblings, plus ENC_GZIP if it can gzip on the fly): the
 * client's most preferred available one per enc_accepted's order, or
 * ENC_IDENTITY if none is acceptable.  Identity is returned even if the
 * client refused it (serving it is what nginx and Apache do; a 406 would
 * need enc_accepted's ENC_NO_IDENTITY).  Ties go to the smallest coding
 * (br > zstd > gzip): what is chosen here is stored (a sibling, the file
 * cache's variant) and coded once at most.
 */
int enc_choose(const char *ae, size_t n, unsigned available);

/*
 * As enc_choose, for an answer coded on the fly for this request alone (CGI,
 * a backend, a cache miss): ties go to the cheapest coding to make,
 * zstd > br > gzip (zstd 3 costs about a fifth of br 4's time for ~1% more
 * bytes).
 */
int enc_choose_coded(const char *ae, size_t n, unsigned available);

/* The Content-Encoding token for enc ("gzip", "br", "zstd"); NULL for identity. */
const char *enc_name(int enc);

/* The file name suffix of a precompressed sibling (".gz", ".br", ".zst"); NULL for identity. */
const char *enc_suffix(int enc);

/*
 * 1 if the Content-Type ctype (parameters after ';' ignored, case-insensitive)
 * is worth compressing: text/html, text/css, text/plain, text/javascript,
 * application/javascript, application/json, image/svg+xml, application/xml,
 * text/xml.  0 otherwise, also for NULL.
 */
int enc_compressible(const char *ctype);

#endif
