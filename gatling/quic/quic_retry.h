/*
 * quic_retry — address validation for QUIC's Initials (RFC 9000 8.1): who
 * gets a Retry before the server keeps any state for a connection.
 *
 * A UDP source address costs a spoofer nothing, and an Initial makes the
 * server hold a connection (~150 KiB) and run a TLS handshake.  A Retry
 * packet is stateless: it carries a token (ngtcp2_crypto_generate_retry_
 * token: AEAD under a per-process secret from getrandom, bound to the
 * client's address and port, the Destination Connection ID it first chose
 * and the time), and only a client that receives it at that address can
 * send it back.  An Initial with a valid token is address-validated: the
 * connection begins with no anti-amplification limit, and ngtcp2 is told
 * the original and the Retry connection IDs (RFC 9000 7.3).
 *
 * When (--h3-retry): CONFIG_RETRY_ALWAYS every new connection; _NEVER
 * none; _BUSY (the default) when the caller says handshakes are many, or
 * when one address (IPv4, or IPv6 /64) began more than QUIC_RETRY_PER_ADDR
 * connections without a token within a second, counted in a small table
 * of slots under a keyed SipHash (a collision only costs a client one
 * round trip more, never a refusal).
 *
 * A token is good for QUIC_RETRY_TOKEN_S seconds.  An Initial whose Retry
 * token does not verify (forged, old, from another address) is answered
 * with CONNECTION_CLOSE INVALID_TOKEN (RFC 9000 8.1.3) and no state.
 *
 * A connection whose handshake completed is given a NEW_TOKEN token
 * (quic_retry_new_token: bound to the client's IP address, not its port,
 * good for QUIC_NEW_TOKEN_S): its client's next connection from that
 * address begins validated with no Retry, whatever the mode.  One that
 * does not verify, or a token of another kind, counts as none (RFC 9000
 * 8.1.3: it may be another server's).
 *
 * Pure of I/O: the caller sends what it is given to send.  Built with HAVE_H3.
 */
#ifndef GATLING_QUIC_RETRY_H
#define GATLING_QUIC_RETRY_H

#ifdef HAVE_H3
#include <ngtcp2/ngtcp2.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define QUIC_RETRY_PER_ADDR 8  /* new connections a second from one address before Retry */
#define QUIC_RETRY_SLOTS 1024  /* addresses counted at once (a slot each, shared on collision) */
#define QUIC_RETRY_TOKEN_S 10  /* a Retry token's lifetime */
#define QUIC_RETRY_OUT_MAX 1500 /* room for a Retry or a CONNECTION_CLOSE we send */
#define QUIC_NEW_TOKEN_S 3600  /* a NEW_TOKEN token's lifetime */
#define QUIC_NEW_TOKEN_MAX 64  /* room for one (NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN) */

typedef struct quic_retry quic_retry_t;

/* Verdicts of quic_retry_check. */
enum {
    QUIC_ADMIT_NEW = 0, /* no token: begin a connection, the address unvalidated */
    QUIC_ADMIT_VALID,   /* a valid Retry token: begin it validated (odcid filled) */
    QUIC_ADMIT_TOKEN,   /* a valid NEW_TOKEN token: begin it validated (no Retry) */
    QUIC_ADMIT_RETRY,   /* send out[0..*outlen): a Retry; keep nothing */
    QUIC_ADMIT_BAD,     /* a bad Retry token: send out[0..*outlen) (INVALID_TOKEN) */
    QUIC_ADMIT_DROP,    /* nothing to do (a packet could not be written) */
};

/* A checker for mode (CONFIG_RETRY_*), its secret and hash key from
   getrandom.  NULL on ENOMEM or if getrandom failed. */
quic_retry_t *quic_retry_new(int mode);

void quic_retry_free(quic_retry_t *r);

/* What an Initial's peer and version were, and when (the caller's clocks). */
typedef struct quic_initial {
    const ngtcp2_pkt_hd *hd; /* ngtcp2_accept's header of the Initial */
    const struct sockaddr *peer;
    socklen_t peerlen;
    ngtcp2_tstamp ts; /* ngtcp2's clock (ns) */
    int64_t now_ms;   /* gio_now */
    int busy;         /* handshakes under way are many */
    int steer;        /* the socket a Retry's connection ID names (quic_steer_mark), or -1 */
} quic_initial_t;

/*
 * The verdict (QUIC_ADMIT_*) on an Initial that no connection owns.  For
 * QUIC_ADMIT_VALID, *odcid is the Destination Connection ID of the client's
 * first Initial (the one the Retry answered).  For _RETRY and _BAD, out
 * (QUIC_RETRY_OUT_MAX bytes) holds *outlen bytes to send back to the peer.
 */
int quic_retry_check(quic_retry_t *r, const quic_initial_t *in, ngtcp2_cid *odcid, uint8_t *out,
                     size_t *outlen);

/* A NEW_TOKEN token for the client at peer (now ts) into out (QUIC_NEW_TOKEN_MAX
   bytes): its length, or 0. */
size_t quic_retry_new_token(quic_retry_t *r, const struct sockaddr *peer, socklen_t peerlen,
                            ngtcp2_tstamp ts, uint8_t *out);

#endif
#endif
