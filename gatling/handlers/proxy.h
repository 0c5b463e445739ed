/*
 * proxy — reverse proxying to HTTP/1.1, FastCGI and SCGI backends (-P).
 *
 * A rule is [F/|S/]host/port/regex or [F/|S/]unix:path:regex (gatling.8):
 * F/ FastCGI, S/ SCGI, otherwise HTTP; host an IPv4 or a bracketed IPv6
 * literal (never a name: nothing is looked up), path a unix socket (absolute,
 * no colon), regex a POSIX ERE matched against the decoded, normalised
 * request path.  A rule applies to a virtual host whose directory holds a
 * file named .proxy (looked at once a second per vhost).
 *
 * The answer is a streaming producer (http/exchange.h): a non-blocking
 * connection to the backend (from a keep-alive pool per rule for HTTP and
 * FastCGI), the request written to it with its body streamed from the
 * client, the response streamed back with back-pressure; 502 when the
 * backend fails before its head, 504 when it stays silent for -Q seconds.
 */
#ifndef GATLING_PROXY_H
#define GATLING_PROXY_H

#include "http/exchange.h"

struct site;

/* Check rule (main.c, -P) the way proxy_init will use it: 0, or -1 after
   printing why to stderr. */
int proxy_rule_check(const char *rule);

/* How much of rule is its backend ("127.0.0.1/8080", "F/unix:/run/php.sock"):
   the length before the separator of its pattern, for /metrics' label. */
size_t proxy_rule_backend(const char *rule);

/* The rules of site->cfg compiled for this loop, its pools empty, kept in
   the hsite_t whose site it is (hstate.h).  0, or -1 after printing why to
   stderr.  No rules: nothing is allocated. */
int proxy_init(struct site *site);

/* Close the pools and free the rules. */
void proxy_free(struct site *site);

/* Does a rule send ex's request to a backend?  1 or 0 (router_streams). */
int proxy_streams(exchange_t *ex);

enum { PROXY_NOT_MINE = 1 };

/* Answer ex's request from a backend if a rule matches it: 0 (answered or
   under way), -1 (ENOMEM), or PROXY_NOT_MINE. */
int proxy_dispatch(exchange_t *ex);

#endif
