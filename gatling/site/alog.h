/*
 * alog — the access log: one line per request in the Combined Log Format
 * (what goaccess, awstats and webalizer read), or with --log-format json one
 * JSON object a line (RFC 8259; what Loki, Vector and Elasticsearch read),
 * buffered and written out in whole lines at the end of each loop round.
 */
#ifndef GATLING_ALOG_H
#define GATLING_ALOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "http/exchange.h"
#include "http/http_parse.h"

typedef struct alog {
    int fd; /* -1: logging off */
    int json; /* --log-format json */
    char *buf;
    size_t len, cap;
    int64_t stamp_at; /* wall-clock second of `stamp` */
    char stamp[32];   /* "[10/Oct/2000:13:55:36 +0000]" */
    char iso[32];     /* "2000-10-10T13:55:36Z", the JSON lines' */
} alog_t;

void alog_init(alog_t *l, int fd);

/*
 * Append one line.  req may be NULL or have no request line (a request too
 * broken to parse); body_bytes is what was sent of the body.  vhost: NULL
 * for the Combined Log Format, else Apache's vhost_combined ("%v %h ...";
 * "-" for an empty name).  A request that came over HTTPS (flags has
 * ALOG_TLS) gets one more field at the end of its line: https (CLF readers
 * such as goaccess ignore what follows the user agent); one answered with
 * a dictionary's delta (ALOG_DCZ, RFC 9842) then dcz.
 */
enum { ALOG_TLS = 1, ALOG_DCZ = 2 };

/*
 * What a JSON line has beyond the combined format's fields: the protocol,
 * the TLS version and cipher (NULL: plain), the exchange (its vhost, its
 * cache status, the backend of a proxied request and its time to the head;
 * NULL: none) and the request's time from its head's first byte, in µs.
 */
typedef struct alog_facts {
    const char *proto; /* "h1", "h2", "h3" */
    const char *tls_version, *tls_cipher;
    const exchange_t *ex;
    int64_t duration_us;
} alog_facts_t;

/* facts may be NULL (then the JSON line has nulls where they go). */
void alog_request(alog_t *l, int64_t now, const char *vhost, const struct sockaddr *peer,
                  const http_request_t *req, int status, uint64_t body_bytes, int flags,
                  const alog_facts_t *facts);

/*
 * Append one FTP transfer's line, CLF-like: the client, "-", the login name
 * (anonymous, ftp), the time, "VERB /path" quoted, the reply code (226,
 * 426, 452, ...), the bytes moved ("-" for none), "-" "-" for referer and
 * user agent, then ftp (ftps over TLS) as the scheme.
 */
void alog_ftp(alog_t *l, int64_t now, const struct sockaddr *peer, const char *user,
              const char *verb, const char *path, int code, uint64_t bytes, int tls);

/* Write out the buffered lines (a failing log never stops the server). */
void alog_flush(alog_t *l);

void alog_free(alog_t *l);

#endif
