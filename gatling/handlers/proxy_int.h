/*
 * proxy_int — what the reverse proxy's files share: proxy.c (rules, the
 * producer, a backend connection's events), proxy_be.c (backend
 * connections, pools, the helpers a protocol calls) and the protocols,
 * proxy_http.c (HTTP/1.1) and proxy_fcgi.c (FastCGI, SCGI).  The arrows:
 * proxy.c -> a rule's px_ops_t -> proxy_be.c, and proxy.c -> proxy_be.c;
 * none back (make layers).  Not for other handlers.
 */
#ifndef GATLING_PROXY_INT_H
#define GATLING_PROXY_INT_H

#include "http/cgi_head.h"
#include "http/fcgi.h"
#include "http/exchange.h"
#include "http/path.h"
#include "site/site.h"
#include "site/vhost.h"
#include "site/watch.h"

#include <regex.h>
#include <sys/socket.h>

#define PROXY_IDLE_MAX 64         /* idle backend connections kept per rule */
#define PROXY_IDLE_MS 60000       /* ... closed after this long unused */
#define PROXY_BODY_REUSE_MS 1000  /* ... and taken for a request with a body only this fresh */
#define PROXY_HEAD_MAX 32768      /* a backend's response head (HTTP or CGI) */
#define PROXY_READ (64 * 1024)    /* one read from a backend (px_req_t's rbuf) */
#define PROXY_OUT_MAX (64 * 1024) /* request bytes held for the backend: input() takes no more */
/* FastCGI and SCGI want CONTENT_LENGTH before the body: one that comes
   without a length (chunked, HTTP/2 without Content-Length) is read whole
   first, up to this (larger: 413), the cap of the bodies the codecs drop */
#define PROXY_SPOOL_MAX (1 << 20)
/* ... and all such bodies of a loop together: past it 503 (many slow
   uploads must not hold a megabyte each without end) */
#define PROXY_SPOOL_TOTAL (64 << 20)
#define PROXY_VHOSTS 64           /* .proxy verdicts remembered (a second each) */
#define PROXY_STARVED_MS 50   /* FastCGI: a new connection unanswered this long may be starved */
#define PROXY_FIELDS_MAX 4096 /* a backend head's fields, copied for the exchange */

enum { PX_HTTP, PX_FCGI, PX_SCGI };

struct px_req;
struct px_rule;

/* A connection to a backend: in use by one request, or idle in its pool. */
typedef struct px_conn {
    watch_t w; /* first: the loop's cookie */
    int fd;
    struct proxy *px;
    struct px_rule *rule;
    struct px_req *req; /* NULL while idle */
    uint8_t connecting; /* connect() in progress */
    uint8_t reused;     /* taken from the pool */
    int64_t idle_at;    /* gio_now() when it went idle */
} px_conn_t;

struct px_ops;

typedef struct px_rule {
    int kind; /* PX_* */
    const struct px_ops *ops; /* its protocol's (px_http_ops, px_fcgi_ops) */
    struct sockaddr_storage addr;
    socklen_t alen;
    regex_t re;
    px_conn_t *idle[PROXY_IDLE_MAX];
    int nidle;
    /* requests on a new connection the backend has not answered yet, oldest first */
    struct px_req *fresh, *fresh_last;
} px_rule_t;

typedef struct proxy {
    site_t *site;
    void (*on_backend)(watch_t *w, unsigned events); /* proxy.c's: a backend connection's events */
    size_t spooled; /* bytes of bodies read whole (px_req_t's spool) */
    char *spare;    /* a read buffer (PROXY_READ) no request holds, or NULL */
    int nrules;
    px_rule_t rule[CONFIG_PROXY_RULES];
    struct {
        char name[VHOST_NAME_MAX];
        int64_t second; /* wall clock of the verdict; 0: none */
        int has;
        int which; /* VHOST_*: the directory that serves it */
    } vh[PROXY_VHOSTS];
} proxy_t;

/* Where a response is. */
enum { RS_HEAD, RS_BODY, RS_TUNNEL, RS_DONE };
/* How a response body ends. */
enum { FR_NONE, FR_LEN, FR_CHUNKED, FR_CLOSE };

typedef struct px_req {
    exchange_t *ex;
    proxy_t *px;
    px_rule_t *rule;
    px_conn_t *be; /* NULL once the response is complete */
    char *out;     /* bytes for the backend: [outoff, outlen) still to write */
    size_t outlen, outoff, outcap;
    char *in; /* the response head so far (PROXY_HEAD_MAX) */
    size_t inlen;
    char *rbuf; /* during backend_read only: the read's buffer (PROXY_READ) */
    char *fields; /* the head's fields, NUL-terminated, for ex_field */
    size_t fused; /* ... bytes of it used */
    int state;    /* RS_* */
    int framing;  /* FR_* */
    uint64_t left;
    http_chunked_t ch;
    fcgi_parser_t fp;
    cgi_head_t ch_head; /* FastCGI, SCGI: the CGI response head */
    char *spool;        /* FastCGI, SCGI: a body without a length, read whole first */
    size_t spooled, spoolcap;
    uint8_t spooling;   /* ... and not all of it is in yet: no backend */
    uint8_t has_body;   /* the request has a body */
    uint8_t body_in;    /* ... and all of it is in out */
    uint8_t blocked;    /* input() took less than offered: ex_input_ready owed */
    uint8_t got_byte;   /* the backend sent something */
    uint8_t retried;    /* one retry on a new connection done */
    uint8_t fresh;      /* on its rule's fresh list ... */
    int64_t fresh_at;   /* ... since (gio_now) */
    struct px_req *fresh_prev, *fresh_next;
    uint8_t idempotent; /* the method may be sent twice */
    uint8_t head_only;  /* HEAD */
    uint8_t upgrade;    /* a WebSocket upgrade was asked for */
    uint8_t keepalive;  /* the backend keeps the connection after this response */
    uint8_t paused;     /* not reading: the client's side is full */
    uint8_t head_sent;  /* ex_head (or ex_error) went out */
    uint8_t ended;      /* the exchange ended (end()): free when depth is 0 */
    unsigned depth;     /* calls of ours on the stack */
} px_req_t;

/* Room for n more bytes for the backend, at the end of out (valid until the
   next append), or NULL (ENOMEM). */
char *px_room(px_req_t *pr, size_t n);

/* Append n bytes for the backend.  0, or -1 (ENOMEM). */
int px_out(px_req_t *pr, const void *p, size_t n);

/* Response body bytes p[0..n) to the client (copied).  0, or -1 when the
   exchange is over (do nothing more). */
int px_body(px_req_t *pr, const char *p, size_t n);

/* The same, when the caller is done with this read's buffer: if p is its
   start (rbuf), the buffer itself goes to the client, not a copy of it, and
   p must not be touched after.  0, or -1 as px_body. */
int px_body_last(px_req_t *pr, char *p, size_t n);

/* The response is complete; reusable: the backend connection may serve
   another request.  The exchange may be over when this returns. */
void px_done(px_req_t *pr, int reusable);

/* The backend failed (502): an error before the head, a broken body after
   it.  The exchange may be over when this returns. */
void px_fail(px_req_t *pr, const char *why);

/* Send the head: status, ctype (or NULL), len (or EX_LEN_STREAM), the
   fields already added.  0, or -1 when nothing more may be sent. */
int px_head(px_req_t *pr, int status, const char *ctype, uint64_t len);

/* A NUL-terminated copy of p[0..n) that lives as long as pr, or NULL. */
char *px_keep(px_req_t *pr, const char *p, size_t n);

/* Copy name: value into pr->fields and add it to the response.  0, or -1
   (too many fields or bytes: the caller answers 502). */
int px_field(px_req_t *pr, const char *name, size_t nl, const char *value, size_t vl);

/* The client's address as text (IPv4-mapped as IPv4) into a (INET6_ADDRSTRLEN). */
void px_peer(const exchange_t *ex, char *a, int *port);

/* What a matched request is about. */
typedef struct px_target {
    path_t p;                   /* its path (in ex->path) and query */
    char vhost[VHOST_NAME_MAX]; /* its vhost's name ("" with -H) */
    int which;                  /* VHOST_*: the directory that serves it */
} px_target_t;

/*
 * What the generic part (proxy.c) asks of a backend's protocol, through the
 * rule's ops: proxy_http.c (HTTP) and proxy_fcgi.c (FastCGI and SCGI) each
 * fill one and call only proxy_be.c's helpers back, never proxy.c.
 */
typedef struct px_ops {
    /* The request head (or CGI environment) for t into pr's out.  0, or -1
       (ENOMEM), or 0 after answering 502 (pr->state RS_DONE). */
    int (*request)(px_req_t *pr, const px_target_t *t);
    /* Request body bytes p[0..n) framed for the backend; last: the end.
       0, or -1 (ENOMEM). */
    int (*body)(px_req_t *pr, const char *p, size_t n, int last);
    /* Bytes the backend sent (buf is pr->rbuf: see px_body_last). */
    void (*read)(px_req_t *pr, char *buf, size_t n);
    /* The backend closed the connection. */
    void (*eof)(px_req_t *pr);
} px_ops_t;

extern const px_ops_t px_http_ops; /* proxy_http.c */
extern const px_ops_t px_fcgi_ops; /* proxy_fcgi.c: FastCGI and SCGI */

/* ---- proxy_be.c: backend connections, what proxy.c does with them ---- */

/* Count a BACKEND_* event of rule r (site/stats.h keeps them per rule). */
void px_count(proxy_t *px, const px_rule_t *r, int kind);

/* Close c (its descriptor off the loop) and free it. */
void px_conn_close(proxy_t *px, px_conn_t *c);

/* Take c, an idle connection, out of r's pool. */
void px_pool_remove(px_rule_t *r, px_conn_t *c);

/* pr's backend deadline (-Q, or a tunnel's idle limit) for its state. */
void px_set_deadline(px_req_t *pr);

/* What pr's backend connection waits for now (read, write). */
void px_interest(px_req_t *pr);

/* pr's new connection is answered (or let go): off its rule's fresh list. */
void px_unfresh(px_req_t *pr);

/* Let go of pr's backend connection: back to the pool if reusable (and
   the rule keeps connections), else closed. */
void px_release(px_req_t *pr, int reusable);

/* Attach a connection to pr (pooled if pooled and any, else new) and send
   what pr->out holds.  0, or -1 with errno. */
int px_attach(px_req_t *pr, int pooled);

/* pr's spooled body is sent (or dropped): freed, out of the loop's budget. */
void px_spool_free(px_req_t *pr);

/* Free pr and let go of its connection (closed). */
void px_req_free(px_req_t *pr);

/* Write what the backend is owed; on a failure, px_fail (or retry). */
void px_flush(px_req_t *pr);

#endif
