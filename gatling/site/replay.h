/*
 * replay — the ClientHellos that carried early data (TLS 1.3 0-RTT, QUIC's
 * too), remembered for the window in which a copy of one could be accepted
 * again, shared by -W's workers: RFC 8446 8.2's "ClientHello recording".
 *
 * Early data rides a resumption ticket and is sent before the handshake has
 * proved the client fresh, so an attacker who captured a first flight can send
 * it again, to the same worker or to another one behind the same port
 * (SO_REUSEPORT spreads connections over the workers).  The TLS libraries
 * bound the window: a ClientHello's ticket age must agree with the server's
 * clock within 10 s (OpenSSL's TICKET_AGE_ALLOWANCE; GnuTLS's anti-replay
 * window, set to the same), so a replay later than that is refused by them.
 * Within it, this table is the defence: the first ClientHello with a given
 * unique value (its random, or GnuTLS's key for it) may have its early data
 * accepted; a second is a replay.
 *
 * One table in a shared anonymous mapping, made before the workers fork.
 * Unlike the offence board (peerboard.h) it fails closed: a bucket whose lock
 * stays taken, or whose ways all hold live entries, refuses early data (the
 * handshake goes on and the request waits one round trip, as without it);
 * nothing is ever accepted for want of room.  A new table (a start, an
 * upgrade's new process) refuses for its first window, since a first flight
 * the previous process accepted could be replayed to it.  Values are kept as
 * SipHash tags under a key made for the table.
 */
#ifndef GATLING_REPLAY_H
#define GATLING_REPLAY_H

#include <stddef.h>
#include <stdint.h>

/* How long a recorded value is kept: the TLS libraries' ticket-age
   tolerance (10 s) and a second for their rounding. */
#define REPLAY_WINDOW_MS 11000

typedef struct replay replay_t;

/* What replay_record found. */
enum {
    REPLAY_NEW = 0, /* first seen: its early data may be accepted */
    REPLAY_SEEN,    /* seen within the window: a replay */
    REPLAY_FULL,    /* no room in its bucket (or the lock stayed taken): refuse */
    REPLAY_YOUNG,   /* the table is younger than the window: refuse */
};

/* The table's clock, now: CLOCK_MONOTONIC in ms (gio_now()'s, the same in
   every process), for the callers that have no loop at hand. */
int64_t replay_clock_ms(void);

/* A table of about entries values (rounded up to whole buckets), shared with
   the children forked after this; NULL (errno) on failure.  now_ms: the
   monotonic clock's (CLOCK_MONOTONIC is the same clock in every process). */
replay_t *replay_new(unsigned entries, int64_t now_ms);
void replay_free(replay_t *t);

/* The entries the table holds (after rounding). */
unsigned replay_size(const replay_t *t);

/* Record the value key[0..len) as seen at now_ms, kept until now_ms +
   REPLAY_WINDOW_MS.  REPLAY_NEW only when it was not seen within the window,
   the table is old enough and there was room. */
int replay_record(replay_t *t, const void *key, size_t len, int64_t now_ms);

#endif
