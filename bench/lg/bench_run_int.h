/*
 * bench_run_int — what bench_run.c (a worker's events: reading, parsing,
 * issuing) and bench_conn.c (its connection slots and its run) share: the
 * run's and a slot's structs, and bench_conn.c's functions.  bench_run.c
 * calls them; bench_conn.c never calls bench_run.c.
 */
#ifndef BENCH_RUN_INT_H
#define BENCH_RUN_INT_H

#include "bench_common.h"

#include <stdint.h>

#include "gio.h"
#include "gio_batch.h"
#include "lg_ftp.h"
#include "lg_h2.h"
#include "lg_http.h"
#include "lg_tls.h"

#define RBUF_SIZE 65536
#define NOT_HTTP_LIMIT 10 /* parse errors without one good response: not an HTTP server */
#define TICK_NS 1000000000LL

enum { C_FREE, C_CONNECTING, C_HANDSHAKE, C_OPEN };

/* ftp://: what a control connection holds beside the HTTP fields it shares. */
typedef struct bftp {
    int dfd;          /* the data connection of the download in progress; -1: none */
    uint8_t phase;    /* LG_FTP_GREET .. LG_FTP_RETR: what the session waits for */
    uint8_t final;    /* the download's closing reply is in (226, or a failure) */
    uint8_t data_eof; /* the data connection has ended (or never began) */
    uint16_t status;  /* the closing reply's code */
    uint64_t body;    /* bytes read on the data connection */
    const char *retr; /* the RETR command of the download (a bench_req_t's) */
    size_t retrlen;
    const lg_addr_t *src; /* -b: the control connection's address; the data one binds it too */
    lg_ftp_reply_t reply;
} bftp_t;

typedef struct bconn {
    int fd;
    uint8_t state;
    uint8_t closing; /* issue nothing more; close once the in-flight requests are answered */
    uint8_t parked;  /* -R: on the idle stack, waiting for a request to fall due */
    uint32_t ring;   /* slot of the oldest in-flight request in sent[] */
    uint32_t inflight;
    uint32_t reqs;    /* requests issued on this connection */
    int64_t t0;       /* when connect() was called (HANDSHAKE: when it began), ns */
    SSL *ssl;         /* https: the TLS session */
    int64_t deadline; /* gio_now() ms when the pending connect/response times out; 0: none */
    int64_t *sent;    /* issue times of the in-flight requests, `depth` slots (HTTP/1.1) */
    lg_h2_t *h2;      /* --h2: the session, while OPEN */
    bftp_t *ftp;      /* ftp://: the session (one per slot, for the whole run) */
    uint8_t goaway;   /* --h2: a goaway error is counted for this connection */
    lg_resp_t resp;
    gio_batch_t out;
} bconn_t;

typedef struct brun {
    const bench_cfg_t *cfg;
    bench_stats_t *st;
    bench_stats_t *all; /* every worker's results: the ramp waits for all of them */
    gio_loop_t *loop;
    bconn_t *c;
    unsigned n;
    unsigned *pend; /* FIFO of slots waiting for their connect() */
    unsigned phead, npend;
    unsigned connecting;
    unsigned handshaking; /* https: connected, handshake not done: no request yet */
    unsigned depth;
    uint64_t limit; /* requests (connects with --connect-only) this worker may start; 0: no limit */
    uint64_t started;
    size_t next_req, next_src;
    int64_t now; /* ns, refreshed for each event */
    int64_t timeout_ms;
    int64_t interval_ns; /* -R: between due times in this worker; 0: closed loop */
    int64_t next_due;    /* -R: when the next request falls due, ns */
    int64_t stop_at;     /* -d: when the run stops, ns; 0: no duration */
    unsigned *idle;      /* -R: stack of open connections with nothing to send */
    unsigned nidle;
    int64_t *retry; /* --h2: ring of the issue times of requests to send again */
    unsigned nretry, rhead, rcap;
    bftp_t *ftps;   /* ftp://: one per slot */
    int no_epsv;    /* ftp://: the server refused EPSV once: PASV from then on */
    unsigned nopen; /* connections OPEN */
    int ramping;    /* connecting only, no requests yet */
    int stopping;   /* start nothing new; finish what is in flight */
    int aborting;   /* drop everything now */
    char *rbuf;
    SSL_CTX *tls;  /* https: the client context */
    char sni[256]; /* https: the name to ask for, if any */
    int have_sni;
} brun_t;

/* bench_conn.c's functions, each described there. */
int brun_more_work(const brun_t *r);
int brun_any_work(const brun_t *r);
void brun_set_fatal(brun_t *r, int why, int e);
void brun_ftp_data_close(brun_t *r, bftp_t *f);
unsigned brun_connecting(const brun_t *r);
void brun_conn_close(brun_t *r, bconn_t *c);
void brun_conn_fail(brun_t *r, bconn_t *c, int kind);
void brun_arm(brun_t *r, bconn_t *c, int on);
void brun_set_deadline(brun_t *r, bconn_t *c);
int brun_conn_flush(brun_t *r, bconn_t *c);
unsigned brun_conn_room(const brun_t *r, const bconn_t *c);
int brun_conn_put(brun_t *r, bconn_t *c, const bench_req_t *q, int last, int64_t t);
int brun_due(const brun_t *r);
int brun_park(brun_t *r, bconn_t *c);
void brun_ftp_login_begin(brun_t *r, bconn_t *c);
void brun_conn_start(brun_t *r, bconn_t *c);
void brun_conn_next(brun_t *r, bconn_t *c);
void brun_count_response(brun_t *r, int64_t t, unsigned status, uint64_t body);
void brun_response_done(brun_t *r, bconn_t *c);
void brun_h2_lost(brun_t *r, bconn_t *c, int kind, uint64_t n);
int brun_h2_ended(brun_t *r, bconn_t *c);
int brun_ftp_send(brun_t *r, bconn_t *c, const char *cmd, size_t len, int phase);
void brun_ftp_quit(brun_t *r, bconn_t *c);
int brun_ftp_data_connect(brun_t *r, bconn_t *c, int port);
void brun_on_timeout(brun_t *r, bconn_t *c, int fd);
void brun_start_pending(brun_t *r);
void brun_run_stop(brun_t *r);
void brun_run_abort(brun_t *r);
void brun_progress(const brun_t *r, int64_t *last_ns, uint64_t *last_resp);
int brun_all_ramped(const brun_t *r);
int brun_run_setup(brun_t *r, const bench_cfg_t *cfg, unsigned index, bench_stats_t *st);
void brun_run_free(brun_t *r);

#endif
