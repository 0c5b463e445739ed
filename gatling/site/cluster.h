/*
 * cluster — the loops' side of --cluster: one shared page (a MAP_SHARED
 * anonymous mapping, made by main() before the side process and -W's
 * workers fork, so never a file anyone could serve) that the cluster's side
 * process (acme/acme_cluster.h) writes and the loops read with no syscall
 * and no wait: the ticket masters the cluster shares through etcd, the time
 * of the last good exchange with etcd, and a ring of the purges other nodes
 * accepted.  The side process writes under a sequence lock; a reader that
 * meets a write in progress tries again a few times, then does without
 * (its own master, no purge this time round).  Purges accepted here go the
 * other way through a pipe (cluster_send_purge), never waiting on it.
 */
#ifndef GATLING_SITE_CLUSTER_H
#define GATLING_SITE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#define CLUSTER_MASTER_LEN 32
#define CLUSTER_PURGES 64      /* the ring: purges a loop may be behind by */
#define CLUSTER_PURGE_MAX 4000 /* a cache key: one pipe write (PIPE_BUF); longer stay local */

typedef struct cluster_view cluster_view_t;

/* The shared page, or NULL with errno set. */
cluster_view_t *cluster_view_new(void);
void cluster_view_free(cluster_view_t *v);

/*
 * The loops: the cluster's ticket masters, current then previous, into
 * master (2 x CLUSTER_MASTER_LEN bytes).  How many (0: none yet, the loop
 * uses its own; 1: no previous one).
 */
int cluster_tickets(const cluster_view_t *v, unsigned char *master);

/* Unix seconds of the last good exchange with etcd (0: none yet), and the
   masters' generation (0: none). */
int64_t cluster_synced(const cluster_view_t *v, uint64_t *generation);

/* The side process: new masters (prev NULL: none) of a generation. */
void cluster_set_tickets(cluster_view_t *v, const unsigned char *cur, const unsigned char *prev,
                         uint64_t generation);
void cluster_set_synced(cluster_view_t *v, int64_t now);

/*
 * --acme with --cluster: a lock per name.  The ACME client lists its names
 * (cluster_acme_names, at its start: slot i is its name i) and says which
 * it wants to order (due now); the side process takes the cluster's lock of
 * each wanted name, lets go of each no longer wanted, and says which it
 * holds.  The client orders a name only while this node holds its lock.
 */
#define CLUSTER_ACME_NAMES 200 /* CONFIG_ACME_NAMES + CONFIG_ACME_OD_NAMES */
#define CLUSTER_ACME_NAME_MAX 256

void cluster_acme_names(cluster_view_t *v, const char *const *names, int n);
/* The names listed (0: the client has not started); name i's text copied
   into out, NUL-terminated within CLUSTER_ACME_NAME_MAX whatever the
   client's process wrote to the page: its length. */
int cluster_acme_count(const cluster_view_t *v);
size_t cluster_acme_name(const cluster_view_t *v, int i, char out[CLUSTER_ACME_NAME_MAX]);
int cluster_acme_wanted(const cluster_view_t *v, int i);
void cluster_acme_want(cluster_view_t *v, int i, int want);
int cluster_acme_held(const cluster_view_t *v, int i);
/* The side process: name i's lock held here or not (i -1: none of them). */
void cluster_set_acme_held(cluster_view_t *v, int i, int held);

/* How many times the holder's side process put its client's challenges and
   certificates into etcd (the client waits for the next before the CA
   validates); the side process counts one more. */
uint64_t cluster_acme_published(const cluster_view_t *v);
void cluster_note_published(cluster_view_t *v);

/* The side process: the etcd revision up to which purges were given to the
   loops (0: none yet).  Kept in this page, which outlives the side process,
   so one started again by its keeper resumes there and skips no purge. */
int64_t cluster_purge_rev(const cluster_view_t *v);
void cluster_set_purge_rev(cluster_view_t *v, int64_t rev);

/* The side process: a purge another node accepted (a cache key). */
void cluster_add_purge(cluster_view_t *v, const void *key, size_t len);

/*
 * The loops: purges from *next on.  Each one's key is given to fn; *next
 * moves past them.  A loop more than CLUSTER_PURGES behind skips what the
 * ring lost (the count of those is returned; 0 normally).
 */
uint64_t cluster_take_purges(const cluster_view_t *v, uint64_t *next,
                             void (*fn)(const char *key, size_t len, void *arg), void *arg);

/* The loops: where a loop that starts now begins taking purges. */
uint64_t cluster_purges_next(const cluster_view_t *v);

/* The loops: tell the side process (fd: the pipe's write end, non-blocking)
   of a purge accepted here.  0, or -1 if the pipe is full (dropped). */
int cluster_send_purge(int fd, const void *key, size_t len);

#endif
