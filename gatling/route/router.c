/* Request checks and dispatch: see router.h. */
#define _GNU_SOURCE /* memmem */
#include "router.h"
#include "http/hbuf.h"
#include "http/path.h"
#include "site/acme_chal.h"
#include "site/site.h"
#include "handlers/host.h"
#include "handlers/hstate.h"
#include "handlers/static.h"
#include "handlers/target.h"
#include "site/fs.h"
#include "site/vhost.h"
#include "tls/tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define ALLOW "GET, HEAD, OPTIONS"

#define ROUTE_MAX 32

/* A site's route (HSTATE_ROUTE): its table, and the entries there on it, in
   the table's order, once every init has run (made). */
typedef struct route {
    const handler_t *const *all;
    size_t nall;
    const handler_t *e[ROUTE_MAX];
    unsigned n;
    int made;
} route_t;

/* The name of a Host value, without its port ("[::1]" keeps the brackets). */
static size_t host_name_len(const http_str_t *h)
{
    if (h->n && h->p[0] == '[') {
        const char *e = memchr(h->p, ']', h->n);
        return e ? (size_t)(e - h->p) + 1 : 0;
    }
    const char *colon = memchr(h->p, ':', h->n);
    return colon ? (size_t)(colon - h->p) : h->n;
}

/* Safe to put in a Location header: a name, an IPv4 or a bracketed IPv6. */
static int host_chars_ok(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == '[' || ch == ']' || ch == ':'))
            return 0;
    }
    return n > 0 && n <= 255;
}

/* -X: plain HTTP is answered with the same URL on HTTPS. */
static int redirect_https(exchange_t *ex, const http_request_t *req, const http_str_t *host)
{
    char loc[HTTP_MAX_TARGET + 320]; /* "https://" + 255 + ":65535" + target */
    hbuf_t b = hb_init(loc, sizeof loc);
    size_t n = host ? host_name_len(host) : 0;
    if (!host_chars_ok(host ? host->p : "", n))
        return ex_error(ex, 400, NULL, NULL); /* nowhere to send it */
    int port = ex->site->proc->tls_port;
    hb_puts(&b, "https://");
    hb_put(&b, host->p, n);
    if (port != 443) {
        hb_puts(&b, ":");
        hb_num(&b, (uint64_t)port);
    }
    if (req->target.n && req->target.p[0] == '/')
        hb_put(&b, req->target.p, req->target.n); /* the parser let no space or CTL in */
    else
        hb_puts(&b, "/");
    if (!hb_str(&b))
        return ex_error(ex, 414, NULL, NULL);
    return ex_error(ex, 301, "Location", loc);
}

/*
 * RFC 8615: is ex's request for /.well-known/?  WK_ACME for ACME's HTTP-01
 * challenges, WK_OTHER for the rest, 0 for every other path (or a bad one:
 * the handler that takes it answers).  Decodes only a target that may be one.
 */
enum { WK_OTHER = 1, WK_ACME = 2 };
static int well_known(exchange_t *ex)
{
    const http_str_t *t = &ex->req->target;
    path_t p;
    if (!memmem(t->p, t->n, "well-known", 10) && !memchr(t->p, '%', t->n))
        return 0;
    if (path_from_target(t->p, t->n, ex->path, EX_PATH_CAP, &p) != 0)
        return 0;
    if (path_has_prefix(p.path, p.len, PATH_ACME_CHALLENGE))
        return WK_ACME;
    return path_has_prefix(p.path, p.len, PATH_WELL_KNOWN) ? WK_OTHER : 0;
}

/*
 * --acme: HTTP-01 (RFC 8555 8.3) from the client's state directory, ahead of
 * every other rule and on any Host: 200 with the key authorization for a
 * token outstanding, 404 for any other path below acme-challenge/ (another
 * token, a listing, "..", a token too long: acme_chal_http opens nothing
 * for those).  0 when ex is not such a request, else as router_dispatch.
 */
static int acme_http01(exchange_t *ex)
{
    const http_str_t *t = &ex->req->target;
    path_t p;
    if (!memmem(t->p, t->n, "acme-challenge", 14) && !memchr(t->p, '%', t->n))
        return 0;
    size_t skip = sizeof PATH_ACME_CHALLENGE - 1;
    if (path_from_target(t->p, t->n, ex->path, EX_PATH_CAP, &p) != 0 ||
        !(path_has_prefix(p.path, p.len, PATH_ACME_CHALLENGE) ||
          (p.len == skip - 1 && !memcmp(p.path, PATH_ACME_CHALLENGE, skip - 1))))
        return 0;
    if (!http_method_is(ex->req, "GET") && !http_method_is(ex->req, "HEAD"))
        return ex_error(ex, 405, "Allow", "GET, HEAD") < 0 ? -1 : 1;
    char *keyauth = malloc(ACME_KEYAUTH_MAX);
    if (!keyauth)
        return -1;
    int n = p.len > skip ? acme_chal_http(ex->site->proc->acme_chal, p.path + skip,
                                          p.len - skip, keyauth, ACME_KEYAUTH_MAX)
                         : 0; /* the directory itself: never a listing */
    if (n <= 0) {
        free(keyauth);
        ex->site->stats.acme_http_refused++;
        return ex_error(ex, 404, NULL, NULL) < 0 ? -1 : 1;
    }
    ex->site->stats.acme_http++;
    ex_field(ex, "Cache-Control", "no-store");
    return ex_page(ex, "text/plain", keyauth, (size_t)n) < 0 ? -1 : 1;
}

int router_https_names(const site_t *s, const http_str_t *host)
{
    if (!s->proc->acme_chal)
        return 1;
    size_t n = host ? host_name_len(host) : 0;
    return n && tls_store_covers(s->proc->tls, host->p, n);
}

int router_hsts(const site_t *s, const http_request_t *req)
{
    return s->cfg->hsts >= 0 && router_https_names(s, req ? http_header(req, "Host") : NULL);
}

/* -X: is HTTPS there for this Host?  With --acme, only once a certificate
   names it (the first start: HTTP serves it until then). */
static int https_for(const exchange_t *ex, const http_str_t *host)
{
    const site_t *s = ex->site;
    return s->https_ready && (!host || router_https_names(s, host));
}

/* A rule's or handler's answer for the walk: 0 or -1 (ex_head's
   EX_REPLACED, a 500 that went out instead, is an answer too). */
static int answered(int r)
{
    return r < 0 ? -1 : 0;
}

/* RFC 9112 3.2: one Host, and HTTP/1.1 must send it. */
static int host_rule(exchange_t *ex)
{
    const http_request_t *req = ex->req;
    size_t hosts = http_header_count(req, "Host");
    if (hosts > 1 || (req->version == 11 && hosts == 0) || ex->route.state == EX_ROUTE_BAD)
        return answered(ex_error(ex, 400, NULL, NULL));
    return HANDLER_NOT_MINE;
}

static int acme_on(const site_t *s)
{
    return s->proc->acme_chal != NULL;
}

static int acme_rule(exchange_t *ex)
{
    int r = acme_http01(ex);
    return r ? answered(r) : HANDLER_NOT_MINE;
}

/* HTTPS: is host[0..n) (no port) a name another certificate answers for
   than the one the session was set up with (RFC 9110 7.4)?  The one
   question of 421, for every protocol: OpenSSL's session (HTTP/1.1, h2) is
   asked its certificate; HTTP/3's TLS chose by the server name. */
static int misdirected(const exchange_t *ex, const char *host, size_t n)
{
    if (ex->ssl)
        return tls_misdirected(ex->site->proc->tls, ex->ssl, host, n);
    return ex->sni && tls_misdirected_name(ex->site->proc->tls, ex->snilen ? ex->sni : NULL,
                                           ex->snilen, host, n);
}

/* The route's name without its ":port". */
static size_t bare_len(const exchange_t *ex)
{
    const char *colon = memrchr(ex->route.name, ':', ex->route.namelen);
    return colon ? (size_t)(colon - ex->route.name) : ex->route.namelen;
}

/* HTTPS: Alt-Svc names HTTP/3 here (RFC 7838), and a Host another
   certificate answers for is 421 (RFC 9110 7.4). */
static int origin_rule(exchange_t *ex)
{
    const http_str_t *host = http_header(ex->req, "Host");
    /* not where client certificates are asked: browsers differ in offering
       one over QUIC, and one that switched would lose the site (gatling.8) */
    if (ex->site->alt_svc[0] && ex->req->version != 30 && !ex->client)
        ex_field(ex, "Alt-Svc", ex->site->alt_svc);
    size_t n = host ? host_name_len(host) : 0;
    /* the directory served decides too: a client-certificate site's, reached
       by another name, is that site's (handlers/host.h) */
    const char *g = n ? host_guard(ex, ex->route.name, bare_len(ex)) : NULL;
    if ((n && misdirected(ex, host->p, n)) || (g && misdirected(ex, g, strlen(g)))) {
        ex->site->stats.tls_misdirected++;
        return answered(ex_error(ex, 421, NULL, NULL));
    }
    return HANDLER_NOT_MINE;
}

/* -I beside a rule that runs its name (-I index.php, -P F/...:\.php$). */
static int index_on(const site_t *s)
{
    const char *n = s->cfg->index2;
    char p[300];
    int k = n ? snprintf(p, sizeof p, "/%s", n) : -1;
    return k > 0 && (size_t)k < sizeof p && router_program(s, p, (size_t)k);
}

/* Does the directory t names (below its host's directory vfd) hold name? */
static int dir_holds(const site_t *s, int vfd, const target_t *t, const char *name)
{
    char rel[EX_PATH_CAP + 300];
    snprintf(rel, sizeof rel, "%s%s", t->p.path + 1, name);
    int fd = fs_open_beneath(vfd, rel, site_root_check(s));
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

/* A directory whose index is a program (-I's name, a rule runs it) and
   that has no index.html, which comes first: the request goes on as the
   index's, method and body with it, so that the rule that runs the name
   runs it (nginx's "index index.php" beside a location for \.php$).  The
   files handler never sends its source either way (static.c). */
static int index_rule(exchange_t *ex)
{
    site_t *s = ex->site;
    target_t t;
    char to[HTTP_MAX_TARGET];
    if (path_from_target(ex->req->target.p, ex->req->target.n, ex->path, EX_PATH_CAP, &t.p) ||
        t.p.path[t.p.len - 1] != '/')
        return HANDLER_NOT_MINE;
    if (target_vhost(s, ex, t.vhost) < 0)
        return HANDLER_NOT_MINE; /* the Host rule answered 400 */
    hbuf_t b = hb_init(to, sizeof to);
    hb_put(&b, t.p.path, t.p.len), hb_puts(&b, s->cfg->index2);
    if (t.p.query)
        hb_puts(&b, "?"), hb_put(&b, t.p.query, t.p.query_len);
    const host_t *h = hb_str(&b) ? host_of(ex) : NULL;
    if (!h || h->dirfd < 0)
        return HANDLER_NOT_MINE;
    if (dir_holds(s, h->dirfd, &t, "index.html") || !dir_holds(s, h->dirfd, &t, s->cfg->index2))
        return HANDLER_NOT_MINE;
    if (ex_retarget(ex, to, hb_len(&b)) < 0)
        return answered(ex_error(ex, 500, NULL, NULL));
    return HANDLER_NOT_MINE;
}

static int is_secure(exchange_t *ex)
{
    return ex->secure;
}

/* Mutual TLS: a site that requires a client certificate, asked of a client
   without a valid one.  400 with a page that says which (nginx's words), not
   a bare TLS alert: the handshake completed (tls_client.h). */
static int client_unverified(exchange_t *ex)
{
    return ex->client && ex->client->required && !ex->client->verified;
}

static int client_rule(exchange_t *ex)
{
    static const char none[] = "<html><head><title>400 No required SSL certificate was sent"
                               "</title></head><body><h1>400 Bad Request</h1>"
                               "<p>No required SSL certificate was sent.</p></body></html>\n";
    static const char bad[] = "<html><head><title>400 The SSL certificate error</title></head>"
                              "<body><h1>400 Bad Request</h1><p>The SSL certificate error.</p>"
                              "</body></html>\n";
    const char *page = ex->client->cert ? bad : none;
    size_t n = ex->client->cert ? sizeof bad - 1 : sizeof none - 1;
    ex->site->stats.tls_client_refused++;
    ex->nfields = 0;
    ex_field(ex, "Cache-Control", "no-store");
    int r = ex_head(ex, 400, "text/html; charset=utf-8", n, -1);
    return answered(r == 0 ? ex_body_buf(ex, page, n, 0) : r);
}

static int get_or_head(exchange_t *ex)
{
    return http_method_is(ex->req, "GET") || http_method_is(ex->req, "HEAD");
}

/* -X on plain HTTP, where HTTPS is there for the Host: the same URL on
   HTTPS; but the files below /.well-known/ are answered where a CA asks
   for them (ACME's HTTP-01 and pki-validation are plain HTTP), and -S's
   pages where their allowed clients ask (stays_plain). */
static int https_on(const site_t *s)
{
    return s->cfg->https_redirect;
}

/* Does an entry there answer ex over plain HTTP under -X (handler.h's
   plain: -S's pages for their allowed clients)? */
static int stays_plain(exchange_t *ex)
{
    const route_t *rt = hstate(ex->site, HSTATE_ROUTE);
    for (unsigned i = 0; rt && i < rt->n; i++)
        if (rt->e[i]->plain && rt->e[i]->plain(ex))
            return 1;
    return 0;
}

static int https_wanted(exchange_t *ex)
{
    return !ex->secure && ex->site->cfg->https_redirect && !stays_plain(ex) &&
           https_for(ex, http_header(ex->req, "Host"));
}

static int https_rule(exchange_t *ex)
{
    if (get_or_head(ex) && well_known(ex))
        return answered(static_serve(ex));
    return answered(redirect_https(ex, ex->req, http_header(ex->req, "Host")));
}

/* ACME's challenges from the docroot, ahead of -P, CGI and the cache (no
   regex of .proxy can leave them out). */
static int acme_files_rule(exchange_t *ex)
{
    return well_known(ex) == WK_ACME ? answered(static_serve(ex)) : HANDLER_NOT_MINE;
}

/* What no handler took: OPTIONS, 405 for a method known, else 501. */
static int methods_rule(exchange_t *ex)
{
    const http_request_t *req = ex->req;
    if (http_method_is(req, "OPTIONS")) {
        ex_field(ex, "Allow", ALLOW);
        return answered(ex_head(ex, 200, NULL, 0, -1));
    }
    static const char *const known[] = {"POST", "PUT", "DELETE", "PATCH", "TRACE", "CONNECT"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (http_method_is(req, known[i]))
            return answered(ex_error(ex, 405, "Allow", ALLOW));
    return answered(ex_error(ex, 501, NULL, NULL));
}

/* -I's rewrite as the entry's streams: 1 when it answered (500). */
static int index_streams(exchange_t *ex)
{
    return index_rule(ex) != HANDLER_NOT_MINE;
}

const handler_t router_host_entry = {.name = "Host", .phase = HANDLER_CHECK, .serve = host_rule};
const handler_t router_acme_entry = {
    .name = "ACME HTTP-01", .phase = HANDLER_CHECK, .serve = acme_rule, .on = acme_on,
};
const handler_t router_origin_entry = {
    .name = "Alt-Svc, 421", .phase = HANDLER_CHECK, .match = is_secure, .serve = origin_rule,
};
const handler_t router_client_entry = {
    .name = "client certificate", .phase = HANDLER_CHECK, .match = client_unverified,
    .serve = client_rule,
};
const handler_t router_index_entry = {
    .name = "-I's program", .phase = HANDLER_REWRITE, .serve = index_rule, .on = index_on,
    .streams = index_streams,
};
const handler_t router_https_entry = {
    .name = "-X", .phase = HANDLER_CHECK, .match = https_wanted, .serve = https_rule,
    .on = https_on,
};
const handler_t router_acme_files_entry = {
    .name = "ACME files", .phase = HANDLER_CHECK, .match = get_or_head, .serve = acme_files_rule,
};
const handler_t router_methods_entry = {
    .name = "OPTIONS, 405, 501", .phase = HANDLER_LAST, .serve = methods_rule,
};

/* Is the entry there on site (its on, asked as router_init does)? */
static int entry_on(const handler_t *h, const site_t *site)
{
    return !h->on || h->on(site);
}

/* The request's route, decided before any entry sees it (ex->route). */
static void decide(exchange_t *ex)
{
    (void)vhost_route(ex, ex->site->cfg->vhosts, ex->site->cfg->keep_host_port);
    (void)host_of(ex); /* the site behind the name, found once (host.h) */
}

int router_dispatch(exchange_t *ex)
{
    const route_t *rt = hstate(ex->site, HSTATE_ROUTE);
    decide(ex);
    for (unsigned i = 0; rt && i < rt->n; i++) {
        const handler_t *h = rt->e[i];
        if (h->match && !h->match(ex))
            continue;
        int r = h->serve(ex);
        if (r != HANDLER_NOT_MINE)
            return answered(r);
    }
    return answered(ex_error(ex, 501, NULL, NULL)); /* (the last entry answers all) */
}

/* Is the table in phase order (handler.h), every entry with a phase?  Says
   which is not, on stderr. */
static int in_phase_order(const handler_t *const *all, size_t nall)
{
    for (size_t i = 0; i < nall; i++) {
        unsigned p = all[i]->phase, before = i ? all[i - 1]->phase : HANDLER_CHECK;
        if (p < HANDLER_CHECK || p > HANDLER_LAST || p < before) {
            fprintf(stderr, "gatling: the router's table: \"%s\" (phase %u) %s\n", all[i]->name,
                    p, p < HANDLER_CHECK || p > HANDLER_LAST ? "has no phase"
                                                              : "is out of phase order");
            return 0;
        }
    }
    return 1;
}

int router_init_table(site_t *site, const handler_t *const *all, size_t nall)
{
    if (!in_phase_order(all, nall))
        return -1;
    route_t *rt = nall <= ROUTE_MAX ? calloc(1, sizeof *rt) : NULL;
    if (!rt) {
        fprintf(stderr, "gatling: the router's entries: %s\n",
                nall > ROUTE_MAX ? "more than 32" : "out of memory");
        return -1;
    }
    rt->all = all, rt->nall = nall;
    hstate_set(site, HSTATE_ROUTE, rt);
    if (host_init(site) < 0)
        return -1;
    site->program = router_program; /* for the files handler, below route/ */
    for (int producers = 1; producers >= 0; producers--) /* the producers' first */
        for (size_t i = 0; i < nall; i++)
            if (!all[i]->wrap == !producers && all[i]->init && all[i]->init(site) < 0)
                return -1;
    for (size_t i = 0; i < nall; i++) /* what is there, once all are made */
        if (entry_on(all[i], site))
            rt->e[rt->n++] = all[i];
    rt->made = 1;
    return 0;
}

void router_free(site_t *site)
{
    route_t *rt = hstate(site, HSTATE_ROUTE);
    for (size_t i = 0; rt && i < rt->nall; i++) /* (no route: no init ran) */
        if (rt->all[i]->free)
            rt->all[i]->free(site);
    host_free(site);
    free(rt);
    hstate_set(site, HSTATE_ROUTE, NULL);
}

/* A backup copy's name (an editor's, a package manager's, an admin's:
   NAME~, NAME.bak, .swp, .orig, .save, .old): the length of NAME, or 0. */
static size_t backup_of(const char *path, size_t n)
{
    static const char *const ends[] = {"~", ".bak", ".swp", ".orig", ".save", ".old"};
    for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
        size_t k = strlen(ends[i]);
        if (n > k + 1 && path[n - k - 1] != '/' && !strncasecmp(path + n - k, ends[i], k))
            return n - k;
    }
    return 0;
}

int router_program(const site_t *site, const char *path, size_t n)
{
    const route_t *rt = hstate(site, HSTATE_ROUTE);
    for (int copies = 0; n && copies < 4; copies++, n = backup_of(path, n))
        for (size_t i = 0; rt && i < rt->nall; i++) /* (also while the route is made) */
            if (rt->all[i]->claims && entry_on(rt->all[i], site) &&
                rt->all[i]->claims(site, path, n))
                return 1;
    return 0;
}

int router_produced(const site_t *site, exchange_t *ex, unsigned what)
{
    const route_t *rt = hstate(site, HSTATE_ROUTE);
    if (!rt)
        return 0;
    if (!ex || !rt->made) { /* while the route is made: the table, as router_program */
        for (size_t i = 0; i < rt->nall; i++)
            if ((rt->all[i]->wrap & what) == what && rt->all[i]->wrap &&
                entry_on(rt->all[i], site))
                return 1;
        return 0;
    }
    for (unsigned i = 0; i < rt->n; i++)
        if ((rt->e[i]->wrap & what) == what && rt->e[i]->wrap && rt->e[i]->streams(ex))
            return 1;
    return 0;
}

int router_produce(exchange_t *ex)
{
    const route_t *rt = hstate(ex->site, HSTATE_ROUTE);
    decide(ex);
    for (unsigned i = 0; rt && i < rt->n; i++) {
        const handler_t *h = rt->e[i];
        if (!h->wrap || (h->match && !h->match(ex)))
            continue;
        int r = h->serve(ex);
        if (r != HANDLER_NOT_MINE)
            return r;
    }
    return HANDLER_NOT_MINE;
}

int router_backend(const site_t *site, int slot, const char **pool, const char **label,
                   const char **state, unsigned *outstanding)
{
    const route_t *rt = hstate(site, HSTATE_ROUTE);
    for (unsigned i = 0; rt && i < rt->n; i++) {
        int r = rt->e[i]->backend ? rt->e[i]->backend(site, slot, pool, label, state,
                                                        outstanding)
                                  : 0;
        if (r)
            return r;
    }
    return 0;
}

int router_streams(exchange_t *ex)
{
    const route_t *rt = hstate(ex->site, HSTATE_ROUTE);
    decide(ex);
    for (unsigned i = 0; rt && i < rt->n; i++) {
        /* a rewrite first, in its turn: the body goes where it leads (the
           entry does it again for a request without one: nothing is left);
           one that answered takes no body */
        const handler_t *h = rt->e[i];
        if (h->streams && h->streams(ex))
            return h->phase != HANDLER_REWRITE;
    }
    return 0;
}
