/*
 * dictionary — Compression Dictionary Transport (RFC 9842) for the static
 * handler: which files are dictionaries (a .dictionary file in their
 * directory says, read on a file cache miss), the Use-As-Dictionary field
 * they carry once site/dict.c has indexed their hash, and the dcz coding
 * of a file for a request that offers a dictionary whose match pattern
 * its URL fits.  Hashes and deltas are made on the job pool (site/jobs.h)
 * while the request waits, once each; a request that cannot have its
 * delta gets the ordinary response, never an error.
 *
 * .dictionary: one rule a line, "NAME [match=PATTERN] [match-dest=DEST]
 * [id=ID]" (http/dcz.h's dcz_rule_parse); NAME, with '*' wildcards, names
 * files in the directory; the match defaults to the directory's URL and
 * NAME.  At most DICTIONARY_READ_MAX bytes of it are read; the first rule
 * that names a file decides.
 */
#ifndef GATLING_DICTIONARY_H
#define GATLING_DICTIONARY_H

#include "ranges.h"
#include "target.h"
#include "http/exchange.h"
#include "site/fcache.h"
#include "site/fs.h"

#define DICTIONARY_FILE ".dictionary"
#define DICTIONARY_READ_MAX 4096
#define DICTIONARY_USE_MAX 640 /* a Use-As-Dictionary value */

/* What serve_file's coding is for dcz: apart from encoding.h's ENC_* bits. */
#define ENC_DCZ 16

/* the exchange's HSLOT_DICT (hstate.h): what this request waited for once already */
enum { DICT_TRIED_HASH = 1, DICT_TRIED_DELTA = 2, DICT_TRIED_SCAN = 4 };

/*
 * The Use-As-Dictionary value for the file rel (below the vhost directory
 * vfd, version st) from its directory's .dictionary, malloc'd; NULL when
 * no rule names it, when it is empty or larger than DICT_MAX, or on any
 * error.  The caller gives none for a file behind credentials.
 */
char *dictionary_for(int vfd, const fs_at_t *at, const char *rel, const struct stat *st,
                     const char *root_check);

/*
 * f (served for t) is a dictionary: is its hash indexed?  1: yes, send f->dict as
 * Use-As-Dictionary; 0: no (not now: send none); -1: the request waits for the hash (ex->job set, f
 * released, ex->file NULL): return and be dispatched again.
 */
int dictionary_indexed(exchange_t *ex, const target_t *t, fcache_entry_t *f);

/*
 * Does ex (for t) get f as dcz?  The dictionary it offers is opened again
 * below t's virtual host directory; one changed since it was hashed is
 * forgotten.
 * 1: *b is the dcz body (ex owns it), etag its own tag, and the caller
 * sends Content-Encoding: dcz and Vary: Accept-Encoding,
 * Available-Dictionary; 0: serve as before; -1: the request waits for the
 * delta (as dictionary_indexed).  A hash the index does not hold, for a
 * file that a .dictionary rule names, makes the request wait (once) for
 * a scan of the file's directory: the files its rules name whose match
 * fits the path are hashed into the index (dict_scan_begin), so that
 * dictionaries served before a restart, or by another -W worker, count.
 */
int dictionary_delta(exchange_t *ex, const target_t *t, fcache_entry_t *f, body_t *b, char *etag);

#endif
