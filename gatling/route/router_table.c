/*
 * The router's table: every entry, named here and nowhere else (router.c
 * walks it and is what the stages and pages include; the router's own
 * rules are its entries, router.h).  A new entry is a line here, in its
 * phase's part (handler.h: router_init refuses the table out of order).
 */
#include "router_table.h"
#include "router.h"
#include "cache.h"
#include "compress.h"
#include "metrics.h"
#include "sitefiles.h"
#include "status.h"
#include "handlers/cgi.h"
#include "handlers/proxy.h"
#include "handlers/static.h"

/*
 * The router's rules and the handlers, in the order a request is put to
 * them; the first whose match (if any) says yes and whose serve does not
 * answer HANDLER_NOT_MINE answers it.  The order is the behaviour: -k's
 * health check before every rule (a checker sends what it sends), --acme's
 * HTTP-01 before any Host's rules, the files below /.well-known/ before
 * -X's redirect and ACME's before the cache, -P and CGI; the coding stage
 * before the cache (a hit is coded as a miss is, from a coded body the
 * cache keeps: cache_coded.c); the cache in
 * front of the dynamic handlers it stores; -P and CGI take any method and
 * a path of their own before -S's pages and the files; the last entry
 * answers every request left.  init and free are called in this order; a
 * site's requests are put only to the entries there on it (on).  The
 * phases (handler.h: check, rewrite, stage, produce, page, last) are each
 * entry's own, and router_init refuses the table out of their order.
 */
static const handler_t *const table[] = {
    &status_health_handler, /* -k */
    &router_host_entry,
    &router_acme_entry,
    &router_origin_entry,
    &router_client_entry, /* mutual TLS's 400, before anything is served */
    &router_https_entry,
    &router_acme_files_entry,
    &sitefiles_handler, /* _redirects, _headers: the site's own rules, before any producer */
    &router_index_entry,      /* -I's name a rule runs: the request goes on as its */
    &compress_handler, /* --compress: wraps the codec of what goes to a producer */
    &cache_handler,   /* .cache */
    &proxy_handler,   /* -P */
    &cgi_handler,     /* -w, -z */
    &status_handler,  /* -S: /server-status */
    &metrics_handler, /* -S: /metrics */
    &static_handler,  /* GET and HEAD of files, with .htaccess */
    &router_methods_entry,
};


int router_init(site_t *site)
{
    return router_init_table(site, table, sizeof table / sizeof table[0]);
}
