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

#include "fields.h"
#include "http/cgi_head.h"
#include "http/fcgi.h"
#include "http/exchange.h"
#include "http/path.h"
#include "site/site.h"
#include "site/vhost.h"
#include "site/watch.h"

#include <regex.h>
#include <string.h>
#include <strings.h>
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
#define PX_EXT_MAX 128            /* a rule's extensions, "php|phtml|" (cgienv_exts) */
#define PX_FRONT_MAX 256          /* a front controller's script, "/index.php", and its NUL */
#define PX_FRONT_FILE_MAX 4096    /* a .proxy's words (front SCRIPT, front off) */
#define PROXY_FIELDS_MAX 4096 /* a backend head's fields, copied for the exchange */

/* PX_H2C: HTTP/2 by prior knowledge; PX_H2: HTTP/2 over TLS (ALPN h2, proxy_tls.c) */
enum { PX_HTTP, PX_FCGI, PX_SCGI, PX_H2C, PX_H2 };
#define PX_IS_H2(kind) ((kind) == PX_H2C || (kind) == PX_H2)

#define POOL_MEMBERS 32  /* backends of one pool (draining ones too) */
#define PX_LABEL_MAX 120 /* a backend's address as written: "unix:" + 107 bytes fit */
#define PX_FAILON_MAX 8  /* failon=: statuses */
#define PX_CHECK_PATH_MAX 256
#define PX_NAME_MAX 254 /* name=: a DNS name, at most 253 bytes */

struct px_req;
struct px_rule;
struct px_member;
struct px_check;

/* A connection to a backend: in use by one request, or idle in its member's pool. */
typedef struct px_conn {
    watch_t w; /* first: the loop's cookie */
    int fd;
    struct proxy *px;
    struct px_member *m;
    struct px_req *req; /* NULL while idle */
    uint8_t connecting; /* connect() in progress */
    uint8_t reused;     /* taken from the pool */
    int64_t idle_at;    /* gio_now() when it went idle */
} px_conn_t;

struct px_ops;

enum { BAL_RR, BAL_LEAST, BAL_HASH };

/* A pool's options (--pool NAME=...;key=value; gatling.8, POOLS). */
typedef struct px_popts {
    int balance;           /* BAL_* */
    char hash_field[64];   /* balance=hash:Field; "" path and query */
    int fails, window;     /* this many failures in window seconds ... */
    int down;              /* ... and a backend is out this long, then tried by one request */
    int failon[PX_FAILON_MAX], nfailon; /* answers that count as failures */
    int tries;             /* attempts of one request */
    int slowstart;         /* seconds a new or recovered backend's weight grows */
    char check[PX_CHECK_PATH_MAX]; /* active checks' path; "" none */
    int interval, expect_lo, expect_hi, fall, rise, check_timeout;
    int streams;           /* h2c/, h2/: streams on one backend connection, at most */
    int idle;              /* idle connections kept per backend, at most (0: none) */
    char name[PX_NAME_MAX]; /* h2/: the name its certificates are verified for, and SNI;
                               "" the address (an IP address SAN) */
} px_popts_t;

/* A backend as written: its address, weight, backup mark. */
typedef struct px_mdef {
    struct sockaddr_storage addr;
    socklen_t alen;
    int weight;
    uint8_t backup;
    char label[PX_LABEL_MAX]; /* "127.0.0.1/8001", "[::1]/80", "unix:/run/a.sock" */
} px_mdef_t;

/* A backend of a pool: its connections, its share, its health. */
typedef struct px_member {
    px_mdef_t d;
    struct px_pool *pool;
    int slot; /* its counters: site->stats.backend[slot] */
    px_conn_t *idle[PROXY_IDLE_MAX];
    int nidle;
    /* requests on a new connection the backend has not answered yet, oldest first */
    struct px_req *fresh, *fresh_last;
    unsigned outstanding; /* requests sent and not answered in full */
    int64_t cw;           /* smooth weighted round robin's current weight */
    uint8_t down;         /* passive: out until down_until, then one request tries it */
    uint8_t probing;      /* ... that request is under way */
    uint8_t check_down;   /* active checks fail */
    uint8_t draining;     /* gone from its file: no new requests */
    unsigned fails;       /* failures since fail_since (the window's start) */
    int64_t fail_since, down_until, up_since; /* gio_now(); up_since 0: no slow start */
    unsigned check_good, check_bad; /* checks in a row */
    int64_t check_at;     /* the next check (gio_now) */
    struct px_check *check; /* the check under way, or NULL */
    struct px_h2conn *h2;   /* h2c/, h2/: its connections (proxy_h2.c), each with its streams */
} px_member_t;

/* Backends behind one or more rules, one protocol. */
typedef struct px_pool {
    char name[40]; /* --pool's NAME, or "P<rule>" */
    int kind;      /* PX_* */
    const struct px_ops *ops;
    px_popts_t o;
    px_member_t *m[POOL_MEMBERS];
    int n;
    int cfg_index; /* its --pool (cfg->pool_def), or -1 */
    char file[1024];  /* file: pools: the list (its directory: proc_t's pool_dirfd[cfg_index]) */
    int64_t mtime_ns; /* ... as last read (-1: not yet, -2: unreadable, said) */
    int nprimary;  /* members not marked backup (at parse time; draining counted out) */
} px_pool_t;

/* A --pool definition as parsed (also what main.c checks). */
typedef struct px_pooldef {
    char name[33];
    int kind;
    char file[1024]; /* file: its list; "" for backends given inline */
    px_mdef_t m[POOL_MEMBERS];
    int n;
    px_popts_t o;
} px_pooldef_t;

typedef struct px_rule {
    int kind; /* PX_*: its pool's */
    const struct px_ops *ops; /* ... */
    px_pool_t *pool;
    regex_t re;
    char front[PX_FRONT_MAX]; /* front=: its front controller's script, or "" */
    char ext[PX_EXT_MAX];     /* the extensions its pattern names (cgienv_exts): "php|" */
} px_rule_t;

typedef struct proxy {
    site_t *site;
    void (*on_backend)(watch_t *w, unsigned events); /* proxy.c's: a backend connection's events */
    /* proxy_h2.c's: close m's HTTP/2 connections without a stream (all:
       every one; their streams fail) */
    void (*h2_close)(struct proxy *px, px_member_t *m, int all);
    struct ssl_ctx_st *tls; /* h2/ backends' client context (proc_t's proxy_tls), or NULL */
    size_t spooled; /* bytes of bodies read whole (px_req_t's spool) */
    char *spare;    /* a read buffer (PROXY_READ) no request holds, or NULL */
    int nrules;
    px_rule_t rule[CONFIG_PROXY_RULES];
    px_pool_t *pool[CONFIG_POOLS + CONFIG_PROXY_RULES];
    int npools;
    px_member_t *slot[CONFIG_BACKENDS]; /* members by counter slot; NULL: free */
    gio_timer_t tick; /* once a second: files, checks, drained members */
    struct {
        char name[VHOST_NAME_MAX];
        int64_t second; /* wall clock of the verdict; 0: none */
        int has;
        int which; /* VHOST_*: the directory that serves it */
    } vh[PROXY_VHOSTS];
    struct px_front_vh *front_vh; /* proxy_front.c's verdicts (PROXY_VHOSTS), or NULL */
    int front_on; /* a FastCGI or SCGI rule is there: a front controller may be */
} proxy_t;

/* Where a response is. */
enum { RS_HEAD, RS_BODY, RS_TUNNEL, RS_DONE };
/* How a response body ends. */
enum { FR_NONE, FR_LEN, FR_CHUNKED, FR_CLOSE };

typedef struct px_req {
    exchange_t *ex;
    proxy_t *px;
    px_rule_t *rule;
    px_member_t *m; /* the backend of this attempt (NULL before the first) */
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
    uint8_t counted;    /* in m->outstanding */
    uint8_t probe;      /* the one request trying m after it was down */
    uint8_t keep_out;   /* out holds every byte from the start: it may be sent again */
    uint8_t conn_failed; /* the attempt failed connecting: nothing reached the backend */
    uint8_t ntries;     /* attempts so far */
    uint64_t tried;     /* backends tried, by counter slot */
    int64_t t0;         /* gio_now() of the first attempt: -Q's deadline for the others */
    int64_t sent_us;    /* gio_now_us() of this attempt: the backend's latency */
    uint8_t none_up;    /* px_attempt found no usable backend: 503 */
    uint8_t nfields0;   /* ex->nfields before the backend's head: a retry drops what it added */
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
    uint8_t grpc;       /* a gRPC call (application/grpc): failures answered as gRPC */
    struct px_h2s *h2s; /* h2c/: the stream's state (proxy_h2.c; one block, freed with pr) */
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

/* The same, the body ending with the trailer fields t[0..n) (HTTP/2 and
   HTTP/3 clients; the strings copied). */
void px_done_trailers(px_req_t *pr, const ex_field_t *t, int n);

/* The backend failed (502): an error before the head, a broken body after
   it.  The exchange may be over when this returns. */
void px_fail(px_req_t *pr, const char *why);

/* A gRPC call's answer when it cannot be the backend's (px_fail's for a
   gRPC call): HTTP 200 with grpc-status code and grpc-message msg
   (trailers-only before the head, else the trailers after what the backend
   sent).  The exchange may be over when this returns. */
void px_grpc_fail(px_req_t *pr, int code, const char *msg);

/* A gRPC call ends with grpc-status v[0..n): the access log's and
   /metrics' (once a call; a value that is not a status is not counted). */
void px_grpc_status(px_req_t *pr, const char *v, size_t n);

/* The same for a call on the backend's socket that failed with err: call
   is "connect() to", "recv() from" or "send() to", and the error log's
   line names it, the backend (its kind and address as written) and err. */
void px_fail_errno(px_req_t *pr, const char *call, int err);

/* Send the head: status, ctype (or NULL), len (or EX_LEN_STREAM), the
   fields already added.  0, or -1 when nothing more may be sent. */
int px_head(px_req_t *pr, int status, const char *ctype, uint64_t len);

/* A NUL-terminated copy of p[0..n) that lives as long as pr, or NULL. */
char *px_keep(px_req_t *pr, const char *p, size_t n);

/* Copy name: value into pr->fields and add it to the response.  0, or -1
   (too many fields or bytes: the caller answers 502). */
int px_field(px_req_t *pr, const char *name, size_t nl, const char *value, size_t vl);

/* Is ex's request a gRPC call (application/grpc, +proto, ...; not gRPC-Web)? */
int px_is_grpc(const exchange_t *ex);

/* A gRPC call over HTTP/1.1 (no trailers: none can complete): 505 and a
   sentence that says so.  0, or -1. */
int px_grpc_refused(exchange_t *ex);

/* The client's address as text (IPv4-mapped as IPv4) into a (INET6_ADDRSTRLEN). */

/* What a matched request is about. */
typedef struct px_target {
    path_t p;                   /* its path (in ex->path) and query */
    char vhost[VHOST_NAME_MAX]; /* its vhost's name ("" with -H) */
    int which;                  /* VHOST_*: the directory that serves it */
    /* a front controller's script that runs it (proxy_front.c), "/index.php",
       or "": the path's own (cgienv_script) */
    char script[EX_PATH_CAP + PX_FRONT_MAX];
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
    /* A multiplexing protocol's own connections (NULL: px_conn_t's): attach
       pr to one of m's as a new stream, 0 or -1 with errno; and let go of
       its stream (reset if not complete). */
    int (*attach)(px_req_t *pr, px_member_t *m);
    void (*release)(px_req_t *pr);
} px_ops_t;

extern const px_ops_t px_http_ops; /* proxy_http.c */
extern const px_ops_t px_fcgi_ops; /* proxy_fcgi.c: FastCGI and SCGI */
extern const px_ops_t px_h2_ops;   /* proxy_h2.c: HTTP/2 (h2c/) */

/* ---- proxy_h2.c: what proxy.c calls besides the ops ---- */

/* The client took pr's body below EX_STREAM_LOW: the backend's DATA it
   held back is acknowledged (its window opens). */
void px_h2_drained(px_req_t *pr);
/* Is pr's grpc-timeout within slack ms, or past?  0 without one. */
int px_h2_past_deadline(const px_req_t *pr, int64_t slack);

/* proxy_t's h2_close. */
void px_h2_close(struct proxy *px, px_member_t *m, int all);


/* ---- proxy_front.c: front controllers ---- */

/* A rule's leading "front=SCRIPT;" at s: the script into front[cap] ("":
   none) and where the rule goes on; NULL with *why when it is not one. */
const char *px_front_prefix(const char *s, char *front, size_t cap, const char **why);

/* Does r (a FastCGI or SCGI rule) run script as a whole script? */
int px_front_takes(const px_rule_t *r, const char *script);

/* Parse one -P rule: "@name/pattern", or a backend list and its pattern
   (an anonymous pool's backends into pd; name: the --pool's, or "").  0,
   or -1 with *why (r's expression freed). */
int px_rule_parse(const char *s, px_rule_t *r, px_pooldef_t *pd, char *name, size_t cap,
                  const char **why);

/* For --check: does the -P rule (its text) run script as a front
   controller's (px_front_takes)?  1 or 0 (a bad rule: 0). */
int px_rule_runs(const char *rule, const char *script);

/* px_rule_parse's end: r's front= (if any) is a script r runs, kind (PX_*)
   being its pool's (a --pool's: PX_FCGI until pools_init knows).  0, or
   -1 with *why and r's expression freed. */
int px_front_check(px_rule_t *r, int kind, const char **why);

/* pools_init's, with r's pool known (rule: the -P as given): its front=
   is still one r runs, and px->front_on counts r's kind.  0, or -1 after
   printing why. */
int px_front_pool_check(proxy_t *px, const px_rule_t *r, const char *rule);

/* proxy_config_check's (--check and the start's), for -P rule: a front=
   before @pool needs pool to be FastCGI or SCGI (pd: room to parse it).
   0, or -1 after printing why. */
int px_front_config_check(const config_t *cfg, const char *rule, px_pooldef_t *pd);

/* A .proxy's text[0..n) (written in, text[n] too: n + 1 bytes, a NUL
   ending the last line; n at most PX_FRONT_FILE_MAX): 0 when it says
   nothing of a front controller, 1 with the script in front[PX_FRONT_MAX]
   ("front SCRIPT"), 2 for "front off"; -1 with *why and *line. */
int px_front_conf_parse(char *text, size_t n, char *front, int *line, const char **why);

/* After the rules took none of ex's path and its vhost holds a .proxy
   (t as match() made it): the rule that runs the site's front controller
   for it, t->script the script, when the path names nothing there (or a
   directory without index.html: its own copy of the script's name, else
   the script), or NULL: the path is the files' (or no front). */
px_rule_t *px_front(proxy_t *px, exchange_t *ex, px_target_t *t);

/* Let go of px_front's verdicts (their directories). */
void px_front_free(proxy_t *px);

/* The handler's claims (router_program): is path[0..n) a program of a
   FastCGI or SCGI rule's, one it takes whole as its script or a file with
   an extension its pattern names (\.php$: every .php, whichever rule a
   request for it matches), on any host: one without .proxy sends its
   requests to no rule, and must not send the script as a file.  An HTTP
   rule's paths are the backend's URLs, not programs here. */
int px_claims(const site_t *site, const char *path, size_t n);

/* Before r (FastCGI or SCGI) runs t's script: the script as gatling's own
   view of t's vhost directory has it, with the files' path safety
   (fs_open_beneath, fs_public).  0 to go on (there, or nothing there: the
   backend's files may be elsewhere, its 404), 404 when a file stands where
   the way needs a directory (/uploads/x.jpg/y.php: php-fpm's
   cgi.fix_pathinfo would run x.jpg), 403 behind a closed directory (or
   leaving the root), 414 or 503 as the files say. */
int px_script_check(exchange_t *ex, const px_rule_t *r, const px_target_t *t);

/* proxy_config_check's (--check and the start's), for -P rule parsed into
   r (kind: its own pool's; pool: the --pool it names, or ""): a FastCGI or
   SCGI rule that runs only some of the files its pattern names by
   extension (^/w/index\.php$) says so in a warning, since the others are
   refused (403), never sent as source. */
void px_narrow_check(const config_t *cfg, const char *rule, const px_rule_t *r,
                     const char *pool, int kind);

/* ---- proxy_tls.c: TLS to h2/ backends ---- */

typedef struct ssl_st SSL;

/* --proxy-ca's file (cfg->proxy_ca), read as root before a chroot, into
   *ctx (proc_t's proxy_tls; ctx NULL: read, checked and let go, as the
   options' check does): a client context (TLS 1.2 and up, ALPN h2, the
   peer's certificate verified against those CAs alone).  Without
   --proxy-ca, or *ctx made already, nothing.  0, or -1 after printing why
   to stderr (quiet: not). */
int px_tls_load(const config_t *cfg, struct ssl_ctx_st **ctx, int quiet);

/* An h2/ pool or rule (pd; opt "--pool" or "-P", what as given) needs
   --proxy-ca, and name= for a unix socket: 0, or -1 after printing why. */
int px_tls_check(const config_t *cfg, const px_pooldef_t *pd, const char *opt,
                 const char *what);

/* A TLS session on fd for backend m of a PX_H2 pool: SNI and the name
   verified its pool's name= (or, without one, the address as an IP SAN).
   NULL with errno (EDESTADDRREQ: a unix socket without name=). */
SSL *px_tls_new(struct ssl_ctx_st *ctx, const px_member_t *m, int fd);

/* One step of the handshake: 1 done (and the backend chose h2), GIO_AGAIN
   with *want, or GIO_ERR with why in words (the certificate's verify
   result, an alert, "the backend closed the connection") in why[cap]. */
int px_tls_handshake(SSL *ssl, unsigned *want, char *why, size_t cap);

/* Send p[0..n) through ssl: bytes the socket took (> 0), GIO_AGAIN with
   *want, or GIO_ERR (errno).  The bytes not taken come again at the next
   call, as they were (gio_tls.h: the session may hold their records). */
long px_tls_send(SSL *ssl, const char *p, size_t n, unsigned *want);

/* ---- proxy_pool.c: what pools are, which backend, health ---- */

/* A backend list at s ("a/1,b/2*3,unix:/c+backup"): up to POOL_MEMBERS into
   d, their count in *n.  in_rule: a -P rule's, ending in /pattern after an
   address (:pattern after a unix path), *rest at the pattern; else a
   --pool's, ending at ; or the end, *rest there.  0, or -1 with *why. */
int px_list_parse(const char *s, int in_rule, px_mdef_t *d, int *n, const char **rest,
                  const char **why);

/* A file: pool's text, a backend a line (# comments).  0, or -1 with *why
   and *line. */
int px_file_parse(const char *text, px_mdef_t *d, int *n, int *line, const char **why);

/* --pool NAME=[F/|S/]backends-or-file:/path[;key=value...] into pd.  0, or -1 with *why. */
int px_pool_parse(const char *def, px_pooldef_t *pd, const char **why);

/* The directory of a file: pool's list (pd->file), walked to as privfs's rules
   say (pfs_walk_dir): a descriptor, or -1 with errno (and why, n bytes, when a
   link was refused). */
int px_pool_dir_open(const px_pooldef_t *pd, char *why, size_t n);

/* A file: pool's list, read (at most 64 KiB) from its directory unless its
   modification time (ns) is still *mtime: malloc'd text, or NULL with errno
   (0: unchanged; a refusal by privfs's rules also says why, wn bytes);
   *mtime then the file's. */
char *px_list_read(int dirfd, const char *path, int64_t *mtime, char *why, size_t wn);

/* The options a pool has when none is given. */
void px_popts_default(px_popts_t *o);

/* [F/|S/] at *s, stepped over: PX_*. */
int px_kind_parse(const char **s);

/* The backend of p for a request that has tried the backends whose slots
   are set in tried, keyed by key[0..kl) (balance=hash): backups only when
   no other is usable; a backend down past its time is taken by one request
   (the caller marks the probe).  NULL: none usable. */
px_member_t *px_pick(px_pool_t *p, uint64_t tried, const char *key, size_t kl, int64_t now);

/* Is a backend of p that is not in tried usable now (px_pick would find one)? */
int px_any(const px_pool_t *p, uint64_t tried, int64_t now);

/* A request to m failed (a connect, a reset, a timeout, a failon status) or
   succeeded; probe: it was the one trying m after it was down. */
void px_failed(proxy_t *px, px_member_t *m, int probe, int64_t now, const char *why);
void px_ok(proxy_t *px, px_member_t *m, int probe, int64_t now);

/* An active check of m ended: ok, or failed for why. */
void px_check_result(proxy_t *px, px_member_t *m, int ok, int64_t now, const char *why);

/* Does status count as a failure of p's backends (failon=)? */
int px_failon(const px_pool_t *p, int status);

/* m's state for /server-status: up, slowstart, down, probing, draining. */
const char *px_state(const px_member_t *m, int64_t now);

/* Is m taking requests (not down, not draining)? */
int px_up(const px_member_t *m);

/* A new backend of p (a free counter slot, zeroed); up_since: its slow
   start's beginning (0: none).  NULL: no slot or room, or ENOMEM. */
px_member_t *px_member_new(proxy_t *px, px_pool_t *p, const px_mdef_t *d, int64_t up_since);

/* Take m out of its pool and free it (its connections are closed already). */
void px_member_drop(proxy_t *px, px_member_t *m);

/* ---- proxy_check.c: active health checks ---- */

/* Begin a check of m (its pool's check=), unless one is under way. */
void px_check_start(proxy_t *px, px_member_t *m);

/* Abandon m's check under way, if any. */
void px_check_stop(proxy_t *px, px_member_t *m);

/* ---- proxy_be.c: backend connections, what proxy.c does with them ---- */

/* Count a BACKEND_* event of backend m (site/stats.h keeps them per backend); m may be NULL. */
void px_count(proxy_t *px, const px_member_t *m, int kind);

/* Close c (its descriptor off the loop) and free it. */
void px_conn_close(proxy_t *px, px_conn_t *c);

/* Take c, an idle connection, out of its backend's pool. */
void px_pool_remove(px_member_t *m, px_conn_t *c);

/* Close m's idle connections (a draining backend's, at once). */
void px_member_idle_close(proxy_t *px, px_member_t *m);

/* Close m's idle connections and free m (it has no request). */
void px_member_free(proxy_t *px, px_member_t *m);

/* pr's backend deadline (-Q, or a tunnel's idle limit) for its state. */
void px_set_deadline(px_req_t *pr);

/* What pr's backend connection waits for now (read, write). */
void px_interest(px_req_t *pr);

/* pr's new connection is answered (or let go): off its backend's fresh list. */
void px_unfresh(px_req_t *pr);

/* Let go of pr's backend connection: back to the pool if reusable (and
   the backend keeps connections), else closed; the attempt is over. */
void px_release(px_req_t *pr, int reusable);

/* Send what pr->out holds to a backend of its rule's pool (the balancer's
   choice, then the next while connecting fails at once).  0, or -1: no
   backend took it (pr->none_up: none was usable at all). */
int px_attempt(px_req_t *pr);

/* May pr go to another backend?  Before any byte of the answer went to the
   client, within -Q of the first attempt and the pool's tries, with every
   byte of the request still held; and idempotent, or not sent at all
   (RFC 9110 9.2.2: a POST that may have reached the application is not
   sent twice). */
int px_may_retry(const px_req_t *pr);

/* pr's spooled body is sent (or dropped): freed, out of the loop's budget. */
void px_spool_free(px_req_t *pr);

/* Free pr and let go of its connection (closed). */
void px_req_free(px_req_t *pr);

/* Write what the backend is owed; on a failure, px_fail (or retry). */
void px_flush(px_req_t *pr);

/* The backend of pr's attempt timed out (-Q): counted against it. */
void px_timed_out(px_req_t *pr);

#endif
