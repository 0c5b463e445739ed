/*
 * peerlimits — per-client-address bookkeeping for a server under attack: open
 * connections (-K), requests per minute (-A, with the original gatling's
 * semantics), failed logins (growing waits), and recently failed
 * credentials, and the offences a defence ended a connection for (floods:
 * the memory that makes a client who reconnects after each GOAWAY start with
 * less, then be refused a while).  A pure data structure: no I/O, the caller
 * passes the time.
 *
 * A client is its IPv4 address (an IPv4-mapped IPv6 address counts as the
 * IPv4 one), or the /64 of its IPv6 address: one host gets a /64 to itself.
 *
 * Memory is bounded whatever clients do: a fixed table of `capacity`
 * addresses, keyed with SipHash under a per-process random key (nobody can
 * aim at one chain), the least recently active address without open
 * connections evicted when it is full.  Addresses with open connections are
 * never evicted, so the caller sizes capacity above its connection cap.
 * Every operation is O(1).
 */
#ifndef GATLING_PEERLIMITS_H
#define GATLING_PEERLIMITS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum { LIMIT_OK = 0, LIMIT_CONNS, LIMIT_RATE, LIMIT_FULL, LIMIT_OFFENDER };

typedef struct limits_cfg {
    unsigned rpm;            /* requests per minute per address; 0 = no limit */
    unsigned conns_per_addr; /* open connections per address; 0 = no cap */
    unsigned free_fails;     /* failed logins before waits begin */
    unsigned max_wait_s;     /* the longest wait after failed logins */
    unsigned offence_ms;     /* how long one offence is remembered; 0 = none is */
} limits_cfg_t;

typedef struct limits limits_t;

/* A table for capacity addresses.  NULL on ENOMEM. */
limits_t *limits_new(const limits_cfg_t *cfg, size_t capacity);

void limits_free(limits_t *l);

/*
 * A connection from sa opens: LIMIT_OK (counted: call limits_conn_close
 * exactly once when it ends), LIMIT_CONNS (the address is at its cap),
 * LIMIT_OFFENDER (its recent offences reached PEER_REFUSE: see
 * peer_allowance), or LIMIT_FULL (every tracked address has open
 * connections: capacity too small).  No refusal is counted as open.
 */
int limits_conn_open(limits_t *l, const struct sockaddr *sa, int64_t now_ms);
void limits_conn_close(limits_t *l, const struct sockaddr *sa);

/*
 * A request from sa: LIMIT_OK, or LIMIT_RATE when the address made more
 * than rpm requests in the last minute (counted in 10-second slots).  A
 * caught address stays caught until it has made no request for a whole
 * minute; every refused request starts that minute again.
 */
int limits_request(limits_t *l, const struct sockaddr *sa, int64_t now_ms);

/*
 * Failed logins: 0 if a password from sa may be checked now, else the
 * seconds it must wait (answer 429 with Retry-After, without hashing).
 * After free_fails failures the waits are 1, 2, 4 ... max_wait_s seconds;
 * ten quiet minutes forgive them, and so does a success, but at most once a
 * minute (a known password must not wash away guesses at others).
 */
unsigned limits_auth_wait(limits_t *l, const struct sockaddr *sa, int64_t now_ms);
void limits_auth_failed(limits_t *l, const struct sockaddr *sa, int64_t now_ms);
void limits_auth_ok(limits_t *l, const struct sockaddr *sa, int64_t now_ms);

/*
 * Credentials that failed in the last minute, remembered by a keyed hash of
 * key[0..n) (the caller's: the protected path and the Authorization value;
 * the secret itself is never stored).  1 if key failed recently.
 */
int limits_cred_failed(limits_t *l, const void *key, size_t n, int64_t now_ms);
void limits_cred_note_failed(limits_t *l, const void *key, size_t n, int64_t now_ms);

/*
 * Offences: a defence ended a connection from sa because of what its client
 * did (a flood of frames, streams reset or made to be reset too fast, header
 * blocks too fragmented: kinds that cost the server much and the client
 * little), whatever the protocol (HTTP/2's and HTTP/3's floods).  Each one
 * raises the address's level by one, to at most PEER_LEVEL_MAX; the level
 * falls by one for every cfg.offence_ms without a new offence.  The level
 * is what the address's next connections may do (peer_allowance):
 *
 *   0                 everything (no recent offence)
 *   1 .. PEER_REFUSE-1  budgets divided by 2^level (peer_budget): the
 *                     bursts of frames and resets, the concurrent streams
 *   PEER_REFUSE and up  refused: limits_conn_open says LIMIT_OFFENDER
 *
 * So a client that reconnects after each GOAWAY gets a burst, half of it,
 * a quarter, an eighth, then nothing for offence_ms (or up to
 * PEER_LEVEL_MAX - PEER_REFUSE + 1 times that, when connections it had
 * open already offend meanwhile), then an eighth again.  The offender is
 * kept in the table like any address: bounded, keyed by IPv4 address or
 * IPv6 /64, the least recently active one evicted first.
 */
enum { PEER_FLOOD, PEER_RESETS, PEER_HEADERS, PEER_OFFENCE_KINDS };
#define PEER_REFUSE 4
#define PEER_LEVEL_MAX 6

void peer_offence(limits_t *l, const struct sockaddr *sa, int kind, int64_t now_ms);

/* The level (0 .. PEER_LEVEL_MAX) of sa's recent offences, as above. */
unsigned peer_allowance(limits_t *l, const struct sockaddr *sa, int64_t now_ms);

/* A budget of full for a connection of level: full / 2^level, at least 1
   (a connection let in at PEER_REFUSE or above, before the level rose,
   gets what PEER_REFUSE would give). */
static inline unsigned peer_budget(unsigned full, unsigned level)
{
    unsigned v = full >> (level < PEER_REFUSE ? level : PEER_REFUSE);
    return v ? v : 1;
}

/*
 * -W: share the offences with the other workers through board
 * (site/peerboard.h, made before the fork): an offence is posted there too,
 * and an address's level is the higher of this table's and the board's.
 */
struct peer_board;
void limits_share(limits_t *l, struct peer_board *board);

/* Addresses tracked now, for tests and the status page. */
size_t limits_tracked(const limits_t *l);

#endif
