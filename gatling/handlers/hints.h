/*
 * 103 Early Hints (RFC 8297) from a file beside the pages: while an HTML page
 * is being looked up and sent, an HTTP/2 or HTTP/3 client (codec/admit.c's
 * admit_codec_hints; HTTP/1.1 gets none) can already fetch the styles,
 * scripts and fonts it will ask for.  The file is .early-hints in the page's
 * directory (a dotfile: never served itself), one link-value per line,
 * optionally after "Link:", e.g.
 *
 *     </style.css>; rel=preload; as=style
 *     Link: </app.js>; rel=preload; as=script
 *
 * Blank lines and lines starting with '#' are skipped, and so is a line with
 * a byte a field value cannot carry (controls, DEL, bytes over 0x7e).  The
 * lines become one Link field value, joined by ", ", at most HINTS_MAX - 1
 * bytes (a line that would not fit is left out, and so are the ones after
 * it).  Read once, when the page enters the open-file cache, and only if
 * everyone may read it, as a page (a symlink into a closed directory is not).
 */
#ifndef HINTS_H
#define HINTS_H

#include <stddef.h>

#include "site/fs.h"

#define HINTS_FILE ".early-hints"
#define HINTS_MAX 1024     /* the Link value, NUL included */
#define HINTS_READ_MAX 4096 /* bytes of the file read */

/* The Link value of text[0..n) into out (cap >= 1): its length, 0 if none. */
size_t hints_parse(const char *text, size_t n, char *out, size_t cap);

/* --check's look at one line of an .early-hints, line[0..n) without its
   newline, *len the Link value's length so far (0 before the first, kept by
   the caller): 0 (a line taken, blank, or a comment), or -1 with why (a
   static string) for a line the server leaves out: a byte a field value
   cannot carry, not a link-value ("<URI>; rel=..."), or one past HINTS_MAX. */
int hints_line(const char *line, size_t n, size_t *len, const char **why);

/* The Link value for the page rel (below the directory vfd, at's directory;
   root_check as for fs_open_beneath), malloc'd, or NULL (no file, nothing in
   it, not one everyone may read as fs_public says, ENOMEM). */
char *hints_for(int vfd, const fs_at_t *at, const char *rel, const char *root_check);

#endif
