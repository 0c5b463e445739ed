/*
 * cgienv — the CGI/1.1 meta-variables of a request (RFC 3875 4.1), for a
 * CGI process's environment (cgi.c) and for FastCGI and SCGI parameters
 * alike (proxy.c): from an exchange and what the handler found out about
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
 * over TLS, REMOTE_USER and AUTH_TYPE=Basic only when gatling itself
 * checked the password, REDIRECT_STATUS=200 (php-cgi refuses to run
 * without it), and HTTP_* for the request's fields: the name upper-cased
 * with '-' as '_', fields repeated joined with ", " ("; " for Cookie).
 * Never passed as HTTP_*: Proxy (httpoxy, CVE-2016-5385: a script's HTTP
 * client would take HTTP_PROXY for its proxy), Content-Type and
 * Content-Length (they are CONTENT_*), Authorization and
 * Proxy-Authorization (the password stays with the server, as Apache's
 * default), and names with a character other than a letter, digit or '-'
 * (an "X_Foo" must not pass for "X-Foo").
 */
#ifndef GATLING_CGIENV_H
#define GATLING_CGIENV_H

#include "http/exchange.h"

#include <stddef.h>

#define CGIENV_MAX 65536 /* enough for a maximal request head and the paths */

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
 * Write the meta-variables of ex's request for script sc into
 * buf[0..cap) as "NAME=value\0" strings.  Returns the number of strings
 * and sets *used to the bytes written, or returns -1 if they do not fit
 * (nothing usable in buf then).
 */
int cgienv_build(const exchange_t *ex, const cgi_script_t *sc, char *buf, size_t cap,
                 size_t *used);

/*
 * Fill vec[0..nvec) with pointers to the n strings of buf (as
 * cgienv_build wrote them), then a NULL: an envp.  0, or -1 if nvec is less
 * than n + 1.
 */
int cgienv_vector(char *buf, int n, char **vec, size_t nvec);

#endif
