/*
 * vhost — virtual hosts as the original gatling does them: the Host header,
 * lower-cased, with its port replaced by the port the request arrived on
 * (unless -t), names a directory below the document root ("example.org:80",
 * "[::1]:8000"); if there is none, the name without its port ("example.org",
 * a directory for every port, as --acme takes names from), then "default",
 * then the document root itself (unless -v).
 */
#ifndef GATLING_VHOST_H
#define GATLING_VHOST_H

#include <stddef.h>

#include "http/exchange.h"
#include "http/http_parse.h"

#define VHOST_NAME_MAX 270 /* a 255-byte host name, a port and brackets */

/*
 * The directory name for Host value host (NULL: none sent), requests arriving
 * on local_port.  Writes a NUL-terminated name to out (VHOST_NAME_MAX bytes).
 * Returns its length, 0 when there is no Host, or -1 when the Host is
 * unusable (empty, too long, bad characters, "..", "/"): answer 400.
 */
int vhost_name(const http_str_t *host, int local_port, int keep_port, char *out);

/*
 * The request's virtual host, decided once into ex->route (http/exchange.h)
 * from its Host (vhosts 0: none, the root serves).  The router calls it
 * before any entry; later calls, from the handlers and the stages, return
 * what was decided.  The name's length, or -1 for a Host no directory may be
 * named by (answer 400).
 */
int vhost_route(exchange_t *ex, int vhosts, int keep_port);

/* Which directory vhost_open() chose (VHOST_BARE: the name without its port). */
enum { VHOST_ROOT, VHOST_NAMED, VHOST_DEFAULT, VHOST_BARE };

/*
 * Open the directory serving name (may be ""; NULL: vhosting is off, the
 * root itself) below rootfd: name itself, else name without its ":port",
 * else "default", else the root unless vhost_only; symlinks as for
 * fs_open_beneath(root_real).  Returns a descriptor the caller must close,
 * or -1 with errno ENOENT (no directory may serve this request).  *which
 * (if not NULL) says which directory it is, for the vhost_combined log.
 */
int vhost_open(int rootfd, const char *name, int vhost_only, const char *root_real, int *which);

/* The directory vhost_open() chose as *which, relative to the root: name,
   name without its port, "default", or "" for the root itself (fs_public()
   walks from there).  The name without its port is in a buffer of the
   calling thread's, valid until its next call. */
const char *vhost_dir(int which, const char *name);

/*
 * The access log's name of the directory that served (the vhost_combined
 * log's and the JSON log's vhost), host:port as Apache's %v:%p: name itself
 * for VHOST_NAMED and VHOST_BARE (the name asked for, with its port),
 * "default:PORT", or "-:PORT" for the root, so that goaccess's VCOMBINED
 * format reads every line; every producer (files, backends) logs it so.
 * Into out (cap bytes with its NUL); its length, or 0 with out "" when it
 * does not fit (names are VHOST_NAME_MAX: out of EX_VHOST_CAP always fits).
 */
int vhost_log_name(int which, const char *name, int local_port, char *out, size_t cap);

#endif
