/*
 * cluster_setup — main()'s part of --cluster: the options, the shared page
 * and the purge pipe made before the chroot, -u and -W's workers, and the
 * start and end of the side process (acme/acme_cluster.h).  The loops' part
 * is site/cluster.h.
 */
#ifndef GATLING_CLUSTER_SETUP_H
#define GATLING_CLUSTER_SETUP_H

#include "site/config.h"

#include <getopt.h>

/* getopt_long's values (main.c's are below 300, acme_setup.h's from 300). */
enum { CLUSTER_OPT = 400, CLUSTER_OPT_NAME };

#define CLUSTER_LONGOPTS \
    {"cluster", required_argument, NULL, CLUSTER_OPT}, \
    {"cluster-name", required_argument, NULL, CLUSTER_OPT_NAME}

#define CLUSTER_NAME_DEFAULT "gatling"

/* -h's lines. */
void cluster_usage(void);

/* The option's name without its dashes, or NULL if c is none. */
const char *cluster_option_name(int c);

/* One --cluster option: 1 if c is none, -1 to go on, or an exit code (2,
   after saying why on stderr).  Also checks, with c 0 after all options,
   what does not go together. */
int cluster_option(int c, char *arg, config_t *cfg);

/* After the certificates, before a chroot, -u and -W: the shared page, the
   pipe and the side process.  0 (also without --cluster), or -1 after
   saying why on stderr. */
int cluster_launch(config_t *cfg);

/* The server is ending: so does the side process. */
void cluster_end(config_t *cfg);

#endif
