/*
 * sitefiles — a static site's own files at the top of its directory (the
 * root, or a virtual host's directory), as the generators and the hosts
 * that serve them expect (gatling.8, SITE FILES): _redirects (redirects,
 * rewrites, pages with a status), _headers (fields added to or detached
 * from every answer of a path) and an error page per status (404.html,
 * 500.html, ...).  Each is read when it changes (looked at once a second at
 * most, a table built once per change: sitefiles_parse.h), never served.
 *
 * The router's entry (sitefiles_handler) runs once the site is known and
 * before any producer: the control files are 404, the _headers blocks of
 * the request's path are kept in the exchange's slot (HSLOT_SITE), the
 * first _redirects rule that matches redirects, rewrites (the router goes
 * on with the new target) or answers with a page.  The codecs ask the two
 * hooks for every head and every error page (codec/codec.c).
 */
#ifndef GATLING_SITEFILES_H
#define GATLING_SITEFILES_H

#include "handlers/handler.h"
#include "http/head.h"

#include <stddef.h>

#define SF_PAGE_MAX (256 * 1024) /* an error page or a rule's page, at most */

extern const handler_t sitefiles_handler;

/* _headers' fields for ex's answer put into the head h (codec_head_facts
   made it): the answer's fields with the blocks' ones set and detached,
   Content-Type replaced where a block says.  Nothing when no block matched. */
void sitefiles_head(head_t *h, const exchange_t *ex);

/* The page of the site's STATUS.html for an error ex is answered with: a
   malloc'd copy (*n bytes, the caller frees it), or NULL: none. */
char *sitefiles_page(exchange_t *ex, int status, size_t *n);

/* --check: the _redirects and _headers in dirfd (path names it), each bad
   line said on stderr as "gatling: PATH/FILE:LINE: why".  0, or -1 when a
   line was bad. */
int sitefiles_check(int dirfd, const char *path);

#endif
