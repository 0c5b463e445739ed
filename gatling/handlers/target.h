/*
 * target — what a request for a static file is about (its normalised path,
 * its virtual host, its open-file cache key), gathered once by static.c and
 * passed to the parts of the static handler (auth.c, redirect.c).
 */
#ifndef GATLING_TARGET_H
#define GATLING_TARGET_H

#include "http/exchange.h"
#include "http/path.h"
#include "site/site.h"
#include "site/vhost.h"
#include "host.h"

#define TARGET_KEY_MAX (VHOST_NAME_MAX + EX_PATH_CAP + 8)

typedef struct target {
    path_t p;
    char vhost[VHOST_NAME_MAX];
    char key[TARGET_KEY_MAX]; /* vhost name + path: the fcache key */
    size_t keylen;
} target_t;

/* The directory ex's site is served from: its host's (handlers/host.h,
   found once per request), which the caller never closes; *which (if not
   NULL) says which kind (vhost.h VHOST_*).  -1 with errno (ENOENT: no
   directory serves the name; EMFILE and its kin: none could be opened). */
int target_dir(exchange_t *ex, int *which);

/* The request's virtual host (ex->route: decided once, host.h) into
   name (VHOST_NAME_MAX bytes): its length, or -1 for a Host no directory may
   be named by (400; the router has answered it before any handler). */
static inline int target_vhost(const site_t *s, exchange_t *ex, char *name)
{
    (void)s;
    int n = host_route(ex);
    memcpy(name, ex->route.name, n < 0 ? 1 : (size_t)n + 1);
    return n;
}

#endif
