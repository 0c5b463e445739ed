/* acme_sched — see acme_sched.h. */
#include "acme_sched.h"

#include <limits.h>

time_t acme_sched_add(time_t now, long secs)
{
    if (secs > 0 && now > (time_t)LLONG_MAX - secs)
        return (time_t)LLONG_MAX;
    return now + secs;
}

time_t acme_sched_renew(time_t nb, time_t na)
{
    time_t life = na - nb;
    if (life <= 0)
        return nb;
    return nb + (life <= ACME_SHORT_LIFE ? life / 2 : life - life / 3);
}

time_t acme_sched_latest(time_t nb, time_t na)
{
    time_t life = na - nb, margin = life / 4;
    if (life <= 0)
        return nb;
    if (margin < 3 * ACME_ISSUE_SECS)
        margin = 3 * ACME_ISSUE_SECS;
    if (margin > life / 2)
        margin = life / 2;
    return na - margin;
}

time_t acme_sched_ari_pick(time_t nb, time_t na, time_t ws, time_t we, uint64_t r)
{
    time_t latest = acme_sched_latest(nb, na);
    if (we > latest)
        we = latest;
    if (ws > we)
        ws = we; /* the whole window past the margin: its clamp */
    time_t t = ws + (time_t)(r % ((uint64_t)(we - ws) + 1));
    return t < nb ? nb : t;
}

long acme_sched_backoff(unsigned fails, long min, uint64_t r)
{
    long base = min > 0 ? min : 1;
    for (unsigned i = 1; i < fails && base < ACME_BACKOFF_MAX; i++)
        base *= 2;
    if (base > ACME_BACKOFF_MAX)
        base = ACME_BACKOFF_MAX;
    return base - base / 4 + (long)(r % ((uint64_t)base / 2 + 1));
}

long acme_sched_cap(long wait, time_t now, time_t na, long floor)
{
    if (na > now) {
        time_t share = (na - now) / ACME_WAIT_SHARE;
        if ((time_t)wait > share)
            wait = (long)share;
    }
    return wait < floor ? floor : wait;
}

time_t acme_sched_gap(time_t t, time_t issued, time_t nb, time_t na, time_t now, time_t ari_end)
{
    time_t gap = ACME_REORDER_GAP;
    if (na > nb && (na - nb) / 2 < gap)
        gap = (na - nb) / 2;
    /* the local clock at issuance against the CA's notBefore: a clock
       ahead would take every passed window for the CA's word */
    int clock_ok = issued - nb <= ACME_CLOCK_SLACK && now < na;
    if (!issued || (ari_end && ari_end < issued + gap && clock_ok))
        return t;
    return t < issued + gap ? issued + gap : t;
}
