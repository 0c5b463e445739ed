/*
 * auth — .htaccess Basic authentication for the static handler.  crypt
 * costs tens of milliseconds: it never runs on the loop but on a worker
 * thread, and the request is dispatched again with the verdict.
 */
#ifndef GATLING_AUTH_H
#define GATLING_AUTH_H

#include "target.h"

/*
 * 0 to go on, 1 when a 401/429/500 was answered, 2 when the password check
 * was handed to a worker thread (ex->job; the request is dispatched again
 * with the verdict in its slot, hstate.h), or -1.  path is the one
 * credentials are checked against; *granted (if not NULL) remembers the
 * last Authorization value that passed for a cached file.
 */
int auth_check(exchange_t *ex, const char *path, char **granted);

#endif
