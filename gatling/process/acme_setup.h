/*
 * acme_setup — main()'s part of automatic HTTPS (--acme): the options, the
 * state directory made before a chroot and -u, the names to keep
 * certificates for, and the start and end of the client process
 * (acme/acme.h).  The loops' part is site/acme_chal.h.
 */
#ifndef GATLING_ACME_SETUP_H
#define GATLING_ACME_SETUP_H

#include "site/config.h"
#include "site/proc.h"
#include "site/optdef.h"

/* The --acme options: their rows' ids, in acme_opts' order. */
enum {
    ACME_OPT = 0, /* --acme EMAIL */
    ACME_OPT_CA,
    ACME_OPT_CA_ROOT,
    ACME_OPT_EAB,
    ACME_OPT_PROFILE,
    ACME_OPT_KEY,
    ACME_OPT_CHALLENGE,
    ACME_OPT_DIR,
    ACME_OPT_NAMES,
    ACME_OPT_ISSUER,
    ACME_OPT_DNS_SERVER, /* DNS-01 (acme/acme_dns.h) */
    ACME_OPT_DNS_KEY,
    ACME_OPT_ONDEMAND, /* names not known at start (acme/acme_ondemand.h) */
    ACME_OPT_ONDEMAND_RATE,
    ACME_OPT_ONDEMAND_NAMES,
    ACME_OPT_ONDEMAND_FORGET,
    ACME_OPT_END
};

/* Their rows of the options table (site/optdef.h), ended by OPT_LAST; each
   value is checked by acme_setup.c as it is read. */
extern const optdef_t acme_opts[];

#define ACME_CA_DEFAULT "https://acme-v02.api.letsencrypt.org/directory"
#define ACME_DIR_DEFAULT "/var/lib/gatling/acme"

/* Before the options: none of them seen yet. */
void acme_options_begin(void);

/* After all options: the defaults, and what does not go together (--acme-*
   without --acme, --acme with -E).  -1 to go on, or an exit code. */
int acme_options_done(config_t *cfg);

/* Before the certificates are loaded (and so before a chroot and -u, after
   -u's ids are known): make the state directory (and, without -C, its live/
   as the certificate directory), writable by -u's user (p's ids), and open
   it for the loops (p->acme_chal).  0, or -1 after saying why on stderr. */
int acme_prepare(const config_t *cfg, proc_t *p);

/* Before the certificates are loaded (so that the client, which talks to
   the network, holds none of their keys nor the session-ticket secret) and
   before a chroot, -u and -W's fork: the names (--acme-names, else the
   virtual host directories that name a host), and the client process
   (p->acme_pid).  0, or -1 after saying why. */
int acme_launch(const config_t *cfg, proc_t *p);

/* The server is ending: so does the client (its keeper told by closing its
   stop pipe, waited for ACME_KEEPER_STOP s at most); what acme_prepare and
   acme_launch made is freed (the loops are done with it). */
void acme_end(proc_t *p);

/* In a process forked after acme_launch (a -W worker): let go of the
   keeper's stop pipe, so that the keeper sees the server's end when the
   process that started it ends, not when the last of its children does. */
void acme_detach(void);

#endif
