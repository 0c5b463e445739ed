/*
 * quic.c — the QUIC endpoint and its connections (see quic.h): datagrams in,
 * connections begun and closed, their timers.  What goes out, the send queue
 * of trains, is quic_send.c's; ngtcp2's callbacks are quic_callbacks.c's
 * (quic_int.h).
 */
#ifdef HAVE_H3
#include "quic.h"
#include "quic_int.h"
#include "gio_udp.h"
#include "h3/h3.h"
#include "quic_cid.h"
#include "quic_cred.h"
#include "quic_mem.h"
#include "quic_retry.h"
#include "quic_steer.h"
#include "site/peerlimits.h"
#include "site/watch.h"
#include "tls/tls.h"

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
#include <arpa/inet.h>
#include <sys/random.h>
#include <unistd.h>

#define QUIC_SCID_LEN 18          /* the connection IDs we issue */
#define QUIC_RX_ROUNDS 4          /* receive batches per readiness event */
#define QUIC_DRAIN_SILENCE_MS 2000 /* shutting down: a peer silent this long (or 3 PTO) is gone */
#define QUIC_DRAIN_WAIT_MAX_MS 5000 /* ... and 3 PTO counts for this much at most */
#define QUIC_DRAIN_CLOSING_MS 1000 /* a draining period (the peer closed), or any closing one
                                     while shutting down, lasts this much at most */
#define QUIC_HANDSHAKES_MAX 1024  /* ... and at most this many at once (each holds ~150 KiB
                                     of state), more are dropped; past half of it new
                                     clients prove their address first (Retry) */
#define QUIC_PRIORITY "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:" \
                      "+CHACHA20-POLY1305:+AES-128-CCM:%DISABLE_TLS13_COMPAT_MODE"

/* ---- the connections' timers: the loop's (gio_timer_set) ------------------------ */

static void on_conn_timer(gio_loop_t *l, void *arg);

/* c's next timer at due (gio_now() ms); quic_start reserved room for one per
   connection, so it cannot fail. */
static void timer_set(quic_conn_t *c, int64_t due)
{
    gio_timer_set(c->ep->site->loop, &c->timer, due, on_conn_timer, c);
}

static void timer_stop(quic_conn_t *c)
{
    gio_timer_stop(c->ep->site->loop, &c->timer);
}

/* ---- connection life -------------------------------------------------------------- */

static void cid_forget(quic_conn_t *c)
{
    quic_ep_t *e = c->ep;
    size_t n = ngtcp2_conn_get_num_scid(c->q);
    ngtcp2_cid *ids = n ? calloc(n, sizeof *ids) : NULL;
    if (ids) {
        n = ngtcp2_conn_get_scid(c->q, ids);
        for (size_t i = 0; i < n; i++)
            if (quic_cid_get(e->cids, ids[i].data, ids[i].datalen) == c)
                quic_cid_del(e->cids, ids[i].data, ids[i].datalen);
        free(ids);
    }
    if (quic_cid_get(e->cids, c->odcid.data, c->odcid.datalen) == c)
        quic_cid_del(e->cids, c->odcid.data, c->odcid.datalen);
}

static void conn_free(quic_conn_t *c)
{
    quic_ep_t *e = c->ep;
    timer_stop(c);
    if (c->next)
        c->next->prevp = c->prevp;
    *c->prevp = c->next;
    for (quic_conn_t **p = &e->woken; *p; p = &(*p)->wnext)
        if (*p == c) {
            *p = c->wnext;
            break;
        }
    for (quic_conn_t **p = &e->touched; *p; p = &(*p)->tnext)
        if (*p == c) {
            *p = c->tnext;
            break;
        }
    h3_free(c->h3);
    if (c->q) {
        cid_forget(c);
        ngtcp2_conn_del(c->q);
    }
    if (c->tls)
        gnutls_deinit(c->tls);
    quic_cred_release(c->cred);
    if (c->limited)
        limits_conn_close(e->site->limits, (struct sockaddr *)&c->peer);
    e->handshaking -= c->shaking;
    free(c->closebuf);
    free(c);
    e->nconns--;
    e->site->nconns--;
}

/* The connection ends without a word (idle timeout, draining over, dropped). */
static void conn_close_now(quic_conn_t *c)
{
    conn_free(c);
}

/* The closing (or draining) period: 3 PTO (RFC 9000 10.2), 1 s at most for a draining
   one (the peer closed: the period only swallows its stray packets, and a connection
   held for a loaded machine's stretched PTO is one the status page and a drain count as
   open for seconds after its client said goodbye), and once the process shuts down 1 s
   at most, none for a draining one.  The period only repeats
   CONNECTION_CLOSE to a peer whose packets still come (or swallows them); the PTO comes
   from the RTT measured, which a loaded machine stretches to seconds, and a drain that
   waited it out would hold the exit (or an upgrade's old process) that long for
   connections that have nothing left to serve.  A peer whose CONNECTION_CLOSE was lost
   hears a stateless reset or nothing, and its idle timer ends it: RFC 9000 10.2 asks for
   the 3 PTO with a SHOULD, for this trade. */
static int64_t closing_period_ms(const quic_conn_t *c)
{
    int64_t ms = 3 * (int64_t)(ngtcp2_conn_get_pto(c->q) / NGTCP2_MILLISECONDS) + 1;
    if (c->ep->draining && c->draining) /* the peer closed: nothing is sent, nothing lost */
        return 0;
    if (!c->ep->draining && !c->draining)
        return ms;
    return ms > QUIC_DRAIN_CLOSING_MS ? QUIC_DRAIN_CLOSING_MS : ms;
}

/* CONNECTION_CLOSE with c->err, kept and repeated for a closing period
   (closing_period_ms), then the connection goes. */
static void start_closing(quic_conn_t *c)
{
    quic_ep_t *e = c->ep;
    if (c->closing || c->draining)
        return;
    if (ngtcp2_conn_is_in_closing_period(c->q) || ngtcp2_conn_is_in_draining_period(c->q)) {
        c->draining = 1;
    } else if ((c->closebuf = malloc(QUIC_PKT_MAX))) {
        ngtcp2_path_storage ps;
        ngtcp2_path_storage_zero(&ps);
        ngtcp2_pkt_info pi = {0};
        ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->q, &ps.path, &pi, c->closebuf,
                                                            QUIC_PKT_MAX, &c->err, now_ts(e));
        if (n > 0) {
            c->closelen = (size_t)n;
            quic_send_packet(e, &ps.path, c->closebuf, c->closelen);
        }
    }
    c->closing = 1;
    /* its streams end now, not with the period: their producers, files and
       CGI slots (-J) go back at once, as when a TCP connection closes */
    h3_free(c->h3);
    c->h3 = NULL;
    int app = c->err.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION;
    if (c->err.error_code != (app ? NGHTTP3_H3_NO_ERROR : NGTCP2_NO_ERROR))
        e->site->stats.h3_failed++;
    timer_set(c, gio_now(e->site->loop) + closing_period_ms(c));
}

/* Shutting down: when the peer counts as gone (gio_now() ms), or INT64_MAX while the
   server serves.  A peer that vanished (killed, out of coverage) never acknowledges
   its last packets, so its streams never close and the drain would wait out the idle
   timeout (-T): as TCP's drain gives an idle connection a second, a connection that
   has heard nothing for QUIC_DRAIN_SILENCE_MS, or 3 PTO if longer (up to
   QUIC_DRAIN_WAIT_MAX_MS: a PTO stretched by a loaded CPU must not hold the exit), ends. */
static int64_t drain_silence_end(const quic_conn_t *c)
{
    if (!c->ep->draining)
        return INT64_MAX;
    int64_t pto3_ms = 3 * (int64_t)(ngtcp2_conn_get_pto(c->q) / NGTCP2_MILLISECONDS);
    pto3_ms = pto3_ms > QUIC_DRAIN_WAIT_MAX_MS ? QUIC_DRAIN_WAIT_MAX_MS : pto3_ms;
    return c->heard + (pto3_ms > QUIC_DRAIN_SILENCE_MS ? pto3_ms : QUIC_DRAIN_SILENCE_MS);
}

/* The handshake is done: the TLS session (about 20 KiB) goes.  ngtcp2 keeps the
   1-RTT keys and derives the next ones itself (key update), and keeps a copy of
   the CRYPTO data it may have to send again; a client has nothing more to say in
   TLS (RFC 9001 4.1.3: no KeyUpdate message, and no ticket of ours to answer), so
   CRYPTO data that still comes ends the connection (on_crypto_data). */
static void tls_release(quic_conn_t *c)
{
    ngtcp2_conn_set_tls_native_handle(c->q, NULL);
    gnutls_deinit(c->tls);
    c->tls = NULL;
    quic_cred_release(c->cred); /* a reload's new certificates no longer wait for it */
    c->cred = NULL;
}

/* After a read or write: the next timer, or the end of a finished connection. */
static void conn_settle(quic_conn_t *c)
{
    quic_ep_t *e = c->ep;
    if (c->closing || c->draining)
        return;
    if (c->tls && ngtcp2_conn_get_handshake_completed(c->q))
        tls_release(c);
    if (c->h3)
        h3_sweep(c->h3);
    int64_t now_ms = gio_now(e->site->loop), gone = drain_silence_end(c);
    int64_t head = c->h3 ? h3_head_due(c->h3) : INT64_MAX;
    int64_t shut = c->h3 ? h3_shut_due(c->h3) : INT64_MAX;
    if (head <= now_ms) /* -s: a request head not complete in time (slowloris), as h2's */
        e->site->stats.timeout_head++;
    if ((c->h3 && h3_done(c->h3)) || gone <= now_ms || head <= now_ms) {
        /* drained (GOAWAY went, every stream answered), the peer is gone, or too slow */
        ngtcp2_connection_close_error_set_application_error(&c->err, NGHTTP3_H3_NO_ERROR,
                                                            NULL, 0);
        start_closing(c);
        return;
    }
    gone = head < gone ? head : gone;
    gone = shut < gone ? shut : gone; /* the GOAWAY's second step (h3.h's h3_goaway) */
    ngtcp2_tstamp x = ngtcp2_conn_get_expiry(c->q);
    if (x == UINT64_MAX && gone == INT64_MAX) {
        timer_stop(c);
        return;
    }
    ngtcp2_tstamp now = now_ts(e);
    int64_t due = x == UINT64_MAX ? INT64_MAX
                  : x <= now      ? now_ms
                                  : now_ms + (int64_t)((x - now + NGTCP2_MILLISECONDS - 1) /
                                                       NGTCP2_MILLISECONDS);
    timer_set(c, due < gone ? due : gone);
}

/* Run the connection soon (a job or producer moved one of its streams). */
static void conn_wake(void *arg)
{
    quic_conn_t *c = arg;
    if (!c->woken) {
        c->woken = 1;
        c->wnext = c->ep->woken;
        c->ep->woken = c;
    }
}

/* ---- accepting -------------------------------------------------------------------- */

/* Count the connection in -N and -K, as an accepted TCP one.  0, or -1. */
static int admit(quic_ep_t *e, const gio_dgram_t *d)
{
    site_t *site = e->site;
    if (e->draining || site->nconns >= e->max_conns || !e->cred || !e->cred->n ||
        e->handshaking >= QUIC_HANDSHAKES_MAX) {
        site->stats.h3_refused++;
        return -1;
    }
    int lim = limits_conn_open(site->limits, (const struct sockaddr *)&d->peer,
                               gio_now(site->loop));
    if (lim != LIMIT_OK) { /* as at accept: over -K, or an address whose floods are remembered */
        site->stats.h3_refused++;
        if (lim == LIMIT_OFFENDER)
            site->stats.refused_offender++;
        else if (lim == LIMIT_CONNS)
            site->stats.refused_addr++;
        else
            site->stats.refused_cap++;
        return -1;
    }
    return 0;
}

static quic_conn_t *conn_new(quic_ep_t *e, gio_dgram_t *d, const ngtcp2_pkt_hd *hd, int v,
                             const ngtcp2_cid *odcid)
{
    if (admit(e, d) < 0)
        return NULL;
    quic_conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        limits_conn_close(e->site->limits, (const struct sockaddr *)&d->peer);
        return NULL;
    }
    c->ep = e, c->limited = 1, c->shaking = 1;
    e->handshaking++;
    c->next = e->all;
    if (e->all)
        e->all->prevp = &c->next;
    c->prevp = &e->all;
    e->all = c;
    memcpy(&c->peer, &d->peer, d->peerlen);
    c->peerlen = d->peerlen;
    c->odcid = hd->dcid;
    ngtcp2_connection_close_error_default(&c->err);
    e->nconns++, e->site->nconns++;
    e->site->stats.h3_conns++;
    c->f = (codec_conn_t){.site = e->site, .peer = (struct sockaddr *)&c->peer,
                          .local_port = (uint16_t)e->port, .secure = 1, .conn = c,
                          .wake = conn_wake};
    ngtcp2_cid scid = {.datalen = QUIC_SCID_LEN};
    ngtcp2_settings st;
    ngtcp2_transport_params tp;
    ngtcp2_path path;
    quic_path_of(e, d, &path);
    quic_params(e, &st, &tp, hd, v, odcid);
    /* fewer streams at once for an address whose floods are remembered (h3_max_streams) */
    tp.initial_max_streams_bidi = peer_budget(
        H3_MAX_STREAMS, peer_allowance(e->site->limits, c->f.peer, gio_now(e->site->loop)));
    int rnd = gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen);
    quic_steer_mark(scid.data, scid.datalen, e->steer); /* names our socket (quic_steer.h) */
    if (rnd < 0 ||
        ngtcp2_crypto_generate_stateless_reset_token(tp.stateless_reset_token, e->secret,
                                                     sizeof e->secret, &scid) != 0 ||
        ngtcp2_conn_server_new(&c->q, &hd->scid, &scid, &path, hd->version, &quic_callbacks, &st,
                               &tp, quic_mem_ngtcp2(), c) != 0) {
        c->q = NULL;
        conn_free(c);
        return NULL;
    }
    if (quic_tls_setup(c) < 0 || !(c->h3 = h3_new(&c->f, c->q, e->pool, quic_mem_nghttp3())) ||
        quic_cid_put(e->cids, scid.data, scid.datalen, c) < 0 ||
        quic_cid_put(e->cids, hd->dcid.data, hd->dcid.datalen, c) < 0) {
        conn_free(c);
        return NULL;
    }
    return c;
}

/* An Initial for no connection: a Retry first if the address must prove itself
   (quic_retry.h), else a connection, validated if its token was a good one. */
static quic_conn_t *accept_initial(quic_ep_t *e, gio_dgram_t *d, const ngtcp2_pkt_hd *hd)
{
    if (e->draining) /* conn_new refuses it, counted */
        return conn_new(e, d, hd, QUIC_ADMIT_NEW, NULL);
    quic_initial_t in = {.hd = hd, .peer = (const struct sockaddr *)&d->peer,
                         .peerlen = d->peerlen, .ts = now_ts(e), .now_ms = gio_now(e->site->loop),
                         .busy = e->handshaking >= QUIC_HANDSHAKES_MAX / 2, .steer = e->steer};
    ngtcp2_cid odcid;
    size_t n;
    uint8_t *out = e->tx;
    int v = quic_retry_check(e->retry, &in, &odcid, out, &n);
    if (v == QUIC_ADMIT_RETRY || v == QUIC_ADMIT_BAD) {
        quic_send_to(e, d, out, n);
        if (v == QUIC_ADMIT_RETRY)
            e->site->stats.h3_retries++;
        else
            e->site->stats.h3_bad_tokens++;
    }
    if (v == QUIC_ADMIT_NEW || v == QUIC_ADMIT_VALID || v == QUIC_ADMIT_TOKEN)
        return conn_new(e, d, hd, v, &odcid);
    return NULL;
}

/* ---- receiving -------------------------------------------------------------------- */

/* A short packet for no connection of ours: a stateless reset (RFC 9000
   10.3), smaller than what came so that two servers cannot loop. */
static void stateless_reset(quic_ep_t *e, const gio_dgram_t *d, const ngtcp2_version_cid *vc)
{
    uint8_t buf[64], token[NGTCP2_STATELESS_RESET_TOKENLEN], rnd[64];
    size_t len = d->len - 1 < sizeof buf ? d->len - 1 : sizeof buf;
    ngtcp2_cid cid;
    if (vc->dcidlen != QUIC_SCID_LEN || len < 1 + NGTCP2_STATELESS_RESET_TOKENLEN +
                                                  NGTCP2_MIN_STATELESS_RESET_RANDLEN) {
        e->site->stats.h3_dropped++;
        return;
    }
    ngtcp2_cid_init(&cid, vc->dcid, vc->dcidlen);
    size_t rlen = len - 1 - NGTCP2_STATELESS_RESET_TOKENLEN;
    if (ngtcp2_crypto_generate_stateless_reset_token(token, e->secret, sizeof e->secret, &cid) ||
        gnutls_rnd(GNUTLS_RND_NONCE, rnd, rlen) < 0)
        return;
    ngtcp2_ssize n = ngtcp2_pkt_write_stateless_reset(buf, len, token, rnd, rlen);
    if (n > 0) {
        quic_send_to(e, d, buf, (size_t)n);
        e->site->stats.h3_resets++;
    }
}

static void version_negotiation(quic_ep_t *e, const gio_dgram_t *d, const ngtcp2_version_cid *vc)
{
    uint8_t buf[256], unused;
    uint32_t sv[] = {NGTCP2_PROTO_VER_V1};
    if (d->len < 1200) /* only to a datagram of an Initial's size (RFC 9000 6, 14.1) */
        return;
    gnutls_rnd(GNUTLS_RND_NONCE, &unused, 1);
    ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(buf, sizeof buf, unused, vc->scid,
                                                          vc->scidlen, vc->dcid, vc->dcidlen, sv,
                                                          1);
    if (n > 0) {
        quic_send_to(e, d, buf, (size_t)n);
        e->site->stats.h3_version_neg++;
    }
}

static void touch(quic_conn_t *c)
{
    if (!c->touched) {
        c->touched = 1;
        c->tnext = c->ep->touched;
        c->ep->touched = c;
    }
}

/* ngtcp2 refused a packet: the connection closes, quietly or with a word. */
static void read_failed(quic_conn_t *c, int rv)
{
    if (rv == NGTCP2_ERR_DRAINING) {
        start_closing(c); /* the peer closed: silence for the period */
    } else if (rv == NGTCP2_ERR_DROP_CONN || rv == NGTCP2_ERR_RETRY) {
        c->ep->site->stats.h3_failed++;
        conn_close_now(c);
    } else {
        if (!c->err.error_code && rv == NGTCP2_ERR_CRYPTO)
            ngtcp2_connection_close_error_set_transport_error_tls_alert(
                &c->err, ngtcp2_conn_get_tls_alert(c->q), NULL, 0);
        else if (!c->err.error_code)
            ngtcp2_connection_close_error_set_transport_error_liberr(&c->err, rv, NULL, 0);
        start_closing(c);
    }
}

static void datagram(quic_ep_t *e, gio_dgram_t *d)
{
    ngtcp2_version_cid vc;
    const uint8_t *p = d->buf;
    /* an empty datagram is legal UDP, and Debian's libngtcp2 asserts on one (abort) */
    int rv = d->truncated || !d->len ? -1
                                     : ngtcp2_pkt_decode_version_cid(&vc, p, d->len,
                                                                     QUIC_SCID_LEN);
    if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
        version_negotiation(e, d, &vc);
        return;
    }
    if (rv != 0) {
        e->site->stats.h3_dropped++;
        return;
    }
    ngtcp2_path path;
    quic_path_of(e, d, &path);
    quic_conn_t *c = quic_cid_get(e->cids, vc.dcid, vc.dcidlen);
    if (!c) {
        ngtcp2_pkt_hd hd;
        if (!(p[0] & 0x80))
            stateless_reset(e, d, &vc);
        else if (ngtcp2_accept(&hd, p, d->len) != 0)
            e->site->stats.h3_dropped++;
        else
            c = accept_initial(e, d, &hd); /* NULL: refused, retried (counted), or ENOMEM */
        if (!c)
            return;
    }
    if (c->closing || c->draining) {
        /* the CONNECTION_CLOSE again, but only to a datagram from the peer itself and
           ever more rarely (the 1st, 2nd, 4th, 8th...: RFC 9000 10.2.1): anyone who
           names the connection's ID could otherwise have it sent to the peer, 60
           bytes for every 19, without end, the address never validated (a
           reflector: test_h3's test_closing_connection_is_no_reflector) */
        const ngtcp2_path *cp = ngtcp2_conn_get_path(c->q);
        c->closing_rx++;
        if (c->closelen && !(c->closing_rx & (c->closing_rx - 1)) &&
            cp->remote.addrlen == d->peerlen && !memcmp(cp->remote.addr, &d->peer, d->peerlen))
            quic_send_packet(e, cp, c->closebuf, c->closelen);
        return;
    }
    ngtcp2_pkt_info pi = {.ecn = d->ecn};
    rv = ngtcp2_conn_read_pkt(c->q, &path, &pi, p, d->len, now_ts(e));
    if (rv != 0) {
        read_failed(c, rv);
    } else {
        c->heard = gio_now(e->site->loop);
        touch(c);
    }
}

/* What the batch's connections have to send, and their timers. */
static void flush_touched(quic_ep_t *e)
{
    while (e->touched) {
        quic_conn_t *c = e->touched;
        e->touched = c->tnext;
        c->touched = 0;
        if (quic_conn_write(c) < 0)
            start_closing(c);
        conn_settle(c);
    }
    if (e->ntxq) /* the batch's trains, all connections' together */
        quic_txq_flush(e);
}

static void on_readable(quic_ep_t *e)
{
    for (int round = 0; round < QUIC_RX_ROUNDS; round++) {
        for (unsigned i = 0; i < GIO_UDP_BATCH; i++) {
            memset(&e->dg[i], 0, sizeof e->dg[i]);
            e->dg[i].buf = e->rx[i];
            e->dg[i].cap = sizeof e->rx[i];
        }
        long n = gio_udp_recv(e->fd, e->dg, GIO_UDP_BATCH);
        if (n <= 0)
            break;
        for (long i = 0; i < n; i++)
            datagram(e, &e->dg[i]);
        flush_touched(e);
        if (n < GIO_UDP_BATCH)
            break;
    }
}

/* c's timer is due (the loop's gio_timers_run): ngtcp2's expiry (loss
   detection, acknowledgements, pacing, the idle timeout), or the end of its
   closing period.  What it has to send leaves with the other connections' of
   the round, at quic_run (or quic_tick). */
static void on_conn_timer(gio_loop_t *l, void *arg)
{
    quic_conn_t *c = arg;
    quic_ep_t *e = c->ep;
    (void)l;
    if (c->closing || c->draining) {
        conn_close_now(c);
        return;
    }
    if (c->h3 && h3_shut_due(c->h3) <= gio_now(e->site->loop))
        h3_shut(c->h3); /* written by the pass touch() brings */
    int rv = ngtcp2_conn_handle_expiry(c->q, now_ts(e));
    if (rv == NGTCP2_ERR_IDLE_CLOSE) {
        e->site->stats.h3_idle++;
        conn_close_now(c);
        return;
    }
    if (rv != 0) {
        ngtcp2_connection_close_error_set_transport_error_liberr(&c->err, rv, NULL, 0);
        start_closing(c);
        return;
    }
    touch(c);
}

static void on_event(watch_t *w, unsigned events)
{
    quic_ep_t *e = (quic_ep_t *)w;
    if (events) /* an error too: recvmmsg takes it (ICMP), and the socket goes on */
        on_readable(e);
}

/* ---- the endpoint ----------------------------------------------------------------- */

/* What every endpoint has, socket or not: TLS priorities, the stateless reset
   secret, the connection ID table, credentials from -C.  0, or -1 with err. */
static int ep_setup(quic_ep_t *e, char *err, size_t errlen)
{
    if (gnutls_priority_init(&e->prio, QUIC_PRIORITY, NULL) < 0 ||
        getrandom(e->secret, sizeof e->secret, 0) != (ssize_t)sizeof e->secret ||
        !(e->cids = quic_cid_table_new()) || !(e->retry = quic_retry_new(e->cfg->h3_retry)) ||
        !(e->pool = h3_pool_new()) || quic_early_setup(e) < 0) {
        snprintf(err, errlen, "GnuTLS or memory: cannot set up");
        return -1;
    }
    if (e->proc->tls && tls_store_count(e->proc->tls) > 0 &&
        !(e->cred = quic_cred_load(e->proc->tls, err, errlen)))
        return -1;
    return 0;
}

quic_ep_t *quic_open(const config_t *cfg, const proc_t *p, int udp_fd, int steer, char *err,
                     size_t errlen)
{
    quic_ep_t *e = calloc(1, sizeof *e);
    if (!e) {
        close(udp_fd);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->fd = udp_fd;
    e->steer = steer;
    e->cfg = cfg, e->proc = p;
    e->boundlen = sizeof e->bound;
    if (getsockname(udp_fd, (struct sockaddr *)&e->bound, &e->boundlen) < 0) {
        snprintf(err, errlen, "UDP socket: %s", strerror(errno));
        quic_free(e);
        return NULL;
    }
    e->port = ntohs(((struct sockaddr_in *)&e->bound)->sin_port); /* same offset for v6 */
    e->gso = gio_udp_gso_probe(e->fd);
    if (ep_setup(e, err, errlen) < 0) {
        quic_free(e);
        return NULL;
    }
    return e;
}

quic_ep_t *quic_open_loose(const config_t *cfg, const proc_t *p, const struct sockaddr *bound,
                           socklen_t len, quic_out_fn out, void *arg, char *err,
                           size_t errlen)
{
    quic_ep_t *e = calloc(1, sizeof *e);
    if (!e || len > sizeof e->bound) {
        free(e);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->fd = -1;
    e->steer = -1; /* no group: the IDs name no socket */
    e->cfg = cfg, e->proc = p;
    memcpy(&e->bound, bound, len);
    e->boundlen = len;
    e->port = ntohs(((const struct sockaddr_in *)bound)->sin_port); /* same offset for v6 */
    e->out = out, e->out_arg = arg;
    if (ep_setup(e, err, errlen) < 0) {
        quic_free(e);
        return NULL;
    }
    return e;
}

void quic_input(quic_ep_t *e, gio_dgram_t *d)
{
    datagram(e, d);
    flush_touched(e);
}

void quic_tick(quic_ep_t *e)
{
    gio_timers_run(e->site->loop);
    flush_touched(e);
}

int quic_start(quic_ep_t *e, site_t *site, size_t max_conns)
{
    e->site = site;
    e->max_conns = max_conns;
    if (gio_timer_reserve(site->loop, max_conns + 1) < 0) /* a timer per connection */
        return -1;
    watch_init(&e->w, on_event);
    if (e->fd < 0) /* quic_open_loose: datagrams come by quic_input */
        return 0;
    if (gio_add(site->loop, e->fd, &e->w) < 0)
        return -1;
    gio_want(site->loop, e->fd, GIO_READ);
    return 0;
}

int quic_reload(quic_ep_t *e, char *err, size_t errlen)
{
    quic_cred_t *c = quic_cred_load(e->proc->tls, err, errlen);
    if (!c)
        return -1;
    quic_cred_release(e->cred);
    e->cred = c;
    return 0;
}

void quic_drain(quic_ep_t *e)
{
    if (e->draining)
        return;
    e->draining = 1;
    int64_t now_ms = gio_now(e->site->loop);
    for (quic_conn_t *c = e->all; c; c = c->next) {
        if (!c->closing && !c->draining) {
            if (c->h3)
                h3_goaway(c->h3);
            touch(c); /* settles under the drain's silence rule too */
        } else { /* a period begun before: shortened to the drain's */
            int64_t end = now_ms + closing_period_ms(c);
            if (c->timer.when > end)
                timer_set(c, end);
        }
    }
    flush_touched(e);
}

int quic_run(quic_ep_t *e)
{
    if (!e->woken && !e->touched) /* touched: by their timers this round */
        return 0;
    quic_conn_t *list = e->woken;
    e->woken = NULL;
    while (list) {
        quic_conn_t *c = list;
        list = c->wnext;
        c->woken = 0;
        touch(c);
    }
    flush_touched(e);
    return e->woken != NULL;
}

int quic_port(const quic_ep_t *e)
{
    return e->port;
}

void quic_free(quic_ep_t *e)
{
    if (!e)
        return;
    while (e->all)
        conn_free(e->all);
    if (e->fd >= 0) {
        if (e->site)
            gio_del(e->site->loop, e->fd);
        close(e->fd);
    }
    quic_cred_release(e->cred);
    if (e->prio)
        gnutls_priority_deinit(e->prio);
    if (e->replay)
        gnutls_anti_replay_deinit(e->replay);
    quic_cid_table_free(e->cids);
    quic_retry_free(e->retry);
    h3_pool_free(e->pool);
    explicit_bzero(e->secret, sizeof e->secret);
    free(e);
}
#endif
