/*
 * acme_dns — DNS-01 (RFC 8555 8.4) through RFC 2136 dynamic updates signed
 * with TSIG (RFC 8945), sent to the zone's primary (--acme-dns-server) with
 * Debian's libldns, which builds, signs, sends and checks them: no DNS
 * provider's API, the protocol BIND, Knot and PowerDNS all take.  Blocking,
 * in the ACME client's process only (never a serving loop), each exchange
 * bounded (ACME_DNS_TIMEOUT_S a try, ACME_DNS_TRIES tries).
 *
 * For NAME (a host name, or a wildcard "*.example.org", whose record is the
 * base name's), the record is _acme-challenge.NAME TXT
 * base64url(SHA-256(key authorization)), or, when the primary answers that
 * name with a CNAME (an admin who delegates the challenge to a zone that
 * takes updates, acme-dns style), the record at the end of the CNAME chain
 * (ACME_DNS_CNAME_MAX links at most, a loop refused).  The zone is the one
 * whose SOA the primary gives for that owner; the record is added, then
 * looked for at the
 * primary and at every name server of the zone's NS set that answers,
 * until each has it (ACME_DNS_PROPAGATION_S at most), and removed after the
 * validation, whatever its outcome.
 *
 * Each returns 0, or -1 with one line in err: the name, the server, and
 * the DNS answer's code (REFUSED, NOTAUTH, a TSIG error) in words.
 */
#ifndef GATLING_ACME_DNS_H
#define GATLING_ACME_DNS_H

#include <signal.h>
#include <stddef.h>

#include "acme_dnskey.h"
#include "site/config.h"

#define ACME_DNS_TTL 60            /* the TXT record's TTL */
#define ACME_DNS_TIMEOUT_S 3       /* one DNS exchange, seconds */
#define ACME_DNS_TRIES 2           /* ... tries of it */
#define ACME_DNS_PROPAGATION_S 120 /* every server has the record, at most */
#define ACME_DNS_CNAME_MAX 8       /* _acme-challenge CNAMEs followed, at most */

/* Does name go by DNS-01?  A wildcard always; any name with
   --acme-challenge dns-01. */
int acme_dns_wanted(const config_acme_t *a, const char *name);

/* Is --acme-dns-server's value ADDR, ADDR:PORT or [IPv6]:PORT?  1 or 0. */
int acme_dns_server_ok(const char *s);

/* What one challenge put in the DNS, for acme_dns_remove. */
typedef struct acme_dns_rec {
    char owner[300]; /* "_acme-challenge.example.org." */
    char zone[260];  /* "example.org." */
    char value[48];  /* base64url of 32 bytes */
    char via[600];   /* the CNAMEs followed, "A CNAME B, B CNAME C"; "" for none */
} acme_dns_rec_t;

/* Before an order for name: its record's owner (CNAMEs followed) and zone
   are found, and the very update is made and undone in one signed UPDATE
   (a TXT record with a random value added, then deleted: the zone is left
   as it was, no serial change at BIND or Knot), so a wrong key, a server
   that is down, or an update policy that refuses the key this owner or
   type is found before the CA is asked for anything.  (An UPDATE with no
   update RRs, or with prerequisites only, is no proof: BIND 9 and Knot
   check a policy per update RR, and accept one with none whatever it
   says.) */
int acme_dns_check(const config_acme_t *a, const char *name, char *err, size_t cap);

/* Add the TXT record for name's key authorization and wait until the
   primary and the zone's reachable name servers serve it (stop: a SIGTERM
   ends the wait).  rec is filled for acme_dns_remove, also on failure after
   the record was added (rec->zone "" when nothing was). */
int acme_dns_publish(const config_acme_t *a, const char *name, const char *keyauth,
                     const volatile sig_atomic_t *stop, acme_dns_rec_t *rec, char *err,
                     size_t cap);

/* Delete what acme_dns_publish added (only that record: another client's
   value at the same owner stays).  Nothing when rec->zone is "". */
int acme_dns_remove(const config_acme_t *a, const acme_dns_rec_t *rec, char *err, size_t cap);

#endif
