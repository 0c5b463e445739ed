/*
 * cluster_setup — main()'s part of --cluster: the options, the shared page
 * and the purge pipe made before the chroot, -u and -W's workers, and the
 * start and end of the side process (acme/acme_cluster.h).  The loops' part
 * is site/cluster.h.
 */
#ifndef GATLING_CLUSTER_SETUP_H
#define GATLING_CLUSTER_SETUP_H

#include "site/config.h"
#include "site/proc.h"
#include "site/optdef.h"

#define CLUSTER_NAME_DEFAULT "gatling"

/* --cluster's rows of the options table (site/optdef.h), ended by OPT_LAST. */
extern const optdef_t cluster_opts[];

/* After every option: --cluster-name without --cluster is refused (2, after
   saying so), the default name set otherwise (-1: go on). */
int cluster_options_done(config_t *cfg);

/* After the certificates, before a chroot, -u and -W: the shared page, the
   pipe and the side process, into p.  0 (also without --cluster), or -1
   after saying why on stderr. */
int cluster_launch(const config_t *cfg, proc_t *p);

/*
 * The start's and --check's warning (advise.h) for --cluster with --acme:
 * the ACME client's certificates loaded from -C (NAME -> .acme/...) whose
 * chain does not lead to a root of --acme-ca-root (else the system's roots),
 * the roots a node checks another's certificate against: with a private CA
 * (Pebble) whose API root is there but not its issuing root, every node
 * refuses the others' certificates and orders its own.  Says which root is
 * missing; 1 if it said so, else 0.
 */
int cluster_advise(const config_t *cfg, const proc_t *p);

/* The server is ending: so does the side process. */
void cluster_end(proc_t *p);

#endif
