/*
 * quic — HTTP/3's transport: one UDP socket on the HTTPS port's number, the
 * QUIC connections on it (Debian's libngtcp2 0.12, TLS 1.3 by GnuTLS with
 * the certificates of -C), and their HTTP/3 sessions (h3.c).
 *
 * The socket is one more descriptor on gio's loop (a watch: site/watch.h):
 * readable, it takes up to GIO_UDP_BATCH datagrams a call (gio_udp_recv)
 * and hands each to the connection its Destination Connection ID names (a
 * quic_cid table); an Initial for no connection begins one (unless draining
 * or over -N/-K); a short packet for no connection gets a stateless reset;
 * an unknown version gets version negotiation.  What connections have to
 * send leaves after the batch, in GSO trains where the kernel cuts them
 * (gio_udp_send).  Each connection's next timer (ngtcp2_conn_get_expiry:
 * loss detection, acknowledgements, pacing, the idle timeout -T) is a gio
 * timer of the loop's (gio_timer_set), so the loop wakes for the earliest
 * without a scan; what the timers of a round make the connections send
 * leaves together, at quic_run.  Replies leave from the address the client spoke to
 * (packet info), so a host with several addresses bound to [::] works.
 *
 * Defences: ngtcp2 enforces anti-amplification (at most 3x what an
 * unvalidated address sent), 0-RTT is off (no replay), connections count in
 * -N and -K as TCP ones do, streams and QPACK tables are capped (h3.h).
 * A new connection's address proves itself with a Retry first when the
 * server is busy or one address begins many (quic_retry.h, --h3-retry).
 * Streams the client resets too fast end the connection (h3_client_reset)
 * and are remembered against its address (site/peerlimits.h), as HTTP/2's
 * floods are: its next connections get less, then are refused a while.
 *
 * Without HAVE_H3 (make H3=0, or the libraries missing) every call is a
 * stub: quic_open says HTTP/3 is not built in.
 */
#ifndef GATLING_QUIC_H
#define GATLING_QUIC_H

#include "site/config.h"
#include "site/site.h"

#include <stddef.h>
#include <sys/socket.h>

typedef struct quic_ep quic_ep_t;

#ifdef HAVE_H3
#define H3_BUILT 1
#else
#define H3_BUILT 0
#endif

#ifdef HAVE_H3
/*
 * Before privileges are dropped: the endpoint on udp_fd, a bound UDP socket
 * of the group (quic_steer.h) that it owns from now on (closed on failure
 * too), whose index in the group its connection IDs name (steer < 0: no
 * group), and GnuTLS credentials from the certificate store (p->tls).
 * NULL with why in err.
 */
quic_ep_t *quic_open(const config_t *cfg, const proc_t *p, int udp_fd, int steer, char *err,
                     size_t errlen);

/* On the loop of site: from now on datagrams are served; max_conns is -N's
   cap (shared with TCP through site->nconns).  0, or -1 with errno. */
int quic_start(quic_ep_t *e, site_t *site, size_t max_conns);

/* The certificate files changed (tls_store_check loaded them): load them into
   new credentials; connections keep the ones they began with.  0, or -1 with
   why in err (the old ones stay). */
int quic_reload(quic_ep_t *e, char *err, size_t errlen);

/* Draining: GOAWAY on every connection, no new ones; each closes once its
   streams are answered. */
void quic_drain(quic_ep_t *e);

/* Connections a job or a producer woke, or their timer ran this round
   (after gio_timers_run): send what they have.  Returns 1 if some woke
   again meanwhile (the loop must not sleep). */
int quic_run(quic_ep_t *e);

/* The UDP port (for Alt-Svc). */
int quic_port(const quic_ep_t *e);

void quic_free(quic_ep_t *e);

/* ---- without a socket: the fuzz harness (tests/fuzz/fuzz_quic.c) ---- */

struct gio_dgram;
typedef void (*quic_out_fn)(void *arg, const struct gio_dgram *d);

/*
 * An endpoint as quic_open's, "bound" to addr (datagrams' local address)
 * but with no socket: quic_start puts nothing on the loop, datagrams come
 * in by quic_input, and each datagram (or GSO train: segsize) it sends goes
 * to out(arg, d) instead of a socket.  NULL with why in err.
 */
quic_ep_t *quic_open_loose(const config_t *cfg, const proc_t *p, const struct sockaddr *addr,
                           socklen_t len, quic_out_fn out, void *arg, char *err, size_t errlen);

/* One datagram as if received (d->buf, d->len, d->peer; d->local may be
   zero), then what the connections have to send, and their timers. */
void quic_input(quic_ep_t *e, struct gio_dgram *d);

/* The loop's timers due by its clock (gio_timers_run: the connections'
   among them; the caller refreshed the clock), then what they send. */
void quic_tick(quic_ep_t *e);
#else
static inline quic_ep_t *quic_open(const config_t *cfg, const proc_t *p, int udp_fd, int steer,
                                   char *err, size_t errlen)
{
    (void)cfg, (void)p, (void)udp_fd, (void)steer, (void)err, (void)errlen;
    return NULL;
}
static inline int quic_start(quic_ep_t *e, site_t *site, size_t max_conns)
{
    (void)e, (void)site, (void)max_conns;
    return -1;
}
static inline int quic_reload(quic_ep_t *e, char *err, size_t errlen)
{
    (void)e, (void)err, (void)errlen;
    return 0;
}
static inline void quic_drain(quic_ep_t *e)
{
    (void)e;
}
static inline int quic_run(quic_ep_t *e)
{
    (void)e;
    return 0;
}
static inline int quic_port(const quic_ep_t *e)
{
    (void)e;
    return 0;
}
static inline void quic_free(quic_ep_t *e)
{
    (void)e;
}
#endif

#endif
