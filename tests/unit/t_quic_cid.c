/*
 * t_quic_cid — the QUIC connection ID table (gatling/quic/quic_cid.c):
 * SipHash-2-4 against the reference vectors, then a long random run of
 * puts, gets and removals checked against a plain array (a removal that
 * broke a probe run, a growth that lost an entry, or a length taken for a
 * prefix fails here).
 */
#include "quic_cid.h"
#include "siphash.h"
#include "tap.h"

#include <errno.h>
#include <stdint.h>

#define POOL 600

static uint8_t ids[POOL][QUIC_CID_MAX];
static size_t lens[POOL];
static int mapped[POOL];
static int owners[POOL];

static uint32_t rnd(void)
{
    static uint32_t x = 2463534242u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
}

static void test_siphash(void)
{
    uint8_t key[16], msg[64];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    /* the SipHash paper's appendix vectors (key 00..0f, message 00..n-1) */
    ok(siphash24(key, msg, 0) == 0x726fdb47dd0e0e31ULL, "siphash of the empty message");
    ok(siphash24(key, msg, 15) == 0xa129ca6149be45e5ULL, "siphash of 00..0e (the paper's)");
    ok(siphash24(key, msg, 8) == 0x93f5f5799a932462ULL, "siphash of 00..07 (one word)");
}

static int model_check(const quic_cid_table_t *t)
{
    size_t n = 0;
    for (int i = 0; i < POOL; i++) {
        void *o = quic_cid_get(t, ids[i], lens[i]);
        if (o != (mapped[i] ? &owners[i] : NULL))
            return 0;
        n += mapped[i];
    }
    return n == quic_cid_count(t);
}

static void test_random(void)
{
    uint8_t key[16] = {1, 2, 3};
    quic_cid_table_t *t = quic_cid_table_new_keyed(key);
    /* IDs of every length 0-20, the first 21 each a prefix of the next
       (length counts), the rest random of 4-20 bytes (distinct) */
    for (int i = 0; i < POOL; i++) {
        lens[i] = (size_t)(i <= QUIC_CID_MAX ? i : 4 + i % (QUIC_CID_MAX - 3));
        for (size_t j = 0; j < lens[i]; j++)
            ids[i][j] = (uint8_t)(i <= QUIC_CID_MAX ? 0xab : rnd());
    }
    int bad = 0, checks = 0;
    for (int step = 0; step < 40000 && !bad; step++) {
        int i = (int)(rnd() % POOL);
        if (rnd() % 3) {
            int r = quic_cid_put(t, ids[i], lens[i], &owners[i]);
            bad |= mapped[i] ? !(r == -1 && errno == EEXIST) : r != 0;
            mapped[i] = 1;
        } else {
            bad |= quic_cid_del(t, ids[i], lens[i]) != mapped[i];
            mapped[i] = 0;
        }
        if (step % 97 == 0) {
            bad |= !model_check(t);
            checks++;
        }
    }
    ok(!bad && model_check(t), "40000 random puts and removals agree with the model (%d checks)",
       checks);
    for (int i = 0; i < POOL; i++)
        if (mapped[i])
            quic_cid_del(t, ids[i], lens[i]), mapped[i] = 0;
    is_int(quic_cid_count(t), 0, "all removed: the table is empty");
    ok(model_check(t), "and finds none of them");
    quic_cid_table_free(t);
}

static void test_edges(void)
{
    quic_cid_table_t *t = quic_cid_table_new();
    ok(t != NULL, "a table with a random key");
    uint8_t id[QUIC_CID_MAX + 1] = {9};
    int o1, o2;
    is_int(quic_cid_put(t, id, QUIC_CID_MAX + 1, &o1), -1, "a 21-byte ID is refused");
    is_int(errno, EINVAL, "... with EINVAL");
    is_int(quic_cid_put(t, id, 4, NULL), -1, "a NULL owner is refused");
    is_int(quic_cid_put(t, id, 0, &o1), 0, "the empty ID maps (RFC 9000 allows 0 bytes)");
    is_int(quic_cid_put(t, id, 0, &o2), -1, "mapping it again fails ...");
    ok(quic_cid_get(t, id, 0) == &o1, "... and the first owner stays");
    ok(quic_cid_get(t, id, 1) == NULL, "a 1-byte ID is another ID");
    ok(quic_cid_get(t, id, QUIC_CID_MAX + 1) == NULL, "a 21-byte lookup finds nothing");
    is_int(quic_cid_del(t, id, 1), 0, "removing an unmapped ID says 0");
    is_int(quic_cid_del(t, id, 0), 1, "removing a mapped one says 1");
    quic_cid_table_free(t);
}

int main(void)
{
    test_siphash();
    test_edges();
    test_random();
    return tap_done();
}
