/* Client-certificate sites' directories: see guard.h. */
#include "guard.h"
#include "site/site.h"
#include "site/vhost.h"
#include "tls/tls.h"
#include "gio.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GUARD_MAX 64 /* guarded names per loop; more are guarded by their own name only */

typedef struct {
    dev_t dev;
    ino_t ino;
    char name[VHOST_NAME_MAX];
} guarded_t;

static _Thread_local struct {
    const void *store;
    int port, n;
    int64_t second;
    guarded_t g[GUARD_MAX];
} tab;

/* The directory name:port is served from, if its own (not default/ nor
   the root): 0 with its identity in *sb, or -1. */
static int own_dir(const site_t *s, const char *name, struct stat *sb)
{
    int which, fd = vhost_open(s->rootfd, name, s->cfg->vhost_only, site_root_check(s), &which);
    int ok = fd >= 0 && (which == VHOST_NAMED || which == VHOST_BARE) && !fstat(fd, sb);
    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}

/* The table for s's store and port, made again when stale. */
static void refresh(const site_t *s, int port)
{
    tls_store_t *st = s->proc->tls;
    int64_t now = gio_now(s->loop) / 1000;
    if (tab.store == st && tab.port == port && tab.second == now)
        return;
    tab.store = st, tab.port = port, tab.second = now, tab.n = 0;
    for (int i = 0; i < tls_store_count(st); i++) {
        const char *nm;
        for (int k = 0; tls_store_asks_client(st, i) && tls_store_name(st, i, k, &nm); k++) {
            char with[VHOST_NAME_MAX];
            struct stat sb;
            int w = snprintf(with, sizeof with, "%s:%d", nm, port);
            if (tab.n == GUARD_MAX || nm[0] == '*' || w < 0 || (size_t)w >= sizeof with ||
                own_dir(s, with, &sb) < 0)
                continue;
            guarded_t *g = &tab.g[tab.n++];
            g->dev = sb.st_dev, g->ino = sb.st_ino;
            snprintf(g->name, sizeof g->name, "%s", nm);
        }
    }
}

const char *guard_site(exchange_t *ex, const char *host, size_t n)
{
    const site_t *s = ex->site;
    struct stat sb;
    if ((!ex->ssl && !ex->sni) || !s->cfg->vhosts || ex->route.state != EX_ROUTE_OK ||
        !ex->route.namelen || !tls_store_count(s->proc->tls))
        return NULL;
    refresh(s, ex->local_port);
    if (!tab.n || own_dir(s, ex->route.name, &sb) < 0)
        return NULL;
    for (int i = 0; i < tab.n; i++) {
        const guarded_t *g = &tab.g[i];
        if (g->dev == sb.st_dev && g->ino == sb.st_ino &&
            !(strlen(g->name) == n && !memcmp(g->name, host, n)))
            return g->name;
    }
    return NULL;
}
