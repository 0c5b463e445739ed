/*
 * cache_cluster — --cluster's purges on the cache's side: a PURGE accepted
 * here goes to the side process through site/cluster.h's pipe, and every
 * CC_TICK_MS the purges the side process read from etcd (other nodes', and
 * with -W this node's other workers') are done on this loop's store.  The
 * tick reads shared memory only: it never waits on etcd.
 */
#include "cache_int.h"
#include "site/cluster.h"

#define CC_TICK_MS 100

static void purge_one(const char *key, size_t len, void *arg)
{
    ce_purge(arg, key, len);
}

static void on_tick(gio_loop_t *l, void *arg)
{
    cache_t *c = arg;
    cluster_take_purges(c->site->proc->cluster, &c->cluster_next, purge_one, c);
    gio_timer_set(l, &c->cluster_tick, gio_now(l) + CC_TICK_MS, on_tick, c);
}

void cc_start(cache_t *c)
{
    if (!c->site->proc->cluster)
        return;
    c->cluster_next = cluster_purges_next(c->site->proc->cluster); /* older ones were done */
    gio_timer_set(c->site->loop, &c->cluster_tick, gio_now(c->site->loop) + CC_TICK_MS, on_tick,
                  c);
}

void cc_stop(cache_t *c)
{
    if (c->site->proc->cluster)
        gio_timer_stop(c->site->loop, &c->cluster_tick);
}

void cc_send(cache_t *c, const char *key, size_t n)
{
    const proc_t *p = c->site->proc;
    if (p->cluster)
        cluster_send_purge(p->cluster_purge_fd, key, n);
}
