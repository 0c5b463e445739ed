/* t_acme_sched — the ACME client's schedule (gatling/acme/acme_sched.c) as
   pure functions: renewal at half the lifetime for short certificates and a
   third left for long ones, an ARI pick clamped before the last quarter, every
   wait capped by a share of the time left, no order again within hours of an
   issuance (a clock far ahead), and no overflow from a Retry-After. */
#include <limits.h>

#include "acme_sched.h"
#include "tap.h"

#define DAY 86400L

static void test_renew(void)
{
    is_int(acme_sched_renew(0, 90 * DAY), 60 * DAY, "90 days: with a third left");
    is_int(acme_sched_renew(0, 6 * DAY), 3 * DAY, "6 days (shortlived): at half");
    is_int(acme_sched_renew(1000, 1045), 1022, "45 s: at half");
    is_int(acme_sched_renew(1000, 1000), 1000, "no lifetime: at once");
}

static void test_ari_pick(void)
{
    /* Pebble's window for a 45-s certificate is its whole lifetime */
    time_t lo = 2000000000, hi = 0;
    for (uint64_t r = 0; r < 200; r++) {
        time_t t = acme_sched_ari_pick(1000, 1045, 1000, 1045, r * 7919);
        lo = t < lo ? t : lo;
        hi = t > hi ? t : hi;
    }
    ok(lo >= 1000 && hi <= 1045 - 22, "45 s, window = lifetime: picked in [nb, na - 22] (%ld..%ld)",
       (long)lo, (long)hi);
    is_int(acme_sched_latest(0, 90 * DAY), 90 * DAY - 90 * DAY / 4, "90 days: a quarter left");
    is_int(acme_sched_latest(0, 200), 150, "200 s: a quarter left");
    is_int(acme_sched_latest(0, 100), 70, "100 s: three issuance times left");
    is_int(acme_sched_latest(0, 40), 20, "40 s: half (three issuances would pass it)");
    is_int(acme_sched_ari_pick(0, 90 * DAY, 60 * DAY, 62 * DAY, 0), 60 * DAY,
           "Let's Encrypt's window: kept");
    is_int(acme_sched_ari_pick(0, 90 * DAY, 89 * DAY, 90 * DAY, 12345), 90 * DAY - 90 * DAY / 4,
           "a window in the last quarter: its start clamped");
    is_int(acme_sched_ari_pick(100, 200, 0, 50, 3), 100, "a window before issuance: at nb");
}

static void test_waits(void)
{
    time_t now = 1000000;
    is_int(acme_sched_cap(86400, now, now + 8 * 3600, 60), 2 * 3600,
           "a day's back-off with 8 h left: 2 h");
    is_int(acme_sched_cap(7 * DAY, now, now + 6 * DAY, 60), 6 * DAY / 4,
           "a Retry-After of 7 days with 6 days left: 1.5 days");
    is_int(acme_sched_cap(600, now, now + 40, 60), 60, "never below the floor");
    is_int(acme_sched_cap(600, now, 0, 60), 600, "no certificate: not capped");
    is_int(acme_sched_cap(600, now, now - 5, 60), 600, "expired: not capped");
    long b = acme_sched_backoff(40, 60, UINT64_MAX);
    ok(b >= ACME_BACKOFF_MAX * 3 / 4 && b <= ACME_BACKOFF_MAX * 5 / 4,
       "the back-off stops doubling at 6 h (%ld)", b);
    ok(acme_sched_backoff(1, 60, 0) == 45 && acme_sched_backoff(2, 60, 0) == 90,
       "the back-off doubles from the first");
    is_int(acme_sched_add(LONG_MAX - 10, 99999), LONG_MAX, "now + a huge wait: saturated");
    is_int(acme_sched_add(now, 5), now + 5, "now + 5");
}

static void test_gap(void)
{
    time_t nb = 1000000, na = nb + 90 * DAY, far = na + 365 * DAY;
    /* a clock a year ahead: the new certificate looks expired at once */
    is_int(acme_sched_gap(acme_sched_renew(nb, na), far, nb, na, far, 0), far + ACME_REORDER_GAP,
           "clock ahead: not before 6 h after the issuance");
    is_int(acme_sched_gap(nb, far, nb, na, far, nb + 1), far + ACME_REORDER_GAP,
           "clock ahead: ARI's passed window waits too (the certificate is expired to us)");
    time_t ahead = nb + 70 * DAY; /* 70 days ahead: past the window, not the expiry */
    is_int(acme_sched_gap(ahead, ahead, nb, na, ahead, nb + 61 * DAY), ahead + ACME_REORDER_GAP,
           "clock 70 days ahead: ARI's window passed to us, still 6 h");
    is_int(acme_sched_gap(nb + 10, nb + 5, nb, na, nb + 10, nb - 3599), nb + 10,
           "ARI's window in the past (revoked) while the certificate is valid: at once");
    is_int(acme_sched_gap(nb + 3, nb + 1, nb, nb + 90, nb + 3, nb + 90), nb + 46,
           "a random pick early in a 90-s certificate's window: not before half its lifetime");
    is_int(acme_sched_gap(nb + 10, nb, nb, nb + 90, nb + 10, 0), nb + 45,
           "a 90-s certificate: half its lifetime");
    is_int(acme_sched_gap(nb + 10, 0, nb, na, nb + 10, 0), nb + 10, "issuance unknown: as is");
    /* the rest of the branches (issue 55) */
    is_int(acme_sched_gap(nb, nb + 5, nb, nb, nb + 5, 0), nb + 5 + ACME_REORDER_GAP,
           "no lifetime (notAfter at notBefore): the whole gap");
    is_int(acme_sched_gap(nb + 10, nb + 5, nb, na, na + 1, nb - 3599), nb + 5 + ACME_REORDER_GAP,
           "ARI's window past while the certificate has expired to us: the gap");
    is_int(acme_sched_add(1000, -5), 995, "now + a negative wait: no saturation");
    is_int(acme_sched_add(LONG_MAX, 0), LONG_MAX, "the end of time + 0");
    is_int(acme_sched_latest(500, 500), 500, "no lifetime: the latest is notBefore");
    is_int(acme_sched_latest(500, 400), 500, "notAfter before notBefore: notBefore");
    is_int(acme_sched_cap(60, 0, 90 * DAY, 10), 60, "a wait under its share: as is");
}

int main(void)
{
    test_renew();
    test_ari_pick();
    test_waits();
    test_gap();
    return tap_done();
}
