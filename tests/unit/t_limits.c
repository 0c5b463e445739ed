/* limits: per-address connection caps, request rate, login waits, credentials. */
#include "peerboard.h"
#include "peerlimits.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>

static struct sockaddr_storage addr(const char *s)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, s, &a4->sin_addr) == 1)
        a4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, s, &a6->sin6_addr) == 1)
        a6->sin6_family = AF_INET6;
    return ss;
}



static void test_conns(void)
{
    limits_cfg_t cfg = {.conns_per_addr = 2};
    limits_t *l = limits_new(&cfg, 100);
    struct sockaddr_storage a = addr("10.0.0.1"), m = addr("::ffff:10.0.0.1");
    struct sockaddr_storage b = addr("2001:db8:1:2::1"), b2 = addr("2001:db8:1:2:ffff::9"),
                            c = addr("2001:db8:1:3::1");
    const struct sockaddr *A = (void *)&a, *M = (void *)&m, *B = (void *)&b, *B2 = (void *)&b2,
                          *C = (void *)&c;
    is_int(limits_conn_open(l, A, 0), LIMIT_OK, "first connection");
    is_int(limits_conn_open(l, M, 0), LIMIT_OK, "mapped IPv4 is the same address: second");
    is_int(limits_conn_open(l, A, 0), LIMIT_CONNS, "third over the cap of 2");
    limits_conn_close(l, M);
    is_int(limits_conn_open(l, A, 0), LIMIT_OK, "a slot again after a close");
    is_int(limits_conn_open(l, B, 0), LIMIT_OK, "IPv6 one");
    is_int(limits_conn_open(l, B2, 0), LIMIT_OK, "same /64: second");
    is_int(limits_conn_open(l, B, 0), LIMIT_CONNS, "same /64: third refused");
    is_int(limits_conn_open(l, C, 0), LIMIT_OK, "another /64 is another client");
    limits_free(l);
}

static void test_rate(void)
{
    limits_cfg_t cfg = {.rpm = 10};
    limits_t *l = limits_new(&cfg, 100);
    struct sockaddr_storage a = addr("192.0.2.7"), o = addr("192.0.2.8");
    const struct sockaddr *A = (void *)&a, *O = (void *)&o;
    int okn = 0;
    for (int i = 0; i < 10; i++)
        okn += limits_request(l, A, 1000 + i * 100) == LIMIT_OK;
    is_int(okn, 10, "exactly rpm requests allowed");
    is_int(limits_request(l, A, 2100), LIMIT_RATE, "rpm + 1 caught");
    is_int(limits_request(l, O, 2100), LIMIT_OK, "another address is not");
    is_int(limits_request(l, A, 2100 + 59000), LIMIT_RATE, "a request in the penalty minute");
    is_int(limits_request(l, A, 2100 + 59000 + 59999), LIMIT_RATE,
           "it restarted the minute: 59.999 s later still caught");
    is_int(limits_request(l, A, 2100 + 59000 + 60000 + 60000), LIMIT_OK,
           "after a whole quiet minute let back in");
    /* the window slides: 10 now, 10 more a minute later are fine */
    limits_cfg_t cfg2 = {.rpm = 10};
    limits_t *l2 = limits_new(&cfg2, 100);
    int all = 1;
    for (int m = 0; m < 5; m++)
        for (int i = 0; i < 10; i++)
            all &= limits_request(l2, A, (int64_t)m * 61000 + i) == LIMIT_OK;
    ok(all, "10 a minute for 5 minutes is never caught");
    limits_free(l2);
    limits_free(l);
}

static void test_auth(void)
{
    limits_cfg_t cfg = {.free_fails = 3, .max_wait_s = 60};
    limits_t *l = limits_new(&cfg, 100);
    struct sockaddr_storage a = addr("198.51.100.1");
    const struct sockaddr *A = (void *)&a;
    int64_t t = 5000;
    is_int(limits_auth_wait(l, A, t), 0, "no wait at first");
    for (int i = 0; i < 3; i++)
        limits_auth_failed(l, A, t);
    is_int(limits_auth_wait(l, A, t), 0, "3 free failures");
    limits_auth_failed(l, A, t);
    is_int(limits_auth_wait(l, A, t), 1, "4th: 1 s");
    limits_auth_failed(l, A, t += 1000);
    is_int(limits_auth_wait(l, A, t), 2, "5th: 2 s");
    limits_auth_failed(l, A, t += 2000);
    is_int(limits_auth_wait(l, A, t), 4, "6th: 4 s");
    for (int i = 0; i < 20; i++)
        limits_auth_failed(l, A, t);
    is_int(limits_auth_wait(l, A, t), 60, "capped at 60 s");
    is_int(limits_auth_wait(l, A, t + 600000), 0, "forgiven after 10 quiet minutes");
    limits_auth_failed(l, A, t + 600000);
    is_int(limits_auth_wait(l, A, t + 600000), 0, "and counting from zero again");
    limits_auth_ok(l, A, t);
    is_int(limits_auth_wait(l, A, t), 0, "a success forgives");
    for (int i = 0; i < 6; i++)
        limits_auth_failed(l, A, t + 1000);
    limits_auth_ok(l, A, t + 2000);
    ok(limits_auth_wait(l, A, t + 2000) > 0, "but not twice within a minute");
    const char k1[] = "/prot/\0Basic YWxpY2U6d3Jvbmc=", k2[] = "/prot/\0Basic YWxpY2U6cmlnaHQ=";
    ok(!limits_cred_failed(l, k1, sizeof k1, t), "unknown credentials not remembered");
    limits_cred_note_failed(l, k1, sizeof k1, t);
    ok(limits_cred_failed(l, k1, sizeof k1, t + 59999), "a failed credential is remembered");
    ok(!limits_cred_failed(l, k2, sizeof k2, t), "another one is not");
    ok(!limits_cred_failed(l, k1, sizeof k1, t + 60000), "forgotten after a minute");
    limits_free(l);
}

/* A million addresses through a table of 1,000: bounded, and open counts kept. */
static void test_flood(void)
{
    limits_cfg_t cfg = {.conns_per_addr = 1, .rpm = 5};
    limits_t *l = limits_new(&cfg, 1000);
    struct sockaddr_storage keep = addr("203.0.113.9");
    const struct sockaddr *K = (void *)&keep;
    is_int(limits_conn_open(l, K, 0), LIMIT_OK, "a long-lived connection");
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    int refused = 0;
    for (uint32_t i = 0; i < 1000000; i++) {
        a6.sin6_addr.s6_addr[0] = 0x20;
        memcpy(a6.sin6_addr.s6_addr + 4, &i, 4); /* a different /64 each */
        refused += limits_request(l, (struct sockaddr *)&a6, i) != LIMIT_OK;
    }
    is_int(refused, 0, "a million one-request addresses: none caught");
    ok(limits_tracked(l) <= 1000, "tracked addresses stay bounded (%zu)", limits_tracked(l));
    is_int(limits_conn_open(l, K, 0), LIMIT_CONNS, "the open connection was not evicted");
    limits_free(l);
    limits_cfg_t cfg2 = {0};
    limits_t *l2 = limits_new(&cfg2, 16);
    int full = 0;
    for (uint32_t i = 0; i < 20; i++) {
        struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000000 + i)};
        full += limits_conn_open(l2, (struct sockaddr *)&a4, 0) == LIMIT_FULL;
    }
    is_int(full, 4, "16 addresses with connections fill a table of 16: the rest LIMIT_FULL");
    limits_free(l2);
}

/* Offences: the level rises by one per offence, halves budgets, refuses at
   PEER_REFUSE, falls by one per offence_ms; another address and another
   /64 are untouched; a flood of addresses cannot grow the table. */
static void test_offences(void)
{
    limits_cfg_t cfg = {.offence_ms = 1000};
    limits_t *l = limits_new(&cfg, 64);
    struct sockaddr_storage a = addr("10.0.0.1"), b = addr("10.0.0.2");
    struct sockaddr_storage v6 = addr("2001:db8:1:2::1"), v6b = addr("2001:db8:1:2:9::9"),
                            v6c = addr("2001:db8:1:3::1");
    const struct sockaddr *A = (void *)&a, *B = (void *)&b, *V = (void *)&v6, *V2 = (void *)&v6b,
                          *V3 = (void *)&v6c;
    is_int((int)peer_allowance(l, A, 0), 0, "an address never seen: level 0");
    for (int k = 1; k < PEER_REFUSE; k++) {
        peer_offence(l, A, PEER_FLOOD, 10 * k);
        is_int((int)peer_allowance(l, A, 10 * k), k, "offence %d: level %d", k, k);
        is_int(limits_conn_open(l, A, 10 * k), LIMIT_OK, "... still let in");
        limits_conn_close(l, A);
    }
    is_int((int)peer_budget(100, 3), 12, "level 3: 100 streams become 12");
    is_int((int)peer_budget(100, 9), 6, "past PEER_REFUSE: what PEER_REFUSE would give");
    is_int((int)peer_budget(1, 3), 1, "never 0");
    peer_offence(l, A, PEER_RESETS, 100);
    is_int(limits_conn_open(l, A, 100), LIMIT_OFFENDER, "offence 4: refused");
    is_int(limits_conn_open(l, B, 100), LIMIT_OK, "another address: let in");
    limits_conn_close(l, B);
    is_int(limits_conn_open(l, A, 1099), LIMIT_OFFENDER, "999 ms later: still refused");
    is_int(limits_conn_open(l, A, 1100), LIMIT_OK, "1 s after the last offence: let in");
    limits_conn_close(l, A);
    is_int((int)peer_allowance(l, A, 1100), 3, "... at level 3");
    is_int((int)peer_allowance(l, A, 3099), 2, "2.999 s: level 2");
    is_int((int)peer_allowance(l, A, 4100), 0, "4 s: forgotten");
    for (int k = 0; k < 20; k++)
        peer_offence(l, A, PEER_HEADERS, 5000);
    is_int((int)peer_allowance(l, A, 5000), PEER_LEVEL_MAX, "the level stops at its max");
    is_int((int)peer_allowance(l, A, 5000 + 1000 * PEER_LEVEL_MAX), 0,
           "... so that it is forgotten within PEER_LEVEL_MAX periods");
    peer_offence(l, V, PEER_FLOOD, 0);
    is_int((int)peer_allowance(l, V2, 0), 1, "IPv6: the same /64 is the same offender");
    is_int((int)peer_allowance(l, V3, 0), 0, "... another /64 is not");
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
    for (uint32_t i = 0; i < 100000; i++) { /* a /64 each: the table stays bounded */
        s6.sin6_addr.s6_addr[0] = 0x20;
        memcpy(s6.sin6_addr.s6_addr + 4, &i, 4);
        peer_offence(l, (struct sockaddr *)&s6, PEER_FLOOD, 6000);
    }
    ok(limits_tracked(l) <= 64, "100,000 offending /64s: %zu tracked", limits_tracked(l));
    limits_free(l);
    limits_cfg_t off = {0};
    l = limits_new(&off, 16);
    for (int k = 0; k < 10; k++)
        peer_offence(l, A, PEER_FLOOD, 0);
    is_int((int)peer_allowance(l, A, 0), 0, "offence_ms 0: nothing remembered");
    is_int(limits_conn_open(l, A, 0), LIMIT_OK, "... nobody refused");
    limits_free(l);
}

/* -W: two workers' tables that share a board see each other's offences. */
static void test_board(void)
{
    limits_cfg_t cfg = {.offence_ms = 1000};
    peer_board_t *board = peer_board_new();
    limits_t *w1 = limits_new(&cfg, 64), *w2 = limits_new(&cfg, 64), *alone = limits_new(&cfg, 64);
    limits_share(w1, board);
    limits_share(w2, board);
    struct sockaddr_storage a = addr("10.0.0.9"), b = addr("2001:db8::9");
    const struct sockaddr *A = (void *)&a, *B = (void *)&b;
    peer_offence(w1, A, PEER_FLOOD, 0);
    peer_offence(alone, A, PEER_FLOOD, 0);
    is_int((int)peer_allowance(w2, A, 10), 1, "an offence in one worker is seen by another");
    peer_offence(w2, A, PEER_RESETS, 20);
    peer_offence(w1, A, PEER_FLOOD, 30);
    is_int((int)peer_allowance(w1, A, 40), 3, "offences in two workers add up: level 3");
    is_int((int)peer_allowance(alone, A, 40), 1, "... a table without the board has its own");
    peer_offence(w2, A, PEER_FLOOD, 50);
    is_int(limits_conn_open(w1, A, 60), LIMIT_OFFENDER, "the fourth, in w2: refused in w1");
    is_int((int)peer_allowance(w1, A, 1100), 3, "the board's level falls as a table's does");
    is_int((int)peer_allowance(w2, A, 6100), 0, "... and is forgotten");
    is_int((int)peer_allowance(w2, B, 0), 0, "another address: nothing");
    for (int i = 0; i < 20000; i++) { /* more addresses than the board holds */
        struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0b000000u + i)};
        peer_offence(w1, (struct sockaddr *)&s4, PEER_FLOOD, 7000);
    }
    peer_offence(w1, B, PEER_FLOOD, 7000);
    is_int((int)peer_allowance(w2, B, 7000), 1, "a full board takes a new offender (the oldest goes)");
    limits_free(w1);
    limits_free(w2);
    limits_free(alone);
    peer_board_free(board);
}

int main(void)
{
    test_conns();
    test_rate();
    test_auth();
    test_flood();
    test_offences();
    test_board();
    return tap_done();
}
