/* The site behind a request's name: see host.h. */
#include "host.h"
#include "hstate.h"
#include "site/siphash.h"
#include "tls/tls.h"
#include "gio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GUARD_MAX 64 /* guarded names per loop; more are guarded by their own name only */

typedef struct guarded {
    dev_t dev;
    ino_t ino;
    char name[VHOST_NAME_MAX];
} guarded_t;

/* The loop's table (HSTATE_HOST): the hosts, open addressing over HOST_MAX
   * 2 buckets; and the client-certificate sites' directories. */
typedef struct host_tab {
    uint8_t key[16];
    unsigned n;
    gio_timer_t clock; /* closes the directories no request asked for lately */
    host_t h[HOST_MAX];
    short bucket[HOST_MAX * 2]; /* index into h + 1; 0: empty */
    struct {
        const void *store;
        int port, n;
        int64_t second;
        guarded_t g[GUARD_MAX];
    } guard;
} host_tab_t;

int host_init(site_t *s)
{
    host_tab_t *t = calloc(1, sizeof *t);
    if (!t) {
        fprintf(stderr, "gatling: the hosts' table: out of memory\n");
        return -1;
    }
    siphash_key(t->key);
    for (unsigned i = 0; i < HOST_MAX; i++)
        t->h[i].dirfd = -1;
    t->clock = (gio_timer_t)GIO_TIMER_INIT;
    hstate_set(s, HSTATE_HOST, t);
    return 0;
}

/* Forget every host: their directories closed, their generations bumped
   (a route that held one finds its host again). */
static void forget(host_tab_t *t)
{
    for (unsigned i = 0; i < t->n; i++) {
        host_t *h = &t->h[i];
        if (h->dirfd >= 0)
            close(h->dirfd);
        uint32_t gen = h->gen + 1;
        memset(h, 0, sizeof *h);
        h->gen = gen, h->dirfd = -1;
    }
    memset(t->bucket, 0, sizeof t->bucket);
    t->n = 0;
}

void host_free(site_t *s)
{
    host_tab_t *t = hstate(s, HSTATE_HOST);
    if (!t)
        return;
    forget(t);
    if (s->loop)
        gio_timer_stop(s->loop, &t->clock);
    free(t);
    hstate_set(s, HSTATE_HOST, NULL);
}

/* The directory name:port is served from, if its own (not default/ nor the
   root): 0 with its identity in *sb, or -1. */
static int own_dir(const site_t *s, const char *name, struct stat *sb)
{
    int which, fd = vhost_open(s->rootfd, name, s->cfg->vhost_only, site_root_check(s), &which);
    int ok = fd >= 0 && (which == VHOST_NAMED || which == VHOST_BARE) && !fstat(fd, sb);
    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}

/* The client-certificate sites' directories for s's store and port, found
   again when stale: their count. */
static int guard_refresh(const site_t *s, host_tab_t *t, int port)
{
    tls_store_t *st = s->proc->tls;
    int64_t now = gio_now(s->loop) / 1000;
    if (t->guard.store == st && t->guard.port == port && t->guard.second == now)
        return t->guard.n;
    t->guard.store = st, t->guard.port = port, t->guard.second = now, t->guard.n = 0;
    for (int i = 0; i < tls_store_count(st); i++) {
        const char *nm;
        for (int k = 0; tls_store_asks_client(st, i) && tls_store_name(st, i, k, &nm); k++) {
            char with[VHOST_NAME_MAX];
            struct stat sb;
            int w = snprintf(with, sizeof with, "%s:%d", nm, port);
            if (t->guard.n == GUARD_MAX || nm[0] == '*' || w < 0 || (size_t)w >= sizeof with ||
                own_dir(s, with, &sb) < 0)
                continue;
            guarded_t *g = &t->guard.g[t->guard.n++];
            g->dev = sb.st_dev, g->ino = sb.st_ino;
            snprintf(g->name, sizeof g->name, "%s", nm);
        }
    }
    return t->guard.n;
}

const char *host_guard(exchange_t *ex, const char *host, size_t n)
{
    const site_t *s = ex->site;
    host_tab_t *t = hstate(s, HSTATE_HOST);
    if ((!ex->ssl && !ex->sni) || !s->cfg->vhosts || ex->route.state != EX_ROUTE_OK ||
        !ex->route.namelen || !t || !tls_store_count(s->proc->tls))
        return NULL;
    host_t *h = host_of(ex);
    if (!guard_refresh(s, t, ex->local_port) || !h || h->dirfd < 0 ||
        (h->which != VHOST_NAMED && h->which != VHOST_BARE))
        return NULL;
    for (int i = 0; i < t->guard.n; i++) {
        const guarded_t *g = &t->guard.g[i];
        if (g->dev == h->dev && g->ino == h->ino &&
            !(strlen(g->name) == n && !memcmp(g->name, host, n)))
            return g->name;
    }
    return NULL;
}

/* Every second while a directory is open: those no request asked for in
   the last second or two are closed (an idle server holds none, as the
   open-file cache's files), their hosts kept. */
static void on_clock(gio_loop_t *l, void *arg)
{
    host_tab_t *t = arg;
    int64_t now = gio_now(l) / 1000;
    unsigned open = 0;
    for (unsigned i = 0; i < t->n; i++) {
        host_t *h = &t->h[i];
        if (h->dirfd >= 0 && h->second < now - 1)
            close(h->dirfd), h->dirfd = -1, h->err = 0, h->second = -1;
        open += h->dirfd >= 0;
    }
    if (open)
        (void)gio_timer_set(l, &t->clock, gio_now(l) + 1000, on_clock, t);
}

/* h's directory opened (again), for the name it is kept under. */
static void open_dir(const site_t *s, host_tab_t *t, host_t *h, int64_t now)
{
    const config_t *cfg = s->cfg;
    struct stat sb;
    if (h->dirfd >= 0)
        close(h->dirfd);
    h->dirfd = vhost_open(s->rootfd, cfg->vhosts ? h->name : NULL, cfg->vhost_only,
                          site_root_check(s), &h->which);
    h->err = h->dirfd < 0 ? errno : 0;
    h->second = now;
    h->dev = 0, h->ino = 0;
    if (h->dirfd >= 0 && !fstat(h->dirfd, &sb))
        h->dev = sb.st_dev, h->ino = sb.st_ino;
    if (h->dirfd >= 0 && s->loop && !gio_timer_armed(&t->clock))
        (void)gio_timer_set(s->loop, &t->clock, gio_now(s->loop) + 1000, on_clock, t);
}

/* name's host in t, made if new (every name forgotten first when full). */
static host_t *find(host_tab_t *t, const char *name, size_t len)
{
    unsigned nb = HOST_MAX * 2, b = (unsigned)(siphash24(t->key, name, len) % nb);
    for (unsigned k = 0; k < nb; k++, b = (b + 1) % nb) {
        if (!t->bucket[b])
            break;
        host_t *h = &t->h[t->bucket[b] - 1];
        if (!strcmp(h->name, name))
            return h;
    }
    if (t->n == HOST_MAX) {
        forget(t);
        b = (unsigned)(siphash24(t->key, name, len) % nb);
    }
    while (t->bucket[b]) /* (at most half the buckets are taken) */
        b = (b + 1) % nb;
    host_t *h = &t->h[t->n];
    t->bucket[b] = (short)(++t->n);
    h->gen++, h->second = -1;
    memcpy(h->name, name, len + 1); /* (len < VHOST_NAME_MAX: vhost_name's) */
    return h;
}

int host_route(exchange_t *ex)
{
    const site_t *s = ex->site;
    return vhost_route(ex, s->cfg->vhosts, s->cfg->keep_host_port);
}

host_t *host_of(exchange_t *ex)
{
    site_t *s = ex->site;
    host_tab_t *t = hstate(s, HSTATE_HOST);
    ex_route_t *r = &ex->route;
    host_t *h = r->host;
    if (!s->loop)
        return NULL; /* a site without its loop (the unit tests): no directory */
    int64_t now = gio_now(s->loop) / 1000;
    if (h && h->gen == r->hostgen && h->second == now)
        return h;
    if (!t || host_route(ex) < 0)
        return NULL;
    const char *name = s->cfg->vhosts ? r->name : "";
    h = find(t, name, strlen(name));
    if (h->second != now || (h->dirfd < 0 && h->err != ENOENT))
        open_dir(s, t, h, now); /* (out of descriptors: tried again at once) */
    r->host = h, r->hostgen = h->gen;
    return h;
}
