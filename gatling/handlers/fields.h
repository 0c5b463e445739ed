/*
 * fields — what any backend sees of a request's fields, whatever its
 * protocol: the one policy that the HTTP/1.1 (proxy_http.c) and HTTP/2
 * (proxy_h2.c) paths and the CGI, FastCGI and SCGI variables (cgienv.c)
 * only encode.
 *
 * Removed: the hop-by-hop fields and those a Connection field names (RFC
 * 9110 7.6.1), the framing ones (each protocol writes its own), and every
 * field only the server may write: the forwarding ones (X-Forwarded-*,
 * Forwarded) and what a client certificate was (X-SSL-Client-*, with '_'
 * for '-' too, Client-Cert, Client-Cert-Chain).  Added (fields_ours):
 * X-Forwarded-For (the client's list, then its address), X-Forwarded-Proto,
 * X-Forwarded-Host, Forwarded (RFC 7239), and, for the HTTP backends under
 * mutual TLS, the verified identity (X-SSL-Client-Verify, -S-DN, -I-DN,
 * -Serial, -Fingerprint; CGI's variables carry it as SSL_CLIENT_*).
 */
#ifndef GATLING_FIELDS_H
#define GATLING_FIELDS_H

#include "http/exchange.h"

#include <string.h>
#include <strings.h>

/* Is n the name s (case-insensitive)?  Inline: s is mostly a literal. */
static inline int fields_name_is(http_str_t n, const char *s)
{
    size_t k = strlen(s);
    return n.n == k && !strncasecmp(n.p, s, k);
}

/* Is name listed in a Connection field among h[0..nh)?  (RFC 9110 7.6.1) */
int fields_named_by_connection(const http_header_t *h, size_t nh, http_str_t name);

/* Is the field name (of h[0..nh)) one the other side never gets from this
   one?  A request's (response 0): hop-by-hop, named by Connection,
   framing, forwarding, a client certificate's; a response's (1): hop-by-hop
   and framing, and Date, Server, Content-Type (which the head writes). */
int fields_hop_by_hop(const http_header_t *h, size_t nh, http_str_t name, int response);

#define FIELDS_FORWARDED_MAX 1024 /* a client's X-Forwarded-For or Forwarded list kept */

/* A field of ours, name: value (NUL-terminated, valid during the call) to
   the encoder.  0, or -1 (ENOMEM). */
typedef int (*fields_emit_t)(void *arg, const char *name, const char *value);

/* ex's peer as text (IPv4-mapped addresses as IPv4; "0.0.0.0" if none) into
   a (INET6_ADDRSTRLEN bytes) and its port. */
void fields_peer(const exchange_t *ex, char *a, int *port);

enum { FIELDS_IDENTITY = 1 }; /* fields_ours: the client certificate's too */

/* The fields every backend gets from the server, through emit: X-Forwarded-For
   (the client's list, dropped when over FIELDS_FORWARDED_MAX, then its
   address), -Proto, -Host, Forwarded, and with FIELDS_IDENTITY the client
   certificate's X-SSL-Client-* where the site asks for one.  0, or -1. */
int fields_ours(const exchange_t *ex, unsigned what, fields_emit_t emit, void *arg);

#endif
