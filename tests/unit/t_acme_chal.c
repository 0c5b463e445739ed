/*
 * acme_chal: the loops' reader of the ACME client's state directory.  A
 * token is checked before anything is opened (not base64url, "..", "/", a
 * 10 KB token: -1); only a file holding this token's key authorization
 * answers; names are host names or IP addresses; reads are bounded; the
 * status file is read whole or not at all.
 */
#define _GNU_SOURCE
#include "acme_chal.h"
#include "tap.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[PATH_MAX];

static void put(const char *rel, const char *text)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        perror(p);
}

static void test_http(acme_chal_t *c)
{
    char buf[ACME_KEYAUTH_MAX], big[10240];
    const char *tok = "abc-_DEF123";
    put("challenges/http-01/abc-_DEF123", "abc-_DEF123.thumbPRINT_-0\n");
    is_int(acme_chal_http(c, tok, strlen(tok), buf, sizeof buf), 25, "a token outstanding");
    ok(!memcmp(buf, "abc-_DEF123.thumbPRINT_-0", 25), "its key authorization, no line end");
    is_int(acme_chal_http(c, "abc", 3, buf, sizeof buf), 0, "another token: none");
    is_int(acme_chal_http(c, "..", 2, buf, sizeof buf), -1, "..: refused unopened");
    is_int(acme_chal_http(c, "a/b", 3, buf, sizeof buf), -1, "a slash: refused");
    is_int(acme_chal_http(c, "", 0, buf, sizeof buf), -1, "empty: refused");
    is_int(acme_chal_http(c, "a%2e", 4, buf, sizeof buf), -1, "percent: refused");
    memset(big, 'A', sizeof big);
    is_int(acme_chal_http(c, big, sizeof big, buf, sizeof buf), -1, "a 10 KB token: refused");
    is_int(acme_chal_http(c, big, ACME_TOKEN_MAX + 1, buf, sizeof buf), -1, "129 bytes: refused");
    is_int(acme_chal_http(c, big, ACME_TOKEN_MAX, buf, sizeof buf), 0, "128 bytes: looked up");
    put("challenges/http-01/other", "wrongtoken.x");
    is_int(acme_chal_http(c, "other", 5, buf, sizeof buf), 0, "a file for another token: none");
    put("challenges/http-01/spaced", "spaced.a b");
    is_int(acme_chal_http(c, "spaced", 6, buf, sizeof buf), 0, "not base64url inside: none");
    char huge[ACME_KEYAUTH_MAX + 64];
    memset(huge, 'x', sizeof huge - 1), huge[sizeof huge - 1] = 0;
    memcpy(huge, "huge.", 5);
    put("challenges/http-01/huge", huge);
    is_int(acme_chal_http(c, "huge", 4, buf, sizeof buf), 0, "too long a file: none");
    is_int(acme_chal_http(c, tok, strlen(tok), buf, 10), 0, "a buffer too small: none");
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/challenges/http-01/dir", base);
    mkdir(p, 0700);
    is_int(acme_chal_http(c, "dir", 3, buf, sizeof buf), 0, "a directory: none");
}

static void test_names(void)
{
    ok(acme_chal_name_ok("example.org", 11), "a host name");
    ok(acme_chal_name_ok("a-b.example.org", 15), "with a hyphen");
    ok(acme_chal_name_ok("192.0.2.1", 9), "an IPv4 address");
    ok(acme_chal_name_ok("2001:db8::1", 11), "an IPv6 address");
    ok(!acme_chal_name_ok("1.2.3.456", 9), "not an IPv4 address");
    ok(!acme_chal_name_ok("..", 2), "..: no");
    ok(!acme_chal_name_ok("a..b", 4), "an empty label: no");
    ok(!acme_chal_name_ok("a/b", 3), "a slash: no");
    ok(!acme_chal_name_ok("-a.org", 6), "a leading hyphen: no");
    ok(!acme_chal_name_ok("a.org.", 6), "a trailing dot: no");
    ok(!acme_chal_name_ok("*.a.org", 7), "a wildcard: no");
    ok(!acme_chal_name_ok("", 0), "empty: no");
    char l[300];
    memset(l, 'a', sizeof l);
    ok(!acme_chal_name_ok(l, 64), "a 64-byte label: no");
    ok(acme_chal_name_ok(l, 63), "a 63-byte label");
    for (int i = 63; i < 300; i += 64)
        l[i] = '.';
    ok(acme_chal_name_ok(l, 253), "253 bytes");
    ok(!acme_chal_name_ok(l, 254) && !acme_chal_name_ok(l, 300), "longer: no");
    static const char *const no[] = {"a-.org", "a_b.org", "a b.org", "a.org\177", "a@b", "[::1]",
                                     "1.2.3", "::g", "a:b", "a.-b", "Ab9-Z.09", "a.b~"};
    static const int yes[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        is_int(acme_chal_name_ok(no[i], strlen(no[i])), yes[i], "'%s': %s", no[i],
               yes[i] ? "a name" : "no");
    ok(acme_chal_host_ok("Ab9-Z.09", 8) && !acme_chal_host_ok("192.0.2.1.", 10),
       "a host name of every class of byte; a trailing dot: no");
}

static void test_alpn(acme_chal_t *c)
{
    size_t n = 0;
    put("challenges/tls-alpn-01/www.example.org.pem", "-----BEGIN CERTIFICATE-----\n");
    char *pem = acme_chal_alpn_pem(c, "WWW.Example.ORG.", 16, &n);
    ok(pem && n == 28 && !strcmp(pem, "-----BEGIN CERTIFICATE-----\n"),
       "a challenge, the name in any case, absolute");
    free(pem);
    ok(!acme_chal_alpn_pem(c, "other.example.org", 17, &n), "another name: none");
    put("challenges/tls-alpn-01/192.0.2.1.pem", "four\n");
    put("challenges/tls-alpn-01/2001:db8::1.pem", "six\n");
    const char *r4 = "1.2.0.192.in-addr.arpa";
    pem = acme_chal_alpn_pem(c, r4, strlen(r4), &n);
    is_str(pem, "four\n", "RFC 8738: an IPv4 address by its reverse name");
    free(pem);
    const char *r6 = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.";
    pem = acme_chal_alpn_pem(c, r6, strlen(r6), &n);
    is_str(pem, "six\n", "... an IPv6 address by its nibbles");
    free(pem);
    const char *bad6 = "1.0.0.2.ip6.arpa", *bad4 = "1.2.0.999.in-addr.arpa";
    ok(!acme_chal_alpn_pem(c, bad6, strlen(bad6), &n) &&
           !acme_chal_alpn_pem(c, bad4, strlen(bad4), &n),
       "... not for reverse names of no address");
    ok(!acme_chal_alpn_pem(c, "../status", 9, &n), "../: refused");
    static const char *const badrev[] = {
        /* 32 nibbles, one of them two characters long */
        "10.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.ip6.arpa",
        /* 32 labels, one not hex */
        "g.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa",
        /* 63 bytes of nibbles, but dots where hex should be: an empty label */
        "1..0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.02.ip6.arpa",
        "1.2.0.192.0.in-addr.arpa", /* five labels */
        "1.2.0.in-addr.arpa",       /* three */
        "1..0.192.in-addr.arpa",    /* an empty one */
        "1.2.0.1920.in-addr.arpa",  /* four digits */
        "1.2.x.192.in-addr.arpa",   /* not a digit */
        "in-addr.arpa", ".in-addr.arpa", "ip6.arpa",
    };
    for (size_t i = 0; i < sizeof badrev / sizeof badrev[0]; i++)
        ok(!acme_chal_alpn_pem(c, badrev[i], strlen(badrev[i]), &n), "no address: %s", badrev[i]);
    const char *r4up = "1.2.0.192.IN-ADDR.ARPA";
    pem = acme_chal_alpn_pem(c, r4up, strlen(r4up), &n);
    is_str(pem, "four\n", "a reverse name in capitals");
    free(pem);
    const char *r6up = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.B.D.0.1.0.0.2.IP6.ARPA";
    pem = acme_chal_alpn_pem(c, r6up, strlen(r6up), &n);
    is_str(pem, "six\n", "... an IPv6 one in capitals, its nibbles too");
    free(pem);
    char big[ACME_ALPN_PEM_MAX + 2];
    memset(big, 'x', sizeof big - 1), big[sizeof big - 1] = 0;
    put("challenges/tls-alpn-01/big.example.org.pem", big);
    ok(!acme_chal_alpn_pem(c, "big.example.org", 15, &n), "past ACME_ALPN_PEM_MAX: none");
}

static void test_status(acme_chal_t *c)
{
    char buf[64];
    is_int(acme_chal_status(c, buf, sizeof buf), 0, "no status file: 0");
    put("challenges/status", "orders 3\nfailures 1\n");
    is_int(acme_chal_status(c, buf, sizeof buf), 20, "the status file");
    is_str(buf, "orders 3\nfailures 1\n", "its text");
    is_int(acme_chal_status(c, buf, 10), 0, "too long for the buffer: none");
    ok(acme_chal_status(NULL, buf, sizeof buf) == 0 && !acme_chal_alpn_pem(NULL, "a", 1, NULL),
       "no state directory: nothing");
}

static void test_status_parse(void)
{
    acme_status_t *st = malloc(sizeof *st);
    if (!st)
        return;
    ok(acme_chal_status_parse("orders 3\nfailures 1\ncert example.org 1790000000 1780000000 0\n"
                              "cert 192.0.2.1 0 1700000000 4\n", st) == 0 &&
           st->orders == 3 && st->failures == 1 && st->n == 2,
       "a status file");
    ok(!strcmp(st->names[0].name, "example.org") && st->names[0].not_after == 1790000000 &&
           st->names[0].next == 1780000000 && st->names[1].fails == 4,
       "its names");
    ok(acme_chal_status_parse("cert a.org 1 2 3 Pebble Intermediate CA 0a1b\n", st) == 0 &&
           st->n == 1 && !strcmp(st->names[0].issuer, "Pebble Intermediate CA 0a1b") &&
           st->names[0].fails == 3,
       "the issuer: the rest of the line");
    ok(acme_chal_status_parse("", st) == 0 && st->n == 0 && st->orders == 0, "empty: nothing");
    ok(acme_chal_status_parse("orders 1", st) == 0 && st->orders == 1, "no last line end");
    const char *bad[] = {"orders x\n", "orders -1\n", "orders 1 2\n", "nonsense 1\n",
                         "cert ../x 1 2 3\n", "cert a.org 1 2\n", "cert a.org 1 2 3 \n",
                         "cert a.org 1 2 3 a\tb\n",
                         "cert a.org 1 2 3x\n", "orders 1234567890123456789\n",
                         "cert a\"b 1 2 3\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        is_int(acme_chal_status_parse(bad[i], st), -1, "malformed: %zu", i);
    char *many = malloc(ACME_STATUS_NAMES * 32 + 64), *p = many;
    for (int i = 0; i <= ACME_STATUS_NAMES; i++)
        p += sprintf(p, "cert n%d.org 1 2 3\n", i);
    is_int(acme_chal_status_parse(many, st), -1, "more than ACME_STATUS_NAMES names");
    free(many);
    free(st);
}

/* --acme-on-demand: the names that may be asked for, the status file's
   lines, the refusals file, the ask's datagram. */
static void test_ondemand(acme_chal_t *c)
{
    const char *yes[] = {"shop.customer.example", "a.b", "xn--bcher-kva.example", "a.b.c.d.e"};
    const char *no[] = {"localhost", "192.0.2.1", "10.0.0.300", "a..b", "-a.b", "a.b-",
                        "a_b.example", "a.b.", "", "a.123"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        is_int(acme_chal_ondemand_ok(yes[i], strlen(yes[i])), 1, "may be asked: %s", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        is_int(acme_chal_ondemand_ok(no[i], strlen(no[i])), 0, "never asked: '%s'", no[i]);
    acme_status_t *st = malloc(sizeof *st);
    if (st) {
        ok(acme_chal_status_parse("orders 1\nfailures 0\ncert a.example 1 2 0\n"
                                  "cert b.example 1 2 0\nod_names 1\nod_asks 5\nod_allowed 1\n"
                                  "od_refused 2\nod_limited 1\nod_invalid 1\n"
                                  "ondemand_name b.example\n", st) == 0 &&
               st->od_names == 1 && st->od_asks == 5 && st->od_refused == 2 &&
               st->od_limited == 1 && st->od_invalid == 1 && !st->names[0].ondemand &&
               st->names[1].ondemand,
           "the on-demand lines");
        is_int(acme_chal_status_parse("ondemand_name c.example\n", st), -1,
               "an on-demand name without its cert line");
        free(st);
    }
    put("challenges/ondemand", "nope.example 2000000000\nold.example 1000\n");
    is_int(acme_chal_refused(c, "NOPE.example", 12, 1700000000), 1, "refused lately");
    is_int(acme_chal_refused(c, "old.example", 11, 1700000000), 0, "a refusal run out");
    is_int(acme_chal_refused(c, "nope.exampl", 11, 1700000000), 0, "another name");
    is_int(acme_chal_ondemand(c), 0, "no socket: off");
    is_int(acme_chal_ask(c, "a.example", 9, "192.0.2.1"), -1, "no socket: no ask");
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0) {
        char buf[400];
        acme_chal_set_ask(c, sv[0]);
        ok(acme_chal_ondemand(c) && acme_chal_ask(c, "a.example", 9, "192.0.2.1") == 0,
           "an ask sent");
        ssize_t n = recv(sv[1], buf, sizeof buf - 1, MSG_DONTWAIT);
        buf[n > 0 ? n : 0] = 0;
        is_str(buf, "a.example 192.0.2.1", "as NAME ADDR");
        is_int(acme_chal_ask(c, "192.0.2.1", 9, "x"), -1, "an IP literal is never sent");
        close(sv[1]);
    }
}

int main(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(base, sizeof base, "%s/t_acme_chal.XXXXXX", tmp);
    if (!mkdtemp(base))
        return perror("mkdtemp"), 1;
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/challenges", base);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/challenges/http-01", base);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/challenges/tls-alpn-01", base);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/challenges", base);
    acme_chal_t *c = acme_chal_open(open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ok(c != NULL, "acme_chal_open");
    put("status", "orders 9\n"); /* beside challenges/: out of the loops' reach */
    if (c) {
        test_http(c);
        test_alpn(c);
        test_status(c);
        test_ondemand(c);
    }
    test_names();
    test_status_parse();
    acme_chal_free(c);
    snprintf(p, sizeof p, "rm -rf '%s'", base);
    (void)!system(p);
    return tap_done();
}
