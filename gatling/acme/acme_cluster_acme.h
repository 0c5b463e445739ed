/*
 * acme_cluster_acme — --acme with --cluster, the side process's part (see
 * acme_cluster.h): one order per name for the whole cluster, one account.
 *   - A lock per name: NAME/acme/lock/HOST, put if absent with this node's
 *     lease of LOCK_TTL seconds (one lease for all the locks it holds, kept
 *     alive every round) when the ACME client wants HOST (due); let go once
 *     the client no longer wants it (its certificate is in etcd by then).  A
 *     holder that dies or is cut off loses its locks within LOCK_TTL and
 *     another node takes them.  The client orders a name only while this
 *     node holds its lock (site/cluster.h's slots).
 *   - Challenges: each node puts its client's challenge files under
 *     NAME/acme/chal/NODE/{http-01/TOKEN,tls-alpn-01/HOST.pem} (with the
 *     locks' lease) and writes the other nodes' into its state directory
 *     (mode 0444, so it tells them from its client's 0644 ones), so the
 *     balancer may send the CA's validation to any node.
 *   - Certificates: NAME/acme/cert/HOST ("gatling-cert-1 SERIAL CHAINLEN
 *     KEYLEN\n" then the chain and the key).  The newer of etcd's and -C's
 *     wins on both sides: a node installs etcd's (atomically, acme_install)
 *     when it was issued later than its own, and puts its own (a
 *     compare-and-put) when etcd's is older or absent -- so a holder cut
 *     off during an order still hands its certificate over when etcd is
 *     back.  A value that is not a whole certificate with its own key (one
 *     written half, hostile data) is said once and never installed.
 *   - The account: NAME/acme/account/CAHASH holds the cluster's account key
 *     (PEM), put by the first client that needs it (a compare-and-put: the
 *     others read that one), so every node signs as the one account.
 */
#ifndef GATLING_ACME_CLUSTER_ACME_H
#define GATLING_ACME_CLUSTER_ACME_H

#include "acme_etcd.h"
#include "site/cluster.h"
#include "site/config.h"
#include "site/elog.h"

#include <signal.h>

#define CLUSTER_SAID_MAX 64

typedef struct cluster_acme {
    const config_t *cfg;
    const char *tls_dir; /* proc_t's: -C, or --acme's live/ */
    cluster_view_t *view;
    elog_t *log;
    const char *prefix; /* "/gatling/NAME/" */
    const char *node;   /* this node's id */
    int state_fd, tls_fd; /* --acme-dir and -C, opened before -u */
    int64_t lease;        /* the locks', while one is held */
    int64_t kept_at;      /* the lease last kept alive */
    int64_t next;         /* the next round (unix seconds) */
    uint64_t published;   /* a hash of the challenges last put */
    uint64_t said[CLUSTER_SAID_MAX]; /* bad values said (hashes): not said again */
    unsigned nsaid;
    pid_t notify;         /* the server: SIGUSR1 once a certificate is installed */
} cluster_acme_t;

/* Open the directories (before -u and the chroot).  0 (also without
   --acme: nothing to do), or -1 with why in err. */
int cluster_acme_open(cluster_acme_t *a, char *err, size_t errlen);

/* One round (every second): certificates, locks, challenges.  0, or -1
   with why in err (etcd down; bad data is said and skipped). */
int cluster_acme_round(cluster_acme_t *a, etcd_t *e, char *err, size_t errlen);

/* A round failed (etcd unreachable): once the locks' lease has not been
   kept alive for LOCK_TTL seconds, they are another node's to take, and the
   client is told it holds none (an order in flight finishes). */
void cluster_acme_down(cluster_acme_t *a);

/* The ACME client, after it wrote a challenge file and before it tells the
   CA to validate: wait until the side process put it in etcd and the other
   nodes had a round to take it (about 2 s; nothing without --cluster: view
   NULL). */
void acme_cluster_spread(cluster_view_t *view, const volatile sig_atomic_t *stop);

/* The ACME client: the cluster's account key for the CA (cahash), from
   etcd, put there from mine[0..mlen) (a PEM key) if it has none yet.  The
   PEM (malloc'd, its length in *len; the caller checks it is a key), or
   NULL with why in err. */
char *acme_cluster_account(const config_t *cfg, etcd_t *e, const char *cahash, const char *mine,
                           size_t mlen, size_t *len, char *err, size_t errlen);

#endif
