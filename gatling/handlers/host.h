/*
 * host — the site behind a request's name, found once per request and held
 * by pointer in its route (ex->route.host), as nginx's server block or
 * h2o's hostconf: the directory that serves the name (open, and which of
 * the name, the name without its port, default/ or the root it is), its
 * TLS terms (the certificate whose client-certificate demand covers that
 * directory, whatever name led there: issue 92), and slots for what the
 * per-site files parse into.
 *
 * One table per loop (the site's HSTATE_HOST), keyed by the route's name
 * (site/vhost.h's vhost_route(); "" with vhosting off), HOST_MAX names; when
 * it is full every name is forgotten at once, and a route that held one of
 * them finds its host again (the generation tells).  One freshness rule for
 * all: a host's directory is opened again, and its slots' files looked at
 * again, when its second is past (a new site directory, or a site file's
 * change, is seen within a second).  The router finds the host before any
 * entry (router_dispatch); producers, stages and pages read it with
 * host_of() and open below host->dirfd (openat, fs_open_beneath) instead of
 * choosing or opening the site's directory again.
 */
#ifndef GATLING_HOST_H
#define GATLING_HOST_H

#include "http/exchange.h"
#include "site/site.h"
#include "site/vhost.h"

#include <stdint.h>
#include <sys/types.h>

#define HOST_MAX 256 /* names per loop, then all forgotten at once */

/* A host's slots, by owner: each keeps there what it made of the site's
   files (the pointer; its owner frees it, or keeps it in its own table). */
enum host_slot {
    HOST_SLOT_SITEFILES, /* route/sitefiles.c: the directory's _redirects, _headers, pages */
    HOST_SLOTS
};

typedef struct host {
    uint32_t gen;  /* bumped when the entry is forgotten or made again */
    int dirfd;     /* the directory serving the name; -1: none does (404) */
    int err;       /* with dirfd -1: ENOENT, or why it could not be opened (503) */
    int which;     /* vhost.h's VHOST_*: which directory it is */
    int64_t second; /* when dirfd was opened (the freshness rule) */
    dev_t dev;      /* dirfd's identity (the TLS terms) */
    ino_t ino;
    const char *guard; /* the certificate name whose client-certificate demand covers
                          this directory (its own name aside), or NULL */
    void *slot[HOST_SLOTS];
    int64_t slot_second[HOST_SLOTS]; /* the second the slot was last made fresh */
    char name[VHOST_NAME_MAX]; /* the key: the route's name */
} host_t;

/* Make the loop's table (HSTATE_HOST) and forget it; the router calls them
   in its init and free.  host_init: 0, or -1 (out of memory, said). */
int host_init(site_t *s);
void host_free(site_t *s);

/* ex's route's name decided (once: site/vhost.h's vhost_route, with the
   site's -v, -t): its length, or -1 for a Host no directory may be named by
   (400).  The one door to vhost_route below the router (make layers). */
int host_route(exchange_t *ex);

/*
 * The site behind ex's route (decided first by vhost_route), found in the
 * loop's table or made there (the directory opened; its TLS terms are read
 * by host_guard),
 * fresh by the rule above; kept in ex->route.  NULL when the route is a bad
 * Host (400), the table is not there, or the site has no loop (a unit
 * test).  host->dirfd is the host's: never close it.
 */
host_t *host_of(exchange_t *ex);

/* Is host h's slot i as fresh as the host (its files looked at this second)?
   If not, its owner looks at them again and calls host_slot_set(). */
static inline int host_slot_fresh(const host_t *h, enum host_slot i)
{
    return h->slot[i] && h->slot_second[i] == h->second;
}

static inline void host_slot_set(host_t *h, enum host_slot i, void *p)
{
    h->slot[i] = p, h->slot_second[i] = h->second;
}

/* The access log's and the producers' kind of h's directory (VHOST_*). */
static inline int host_which(const host_t *h)
{
    return h ? h->which : VHOST_ROOT;
}

/*
 * HTTPS: the certificate name whose client-certificate demand covers the
 * directory ex's route serves, when the request named another (host[0..n),
 * no port, no final dot): NULL when none does.  Directories are told apart
 * by device and inode; the certificates' directories are found again once
 * a second per loop (and at once when the store or the port changes).
 */
const char *host_guard(exchange_t *ex, const char *host, size_t n);

#endif
