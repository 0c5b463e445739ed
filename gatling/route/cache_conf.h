/*
 * cache_conf — a virtual host's .cache file, the switch and the settings of
 * the response cache for that host (gatling.8, RESPONSE CACHE).  An empty
 * file turns the cache on with HTTP's rules alone; lines (# comments):
 *
 *   ttl SECS [REGEX]   the micro-cache: responses without freshness
 *                      information live SECS (for paths matching REGEX; the
 *                      first line that matches counts)
 *   grace SECS         ... and are served stale this long while one fetch
 *                      refreshes them, or while the backend fails (default 10)
 *   errors SECS        404 and 410 are stored this long (default: never)
 *   cookie NAME        a request whose cookies all have such names may use
 *                      the cache (the Cookie field is not sent to the backend)
 *   purge ADDR[/BITS]  who may PURGE besides loopback
 *   lock SECS          how long requests wait for a fetch another began
 *                      before they ask the backend themselves (1-60, default 5)
 *
 * A file with a bad line turns the cache off for the host (the error log
 * says which line).  Read once a second at most per host, parsed again only
 * when it changed.
 */
#ifndef GATLING_CACHE_CONF_H
#define GATLING_CACHE_CONF_H

#include "http/exchange.h"
#include "site/site.h"
#include "site/vhost.h"

#include <netinet/in.h>
#include <regex.h>
#include <stdint.h>
#include <sys/stat.h>

#define CACHE_CONF_TTLS 8
#define CACHE_CONF_COOKIES 16
#define CACHE_CONF_NETS 8
#define CACHE_CONF_FILE_MAX 8192
#define CACHE_CONF_VHOSTS 64
#define CACHE_GRACE_DEFAULT 10
#define CACHE_LOCK_DEFAULT 5

typedef struct cache_conf {
    struct {
        int64_t secs;
        regex_t re;
        int has_re;
    } ttl[CACHE_CONF_TTLS];
    int nttl;
    int64_t grace, errors;
    int64_t lock; /* seconds */
    char cookie[CACHE_CONF_COOKIES][64];
    int ncookies;
    config_net_t net[CACHE_CONF_NETS]; /* purge NET */
    int nnets;
} cache_conf_t;

/* What a vhost's .cache said, remembered a second. */
typedef struct cache_vh {
    char name[VHOST_NAME_MAX];
    int64_t second; /* wall clock of the look; 0: never */
    int on;         /* the file is there and good: conf holds it */
    int bad;        /* ... there and refused (said once, until it changes) */
    int which;      /* VHOST_* of the directory read (vhost_open), for the access log */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    cache_conf_t conf;
} cache_vh_t;

/* Parse text[0..n) (modified) into k.  0, or -1 with *bad_line set, *why
   (if why is not NULL) saying what is wrong with it, and k empty. */
int cache_conf_parse(cache_conf_t *k, char *text, size_t n, int *bad_line, const char **why);
void cache_conf_free(cache_conf_t *k);

/* The micro-cache's seconds for path (0: none). */
int64_t cache_conf_ttl(const cache_conf_t *k, const char *path);

/* May the client at sa PURGE?  (loopback, or a purge net) */
int cache_conf_purger(const cache_conf_t *k, const struct sockaddr *sa);

/* Are all the cookies in the Cookie value v[0..n) allow-listed? */
int cache_conf_cookie_ok(const cache_conf_t *k, const char *v, size_t n);

/* The cache settings of the vhost serving ex (tab has CACHE_CONF_VHOSTS
   slots), or NULL: no .cache there.  *vh gets the vhost's slot (its name,
   and which directory served it, for the access log). */
const cache_conf_t *cache_conf_of(cache_vh_t *tab, site_t *s, exchange_t *ex,
                                  const cache_vh_t **vh);

/* Forget every vhost's settings. */
void cache_conf_table_free(cache_vh_t *tab);

#endif
