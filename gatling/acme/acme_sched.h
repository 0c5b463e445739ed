/*
 * acme_sched — when the client orders and asks again, as pure functions of
 * the certificate's lifetime and the clock (tests/unit/t_acme_sched.c): no
 * I/O, no randomness of their own (the caller passes a random number).
 *
 *   - a certificate of 10 days or less is renewed at half its lifetime (as
 *     Let's Encrypt advises for its 6-day certificates), a longer one with a
 *     third of it left;
 *   - a time picked in the CA's ARI window (RFC 9773) is clamped so that the
 *     renewal starts while a margin of the lifetime (and several issuance
 *     times) is left: the window may reach the certificate's last second;
 *   - every wait (back-off, Retry-After, the next ARI poll) is capped by a
 *     fraction of the time the certificate has left, never below a floor;
 *   - a name is not ordered again within hours of an issuance (a clock far
 *     ahead makes every certificate look expired; a random pick in a window
 *     that starts at issuance is not a reason) unless ARI's window ends
 *     sooner, while the certificate is valid by our clock.
 */
#ifndef GATLING_ACME_SCHED_H
#define GATLING_ACME_SCHED_H

#include <stdint.h>
#include <time.h>

#define ACME_SHORT_LIFE (10 * 86400) /* renewed at half their lifetime, at most this */
#define ACME_ISSUE_SECS 10           /* what one issuance may take (several are left) */
#define ACME_WAIT_SHARE 4            /* a wait: at most 1/4 of the time left */
#define ACME_BACKOFF_MAX (6 * 3600)  /* back-off doubles up to this (certmagic's 6 h) */
#define ACME_REORDER_GAP (6 * 3600)  /* no order again within this of an issuance */
#define ACME_CLOCK_SLACK 86400       /* issued this long after notBefore: the clock is ahead */

/* The renewal time without ARI for a certificate valid [nb, na). */
time_t acme_sched_renew(time_t nb, time_t na);

/* The latest time a renewal may start: a quarter of the lifetime (at least
   ACME_ISSUE_SECS * 3, at most half of it) before na. */
time_t acme_sched_latest(time_t nb, time_t na);

/* A time in the ARI window [ws, we] (r: a random number), clamped to
   [nb, acme_sched_latest(nb, na)]. */
time_t acme_sched_ari_pick(time_t nb, time_t na, time_t ws, time_t we, uint64_t r);

/* The back-off after the fails-th failure in a row: min doubled up to
   ACME_BACKOFF_MAX, with +-25% jitter from r. */
long acme_sched_backoff(unsigned fails, long min, uint64_t r);

/* wait (seconds) capped by 1/ACME_WAIT_SHARE of what is left of a
   certificate expiring at na (0: none), but not below floor. */
long acme_sched_cap(long wait, time_t now, time_t na, long floor);

/* t no earlier than ACME_REORDER_GAP (or half the lifetime when shorter)
   after issued (0: unknown); unless t comes from an ARI window (ari_end: its
   end, 0 for none) that ends before that while the clock looks right (now <
   na, and issued within ACME_CLOCK_SLACK of nb): the CA wants the
   certificate replaced (revoked); a clock ahead cannot tell. */
time_t acme_sched_gap(time_t t, time_t issued, time_t nb, time_t na, time_t now, time_t ari_end);

/* now + secs without overflow. */
time_t acme_sched_add(time_t now, long secs);

#endif
