/*
 * acme_cluster — the cluster's side process (--cluster): the one process of
 * a node that talks to etcd, forked by main() (cluster_setup.h) before the
 * chroot, -u and -W's workers, as the ACME client is.  Every round (a fifth
 * of a second) it
 *   - keeps the cluster's ticket masters: reads NAME's tickets key, makes
 *     it if there is none, rotates it when it is older than the rotation
 *     period (a compare-and-swap on the key's revision: of the nodes that
 *     see it due, one wins, the others read the winner's), and puts the
 *     current and previous masters in the loops' shared page (site/cluster.h);
 *   - sends the purges the loops accepted (their pipe) to etcd as keys with
 *     a lease of PURGE_TTL seconds, and gives the loops every purge key that
 *     appeared since the last round (its own too: -W's other workers need
 *     it).
 * etcd down costs a round its timeouts, never the loops anything; a value
 * in etcd that is not what gatling wrote, or not sealed with the cluster's
 * secret (acme_etcd.h), is logged and not used.
 */
#ifndef GATLING_ACME_CLUSTER_H
#define GATLING_ACME_CLUSTER_H

#include "site/cluster.h"
#include "site/config.h"
#include "site/proc.h"

#include <sys/types.h>

#define CLUSTER_ROTATE_DEFAULT 86400 /* seconds a ticket master encrypts (RFC 8446 4.6.1: <= 7 days) */

/* The key names under /gatling/NAME/ (tests and gatling.8 name them). */
#define CLUSTER_KEY_TICKETS "tickets"
#define CLUSTER_KEY_PURGE "purge/"

/*
 * Fork the side process: it reads purges from purge_fd, writes view, logs
 * to p's error log (cfg's -q) and runs as -u's user (p's ids).  Its pid, or -1 with why in err.
 */
pid_t acme_cluster_start(const config_t *cfg, const proc_t *p, cluster_view_t *view, int purge_fd,
                         char *err, size_t errlen);

#endif
