/*
 * guard — a client-certificate site's directory, whatever name led there
 * (issue 92): the certificates that ask their clients for one (tls/'s
 * client-ca) guard the directory each of their names is served from (its
 * own, name:port or name, never default/ or the root, which every name
 * shares); a request whose route serves one of those directories by
 * another name (a symbolic link, a second directory name for it) is put to
 * that certificate's terms: 421 when its connection was set up with
 * another certificate, its client check otherwise (route/router.c).
 * Directories are told apart by device and inode, the table made again
 * once a second per loop (and at once when the store or the port changes).
 */
#ifndef GATLING_ROUTE_GUARD_H
#define GATLING_ROUTE_GUARD_H

#include "http/exchange.h"

#include <stddef.h>

/* The certificate name whose client-certificate demand covers the
   directory ex's route serves over TLS, when the request named another
   (host[0..n), no port, no final dot): NULL when none does. */
const char *guard_site(exchange_t *ex, const char *host, size_t n);

#endif
