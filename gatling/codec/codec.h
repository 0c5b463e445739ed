/*
 * codec — what every codec (h1/h1.c, h2/, h3/) is told of the connection
 * its exchanges come on, and the start of an exchange from those facts.  A
 * codec knows its connection only by them: the connection (conn/, or a QUIC
 * connection in quic/quic.c) fills a codec_conn_t and hands it down, never the
 * reverse.
 */
#ifndef GATLING_CODEC_H
#define GATLING_CODEC_H

#include "gio_batch.h"
#include "http/exchange.h"
#include "http/head.h"
#include "site/alog.h"
#include "site/site.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Request bodies no producer takes are read and dropped, up to this; a
   longer one gets 413 (every codec alike). */
#define CODEC_BODY_MAX (1 << 20)

/* The facts of a connection that its exchanges are handed. */
typedef struct codec_conn {
    gio_batch_t *out;
    struct ssl_st *ssl;
    site_t *site;
    const struct sockaddr *peer;
    const ex_client_t *client; /* the client's certificate (mutual TLS), or NULL */
    uint16_t local_port;
    uint8_t secure;
    void *conn; /* the connection, for the exchange's owner (a job's return) */
    void (*wake)(void *conn); /* run the connection soon, not now (a producer's call) */
    /* 1 while the connection reads TLS early data, its handshake not
       complete (a request read now may be a replay: codec_early_safe);
       NULL: never */
    const uint8_t *early;
    /* HTTP/3 (its TLS is not OpenSSL's): the server name its certificate
       was chosen by (non-NULL; snilen 0: none sent), for 421 as exchange.h */
    const char *sni;
    size_t snilen;
} codec_conn_t;

/*
 * An exchange starts with the facts of its connection f (secure, peer,
 * local port, site) and nothing else; codec answers it, owner is where a
 * finished job resumes it (the connection, or an HTTP/2 or HTTP/3 stream).
 * Every codec starts its exchanges here.
 */
void codec_exchange_init(exchange_t *ex, const codec_conn_t *f, const ex_codec_t *codec,
                         void *owner);

/*
 * The one path of a job and back: ex->job (site/jobs.h's ex_job_t) goes to
 * the worker threads.  When it is done, on the loop thread, its finish
 * runs, it is freed, ex's answer starts afresh (no fields) and back(ex,
 * cancelled) resumes the owner (cancelled: the pool shut down before it
 * ran); nothing is called back when the exchange went first (its owner set
 * the job's ex to NULL).  0, or -1 when the pool's queue is full: the job
 * is shed (finished, freed, ex->job NULL, stats.busy counted) and the
 * caller answers 503.
 */
int codec_job_send(exchange_t *ex, void (*back)(exchange_t *ex, int cancelled));

/*
 * The head of ex's response (status, ctype, a body of len bytes, mtime: see
 * ex_head) into h, for the walk every codec writes its head from
 * (http/head.h): the Date (a stored response's own, RFC 9110 6.6.1, else
 * the site's of this second), Last-Modified (the site's string, good until
 * its next: walk before another), HSTS's max-age on a secure exchange
 * (-x), the exchange's fields; no HTTP/1.1 framing or Connection.
 */
void codec_head_facts(head_t *h, const exchange_t *ex, int status, const char *ctype, uint64_t len,
                      time_t mtime);

/*
 * The site's own page for an error with this status (its STATUS.html:
 * route/sitefiles.h), sent instead of the small page of http/response.h:
 * a malloc'd copy of *n bytes the caller owns, or NULL (none).
 */
char *codec_error_page(exchange_t *ex, int status, size_t *n);

/*
 * A request that came in early data (ex->early_data), which a replay of the
 * client's first flight would repeat: may it be answered before the
 * handshake completes?  1 for GET and HEAD without a body and without
 * Authorization (a credential's request may act for its owner): the safe
 * methods of RFC 9110 9.2.1 that RFC 8470 lets a server answer early; 0 for
 * anything else (-w's .htaccess asks are Authorization's), which the codec
 * holds until the handshake completes or answers 425 Too Early (RFC 8470
 * 5.2: a browser sends it again after the handshake).  1 for a request not
 * in early data.
 */
int codec_early_safe(const exchange_t *ex);

/*
 * The access log's facts of ex, answered over proto ("h1", "h2", "h3"):
 * ssl's TLS version and cipher (ssl NULL: none), ex's duration until now.
 * The strings are OpenSSL's, valid while ssl is.
 */
void codec_log_facts(alog_facts_t *out, const exchange_t *ex, const struct ssl_st *ssl,
                     const char *proto);

#endif
