/*
 * exchange — one request and its response, as a handler sees them.
 *
 * The codec that read the request (h1/h1.c for HTTP/1.1) fills in the
 * request and the facts of its connection, and hands the exchange to the
 * router (route/router.h).  A handler answers by setting header fields
 * and calling ex_head() or ex_error(), then hands over the body as buffers
 * and file ranges; the codec turns them into bytes on its connection at
 * once (HTTP/1.1: the head into the request block's head buffer, the body
 * onto the output batch), so a handler never sees the wire, and HEAD, the
 * status line, Date, Server, Content-Length and Connection are the codec's
 * (the fields as head.h walks them for every codec).
 *
 * An exchange lives in the connection's request block, from the request's
 * head until its response is sent (or the connection goes).  What it points
 * to in the request (req) is the parsed head, valid as long.
 *
 * The types named here by a struct tag only (site, host, fcache_entry, enc_gz,
 * ex_job) belong to the layers above (site/, and jobs.h there): this layer
 * carries the pointers and never looks inside.
 */
#ifndef GATLING_EXCHANGE_H
#define GATLING_EXCHANGE_H

#include "http_parse.h"
#include "path.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define EX_FIELDS_MAX 40 /* a file response carries 8, a proxied one what its backend sent */
#define EX_PATH_CAP (HTTP_MAX_TARGET + 8)
#define EX_FIELD_MAX (3 * HTTP_MAX_TARGET + 1024) /* a field line: Location, the path encoded */
#define EX_VHOST_CAP 272
#define EX_HOST_CAP 272 /* a virtual host's name: site/vhost.h's VHOST_NAME_MAX fits */

/*
 * The request's route, decided once before the router puts the request to
 * any entry (site/vhost.h's vhost_route(), called by route/router.c), and
 * read by every later step: no handler or stage chooses a site again.  The
 * authority is the one http_request_authority() left in Host (an
 * absolute-form target's, HTTP/2's and HTTP/3's :authority); the TLS terms
 * (the certificate's names, a client certificate a site requires) are the
 * router's first entries, checked against the same Host and against the
 * directory the route serves (handlers/host.h: a client-certificate site's
 * directory keeps its terms under another name).  The name is canonical
 * (one final dot dropped, case folded): the cache keys on it too.
 */
enum { EX_ROUTE_NONE, EX_ROUTE_OK, EX_ROUTE_BAD };
typedef struct ex_route {
    uint8_t state;         /* EX_ROUTE_*: not decided yet, decided, or a Host that
                              can name no directory (the router answers 400) */
    uint16_t namelen;
    uint32_t hostgen;       /* host's generation when it was found (handlers/host.h) */
    struct host *host;      /* the site behind the name, found once (handlers/host.h's
                               host_of(); NULL: not found yet) */
    char name[EX_HOST_CAP]; /* the virtual host's name (vhost_name()); "": -v off or no Host */
} ex_route_t;
#define EX_NOTE_CAP 128 /* a note for the access log (ex_log_note), truncated to fit */

enum { EX_REPLACED = 1 }; /* ex_head: a 500 went out instead (the head did not fit) */
enum { EX_FREE = 1 };     /* ex_body_buf: the exchange owns the buffer (free()) */
enum { EX_LOG_DCZ = 1 };  /* in log_notes: answered as dcz (RFC 9842) */

/*
 * The client's certificate (mutual TLS) on a connection whose server
 * certificate asks for one (tls/tls_client.c makes it; it lives as long as
 * the connection): NULL on every other exchange.  The strings are never
 * NULL ("" without a certificate) and carry no control characters.
 */
typedef struct ex_client {
    uint8_t required; /* the certificate's site requires one: without, 400 (router.c) */
    uint8_t cert;     /* the client sent one (verified or not) */
    uint8_t verified; /* ... and it verified: verify is "SUCCESS" */
    const char *verify;      /* SSL_CLIENT_VERIFY: SUCCESS, NONE or FAILED:reason */
    const char *s_dn, *i_dn; /* subject and issuer, RFC 2253 strings */
    const char *serial;      /* hexadecimal, upper case */
    const char *fingerprint; /* SHA-256 of the certificate (DER), lower-case hex */
} ex_client_t;

/* A response header field; the value is NUL-terminated. */
typedef struct ex_field {
    const char *name, *value;
} ex_field_t;

struct exchange;
struct ssl_st;

/*
 * A handler's state in one exchange: the handlers layer numbers the slots
 * (handlers/hstate.h says which handler owns which) and keeps in them what
 * it needs across its calls for this exchange -- a pointer, a small value,
 * or both.  This layer gives every exchange EX_SLOTS of them, in the
 * exchange itself (nothing to allocate: an exchange is reused for each
 * request of a connection), zeroed by the codec with the rest when the
 * exchange starts.  Neither this layer nor the codec reads anything of them
 * but end: set, ex_end calls it once, after the producer (which may still
 * send from what the slot holds), to let go of what the slot holds (a cache
 * entry, a watch).  A local redirect (ex_redirect) keeps the slots: a
 * handler that knows something of the request as it was tells the
 * requests apart by ex->redirects.
 */
#define EX_SLOTS 6
typedef struct ex_slot {
    void *p;     /* the handler's, or NULL */
    uintptr_t n; /* ... a small value of the handler's */
    void (*end)(struct exchange *ex, struct ex_slot *s);
} ex_slot_t;

#define EX_LEN_STREAM UINT64_MAX /* ex_head: a body of unknown length, streamed */
#define EX_STREAM_HIGH (256 * 1024) /* a producer stops reading its source past this ... */
#define EX_STREAM_LOW (64 * 1024)   /* ... and the codec calls drained() below this */

/*
 * A streamed body's producer: a CGI process or a backend server
 * (handlers/cgi.c, proxy.c) whose answer arrives while the client waits.
 * The handler sets ex->producer (and ex->pctx, its state) before it returns
 * from the router; then, from its own descriptors' events, it calls ex_head
 * (with EX_LEN_STREAM when it does not know the length, or ex_error), hands
 * the body over with ex_body_buf as it comes, and ends it with ex_body_end
 * (or ex_body_abort).  It stops reading its source while ex_queued() is over
 * ex_stream_high(ex) (EX_STREAM_HIGH; LOW for a tight one), and the codec
 * calls drained() when it fell below
 * EX_STREAM_LOW: a slow client never makes the server hold an unbounded
 * response.  The request's body, if any, goes the other way through
 * input(), with back-pressure too.  The codec owns the timing of the
 * client's side (-B); the producer keeps its own deadline (its source's).
 */
typedef struct ex_producer {
    /* Request body bytes p[0..n); last: the body ends with them (n may be
       0).  Returns the bytes taken; fewer than n: the codec keeps the rest,
       stops reading the client, and offers it again after ex_input_ready. */
    size_t (*input)(struct exchange *ex, const char *p, size_t n, int last);
    /* The body bytes the codec holds fell below EX_STREAM_LOW. */
    void (*drained)(struct exchange *ex);
    /* The exchange ends, its response complete or not (sent, client gone,
       stream reset, shutdown): let every resource go.  The last call. */
    void (*end)(struct exchange *ex);
    /* The client ended the exchange before its response was complete (a
       reset stream, its connection gone), just before the exchange is
       logged: the producer may say what that was (a gRPC call's status:
       cancelled, or its deadline).  NULL: nothing to say. */
    void (*abandoned)(struct exchange *ex);
} ex_producer_t;

/* What a codec does with a response: see ex_head, ex_error, ex_body_*. */
typedef struct ex_codec {
    int (*head)(struct exchange *ex, int status, const char *ctype, uint64_t len, time_t mtime);
    int (*error)(struct exchange *ex, int status);
    int (*body_buf)(struct exchange *ex, const void *p, size_t n, int flags);
    int (*body_file)(struct exchange *ex, int fd, uint64_t off, uint64_t len);
    /* 103 Early Hints with this Link value, before the final response; NULL:
       the codec sends none (HTTP/1.1: clients and proxies mishandle 1xx) */
    int (*hints)(struct exchange *ex, const char *link);
    /* a streamed body (ex_head with EX_LEN_STREAM, or any producer's):
       its end; its failure (the client must see a broken response); the
       body bytes handed over and not yet sent; the producer takes input
       again */
    int (*body_end)(struct exchange *ex);
    void (*body_abort)(struct exchange *ex);
    uint64_t (*queued)(const struct exchange *ex);
    void (*input_ready)(struct exchange *ex);
    /* ex's request was rewritten (ex_redirect): route it again, as soon as
       the caller's call returns or from inside it, never before */
    void (*redispatch)(struct exchange *ex);
    /* a streamed body's end with a trailer section f[0..n) (gRPC's
       grpc-status); NULL: the codec sends none (HTTP/1.1) */
    int (*trailers)(struct exchange *ex, const ex_field_t *f, int n);
} ex_codec_t;

typedef struct exchange {
    /* the request */
    const http_request_t *req;
    uint8_t head_only; /* HEAD: the codec sends no body */
    /* facts of the connection, from the codec */
    uint8_t secure; /* HTTPS */
    uint8_t http10; /* an HTTP/1.0 request */
    uint16_t local_port;
    uint8_t upgradable; /* HTTP/1.1 with Upgrade: a 101 makes the connection a tunnel */
    const struct sockaddr *peer;
    const ex_client_t *client; /* HTTPS with client certificates asked: what came, or NULL */
    struct site *site; /* the loop's configuration and resources (site/site.h) */
    /* HTTPS, what chose the certificate (for 421, route/router.c): the
       OpenSSL session (HTTP/1.1, h2), or the server name HTTP/3's TLS chose
       by (sni non-NULL; snilen 0: none was sent) */
    struct ssl_st *ssl;
    const char *sni;
    size_t snilen;
    int64_t req_len; /* the request body: its Content-Length, -1 chunked (length
                        not known), 0 none */
    int64_t started_us; /* when its head began to come (gio_now_us()), for /metrics */
    /* the response */
    uint16_t status;
    uint8_t fields_over; /* more fields than EX_FIELDS_MAX: the codec answers 500 */
    uint8_t nfields;
    ex_field_t fields[EX_FIELDS_MAX];
    uint64_t body_len; /* of the response, for the log */
    /* per-request state of the handlers */
    struct fcache_entry *file; /* the open file the body is sent from, if any */
    struct enc_gz *gz;         /* the gzipped body, if any */
    struct ex_job *job;        /* work off the loop this request waits for, or NULL */
    void *owned;               /* freed when the exchange ends (ex_own) */
    const ex_producer_t *producer; /* a streamed response's source, or NULL */
    void *pctx;                    /* ... its state */
    uint8_t log_notes;         /* EX_LOG_*: what the access log adds of the response */
    uint8_t redirects;         /* local redirects so far (ex_redirect) */
    struct ex_rewrite *rewrite; /* the request a local redirect made, or NULL */
    int64_t resp_date;         /* a backend's Date (seconds; 0: none), for the cache's ages */
    const char *date;          /* the Date to send (a stored response's), or NULL: now */
    int64_t upstream_us;       /* a proxied request: its backend's time to the response head */
    uint8_t grpc_status;       /* a gRPC call's grpc-status + 1 (0: none), for the log */
    /* the request came in early data (TLS 1.3's 0-RTT, QUIC's), before the
       handshake proved the client fresh: it may be a replay (codec_early_safe) */
    uint8_t early_data;
    /* the producer times the exchange's quiet itself (a gRPC call: -Q, both
       ways): while nothing waits for the client to read, its request body
       may pause without a -B window running (HTTP/2's h2_report_t) */
    uint8_t self_paced;
    /* the producer holds what its source sent it beyond what the client took,
       so it stops at EX_STREAM_LOW, not EX_STREAM_HIGH (ex_stream_high): an
       HTTP/2 backend's stream, whose window lets it send before it is asked */
    uint8_t tight;
    /* ex_path's memo: the target's path, decoded into path[] once (path_st + 1;
       0: not yet, and again after a local redirect or a rewrite) */
    uint16_t path_st;
    path_t path_res;
    ex_slot_t slot[EX_SLOTS];  /* the handlers' state (above) */
    /* decided once, before the router's entries (above); the last of what a
       new exchange zeroes (codec.c: up to route.name, which is written when
       the route is decided) */
    ex_route_t route;
    char path[EX_PATH_CAP];    /* the decoded, normalised path */
    char vhost[EX_VHOST_CAP];  /* the vhost that served, for the access log */
    /* for --log-format json, "" when none: set with ex_log_note() */
    char log_cache[EX_NOTE_CAP];    /* the response cache's Cache-Status */
    char log_upstream[EX_NOTE_CAP]; /* the backend that answered ("127.0.0.1/8001") */
    char log_rule[EX_NOTE_CAP];     /* the site's rule that redirected or rewrote ("_redirects:3") */
    /* the codec */
    const ex_codec_t *codec;
    void *conn; /* the codec's connection: where a finished job resumes */
} exchange_t;

/* A note for the access log into one of ex's EX_NOTE_CAP buffers (log_cache,
   log_upstream, log_rule), truncated to fit: its own copy, since the log line is
   written after the response's bytes and buffers have gone. */
static inline void ex_log_note(char *note, const char *text)
{
    size_t n = 0;
    while (n < EX_NOTE_CAP - 1 && text[n])
        note[n] = text[n], n++;
    note[n] = 0;
}

/* The index of the response header field named name (case-insensitive), or -1. */
static inline int ex_field_at(const exchange_t *ex, const char *name)
{
    for (int i = 0; i < ex->nfields; i++)
        if (!strcasecmp(ex->fields[i].name, name))
            return i;
    return -1;
}

/* Add a response header field (kept by pointer: name and value must live
   until the ex_head or ex_error that sends them). */
static inline void ex_field(exchange_t *ex, const char *name, const char *value)
{
    if (ex->nfields < EX_FIELDS_MAX)
        ex->fields[ex->nfields++] = (ex_field_t){name, value};
    else
        ex->fields_over = 1;
}

/*
 * Send the response head: status, Content-Type (if ctype), a body of len
 * bytes, Last-Modified (if mtime >= 0), then the fields added.  Returns 0;
 * or EX_REPLACED when the head did not fit and a complete 500 went out
 * instead (send no body then); or -1 on ENOMEM.
 */
static inline int ex_head(exchange_t *ex, int status, const char *ctype, uint64_t len,
                          time_t mtime)
{
    return ex->codec->head(ex, status, ctype, len, mtime);
}

/*
 * Send a complete error (or other bodyless-by-nature) response with a small
 * HTML page, carrying only the field name: value (name NULL: none), not the
 * ones added before.  0, or -1 on ENOMEM.
 */
int ex_error(exchange_t *ex, int status, const char *name, const char *value);

/* Body bytes after ex_head: buffer p[0..n) (EX_FREE: the exchange frees it,
   also on failure), or n bytes of file fd from off.  0, or -1 on ENOMEM. */
static inline int ex_body_buf(exchange_t *ex, const void *p, size_t n, int flags)
{
    return ex->codec->body_buf(ex, p, n, flags);
}

static inline int ex_body_file(exchange_t *ex, int fd, uint64_t off, uint64_t len)
{
    return ex->codec->body_file(ex, fd, off, len);
}

/*
 * A 200 whose body is the malloc'd page[0..len) of type ctype, with the
 * fields added: the exchange owns page from here on, whatever happens.
 * 0, or -1 on ENOMEM.
 */
int ex_page(exchange_t *ex, const char *ctype, char *page, size_t len);

/* 103 Early Hints (RFC 8297) with the Link value link, where the codec sends
   them; link must live until the exchange ends.  0, or -1 on ENOMEM. */
static inline int ex_hints(exchange_t *ex, const char *link)
{
    return ex->codec->hints ? ex->codec->hints(ex, link) : 0;
}

/* The streamed body is complete.  0, or -1 on ENOMEM. */
static inline int ex_body_end(exchange_t *ex)
{
    return ex->codec->body_end(ex);
}

/* Can the codec send a trailer section (HTTP/2, HTTP/3)? */
static inline int ex_has_trailers(const exchange_t *ex)
{
    return ex->codec->trailers != NULL;
}

/* The streamed body is complete, and the trailer fields f[0..n) (names
   and values copied) end it where the codec sends them; else as
   ex_body_end.  0, or -1 on ENOMEM. */
static inline int ex_body_trailers(exchange_t *ex, const ex_field_t *f, int n)
{
    return ex->codec->trailers ? ex->codec->trailers(ex, f, n) : ex->codec->body_end(ex);
}

/* The streamed body cannot be completed (the source failed after the
   head): HTTP/1.1 closes the connection, HTTP/2 resets the stream. */
static inline void ex_body_abort(exchange_t *ex)
{
    ex->codec->body_abort(ex);
}

/* Body bytes handed to the codec and not yet sent. */
static inline uint64_t ex_queued(const exchange_t *ex)
{
    return ex->codec->queued(ex);
}

/* What a producer may have queued before it stops (the codec's drained()
   comes once ex_queued fell below EX_STREAM_LOW): ex->tight's is the low
   mark itself. */
static inline uint64_t ex_stream_high(const exchange_t *ex)
{
    return ex->tight ? EX_STREAM_LOW : EX_STREAM_HIGH;
}

/* The producer, which took less than it was offered, takes input again. */
static inline void ex_input_ready(exchange_t *ex)
{
    ex->codec->input_ready(ex);
}

/*
 * A local redirect (RFC 3875 6.2.2): answer ex as if its request had been
 * GET (HEAD stays HEAD) of target[0..n), a path beginning with one '/' (a
 * query may follow), with the other header fields of the request but no
 * body.  The fields added so far are dropped, the producer (the caller,
 * usually) is ended, and the router runs again through the codec
 * (redispatch), maybe before this returns.  Only before anything of a
 * response was sent and once the request body was consumed.  0; or -1 with
 * errno EINVAL (not such a path), ELOOP (EX_REDIRECTS_MAX in a row) or
 * ENOMEM, and ex untouched.
 */
#define EX_REDIRECTS_MAX 10
int ex_redirect(exchange_t *ex, const char *target, size_t n);

/*
 * The router's rewrite, before any handler took the request: ex's request
 * is from now on the same (method, fields, body) with target[0..n) (a path
 * as ex_redirect's), and the router goes on with it; nothing is routed
 * again.  0, or -1 with errno as ex_redirect's.
 */
int ex_retarget(exchange_t *ex, const char *target, size_t n);

/*
 * ex's target decoded and normalised (path_from_target into ex->path), done
 * once a request: the first call decodes, the others, until a local redirect
 * or a rewrite changes the target, copy what it found into *p.  Returns
 * path_from_target's 0 or the HTTP status to answer (400).
 */
int ex_path(exchange_t *ex, path_t *p);

/* The target the client asked for, whatever ex_retarget or ex_redirect made
   of it since (CGI's REQUEST_URI, as nginx's $request_uri): a borrowed
   string, valid while ex is. */
http_str_t ex_asked_target(const exchange_t *ex);

/* Does p[0..n) begin as a path on this server, one '/' first?  ("//host/x"
   names another one.)  What ex_redirect takes, its bytes checked apart. */
static inline int ex_local_path(const char *p, size_t n)
{
    return n && p[0] == '/' && (n == 1 || p[1] != '/');
}

/* Free the malloc'd p when the exchange ends, after its body is sent (one
   such block per exchange).  0, or -1 (p not taken) if one is held already. */
int ex_own(exchange_t *ex, void *p);

/* The exchange ends: free what it owns. */
void ex_end(exchange_t *ex);

#endif
