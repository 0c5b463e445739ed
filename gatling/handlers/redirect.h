/*
 * redirect — the static handler's redirects: to a path (a directory's
 * trailing '/', -r for what is not found) and URL symlinks.
 */
#ifndef GATLING_REDIRECT_H
#define GATLING_REDIRECT_H

#include "http/exchange.h"
#include "http/path.h"

/*
 * Redirect to prefix + the encoded path p (+ suffix) + its query, with
 * status; 414 when the Location would not fit.  0, or -1.
 */
int redirect_path(exchange_t *ex, int status, const char *prefix, const path_t *p,
                  const char *suffix);

/* rel below dirfd is a symlink whose target is a URL: 301 to it (1), not
   one (0), or -1 on ENOMEM. */
int redirect_symlink(exchange_t *ex, int dirfd, const char *rel);

#endif
