/*
 * cgi — CGI/1.1 programs (RFC 3875) as streaming producers of an exchange.
 *
 * Which requests: with -w regex, a path whose script part (below) matches
 * one of the patterns; with -z, one whose script part is a world-executable
 * regular file that starts with "#!" or is an ELF binary.  The script part
 * of the decoded, normalised path is the longest prefix ending at a '/'
 * that names a regular file below the vhost directory, found as static.c
 * finds files (fs.c's openat2 RESOLVE_BENEATH, symlinks only within the
 * root unless -L, never a dotfile anywhere in the path, only what fs_public
 * says everyone may read: a script behind a directory others may not search
 * is not run, and static.c answers 403); the rest is PATH_INFO:
 * /cgi/x.sh/a/b runs /cgi/x.sh with PATH_INFO /a/b.  Any method goes to
 * the script; .htaccess protects a script as it protects a file, and then
 * REMOTE_USER names who passed.
 *
 * The process is created by the spawner (site/spawn.h), never by the loop:
 * its stdin, stdout and stderr are pipes watched on the loop (watch.h).
 * The request body goes to stdin with back-pressure; stdout's head is
 * parsed (http/cgi_head.h) into the response's status and fields (or, for a
 * local path in Location without a Status, into a local redirect: the
 * request is routed again as a GET of that path, http/exchange.h's
 * ex_redirect), its body handed to the codec piece by piece, and stdout
 * not read while the client has more than EX_STREAM_HIGH bytes to take;
 * stderr goes to the error log, a line at a time, prefixed with the
 * script.  -Q seconds after the start the process group is killed (504
 * before a head, else the response is cut off); it is killed too when the
 * client goes first, and in any case when the exchange ends.  -J caps the
 * processes per loop (503 with Retry-After past it).  An exit without a
 * valid head is 502, with the reason in the error log.
 */
#ifndef GATLING_CGI_H
#define GATLING_CGI_H

#include "handler.h"
#include "http/exchange.h"

struct site;

/* Set up CGI for the loop of s (kept in its HSTATE_CGI, hstate.h): compile
   -w's patterns, watch the spawner's socket spawn_fd (-1: CGI is off).  0,
   or -1 after printing why. */
int cgi_init(struct site *s, int spawn_fd);

/* The loop ends: let go of what cgi_init took. */
void cgi_free(struct site *s);

/* Does ex's request name a CGI program?  1 or 0 (router_streams). */
int cgi_match(exchange_t *ex);

/* Run ex's CGI program: 0 (answered, or under way as ex->producer), -1 on
   ENOMEM, or CGI_NOT_MINE: not a CGI request, the router goes on. */
enum { CGI_NOT_MINE = -2 };
int cgi_serve(exchange_t *ex);

/* The router's entry (router.c's table): cgi_serve; its init is cgi_init
   with the configuration's spawner. */
extern const handler_t cgi_handler;

#endif
