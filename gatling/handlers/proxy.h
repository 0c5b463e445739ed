/*
 * proxy — reverse proxying to HTTP/1.1, FastCGI and SCGI backends (-P).
 *
 * A rule is [F/|S/]backends/regex (the last backend an address) or
 * [F/|S/]backends:regex (the last a unix socket), or @pool/regex
 * (gatling.8): F/ FastCGI, S/ SCGI, otherwise HTTP; backends one or more,
 * comma-separated, each host/port (an IPv4 or a bracketed IPv6 literal,
 * never a name: nothing is looked up) or unix:/path, with *weight and
 * +backup; @pool names a --pool, which may list its backends in a file and
 * has options (balancing, health, retries).  regex is a POSIX ERE matched
 * against the decoded, normalised request path.  A rule applies to a
 * virtual host whose directory holds a file named .proxy (looked at once a
 * second per vhost).  A FastCGI or SCGI rule's front=/index.php; (or the
 * site's .proxy saying "front /index.php") makes its script the site's
 * front controller: a path that names no file there runs it
 * (proxy_front.c).
 *
 * The answer is a streaming producer (http/exchange.h): a backend chosen
 * by the pool's balancer among those up, a non-blocking connection to it
 * (from a keep-alive pool per backend for HTTP and FastCGI), the request
 * written to it with its body streamed from the client, the response
 * streamed back with back-pressure.  A failure before the answer's head
 * goes to another backend when the request may be sent again (RFC 9110
 * 9.2.2); else 502, 503 when no backend is up, 504 when one stays silent
 * for -Q seconds.
 */
#ifndef GATLING_PROXY_H
#define GATLING_PROXY_H

#include "handler.h"
#include "http/exchange.h"
#include "site/config.h"
#include "site/proc.h"
#include "site/optdef.h"

struct site;

/* -P and --pool: their rows of the options table (site/optdef.h). */
extern const optdef_t proxy_opts[];

/* Check rule (-P) the way proxy_init will use it: NULL, or why it is not
   a rule (a static string). */
const char *proxy_rule_check(const char *rule);

/* Check a --pool definition: NULL, or why it is not one. */
const char *proxy_pool_check(const char *def);

/* Check the rules and pools together (names, the backends' count, each
   file: pool's list read once, --proxy-ca's CAs read once, with --proxy-ca
   alone too).  0, or -1 after printing why to stderr. */
int proxy_config_check(const config_t *cfg);

/* At start, before a chroot, into p: the file: pools' directories, opened
   into p->pool_dirfd[i] for --pool i (the others' stay as they are), and
   --proxy-ca's CAs read into p->proxy_tls (handlers/proxy_tls.c).  0, or
   -1 after printing why to stderr (quiet: not, the options' check said
   it).  After proxy_config_check. */
int proxy_open(const config_t *cfg, proc_t *p, int quiet);

/* Each unix socket the backends of cfg's -P rules and --pools name (a
   file: pool's as its list reads now, through dirfd, proxy_open's):
   fn gets the option ("-P" or "--pool"), the rule or pool definition as
   given and the socket's path.  After proxy_config_check passed. */
typedef void (*proxy_socket_fn)(void *arg, const char *option, const char *value,
                                const char *path);
void proxy_sockets(const config_t *cfg, const int *dirfd, proxy_socket_fn fn, void *arg);

/* Backend slot of this loop (0 <= slot < CONFIG_BACKENDS): its pool's name,
   its address as written, its state (up, slowstart, down, probing,
   draining) and requests outstanding.  0: the slot is free; 1: down or
   draining; 2: up. */
int proxy_backend(const struct site *site, int slot, const char **pool, const char **label,
                  const char **state, unsigned *outstanding);

/* The rules of site->cfg compiled for this loop, its pools empty, kept in
   its site's HSTATE_PROXY (hstate.h).  0, or -1 after printing why to
   stderr.  No rules: nothing is allocated. */
int proxy_init(struct site *site);

/* Close the pools and free the rules. */
void proxy_free(struct site *site);

/* Does a rule send ex's request to a backend?  1 or 0 (router_streams). */
int proxy_streams(exchange_t *ex);

enum { PROXY_NOT_MINE = HANDLER_NOT_MINE };

/* Answer ex's request from a backend if a rule matches it: 0 (answered or
   under way), -1 (ENOMEM), or PROXY_NOT_MINE. */
int proxy_dispatch(exchange_t *ex);

/* The router's entry (router.c's table): proxy_dispatch, proxy_init, proxy_free. */
extern const handler_t proxy_handler;

#endif
