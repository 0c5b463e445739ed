/*
 * The connection's opening states (conn.c's driver runs them): PROXY, the
 * header a load balancer sends first (-y), its client counted against -K;
 * and HANDSHAKE, HTTPS's TLS handshake, after a look that it is TLS at all,
 * which starts HTTP/2 when ALPN chose h2.
 */
#include "conn_int.h"
#include "gio_os.h"
#include "proxyproto.h"
#include "site/peerlimits.h"
#include "tls/tls.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

/* early_step: early data is in the block, the client's Finished is not:
   answer it now (0.5-RTT) */
#define EARLY_ANSWER 2

/*
 * The handshake of a session that takes early data: SSL_read_early_data;
 * its first bytes go into a request block, answered at once (HEAD reads
 * the rest through conn_read, conn_read.c's read_early).  1: the handshake
 * is complete (no early data, or refused), EARLY_ANSWER, GIO_AGAIN (*want
 * as gio_tls_handshake's), GIO_ERR.
 */
static int early_step(conn_t *c, unsigned *want)
{
    char buf[4096]; /* a block only once early data came: a handshake holds none */
    long r = gio_tls_read_early(c->ssl, buf, sizeof buf, want);
    conn_early_count(c);
    if (r == 0)
        return gio_tls_handshake(c->ssl, want); /* none, or refused */
    if (r < 0)
        return (int)r;
    if (!c->blk) {
        if (!(c->blk = conn_block_get(c->set)))
            return errno = ENOMEM, GIO_ERR;
        memset(&c->blk->prog, 0, sizeof c->blk->prog);
        conn_new_exchange(c);
        c->inlen = 0;
    }
    memcpy(c->blk->in + c->inlen, buf, (size_t)r); /* TLS_EARLY_MAX < CONN_IN_CAP */
    c->inlen += (uint32_t)r;
    return EARLY_ANSWER;
}

/* HANDSHAKE: first make sure it is TLS at all (a plain-HTTP client on the
   HTTPS port, a scanner: closed at once, counted), then let OpenSSL work. */
void conn_st_handshake(conn_t *c)
{
    status_counters_t *st = &c->site->stats;
    if (!c->ssl) { /* nothing looked at yet: a silent connection costs no SSL object */
        int h = tls_looks_like_hello(c->fd);
        if (h < 0) {
            gio_want(c->site->loop, c->fd, GIO_READ);
            return;
        }
        if (h == 0) {
            st->tls_not_tls++;
            c->state = CONN_CLOSE;
            return;
        }
        if (!tls_store_accepts(c->site->proc->tls)) { /* -C DIR waits for its first */
            st->tls_no_cert++;
            tls_refuse(c->fd);
            c->state = CONN_CLOSE;
            return;
        }
        if (!(c->ssl = tls_new(c->site->proc->tls, c->fd))) {
            site_error(c->site, "SSL_new()", ENOMEM, &c->peer.sa, "a TLS session: client shed");
            c->state = CONN_CLOSE;
            return;
        }
        tls_may_pause(c->ssl);
    }
    unsigned want = GIO_READ;
    int paused = c->tls_want == CONN_TLS_PAUSED;
    int r = tls_early_on(c->ssl) ? early_step(c, &want) : gio_tls_handshake(c->ssl, &want);
    if (r == GIO_AGAIN) {
        c->tls_want = want ? (uint8_t)want : CONN_TLS_PAUSED;
        gio_want(c->site->loop, c->fd, want);
        if (!want) /* --acme-on-demand: paused for a certificate (tls/): looked at again */
            conn_deadline(c, CONN_PAUSE_LOOK_MS);
        else if (paused) /* the rest of the handshake: -s again */
            conn_deadline(c, conn_head_ms(c));
        return;
    }
    c->tls_want = r == EARLY_ANSWER ? (uint8_t)want : 0;
    int acme = tls_acme_state(c->ssl);
    if (r < 0 || acme == TLS_ACME_SERVED) { /* RFC 8737 3: the challenge is the handshake */
        uint64_t *n = acme == TLS_ACME_SERVED    ? &st->acme_alpn
                      : acme == TLS_ACME_REFUSED ? &st->acme_alpn_refused
                      : acme == TLS_ACME_NO_CERT ? &st->tls_no_cert
                                                 : &st->tls_failed;
        (*n)++;
        if (r >= 0)
            tls_close_notify(c->ssl);
        c->state = CONN_CLOSE;
        return;
    }
    if (r == EARLY_ANSWER) /* the handshake completes as the requests are read */
        c->early = 1;
    else
        conn_tls_ready(c);
    if (tls_alpn_h2(c->ssl) && !c->site->cfg->h2_off) {
        conn_start_h2(c);
        return;
    }
    conn_enter(c, CONN_HEAD); /* the request may have come with the handshake's last flight */
}

/*
 * The client the PROXY header named is the connection's peer from here on
 * (h.local: the proxy's own connection keeps its address); it is counted
 * against -K now.  0, or -1 when the connection is to end.
 */
static int proxy_peer(conn_t *c, const proxy_hdr_t *h)
{
    status_counters_t *st = &c->site->stats;
    if (!h->local && h->srclen <= sizeof c->peer)
        memcpy(&c->peer, &h->src, h->srclen);
    int lim = limits_conn_open(c->site->limits, &c->peer.sa, gio_now(c->site->loop));
    if (lim == LIMIT_OFFENDER) { /* as at accept (server.c): closed without a word */
        st->refused_offender++;
        return -1;
    }
    if (lim != LIMIT_OK) {
        if (lim == LIMIT_CONNS)
            st->refused_addr++;
        else
            st->refused_cap++;
        if (c->tls) /* no 503 over HTTPS: see h1_refuse */
            return -1;
        conn_late(c, 503);
        conn_enter(c, CONN_LINGER); /* the request is unread: drain it, so that the 503 stays */
        return 1;
    }
    c->counted = 1;
    if (h->local)
        st->proxy_local++;
    else
        st->proxy_headers++;
    return 0;
}

/*
 * PROXY: peek at what came, and take off the socket only what is certainly
 * header (proxy_parse's promise), into the request block: the request
 * behind the header stays in the socket for HEAD (or, on HTTPS, for
 * OpenSSL), whatever the client's segments.  A malformed header, or one
 * that ends before it is whole, closes the connection, counted; a slow one
 * meets the head deadline (conn_timed_out, conn_deadline.c).
 */
void conn_st_proxy(conn_t *c)
{
    status_counters_t *st = &c->site->stats;
    if (!c->blk) {
        if (!(c->blk = conn_block_get(c->set))) {
            site_error(c->site, "malloc()", ENOMEM, &c->peer.sa, "a request block: client shed");
            c->state = CONN_CLOSE;
            return;
        }
        conn_new_exchange(c); /* an empty one: conn_free ends whatever a block holds */
    }
    _Static_assert(PROXY_MAX <= CONN_IN_CAP, "the request block holds a PROXY header");
    char *buf = c->blk->in;
    ssize_t r = recv(c->fd, buf + c->inlen, PROXY_MAX - c->inlen, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        gio_want(c->site->loop, c->fd, GIO_READ);
        return;
    }
    proxy_hdr_t h;
    long n = r > 0 ? proxy_parse(buf, c->inlen + (size_t)r, &h) : PROXY_MALFORMED;
    /* what to take: all that was peeked while incomplete, else the header's rest */
    size_t take = n == PROXY_INCOMPLETE ? (size_t)r : n > 0 ? (size_t)n - c->inlen : 0;
    if (n == PROXY_MALFORMED || recv(c->fd, buf + c->inlen, take, MSG_DONTWAIT) != (ssize_t)take) {
        if (r > 0 || c->inlen) /* malformed, or cut short by the client's close; a */
            st->proxy_malformed++; /* connection closed before its first byte is not counted */
        c->state = CONN_CLOSE;
        return;
    }
    c->inlen += (uint32_t)take;
    if (n == PROXY_INCOMPLETE) {
        gio_want(c->site->loop, c->fd, GIO_READ);
        return;
    }
    conn_block_put(c->set, c->blk); /* HEAD takes a fresh one, its parse state new */
    c->blk = NULL;
    c->inlen = 0;
    int p = proxy_peer(c, &h);
    if (p)
        c->state = p < 0 ? CONN_CLOSE : c->state;
    else if (c->tls) /* the -s that runs from the accept goes on */
        c->state = CONN_HANDSHAKE;
    else {
        gio_recv_mode(c->site->loop, c->fd);
        c->state = CONN_HEAD; /* the request may have come with the header */
    }
}
