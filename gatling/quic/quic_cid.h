/*
 * quic_cid — QUIC connection IDs to connections (quic.c's table).
 *
 * Every datagram names the connection it is for by a connection ID (RFC 9000
 * 5.1): one the server issued (random, up to 20 bytes, several per
 * connection as the client rotates them), or, before the handshake has
 * given the client one, the Destination Connection ID the client made up
 * for its Initial.  That second kind is chosen by whoever sends, so the
 * table hashes with SipHash-2-4 under a key drawn at creation: colliding
 * IDs cannot be computed from outside, and no chain of probes grows with an
 * attacker's choice.
 *
 * Open addressing with linear probing, at most half full (it doubles as it
 * fills), removal by backward shift (no tombstones).  An entry costs 40
 * bytes.  No I/O, no globals; the owner's pointer is opaque.  A connection that
 * ends removes its own IDs (ngtcp2_conn_get_scid lists them): the table
 * keeps no list per owner and is never scanned.
 */
#ifndef GATLING_QUIC_CID_H
#define GATLING_QUIC_CID_H

#include <stddef.h>
#include <stdint.h>

#define QUIC_CID_MAX 20 /* RFC 9000 17.2: a connection ID is 0 to 20 bytes */

typedef struct quic_cid_table quic_cid_table_t;

/* An empty table with a fresh random key (getrandom), or NULL (ENOMEM). */
quic_cid_table_t *quic_cid_table_new(void);

/* The same with a given 16-byte key (for tests: reproducible placement). */
quic_cid_table_t *quic_cid_table_new_keyed(const uint8_t key[16]);

void quic_cid_table_free(quic_cid_table_t *t);

/*
 * Map cid[0..len) to owner (not NULL).  0; or -1 with errno EEXIST (the ID
 * is mapped already: it keeps its owner), EINVAL (len > QUIC_CID_MAX or
 * owner NULL) or ENOMEM (the table could not grow; nothing changed).
 */
int quic_cid_put(quic_cid_table_t *t, const uint8_t *cid, size_t len, void *owner);

/* The owner of cid[0..len), or NULL. */
void *quic_cid_get(const quic_cid_table_t *t, const uint8_t *cid, size_t len);

/* Forget cid[0..len).  1 if it was mapped, 0 if not. */
int quic_cid_del(quic_cid_table_t *t, const uint8_t *cid, size_t len);

/* Number of IDs mapped. */
size_t quic_cid_count(const quic_cid_table_t *t);

#endif
