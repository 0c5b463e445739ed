/*
 * peerlimits — per-client-address bookkeeping for a server under attack: open
 * connections (-K), requests per minute (-A, with the original gatling's
 * semantics), failed logins (growing waits), and recently failed
 * credentials.  A pure data structure: no I/O, the caller passes the time.
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

enum { LIMIT_OK = 0, LIMIT_CONNS, LIMIT_RATE, LIMIT_FULL };

typedef struct limits_cfg {
    unsigned rpm;            /* requests per minute per address; 0 = no limit */
    unsigned conns_per_addr; /* open connections per address; 0 = no cap */
    unsigned free_fails;     /* failed logins before waits begin */
    unsigned max_wait_s;     /* the longest wait after failed logins */
} limits_cfg_t;

typedef struct limits limits_t;

/* A table for capacity addresses.  NULL on ENOMEM. */
limits_t *limits_new(const limits_cfg_t *cfg, size_t capacity);

void limits_free(limits_t *l);

/*
 * A connection from sa opens: LIMIT_OK (counted: call limits_conn_close
 * exactly once when it ends), LIMIT_CONNS (the address is at its cap), or
 * LIMIT_FULL (every tracked address has open connections: capacity too
 * small).  Neither refusal is counted as open.
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

/* Addresses tracked now, for tests and the status page. */
size_t limits_tracked(const limits_t *l);

#endif
