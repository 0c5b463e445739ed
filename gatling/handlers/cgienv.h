/*
 * cgienv — the CGI/1.1 meta-variables of a request (RFC 3875 4.1), for a
 * CGI process's environment (cgi.c) and for FastCGI and SCGI parameters
 * alike (proxy_fcgi.c): from an exchange and what the handler found out about
 * the script, "NAME=value" strings one after the other, each NUL-terminated,
 * into the caller's bounded buffer.
 *
 * What is passed: GATEWAY_INTERFACE, SERVER_SOFTWARE, SERVER_NAME (the Host
 * without its port, "localhost" without a usable one), SERVER_PORT,
 * SERVER_PROTOCOL, REQUEST_METHOD, REQUEST_URI (the target as sent),
 * SCRIPT_NAME, SCRIPT_FILENAME, PATH_INFO and PATH_TRANSLATED (when there
 * is a path after the script), QUERY_STRING (as sent, possibly empty),
 * DOCUMENT_ROOT, REMOTE_ADDR and REMOTE_PORT (the exchange's peer: with -y
 * the client the PROXY header named), CONTENT_TYPE, CONTENT_LENGTH (only
 * for a body of known length: a chunked body is read to its end), HTTPS=on
 * over TLS, SSL_CLIENT_VERIFY (SUCCESS, NONE, FAILED:reason) where the site
 * asks for client certificates and, when one came, SSL_CLIENT_S_DN,
 * SSL_CLIENT_I_DN, SSL_CLIENT_M_SERIAL and SSL_CLIENT_FINGERPRINT (its
 * SHA-256; http/exchange.h's ex_client_t), REMOTE_USER and AUTH_TYPE=Basic only when gatling itself
 * checked the password, REDIRECT_STATUS=200 (php-cgi refuses to run
 * without it), and HTTP_* for the request's fields: the name upper-cased
 * with '-' as '_', fields repeated joined with ", " ("; " for Cookie).
 * Never passed as HTTP_*: Proxy (httpoxy, CVE-2016-5385: a script's HTTP
 * client would take HTTP_PROXY for its proxy), Content-Type and
 * Content-Length (they are CONTENT_*), Authorization and
 * Proxy-Authorization (the password stays with the server, as Apache's
 * default), what fields.h keeps from every backend (the hop-by-hop fields
 * and those Connection names; X-SSL-Client-* and Client-Cert(-Chain), a
 * client's claim of a certificate, which SSL_CLIENT_* tell truly; the
 * client's X-Forwarded-* and Forwarded), and names with a character other
 * than a letter, digit or '-' (an "X_Foo" must not pass for "X-Foo").
 * Added as HTTP_* (fields_ours, as the HTTP backends get them):
 * X_FORWARDED_FOR (the client's list, then REMOTE_ADDR), X_FORWARDED_PROTO,
 * X_FORWARDED_HOST and FORWARDED.
 */
#ifndef GATLING_CGIENV_H
#define GATLING_CGIENV_H

#include "http/exchange.h"

#include <regex.h>
#include <stddef.h>

#define CGIENV_MAX 65536 /* enough for a maximal request head and the paths */
/* Script parts tried in a path before the whole of it: the first this many
   segment ends.  Each is a regexec of every pattern: a 4 KiB target of 2000
   one-letter segments would otherwise cost 2000 matches per rule (10 ms of
   the loop for "\.php$" here, 30 for "(a|/)*\.php"), and no site's script is 32 deep. */
#define CGIENV_SCRIPT_DEPTH 32

enum { CGIENV_ANY = 0, CGIENV_AT_END = 1 };

/* What the handler knows of the script (NUL-terminated strings). */
typedef struct cgi_script {
    const char *script_name; /* SCRIPT_NAME: the URL path of the script, "/cgi/x.sh" */
    const char *path_info;   /* PATH_INFO: the URL path after it, "/a/b", or "" */
    const char *filename;    /* SCRIPT_FILENAME: the file as the process sees it */
    const char *docroot;     /* DOCUMENT_ROOT: the vhost directory as it sees it */
    const char *remote_user; /* REMOTE_USER after gatling checked the password, or NULL */
    const char *path;        /* PATH for a CGI process, or NULL (none passed) */
    uint64_t body_len; /* CONTENT_LENGTH of a body that came without a length and
                          was read whole first, or 0: ex->req_len's */
} cgi_script_t;

/*
 * Where the script part of the normalised path[0..len) ends, for the
 * patterns re[0..nre) (REG_NOSUB will do): the length of the shortest
 * leading part that ends where a segment ends -- "/a", "/a/b", ... (the first
 * CGIENV_SCRIPT_DEPTH of them), then the whole path -- that one of them
 * matches, or 0 if none does.  With CGIENV_AT_END a part shorter than the
 * path counts only if its last character is needed for the match (without
 * it, no pattern matches): "\.php$" or "\.php" find "/index.php" in
 * "/index.php/blog", "^/app(/|$)" finds "/app" in "/app/x", while "^/" or
 * "^/app/" find no part of "/app/x/y" but the whole.  What follows the part
 * is PATH_INFO.  -w's patterns (cgi.c) ask CGIENV_ANY: could a prefix be a
 * script at all (the file system then says which); a FastCGI or SCGI rule
 * (proxy.c, proxy_fcgi.c) asks CGIENV_AT_END, the backend's files being
 * possibly elsewhere.
 */
size_t cgienv_script(const regex_t *re, int nre, const char *path, size_t len, int flags);

/*
 * Write the meta-variables of ex's request for script sc into
 * buf[0..cap) as "NAME=value\0" strings.  Returns the number of strings
 * and sets *used to the bytes written, or returns -1 if they do not fit
 * (nothing usable in buf then).
 */
int cgienv_build(const exchange_t *ex, const cgi_script_t *sc, char *buf, size_t cap,
                 size_t *used);

/*
 * The file extensions a pattern re (its text) names for what it runs:
 * each plain word after "\." or "[.]", and each of a group's, "\.php$"
 * gives "php|", "\.(php|phtml)$" "php|phtml|" (into out[0..cap)).  What a
 * program is goes by its file's extension, not by the rule a request
 * matched: a narrowed rule (^/w/index\.php$) still makes every .php a
 * program (router_program).  0, or -1 when they do not fit (out is "").
 */
int cgienv_exts(const char *re, char *out, size_t cap);

/* Does the last segment of path[0..n) end in ".EXT" for an EXT of exts
   (cgienv_exts's, case aside: a file system may not tell)?  1 or 0. */
int cgienv_ext_in(const char *exts, const char *path, size_t n);

#endif
