/*
 * bench_h3 — bench --h3: one worker process of HTTP/3 load on one gio loop.
 *
 * Each connection is a connected UDP socket of its own (the kernel demultiplexes
 * the server's answers by port, and a connection's readiness is its socket's) carrying
 * an ngtcp2 client connection (TLS 1.3 through GnuTLS, ALPN h3) and an nghttp3 client
 * session on it.  A slot is:
 *
 *   FREE --socket(), Initial--> HANDSHAKE --handshake done--> OPEN
 *     ^                             |                          |
 *     +-- failure / timeout / server close / CONNECTION_CLOSE -+
 *
 * The server's certificate is verified against -C (GnuTLS, the URL's host as the
 * name; an IP literal against the certificate's IP addresses) unless --insecure.
 *
 * As with --h2 -k, all connections are opened first (the ramp), then each OPEN one
 * keeps --streams requests in flight, closed loop (or with -R open loop: the requests
 * due go to the connections with a free slot, each timed from its due time, the loop
 * sleeping until the next is due, as bench_run's): a request is a bidirectional
 * stream with HEADERS and FIN (the fields of the HTTP/1.1 request bench made,
 * -H and -f included), and a response is complete when its stream ends (FIN);
 * its latency counts from the issue to then.  A stream the server resets is lost
 * (LG_E_RST); the streams in flight when a connection fails are lost as the
 * failure's kind.  requests == responses + lost, as everywhere in bench.
 *
 * Each read event takes every datagram there is (recvmmsg), feeds them to ngtcp2,
 * refills the freed stream slots, and writes what ngtcp2 and nghttp3 have (up to
 * the send quantum per round, sendmmsg).  ngtcp2's timer (loss detection, ACK
 * delay, idle) is the socket's gio deadline, or the response timeout (-t: no
 * response completed for that long while requests are in flight) if sooner.
 *
 * --idle: connections do the handshake and then send no request; they stay open
 * until -d ends (the server's memory per idle QUIC connection, bench/compare-h3).
 *
 * What ngtcp2 and nghttp3 call back, and the request fields, are
 * bench_h3_cb.c's (bench_h3_int.h).
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "bench_h3.h"

#ifdef HAVE_H3
#include "bench_h3_int.h"

#include <ctype.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gio.h"
#include "gio_udp.h"
#include "lg_tls.h"

static void conn_next(h3run_t *r, h3conn_t *c);
static int conn_write(h3run_t *r, h3conn_t *c);
static void conn_arm(h3run_t *r, h3conn_t *c);

static int more_work(const h3run_t *r)
{
    return !r->stopping && !r->aborting && !r->cfg->idle && (!r->limit || r->started < r->limit);
}

/* -R: is a request due (before the end of -d)?  Always in the closed loop. */
static int due(const h3run_t *r)
{
    return !r->interval_ns || (r->next_due <= r->now && (!r->stop_at || r->next_due < r->stop_at));
}

static void set_fatal(h3run_t *r, int why, int e)
{
    bench_stats_fatal(r->st, why, e);
    r->aborting = 1;
}

/* ---- requests ------------------------------------------------------------------ */

/* ---- accounting ------------------------------------------------------------------ */

/* ---- ngtcp2's and nghttp3's callbacks ---------------------------------------------- */

/* ---- connection life ---------------------------------------------------------------- */

static void conn_close(h3run_t *r, h3conn_t *c)
{
    if (c->state == S_FREE)
        return;
    if (c->state == S_OPEN)
        r->st->open--;
    if (c->state == S_HANDSHAKE)
        r->shaking--;
    nghttp3_conn_del(c->h3);
    ngtcp2_conn_del(c->q);
    if (c->tls)
        gnutls_deinit(c->tls);
    c->h3 = NULL, c->q = NULL, c->tls = NULL;
    gio_close_sole(r->loop, c->fd); /* our own socket, never shared */
    c->fd = -1;
    c->state = S_FREE;
    c->bound = c->closing = 0;
    c->heard = 0;
    c->fail_kind = 0;
    c->inflight = 0;
    c->free = NULL;
    for (unsigned i = 0; i < r->depth; i++)
        c->slots[i].next_free = c->free, c->free = &c->slots[i];
}

/* Count an error, lose what is in flight, close, and open a fresh connection. */
static void conn_fail(h3run_t *r, h3conn_t *c, int kind)
{
    bench_stats_t *st = r->st;
    st->err[kind]++;
    st->lost += c->inflight;
    conn_close(r, c);
    if (!st->connects && kind == LG_E_TLS)
        set_fatal(r, BENCH_NOT_TLS, 0);
    if (!st->connects && (kind == LG_E_REFUSED || kind == LG_E_CTIMEOUT))
        set_fatal(r, BENCH_UNREACHABLE, kind == LG_E_REFUSED ? ECONNREFUSED : ETIMEDOUT);
    conn_next(r, c);
}

/* The connection ended without an error of ours (idle, the server's close). */
static void conn_ended(h3run_t *r, h3conn_t *c, int kind)
{
    if (c->inflight || c->state == S_HANDSHAKE) {
        conn_fail(r, c, c->state == S_HANDSHAKE ? LG_E_TLS : kind);
        return;
    }
    conn_close(r, c);
    conn_next(r, c);
}

static int tls_setup(h3run_t *r, h3conn_t *c)
{
    static const gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
    if (gnutls_init(&c->tls, GNUTLS_CLIENT) < 0) {
        c->tls = NULL;
        return -1;
    }
    c->ref = (ngtcp2_crypto_conn_ref){.get_conn = h3b_get_conn, .user_data = c};
    if (gnutls_priority_set(c->tls, r->prio) < 0 ||
        ngtcp2_crypto_gnutls_configure_client_session(c->tls) != 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, r->cred) < 0 ||
        gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) < 0)
        return -1;
    if (!r->host_is_ip &&
        gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, r->host, strlen(r->host)) < 0)
        return -1;
    if (r->cfg->cafile) /* the name (or address) in the certificate, and its chain to -C */
        gnutls_session_set_verify_cert(c->tls, r->host, 0);
    gnutls_session_set_ptr(c->tls, &c->ref);
    ngtcp2_conn_set_tls_native_handle(c->q, c->tls);
    return 0;
}

static void quic_params(h3run_t *r, ngtcp2_settings *s, ngtcp2_transport_params *p)
{
    ngtcp2_settings_default(s);
    s->initial_ts = (ngtcp2_tstamp)lg_now_ns();
    s->max_window = H3B_CONN_WINDOW;
    s->max_stream_window = H3B_STREAM_WINDOW;
    s->handshake_timeout = (ngtcp2_duration)r->timeout_ns;
    ngtcp2_transport_params_default(p);
    p->initial_max_stream_data_bidi_local = H3B_STREAM_WINDOW;
    p->initial_max_stream_data_uni = H3B_STREAM_WINDOW;
    p->initial_max_data = H3B_CONN_WINDOW;
    p->initial_max_streams_uni = 3;
    p->max_idle_timeout = (ngtcp2_duration)(r->cfg->hardcap + 60) * NGTCP2_SECONDS;
    p->active_connection_id_limit = 2;
    p->max_udp_payload_size = H3B_RX_CAP; /* what a receive buffer holds */
}

/* The UDP socket, connected to the server; its local address in c->local. */
static int conn_socket(h3run_t *r, h3conn_t *c)
{
    const lg_addr_t *dst = &r->cfg->url.addr;
    int fd = socket(dst->ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    gio_udp_buffers(fd, 4 << 20); /* past rmem_max where we may: a window's burst */
    c->locallen = sizeof c->local;
    if (connect(fd, (const struct sockaddr *)&dst->ss, dst->len) < 0 ||
        getsockname(fd, (struct sockaddr *)&c->local, &c->locallen) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    memcpy(&c->remote, &dst->ss, dst->len);
    return fd;
}

/* A new connection in slot c: socket, ngtcp2 and nghttp3 clients, the first Initial. */
static void conn_start(h3run_t *r, h3conn_t *c)
{
    r->st->attempts++;
    int fd = conn_socket(r, c);
    if (fd < 0) {
        r->st->err[LG_E_CONNECT]++;
        if (!r->st->connects)
            set_fatal(r, BENCH_SYSERR, errno);
        return;
    }
    c->fd = fd;
    c->t0 = r->now = lg_now_ns();
    c->state = S_HANDSHAKE;
    r->shaking++;
    ngtcp2_cid dcid = {.datalen = 18}, scid = {.datalen = H3B_SCID_LEN};
    gnutls_rnd(GNUTLS_RND_NONCE, dcid.data, dcid.datalen);
    gnutls_rnd(GNUTLS_RND_NONCE, scid.data, scid.datalen);
    ngtcp2_path path = {.local = {(ngtcp2_sockaddr *)&c->local, c->locallen},
                        .remote = {(ngtcp2_sockaddr *)&c->remote, r->cfg->url.addr.len}};
    ngtcp2_settings st;
    ngtcp2_transport_params tp;
    quic_params(r, &st, &tp);
    nghttp3_settings hs;
    nghttp3_settings_default(&hs);
    if (gio_add(r->loop, fd, c) < 0) {
        close(fd);
        c->fd = -1;
        c->state = S_FREE;
        r->shaking--;
        r->st->err[LG_E_CONNECT]++; /* the slot stays free */
        return;
    }
    if (ngtcp2_conn_client_new(&c->q, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &h3b_quic_cb, &st,
                               &tp, NULL, c) != 0 ||
        tls_setup(r, c) < 0 || nghttp3_conn_client_new(&c->h3, &h3b_h3_cb, &hs, NULL, c) != 0) {
        r->st->err[LG_E_CONNECT]++; /* out of memory: the slot stays free */
        conn_close(r, c);
        if (!r->st->connects)
            set_fatal(r, BENCH_SYSERR, ENOMEM);
        return;
    }
    gio_want(r->loop, fd, GIO_READ);
    if (conn_write(r, c) < 0) {
        conn_fail(r, c, LG_E_IO);
        return;
    }
    conn_arm(r, c);
}

/* The slot is free: a fresh connection in it if there is work (never with --idle). */
static void conn_next(h3run_t *r, h3conn_t *c)
{
    if (c->state == S_FREE && more_work(r) && (unsigned)(c - r->c) < r->next_slot)
        conn_start(r, c);
}

/* ---- sending ------------------------------------------------------------------------ */

/* One packet of what nghttp3 and ngtcp2 have; bytes written (0: nothing now), or -1. */
static ngtcp2_ssize write_one(h3conn_t *c, uint8_t *buf, size_t cap, ngtcp2_tstamp ts)
{
    for (;;) {
        int64_t sid = -1;
        int fin = 0;
        nghttp3_vec vec[16];
        nghttp3_ssize nv = 0;
        if (c->bound && ngtcp2_conn_get_max_data_left(c->q)) {
            nv = nghttp3_conn_writev_stream(c->h3, &sid, &fin, vec, 16);
            if (nv < 0)
                return -1;
        }
        ngtcp2_ssize ndata = -1;
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(c->q, NULL, NULL, buf, cap, &ndata, flags, sid,
                                                   (const ngtcp2_vec *)vec, (size_t)nv, ts);
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
            nghttp3_conn_block_stream(c->h3, sid);
            continue;
        }
        if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
            nghttp3_conn_shutdown_stream_write(c->h3, sid);
            continue;
        }
        if (ndata >= 0 && nghttp3_conn_add_write_offset(c->h3, sid, (size_t)ndata) != 0)
            return -1;
        if (n == NGTCP2_ERR_WRITE_MORE)
            continue;
        return n < 0 ? -1 : n;
    }
}

static int send_batch(h3run_t *r, h3conn_t *c, unsigned k)
{
    unsigned done = 0;
    while (done < k) {
        long m = gio_udp_send(c->fd, r->td + done, k - done, 0);
        if (m == GIO_AGAIN) /* the socket buffer is full: QUIC's loss recovery resends */
            return 0;
        if (m == GIO_ERR)
            return errno == ECONNREFUSED && c->state == S_HANDSHAKE && !r->st->connects ? -2 : 0;
        done += (unsigned)m;
    }
    return 0;
}

/* Send what the connection has now, up to its send quantum.  0, or -1 (it failed). */
static int conn_write(h3run_t *r, h3conn_t *c)
{
    ngtcp2_tstamp ts = (ngtcp2_tstamp)lg_now_ns();
    size_t max = ngtcp2_conn_get_send_quantum(c->q) / H3B_PKT + 1;
    for (;;) {
        unsigned k = 0;
        while (k < H3B_TX_BATCH && max) {
            ngtcp2_ssize n = write_one(c, r->tx[k], H3B_PKT, ts);
            if (n < 0)
                return -1;
            if (n == 0)
                break;
            memset(&r->td[k], 0, sizeof r->td[k]);
            r->td[k].buf = r->tx[k];
            r->td[k].len = (size_t)n;
            memcpy(&r->td[k].peer, &c->remote, r->cfg->url.addr.len);
            r->td[k].peerlen = r->cfg->url.addr.len;
            k++, max--;
        }
        int s = k ? send_batch(r, c, k) : 0;
        if (s == -2) {
            set_fatal(r, BENCH_UNREACHABLE, ECONNREFUSED);
            return -1;
        }
        if (k < H3B_TX_BATCH || !max)
            break;
    }
    ngtcp2_conn_update_pkt_tx_time(c->q, ts);
    return 0;
}

/* ---- requests in, responses out ------------------------------------------------------ */

/* Fill the connection's free stream slots with requests; -1 if it failed. */
static int conn_issue(h3run_t *r, h3conn_t *c)
{
    if (c->state != S_OPEN || r->ramping || c->closing)
        return 0;
    while (c->free && more_work(r) && due(r)) {
        h3slot_t *s = c->free;
        int64_t sid;
        int rv = ngtcp2_conn_open_bidi_stream(c->q, &sid, s);
        if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED)
            break; /* the server's stream limit: more when it raises it */
        if (rv != 0)
            return -1;
        const h3req_t *q = &r->req[r->cfg->nreq == 1 ? 0 : r->next_req++ % r->cfg->nreq];
        if (nghttp3_conn_submit_request(c->h3, sid, q->nv, q->n, NULL, s) != 0)
            return -1;
        c->free = s->next_free;
        s->c = c;
        s->t = r->interval_ns ? r->next_due : r->now; /* -R: timed from when it was due */
        r->next_due += r->interval_ns;
        s->sid = sid;
        s->status = 0;
        s->body = 0;
        if (!c->inflight++)
            c->progress = r->now;
        r->st->requests++;
        r->started++;
    }
    return 0;
}

/* Arm the socket's deadline: ngtcp2's next timer, or the response timeout if sooner. */
static void conn_arm(h3run_t *r, h3conn_t *c)
{
    ngtcp2_tstamp x = ngtcp2_conn_get_expiry(c->q);
    int64_t due = x == UINT64_MAX ? INT64_MAX : (int64_t)x;
    if (c->state == S_HANDSHAKE && c->t0 + r->timeout_ns < due)
        due = c->t0 + r->timeout_ns;
    if (c->inflight && c->progress + r->timeout_ns < due)
        due = c->progress + r->timeout_ns;
    int64_t now = lg_now_ns(), ms = gio_now(r->loop);
    ms += due <= now ? 0 : (due - now + 999999) / 1000000;
    gio_set_deadline(r->loop, c->fd, due == INT64_MAX ? 0 : ms < 1 ? 1 : ms);
}

/* Close c, telling the server with CONNECTION_CLOSE (H3_NO_ERROR; in a handshake ngtcp2
   sends it as a transport error in the packets the server can read) so that it frees the
   connection now: one left without a word stays on the server until its idle timeout
   (-T 600 for bench/ab's servers), a handshake for its own bound, and a drain that
   follows (SIGTERM) waits for them by its silence rule. */
static void conn_bye(h3run_t *r, h3conn_t *c)
{
    if ((c->state == S_OPEN || c->state == S_HANDSHAKE) && c->q) {
        ngtcp2_connection_close_error e;
        ngtcp2_connection_close_error_set_application_error(&e, NGHTTP3_H3_NO_ERROR, NULL, 0);
        ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->q, NULL, NULL, r->tx[0], H3B_PKT,
                                                            &e, (ngtcp2_tstamp)lg_now_ns());
        if (n > 0) /* best effort: else the server's idle timer ends it */
            (void)!send(c->fd, r->tx[0], (size_t)n, 0);
    }
    conn_close(r, c);
}

/* After reading or a timer: refill, write, re-arm; or fail the connection. */
static void conn_after(h3run_t *r, h3conn_t *c)
{
    if (conn_issue(r, c) < 0) {
        conn_fail(r, c, LG_E_PARSE);
        return;
    }
    if (conn_write(r, c) < 0) {
        conn_fail(r, c, LG_E_IO);
        return;
    }
    if ((c->closing || r->stopping) && !c->inflight && c->state == S_OPEN) {
        conn_bye(r, c); /* GOAWAY (or the run's end) and all answered: a fresh connection */
        conn_next(r, c);
        return;
    }
    conn_arm(r, c);
}

/* ngtcp2 refused a packet: the server closed, or the connection is broken. */
static void read_failed(h3run_t *r, h3conn_t *c, int rv)
{
    if (c->fail_kind)
        conn_fail(r, c, c->fail_kind);
    else if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_CLOSING)
        conn_ended(r, c, c->inflight ? LG_E_SHORT : LG_E_EOF);
    else if (rv == NGTCP2_ERR_CRYPTO || c->state == S_HANDSHAKE)
        conn_fail(r, c, LG_E_TLS);
    else
        conn_fail(r, c, LG_E_PARSE);
}

/* Every datagram there is; -1 if the connection was closed. */
static int conn_read(h3run_t *r, h3conn_t *c)
{
    for (;;) {
        for (unsigned i = 0; i < H3B_RX_BATCH; i++) {
            memset(&r->dg[i], 0, sizeof r->dg[i]);
            r->dg[i].buf = r->rx[i];
            r->dg[i].cap = sizeof r->rx[i];
        }
        long n = gio_udp_recv(c->fd, r->dg, H3B_RX_BATCH);
        if (n == GIO_AGAIN)
            return 0;
        if (n == GIO_ERR) {
            conn_fail(r, c, errno == ECONNREFUSED ? LG_E_REFUSED : lg_err_io(errno));
            return -1;
        }
        r->now = lg_now_ns();
        if (!c->heard)
            c->heard = r->now;
        ngtcp2_path path = {.local = {(ngtcp2_sockaddr *)&c->local, c->locallen},
                            .remote = {(ngtcp2_sockaddr *)&c->remote, r->cfg->url.addr.len}};
        for (long i = 0; i < n; i++) {
            r->st->bytes += r->dg[i].len;
            ngtcp2_pkt_info pi = {.ecn = r->dg[i].ecn};
            int rv = ngtcp2_conn_read_pkt(c->q, &path, &pi, r->dg[i].buf, r->dg[i].len,
                                          (ngtcp2_tstamp)r->now);
            if (rv != 0) {
                read_failed(r, c, rv);
                return -1;
            }
        }
        if (n < H3B_RX_BATCH)
            return 0;
    }
}

static void on_event(h3run_t *r, h3conn_t *c)
{
    r->now = lg_now_ns();
    if (c->state == S_FREE || conn_read(r, c) < 0)
        return;
    conn_after(r, c);
}

static void on_timeout(h3run_t *r, h3conn_t *c)
{
    r->now = lg_now_ns();
    if (c->state == S_FREE)
        return;
    if (c->state == S_HANDSHAKE && r->now >= c->t0 + r->timeout_ns) {
        conn_fail(r, c, LG_E_CTIMEOUT);
        return;
    }
    if (c->inflight && r->now >= c->progress + r->timeout_ns) {
        conn_fail(r, c, LG_E_TIMEOUT);
        return;
    }
    int rv = ngtcp2_conn_handle_expiry(c->q, (ngtcp2_tstamp)r->now);
    if (rv == NGTCP2_ERR_IDLE_CLOSE) {
        conn_ended(r, c, LG_E_TIMEOUT);
        return;
    }
    if (rv != 0) {
        conn_fail(r, c, LG_E_IO);
        return;
    }
    conn_after(r, c);
}

/* ---- the run ------------------------------------------------------------------------ */

static int run_tls(h3run_t *r)
{
    const bench_cfg_t *cfg = r->cfg;
    if (gnutls_certificate_allocate_credentials(&r->cred) < 0 ||
        gnutls_priority_init(&r->prio, H3B_PRIORITY, NULL) < 0)
        return -1;
    if (cfg->cafile && gnutls_certificate_set_x509_trust_file(r->cred, cfg->cafile,
                                                              GNUTLS_X509_FMT_PEM) <= 0) {
        fprintf(stderr, "bench: -C %s: no CA certificate read\n", cfg->cafile);
        return -1;
    }
    const char *h = lg_tls_sni(cfg->url.host, r->host, sizeof r->host);
    if (!h) { /* an IP literal: verified against the certificate's addresses */
        const char *s = cfg->url.host + (cfg->url.host[0] == '[');
        size_t l = strcspn(s, cfg->url.host[0] == '[' ? "]" : ":");
        if (l >= sizeof r->host)
            return -1;
        memcpy(r->host, s, l);
        r->host[l] = 0;
        r->host_is_ip = 1;
    }
    return 0;
}

static int run_setup(h3run_t *r, const bench_cfg_t *cfg, unsigned index, bench_stats_t *all)
{
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->all = all;
    r->st = &all[index];
    r->ramping = 1;
    r->n = cfg->conns / cfg->procs + (index < cfg->conns % cfg->procs);
    r->limit = cfg->nreqs ? cfg->nreqs / cfg->procs + (index < cfg->nreqs % cfg->procs) : 0;
    r->depth = cfg->streams ? cfg->streams : 1;
    r->timeout_ns = (int64_t)(cfg->timeout * 1e9);
    r->next_req = index;
    if (cfg->rate > 0) { /* the workers' due times interleave */
        r->interval_ns = (int64_t)(1e9 * cfg->procs / cfg->rate);
        r->interval_ns = r->interval_ns < 1 ? 1 : r->interval_ns;
    }
    r->c = calloc(r->n, sizeof *r->c);
    r->req = calloc(cfg->nreq, sizeof *r->req);
    h3slot_t *slots = calloc((size_t)r->n * r->depth, sizeof *slots);
    r->loop = gio_loop_new();
    if (!r->c || !r->req || !slots || !r->loop) {
        free(slots);
        return -1;
    }
    for (size_t i = 0; i < cfg->nreq; i++)
        if (h3b_req_make(&r->req[i], cfg->req[i].ka) < 0) {
            fprintf(stderr, "bench: --h3: a request bench cannot put in HTTP/3 fields\n");
            free(slots);
            return -1;
        }
    for (unsigned i = 0; i < r->n; i++) {
        r->c[i].r = r;
        r->c[i].fd = -1;
        r->c[i].slots = slots + (size_t)i * r->depth;
        for (unsigned j = 0; j < r->depth; j++)
            r->c[i].slots[j].next_free = r->c[i].free, r->c[i].free = &r->c[i].slots[j];
    }
    return run_tls(r);
}

static void run_free(h3run_t *r)
{
    if (r->c) {
        for (unsigned i = 0; i < r->n; i++)
            conn_close(r, &r->c[i]);
        free(r->c[0].slots);
    }
    free(r->c);
    if (r->req)
        for (size_t i = 0; i < r->cfg->nreq; i++)
            free(r->req[i].mem);
    free(r->req);
    if (r->cred)
        gnutls_certificate_free_credentials(r->cred);
    if (r->prio)
        gnutls_priority_deinit(r->prio);
    if (r->loop)
        gio_loop_free(r->loop);
}

static int all_ramped(const h3run_t *r)
{
    for (unsigned i = 0; i < r->cfg->procs; i++)
        if (!__atomic_load_n(&r->all[i].ramped, __ATOMIC_ACQUIRE) &&
            !__atomic_load_n(&r->all[i].finished, __ATOMIC_ACQUIRE))
            return 0;
    return 1;
}

/* The ramp ends when no handshake is under way (or after -t): the requests begin. */
static void ramp_check(h3run_t *r, int64_t t0)
{
    bench_stats_t *st = r->st;
    if (!st->ramped && ((r->next_slot == r->n && (!r->shaking || r->now - t0 >= r->timeout_ns)) ||
                        r->aborting))
        __atomic_store_n(&st->ramped, 1, __ATOMIC_RELEASE);
    if (!st->ramped || !all_ramped(r))
        return;
    r->ramping = 0;
    st->ramp_ns = r->now - t0;
    st->start_ns = r->next_due = r->now;
    r->stop_at = r->cfg->duration ? r->now + (int64_t)(r->cfg->duration * 1e9) : 0;
    for (unsigned i = 0; i < r->n && !r->aborting; i++)
        if (r->c[i].state == S_OPEN)
            conn_after(r, &r->c[i]);
    if (r->cfg->idle) { /* for a driver that measures the server while they are held */
        fprintf(stderr, "bench: --idle: %llu connections open, held for %g s\n",
                (unsigned long long)st->connects, r->cfg->duration);
        fflush(stderr);
    }
}

/* Start nothing new; idle connections close (conn_bye), busy ones finish, then close
   the same way (conn_after). */
static void run_stop(h3run_t *r)
{
    r->stopping = 1;
    r->st->unsent += bench_unsent(r->next_due, r->interval_ns, r->now, r->stop_at, r->limit,
                                  r->started);
    for (unsigned i = 0; i < r->n; i++) {
        h3conn_t *c = &r->c[i];
        if (c->state == S_HANDSHAKE || (c->state == S_OPEN && !c->inflight))
            conn_bye(r, c);
    }
}

static void run_abort(h3run_t *r)
{
    for (unsigned i = 0; i < r->n; i++) {
        h3conn_t *c = &r->c[i];
        if (c->state == S_FREE)
            continue;
        if (c->inflight) {
            r->st->err[LG_E_ABORT]++;
            r->st->lost += c->inflight;
        }
        conn_close(r, c);
    }
}

static unsigned open_now(const h3run_t *r)
{
    unsigned k = 0;
    for (unsigned i = 0; i < r->n; i++)
        k += r->c[i].state != S_FREE;
    return k;
}

/* -R: the requests due go to the OPEN connections with a free stream slot, in turn. */
static void issue_due(h3run_t *r)
{
    for (unsigned k = 0; k < r->n && due(r) && more_work(r) && !r->ramping; k++) {
        h3conn_t *c = &r->c[r->next_conn];
        r->next_conn = (r->next_conn + 1) % r->n;
        if (c->state == S_OPEN && c->free && !c->closing)
            conn_after(r, c);
    }
}

/* -R: how long the loop may wait for events before the next request falls due, ms. */
static int wait_ms(const h3run_t *r)
{
    if (!r->interval_ns || r->ramping)
        return 100;
    int64_t ms = (r->next_due - lg_now_ns()) / 1000000;
    return ms < 0 ? 0 : ms < 100 ? (int)ms : 100;
}

/* One round of the loop: events, timers, the ramp and the end of -d. */
static void run_round(h3run_t *r, int64_t t0, int *signals)
{
    int wait = wait_ms(r);
    int n = gio_wait(r->loop, wait);
    if (n == 0 && wait == 0 && r->next_due > lg_now_ns()) { /* due within the millisecond */
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    if (n < 0 && errno != EINTR) {
        set_fatal(r, BENCH_SYSERR, errno);
        return;
    }
    int fd;
    unsigned ev;
    while ((fd = gio_next(r->loop, &ev)) >= 0 && !r->aborting)
        on_event(r, gio_cookie(r->loop, fd));
    while ((fd = gio_next_timeout(r->loop)) >= 0 && !r->aborting)
        on_timeout(r, gio_cookie(r->loop, fd));
    r->now = lg_now_ns();
    if (r->interval_ns)
        issue_due(r);
    while (r->next_slot < r->n && r->shaking < H3B_SHAKING && !r->aborting && !r->stopping)
        conn_start(r, &r->c[r->next_slot++]);
    if (r->ramping)
        ramp_check(r, t0);
    if (lg_signals != *signals) {
        if (*signals || r->stopping)
            r->aborting = 1; /* a second signal: stop waiting for the stragglers */
        *signals = lg_signals;
    }
    if (!r->stopping && !r->ramping &&
        (*signals || (r->stop_at && r->now >= r->stop_at) || (r->limit && r->started >= r->limit
                                                                && !r->cfg->idle))) {
        if (!r->st->win_ns)
            bench_stats_window(r->st, r->now);
        run_stop(r);
    }
}

/*
 * bench --h3: worker `index` of cfg->procs, as bench_run() for HTTP/1.1 and HTTP/2:
 * its share of -c (each an HTTP/3 connection with --streams requests in flight) and
 * of -n, until the count, -d, a stop signal or the hard cap.  Returns BENCH_RUN_*.
 */
int bench_h3(const bench_cfg_t *cfg, unsigned index, bench_stats_t *all)
{
    h3run_t *r = calloc(1, sizeof *r);
    bench_stats_t *st = &all[index];
    if (!r || run_setup(r, cfg, index, all) < 0) {
        if (r)
            run_free(r);
        free(r);
        st->fatal = BENCH_SYSERR;
        st->fatal_errno = ENOMEM;
        st->finished = 1;
        return st->fatal;
    }
    int64_t t0 = r->now = st->start_ns = lg_now_ns();
    int64_t cap_at = t0 + (int64_t)(cfg->hardcap * 1e9);
    int64_t shown = t0;
    int signals = 0;
    while (!r->aborting) {
        run_round(r, t0, &signals);
        if (r->now >= cap_at)
            r->aborting = 1;
        if (r->stopping && !open_now(r))
            break;
        if (cfg->progress && r->now - shown >= 1000000000) {
            shown = r->now;
            lg_progress("bench: %5.1fs  %10llu responses  %8d open", (double)(r->now - t0) / 1e9,
                        (unsigned long long)st->responses, st->open);
        }
    }
    if (cfg->progress)
        lg_progress_clear();
    run_abort(r);
    r->now = st->end_ns = lg_now_ns();
    if (!st->win_ns)
        bench_stats_window(r->st, r->now);
    st->finished = 1;
    run_free(r);
    free(r);
    return st->fatal;
}
#else
typedef int bench_h3_none; /* built without HTTP/3: bench.c refuses --h3 */
#endif
