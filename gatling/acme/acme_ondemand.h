/*
 * acme_ondemand — the client's names: those given at start checked and put
 * in canonical form, and those got on demand (--acme-on-demand URL).
 *
 * On demand: a serving loop whose handshake names a host no certificate
 * answers for sends "NAME ADDR" on a datagram socket (site/acme_chal.h,
 * acme_chal_ask) and pauses that handshake (tls/tls_ctx.c; HTTP/3's, in
 * quic/quic_callbacks.c, asks without waiting).  Here, in the client's process
 * (which blocks as it likes), each ask is taken in turn: a name already kept
 * (ordered, in flight, or issued) is passed over, so one order per name
 * however many handshakes ask, and with --cluster one per cluster through
 * the name's lock as for the names given at start; a name that is not a host
 * name (an IP address, one label) is refused; then the limits: a name
 * refused lately (the cache, OD_REFUSE_TTL), asks from one client address
 * within the last hour (--acme-on-demand-rate's ADDR); then GET
 * URL?domain=NAME (OD_ASK_TIMEOUT, no redirects), 200 = yes; then the names
 * allowed within the last hour (its HOUR) and the list's room.  A yes adds the
 * name to the client's list (scheduled at once, renewed and ARI-polled as
 * the others) and to the state directory's ondemand file, so a restart keeps
 * it; a no, a fault or a limit goes into challenges/ondemand for a while, so
 * that the handshakes waiting for it stop waiting.
 *
 * The limits are such that strangers cannot spend them: the address first
 * (every ask from it counts, IPv6 by its /64), then the ask; only a name
 * the ask URL allows counts against the hour's names in all, so names it
 * refuses cost their address and nothing else.  The names got on demand
 * have a room of their own (--acme-on-demand-names; the names given at
 * start are not in it), and one that no handshake named for
 * --acme-on-demand-forget is forgotten: out of the schedule and the
 * ondemand file, not renewed.  A handshake that finds a certificate asks for
 * its name all the same, now and then (tls/'s tls_ondemand_seen, an hour
 * apart at most): for a name kept, that ask is its "in use"; for one
 * forgotten whose certificate still serves, it is asked for again as any
 * new name.  The log: a line per refusal, at most OD_LOG_BURST
 * a minute of each kind (the rest counted in one line); a name the ask URL
 * allowed that is refused all the same (the hour's names spent, the list
 * full) and a name forgotten are always logged.
 */
#ifndef GATLING_ACME_ONDEMAND_H
#define GATLING_ACME_ONDEMAND_H

#include <time.h>

#include "http/hbuf.h"
#include "site/config.h"
#include "site/elog.h"

/* A name usable as a file name in the -C directory and as an identifier. */
int acme_name_ok(const char *s);

/* The names as the client uses them: an IPv6 address in RFC 5952's form
   (lower case, the longest run of zeros as ::), as RFC 8738 wants it in the
   identifier and as the serving side names the TLS-ALPN-01 file (inet_ntop);
   the rest as given.  A malloc'd array (acme_free_names); NULL: no memory. */
const char *const *acme_canonical_names(const char *const *names, int nnames);
void acme_free_names(const char *const *canon, const char *const *names, int nnames);

typedef struct acme_od acme_od_t;

/* What acme_od_names_fn is asked to do with a name. */
enum {
    ACME_OD_IS = 0,  /* is it in the client's list?  1, else 0 */
    ACME_OD_ADD = 1, /* keep it (due at once): 0, or -1 (no memory, or the list full) */
    ACME_OD_DROP,    /* forget it (the client holds name no longer): 0 */
    ACME_OD_HAS_CERT /* has it a certificate in -C (expired too)?  1, else 0 */
};

/* The client's list, asked op (ACME_OD_*) of name. */
typedef int (*acme_od_names_fn)(void *arg, const char *name, int op);

/* cfg's --acme-on-demand in the client (its socket fd, proc_t's acme_od_fd,
   the state directory state_fd); NULL when it is off or out of memory. */
acme_od_t *acme_od_new(const config_t *cfg, int fd, int state_fd, elog_t *log);
void acme_od_free(acme_od_t *od);

/* The socket to wait on (-1: none). */
int acme_od_fd(const acme_od_t *od);

/* The names an earlier run got on demand, each given to fn (add 1). */
void acme_od_load(acme_od_t *od, acme_od_names_fn fn, void *arg);

/* The asks waiting, each as the header says; a yes given to fn.  How many
   names were added. */
int acme_od_take(acme_od_t *od, acme_od_names_fn fn, void *arg);

/* The names got on demand that no handshake named for
   --acme-on-demand-forget: forgotten (fn's ACME_OD_DROP), each logged.  When
   to look again (the first name's time to be forgotten; 0: none due). */
time_t acme_od_sweep(acme_od_t *od, acme_od_names_fn fn, void *arg);

/* The status file's on-demand lines (site/acme_chal.h), after the cert lines. */
void acme_od_status(const acme_od_t *od, hbuf_t *b);

#endif
