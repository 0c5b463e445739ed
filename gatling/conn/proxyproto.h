/*
 * proxyproto — the PROXY protocol header (HAProxy's, versions 1 and 2) that a
 * load balancer sends before the client's first byte (-y in gatling(8));
 * whose headers are believed (-Y) is site/nets.h's to say.
 *
 * proxy_parse() is a pure function over the caller's bytes, in the style of
 * the request parser: no I/O, no allocation, no globals.  It returns the
 * header's length, PROXY_INCOMPLETE or PROXY_MALFORMED, and it never needs
 * more than PROXY_MAX bytes (v1: PROXY_V1_MAX) to decide.  Its promise to
 * the reader (conn_open.c): on PROXY_INCOMPLETE every byte it was given belongs
 * to the header, so a reader may take them off the socket and still never
 * consume a byte of the request that follows the header.
 */
#ifndef GATLING_PROXYPROTO_H
#define GATLING_PROXYPROTO_H

#include "site/config.h"

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define PROXY_V1_MAX 107 /* "PROXY TCP6 " + two full IPv6 addresses, ports, CRLF */
#define PROXY_MAX 536    /* v2: the 16-byte fixed part and at most 520 more */

enum { PROXY_MALFORMED = -1, PROXY_INCOMPLETE = -2 };

typedef struct proxy_hdr {
    uint8_t version;  /* 1 or 2 */
    uint8_t local;    /* keep the connection's own peer: v2 LOCAL, UNSPEC or
                         UNIX; v1 UNKNOWN (a health check by the proxy itself) */
    socklen_t srclen; /* of src, when !local */
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } src; /* the client the proxy speaks for, when !local */
} proxy_hdr_t;

/*
 * Parse the PROXY header at the start of buf[0..len).  Returns its length in
 * bytes (> 0) and fills *h; PROXY_INCOMPLETE (every byte given is part of a
 * header still to be completed); or PROXY_MALFORMED (not a PROXY header, a
 * v1 line past PROXY_V1_MAX, a v2 header past PROXY_MAX, an unknown version,
 * command, family or transport, addresses or a TLV that do not fit the
 * stated length).  TLVs are skipped, each checked to fit.
 */
long proxy_parse(const void *buf, size_t len, proxy_hdr_t *h);

/* -Y's networks, whose PROXY headers are believed: site/nets.h (net_parse,
   net_contains), which /server-status's --status-from shares */

#endif
