/*
 * acme_cluster_acme — --acme with --cluster, the side process's part (see
 * acme_cluster.h): one ACME client orders for the whole cluster.
 *   - The lock: NAME/acme/lock, put if absent with a lease of LOCK_TTL
 *     seconds that its holder keeps alive every round; a holder that dies or
 *     is cut off loses it within LOCK_TTL and another node takes it.  The
 *     shared page says whether this node holds it; the ACME client orders
 *     only then (acme_cluster_turn).
 *   - The holder publishes what its client wrote: the challenge files
 *     (NAME/acme/chal/http-01/TOKEN, .../tls-alpn-01/HOST.pem, under the
 *     lock's lease) and each certificate it installed in -C
 *     (NAME/acme/cert/HOST: "gatling-cert-1 SERIAL CHAINLEN KEYLEN\n" then
 *     the chain and the key).
 *   - The others write those challenges into their own state directory (so
 *     the balancer may send the CA's validation to any node) and install
 *     each certificate whose key matches it, whose name is a host name and
 *     whose serial is new, with acme_install (atomic, as the client does).
 */
#ifndef GATLING_ACME_CLUSTER_ACME_H
#define GATLING_ACME_CLUSTER_ACME_H

#include "acme_etcd.h"
#include "site/cluster.h"
#include "site/config.h"
#include "site/elog.h"

#include <signal.h>

typedef struct cluster_acme {
    const config_t *cfg;
    cluster_view_t *view;
    elog_t *log;
    const char *prefix; /* "/gatling/NAME/" */
    const char *node;   /* this node's id */
    int state_fd, tls_fd; /* --acme-dir and -C, opened before -u */
    int64_t lease;        /* the lock's, while held */
    int64_t next;         /* the next round (unix seconds) */
    uint64_t published;   /* a hash of what the holder last put */
    pid_t notify;         /* the server: SIGUSR1 once a certificate is installed */
} cluster_acme_t;

/* Open the directories (before -u and the chroot).  0 (also without
   --acme: nothing to do), or -1 with why in err. */
int cluster_acme_open(cluster_acme_t *a, char *err, size_t errlen);

/* One round (every second): the lock, then publish or install.  0, or -1
   with why in err (etcd down; bad data is said and skipped). */
int cluster_acme_round(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen);

/* The ACME client, before it orders: wait while another node holds the
   cluster's lock.  0 (this node holds it, or no --cluster), -1 stopped. */
int acme_cluster_turn(const config_t *cfg, const volatile sig_atomic_t *stop, elog_t *log);

/* The ACME client, after it wrote a challenge file and before it tells the
   CA to validate: wait until the side process put it in etcd and the other
   nodes had a round to take it (about 2 s; nothing without --cluster). */
void acme_cluster_spread(const config_t *cfg, const volatile sig_atomic_t *stop);

#endif
