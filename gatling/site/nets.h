/*
 * nets — addresses and networks an option lists (-Y's proxies, --status-from's
 * scrapers): "addr" or "addr/bits", IPv4 or IPv6, kept as IPv6 (IPv4 as
 * ::ffff:a.b.c.d) so that one match serves both families.  Pure functions.
 */
#ifndef GATLING_NETS_H
#define GATLING_NETS_H

#include "config.h"

#include <sys/socket.h>

/* "addr" or "addr/bits" (IPv4 or IPv6) into *net.  0, or -1 if malformed. */
int net_parse(const char *s, config_net_t *net);

/* Is sa (IPv4, IPv6, or IPv4-mapped IPv6) inside one of nets[0..n)? */
int net_contains(const config_net_t *nets, int n, const struct sockaddr *sa);

/* Is sa a loopback address (127/8, ::1, or ::ffff:127.x.y.z)? */
int net_is_loopback(const struct sockaddr *sa);

#endif
