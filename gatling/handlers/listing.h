/*
 * listing — the HTML5 index page of a directory.
 *
 * What is listed: every entry whose name does not start with '.', that is a
 * regular file or a directory, and that is world-readable (S_IROTH; a
 * directory also needs S_IXOTH), i.e. what the server would hand to anyone.
 * Symlinks are followed: a link is listed with its target's type, size and
 * time when the target passes the same test and everyone may reach it
 * (fs_public: no closed directory on the way the link leads), and left out
 * when it dangles.  (Whether the server then serves a link that leaves the
 * document root is fs_open_beneath's decision, not the listing's.)  Whether
 * the directory itself may be listed is the caller's business.
 *
 * The page: title and heading "Index of <path>", a table with Name, Last
 * modified (UTC, "2026-11-21 06:00") and Size, and a "../" row except at "/".
 * Sizes are human-readable in powers of 1024 ("512", "1.2K", "15M"; the
 * exact byte count is in the cell's title attribute); directories show "-".
 * Names are HTML-escaped in text (bytes that are not valid UTF-8, and control
 * characters, show as U+FFFD) and percent-encoded in the relative hrefs, so
 * every name links to itself; directories end in '/'.
 *
 * Sort keys are Apache's, given as the query: N=A / N=D (name, bytewise),
 * M=A / M=D (mtime), S=A / S=D (size), separated from other parameters by
 * '&' or ';' (the first key found wins); ties order by name; anything else
 * gives N=A.  A column header links to its own key, the reverse order for
 * the column currently sorted on, ascending for the others.
 */
#ifndef GATLING_LISTING_H
#define GATLING_LISTING_H

#include <stddef.h>

#include "site/fs.h"

/*
 * Render the listing of the directory open on dirfd (the caller keeps dirfd
 * and its file offset: the directory is reopened as "." relative to it).
 * urlpath[0..n) is the decoded, normalised URL path of the directory below
 * at's directory (where fs_public walks from) and must end with '/'.
 * query[0..qlen) is the raw query string carrying the sort key, or NULL.
 * On success *out is a malloc'd buffer of *outlen bytes
 * (not NUL-terminated; the caller frees it) and 0 is returned; otherwise -1
 * with errno (EINVAL for a urlpath without the final '/', ENOMEM, or what
 * openat/fdopendir/readdir said).  Entries that vanish while being read are
 * left out, not errors.
 */
int listing_render(int dirfd, const fs_at_t *at, const char *urlpath, size_t n, const char *query,
                   size_t qlen, char **out, size_t *outlen);

#endif
