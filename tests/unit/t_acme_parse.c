/* t_acme_parse — what the ACME client reads from a CA (gatling/acme/acme_parse.c):
   Pebble's directory, orders and authorizations, problem documents, RFC 9773
   windows and RFC 3339 times, the response headers; and refusals of what is
   not JSON, lacks a field, or does not fit. */
#include <stdio.h>
#include <string.h>

#include "acme_parse.h"
#include "tap.h"

#define S(x) x, strlen(x)

static void test_dir(void)
{
    acme_dir_t d;
    const char *pebble =
        "{\"keyChange\":\"https://localhost:14000/rollover-account-key\",\"meta\":{"
        "\"profiles\":{\"default\":\"d\",\"shortlived\":\"s\"},\"termsOfService\":\"data:x\"},"
        "\"newAccount\":\"https://localhost:14000/sign-me-up\",\"newNonce\":"
        "\"https://localhost:14000/nonce-plz\",\"newOrder\":\"https://localhost:14000/order-plz\","
        "\"renewalInfo\":\"https://localhost:14000/draft-ietf-acme-ari-03/renewalInfo\"}";
    is_int(acme_parse_dir(S(pebble), &d), 0, "Pebble's directory");
    is_str(d.new_order, "https://localhost:14000/order-plz", "newOrder");
    is_str(d.renewal_info, "https://localhost:14000/draft-ietf-acme-ari-03/renewalInfo", "ARI");
    is_int(d.nprofiles, 2, "two profiles");
    is_int(acme_parse_dir(S("{\"newNonce\":\"a\",\"newAccount\":\"b\"}"), &d), -1,
           "no newOrder: refused");
    is_int(acme_parse_dir(S("<html>502 Bad Gateway</html>"), &d), -1, "HTML: refused");
    is_int(acme_parse_dir(S("{\"newNonce\":1,\"newAccount\":\"b\",\"newOrder\":\"c\"}"), &d), -1,
           "a number for a URL: refused");
    is_int(acme_parse_dir(S("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]"), &d),
           -1, "deep nesting: refused");
    char big[3000];
    snprintf(big, sizeof big, "{\"newNonce\":\"%02000d\",\"newAccount\":\"b\","
             "\"newOrder\":\"c\"}", 0);
    is_int(acme_parse_dir(S(big), &d), -1, "a URL too long: refused, not cut");
}

static void test_order_authz(void)
{
    acme_order_t o;
    acme_authz_t a;
    const char *ord = "{\"status\":\"pending\",\"identifiers\":[{\"type\":\"dns\","
                      "\"value\":\"a.test\"}],\"authorizations\":[\"https://ca/authz/1\"],"
                      "\"finalize\":\"https://ca/f/1\"}";
    is_int(acme_parse_order(S(ord), &o), 0, "an order");
    is_int(o.nauthz, 1, "one authorization");
    is_str(o.certificate, "", "no certificate yet");
    is_str(o.error, "", "no error");
    is_int(acme_parse_order(S("{\"status\":\"invalid\",\"authorizations\":[],\"finalize\":"
                              "\"f\",\"error\":{\"type\":\"urn:ietf:params:acme:error:"
                              "unauthorized\",\"detail\":\"no challenge passed\"}}"),
                            &o),
           0, "an invalid order");
    is_str(o.error, "urn:ietf:params:acme:error:unauthorized: no challenge passed",
           "its error, type and detail");
    is_int(acme_parse_order(S("{\"status\":\"valid\",\"authorizations\":[],\"finalize\":\"f\","
                              "\"certificate\":\"https://ca/cert/1\"}"),
                            &o),
           0, "a valid order");
    is_str(o.certificate, "https://ca/cert/1", "its certificate");
    is_int(acme_parse_order(S("{\"status\":\"pending\",\"authorizations\":[1],\"finalize\":\"f\"}"),
                            &o),
           -1, "a number for an authorization: refused");
    const char *az =
        "{\"status\":\"pending\",\"identifier\":{\"type\":\"dns\",\"value\":\"a.test\"},"
        "\"challenges\":[{\"type\":\"dns-01\",\"url\":\"u0\",\"token\":\"t0\"},"
        "{\"type\":\"http-01\",\"url\":\"u1\",\"token\":\"tok-_1\"},"
        "{\"type\":\"tls-alpn-01\",\"url\":\"u2\",\"token\":\"../../etc/passwd\"}]}";
    is_int(acme_parse_authz(S(az), &a), 0, "an authorization");
    is_str(a.http_url, "u1", "its http-01 challenge");
    is_str(a.http_token, "tok-_1", "its token");
    is_str(a.alpn_url, "", "a token that is no base64url: the challenge is not offered");
    const char *bad = "{\"status\":\"invalid\",\"identifier\":{\"type\":\"dns\",\"value\":\"a\"},"
                      "\"challenges\":[{\"type\":\"http-01\",\"url\":\"u\",\"token\":\"t\","
                      "\"error\":{\"type\":\"urn:ietf:params:acme:error:connection\","
                      "\"detail\":\"refused\"}}]}";
    is_int(acme_parse_authz(S(bad), &a), 0, "an invalid authorization");
    is_str(a.error, "urn:ietf:params:acme:error:connection: refused", "its challenge's error");
}

static void test_problem_ari(void)
{
    acme_problem_t p;
    time_t s, e, t;
    is_int(acme_parse_problem(S("{\"type\":\"urn:ietf:params:acme:error:rateLimited\","
                                "\"detail\":\"too many\",\"status\":429}"),
                              &p),
           0, "a problem document");
    is_str(p.type, "urn:ietf:params:acme:error:rateLimited", "its type");
    is_str(p.detail, "too many", "its detail");
    is_int(acme_parse_problem(S("{\"detail\":\"x\"}"), &p), -1, "no type: refused");
    is_int(acme_parse_ari(S("{\"suggestedWindow\":{\"start\":\"2026-11-26T04:00:00Z\","
                            "\"end\":\"2026-11-26T04:30:00.25+01:00\"}}"),
                          &s, &e),
           -1, "an end before the start: refused");
    is_int(acme_parse_ari(S("{\"suggestedWindow\":{\"start\":\"2026-11-26T04:00:00Z\","
                            "\"end\":\"2026-11-26T06:00:00.25+01:00\"}}"),
                          &s, &e),
           0, "an ARI window");
    is_int(e - s, 3600, "its length");
    is_int(acme_parse_time("1970-01-01T00:01:40Z", &t), 0, "an RFC 3339 time");
    is_int(t, 100, "its value");
    is_int(acme_parse_time("1970-01-01T00:01:40", &t), -1, "no zone: refused");
    is_int(acme_parse_time("1970-13-01T00:01:40Z", &t), -1, "month 13: refused");
}

static void test_headers(void)
{
    acme_head_t h;
    memset(&h, 0, sizeof h);
    h.retry_after = -1;
    acme_parse_header(&h, S("Replay-Nonce: abc_-\r\n"), 0);
    acme_parse_header(&h, S("location:https://ca/o/1\r\n"), 0);
    acme_parse_header(
        &h, S("Link: <https://ca/dir>;rel=\"index\", <https://ca/c/1/1>;rel=\"alternate\"\r\n"), 0);
    acme_parse_header(&h, S("Link: <https://ca/c/1/2>; rel=\"alternate\"\r\n"), 0);
    is_str(h.nonce, "abc_-", "Replay-Nonce");
    is_str(h.location, "https://ca/o/1", "Location");
    is_int(h.nalt, 2, "two alternates");
    is_str(h.alt[0], "https://ca/c/1/1", "the first, not the index");
    acme_parse_header(&h, S("Retry-After: 120\r\n"), 0);
    is_int(h.retry_after, 120, "Retry-After in seconds");
    acme_parse_header(&h, S("Retry-After: Thu, 01 Jan 1970 00:10:00 GMT\r\n"), 60);
    is_int(h.retry_after, 540, "Retry-After as a date");
    acme_parse_header(&h, S("Retry-After: 99999999999999999999\r\n"), 0);
    is_int(h.retry_after, ACME_RETRY_AFTER_CAP, "Retry-After past a long: saturated, no overflow");
    acme_parse_header(&h, S("Retry-After: Fri, 31 Dec 9999 23:59:59 GMT\r\n"), 60);
    is_int(h.retry_after, ACME_RETRY_AFTER_CAP, "Retry-After as a far date: saturated");
    ok(acme_token_ok("abc-_0") && !acme_token_ok("") && !acme_token_ok("a/b") &&
           !acme_token_ok(".."),
       "tokens: base64url only");
}

/* Each refusal of the directory, an order and an authorization by its own
   cause, one field at a time (issue 55: every branch of the parser). */
static void test_dir_refusals(void)
{
    acme_dir_t d;
    char big[2200];
    is_int(acme_parse_dir("{}", (1u << 24) + 1, &d), -1, "past 16 MiB: refused unread");
    is_int(acme_parse_dir(S("{\"newNonce\":\"a\""), &d), -1, "cut short: refused");
    is_int(acme_parse_dir(S("\"a string\""), &d), -1, "JSON but no object: refused");
    is_int(acme_parse_dir(S("{\"newNonce\":\"a\\u0000b\",\"newAccount\":\"b\",\"newOrder\":\"c\"}"),
                          &d),
           -1, "a NUL inside a URL: refused");
    snprintf(big, sizeof big, "{\"newNonce\":\"%01100d\",\"newAccount\":\"b\",\"newOrder\":\"c\"}", 0);
    is_int(acme_parse_dir(S(big), &d), -1, "a URL past ACME_URL_MAX: refused");
    is_int(acme_parse_dir(S("{\"newNonce\":\"a\",\"newOrder\":\"c\"}"), &d), -1,
           "no newAccount: refused");
    is_int(acme_parse_dir(S("{\"newNonce\":\"a\",\"newAccount\":\"b\",\"newOrder\":\"c\","
                            "\"renewalInfo\":7,\"meta\":{\"website\":\"w\"}}"),
                          &d),
           0, "a directory without profiles, renewalInfo no string");
    ok(d.renewal_info[0] == 0 && d.nprofiles == 0, "no ARI, no profiles");
    is_int(acme_parse_dir(S("{\"newNonce\":\"a\",\"newAccount\":\"b\",\"newOrder\":\"c\"}"), &d),
           0, "a directory without meta");
    is_int(d.nprofiles, 0, "no profile");
    static acme_authz_t az;
    acme_problem_t pb;
    is_int(acme_parse_authz(S("{\"identifier\":{\"value\":\"x\"},\"challenges\":[]}"), &az), -1,
           "an authorization without status: refused");
    is_int(acme_parse_problem(S("<html>"), &pb), -1, "a problem no JSON: refused");
    is_int(acme_parse_dir(S("{\"newNonce\":\"a\",\"newAccount\":\"b\",\"newOrder\":\"c\","
                            "\"meta\":{\"profiles\":[\"x\"]}}"),
                          &d),
           0, "profiles not an object: the directory stands");
    is_int(d.nprofiles, 0, "and no profile is taken");
    snprintf(big, sizeof big,
             "{\"newNonce\":\"a\",\"newAccount\":\"b\",\"newOrder\":\"c\",\"meta\":{\"profiles\":"
             "{\"%070d\":\"\",\"p1\":\"\",\"p2\":\"\",\"p3\":\"\",\"p4\":\"\",\"p5\":\"\","
             "\"p6\":\"\",\"p7\":\"\",\"p8\":\"\",\"p9\":\"\"}}}",
             0);
    is_int(acme_parse_dir(S(big), &d), 0, "ten profiles, one of them a long name");
    is_int(d.nprofiles, ACME_PROFILES_MAX, "the long name left out, eight kept");
    is_str(d.profiles[0], "p1", "the first that fits");
}

static void test_order_refusals(void)
{
    acme_order_t o;
    char big[12000];
    is_int(acme_parse_order(S("{\"finalize\":\"f\",\"authorizations\":[]}"), &o), -1,
           "no status: refused");
    is_int(acme_parse_order(S("{\"status\":\"pending\",\"authorizations\":[]}"), &o), -1,
           "no finalize: refused");
    is_int(acme_parse_order(S("{\"status\":\"pending\",\"finalize\":\"f\"}"), &o), -1,
           "no authorizations: refused");
    is_int(acme_parse_order(S("{\"status\":\"pending\",\"finalize\":\"f\",\"authorizations\":\"a\"}"),
                            &o),
           -1, "authorizations not an array: refused");
    is_int(acme_parse_order(S("{\"status\":\"pending\",\"finalize\":\"f\",\"authorizations\":[1]}"),
                            &o),
           -1, "an authorization not a string: refused");
    snprintf(big, sizeof big,
             "{\"status\":\"pending\",\"finalize\":\"f\",\"authorizations\":[\"%01100d\"]}", 0);
    is_int(acme_parse_order(S(big), &o), -1, "an authorization past ACME_URL_MAX: refused");
    is_int(acme_parse_order(S("{\"status\":\"pending\",\"finalize\":\"f\",\"authorizations\":"
                              "[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]}"),
                            &o),
           -1, "nine authorizations: refused");
    is_int(acme_parse_order(S("{\"status\":\"valid\",\"finalize\":\"f\",\"authorizations\":[\"a\"],"
                              "\"certificate\":\"https://ca/cert/1\",\"error\":\"oops\"}"),
                            &o),
           0, "a valid order, its error not an object");
    ok(!strcmp(o.certificate, "https://ca/cert/1") && o.error[0] == 0,
       "the certificate's URL, and no error");
    is_int(acme_parse_order(S("{\"status\":\"invalid\",\"finalize\":\"f\",\"authorizations\":[],"
                              "\"error\":{\"detail\":\"no type\"}}"),
                            &o),
           0, "an invalid order whose error has no type");
    is_str(o.error, ": no type", "its error as it came");
}

static void test_authz_refusals(void)
{
    acme_authz_t a;
    const char *id = "\"status\":\"pending\",\"identifier\":{\"type\":\"dns\",\"value\":\"x.org\"}";
    char buf[2048];
    is_int(acme_parse_authz(S("{\"status\":\"pending\",\"identifier\":\"x.org\",\"challenges\":[]}"),
                            &a),
           -1, "an identifier not an object: refused");
    is_int(acme_parse_authz(S("{\"status\":\"pending\",\"identifier\":{\"type\":\"dns\"},"
                              "\"challenges\":[]}"),
                            &a),
           -1, "an identifier without a value: refused");
    snprintf(buf, sizeof buf, "{%s}", id);
    is_int(acme_parse_authz(S(buf), &a), -1, "no challenges: refused");
    snprintf(buf, sizeof buf, "{%s,\"challenges\":{}}", id);
    is_int(acme_parse_authz(S(buf), &a), -1, "challenges not an array: refused");
    snprintf(buf, sizeof buf,
             "{%s,\"challenges\":[7,{\"url\":\"u0\",\"token\":\"t\"},{\"type\":\"http-01\","
             "\"token\":\"t\"},{\"type\":\"http-01\",\"url\":\"u1\"},{\"type\":\"http-01\","
             "\"url\":\"u2\",\"token\":\"a/b\"},{\"type\":\"tls-alpn-01\",\"url\":\"u3\","
             "\"token\":\"T3\",\"error\":{\"type\":\"urn:x\",\"detail\":\"first\"}},"
             "{\"type\":\"dns-01\",\"url\":\"u4\",\"token\":\"T4\",\"error\":{\"type\":\"urn:y\","
             "\"detail\":\"second\"}},{\"type\":\"dns-account-01\",\"url\":\"u5\",\"token\":\"T5\"}]}",
             id);
    is_int(acme_parse_authz(S(buf), &a), 0, "challenges of every kind of fault");
    ok(!a.http_url[0] && !a.http_token[0], "no http-01: without a url, a token, or a good token");
    ok(!strcmp(a.alpn_url, "u3") && !strcmp(a.alpn_token, "T3"), "tls-alpn-01 taken");
    ok(!strcmp(a.dns_url, "u4") && !strcmp(a.dns_token, "T4"), "dns-01 taken");
    is_str(a.error, "urn:x: first", "the first challenge's error is kept");
    buf[0] = 0;
    size_t n = (size_t)snprintf(buf, sizeof buf, "{%s,\"challenges\":[", id);
    for (int i = 0; i < 17; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s{\"type\":\"%s\",\"url\":\"u%d\","
                              "\"token\":\"t%d\"}", i ? "," : "", i < 16 ? "x-01" : "http-01", i, i);
    snprintf(buf + n, sizeof buf - n, "]}");
    is_int(acme_parse_authz(S(buf), &a), 0, "seventeen challenges");
    ok(!a.http_url[0], "the seventeenth is not looked at");
}

static void test_problem_time(void)
{
    acme_problem_t p;
    char big[1200];
    time_t t;
    snprintf(big, sizeof big, "{\"type\":\"urn:x\",\"detail\":\"%0500d\"}", 7);
    is_int(acme_parse_problem(S(big), &p), 0, "a detail too long for the line");
    ok(strlen(p.detail) == sizeof p.detail - 1 && p.detail[0] == '0', "cut, not dropped");
    is_int(acme_parse_problem(S("{\"type\":\"urn:x\",\"detail\":5}"), &p), 0, "a detail no string");
    is_str(p.detail, "", "left empty");
    is_int(acme_parse_problem(S("{\"detail\":\"d\"}"), &p), -1, "no type: refused");
    static const char *const bad[] = {
        "1970-01-01", "1970/01-01T00:00:00Z", "1970-01/01T00:00:00Z", "1970-01-01 00:00:00Z",
        "1970-01-01T00-00:00Z", "1970-01-01T00:00-00Z", "19x0-01-01T00:00:00Z",
        "3100-01-01T00:00:00Z", "1970-00-01T00:00:00Z", "1970-01-00T00:00:00Z",
        "1970-01-32T00:00:00Z", "1970-01-01T24:00:00Z", "1970-01-01T00:60:00Z",
        "1970-01-01T00:00:61Z", "1970-01-01T0a:00:00Z", "1970-01-01T00:0a:00Z",
        "1970-01-01T00:00:0aZ", "1970-01-01T00:00:00Zx", "1970-01-01T00:00:00+0100",
        "1970-01-01T00:00:00+01-00", "1970-01-01T00:00:00+0a:00", "1970-01-01T00:00:00+01:0a",
        "1970-01-01T00:00:00*01:00"};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused += acme_parse_time(bad[i], &t) == -1;
    is_int(refused, (int)(sizeof bad / sizeof bad[0]), "every malformed time refused");
    ok(acme_parse_time("1970-01-01t00:01:40.125z", &t) == 0 && t == 100,
       "lower-case t and z, a fraction");
    ok(acme_parse_time("1970-01-01T01:01:40+01:00", &t) == 0 && t == 100, "an offset east");
    ok(acme_parse_time("1970-01-01T00:00:00-00:30", &t) == 0 && t == 1800, "an offset west");
    ok(acme_parse_time("1970-01-01T00:00:60Z", &t) == 0 && t == 60, "a leap second");
}

static void test_ari_refusals(void)
{
    time_t s, e;
    is_int(acme_parse_ari(S("{}"), &s, &e), -1, "no window: refused");
    is_int(acme_parse_ari(S("{\"suggestedWindow\":\"soon\"}"), &s, &e), -1,
           "a window no object: refused");
    is_int(acme_parse_ari(S("{\"suggestedWindow\":{\"end\":\"1970-01-01T00:00:00Z\"}}"), &s, &e), -1,
           "no start: refused");
    is_int(acme_parse_ari(S("{\"suggestedWindow\":{\"start\":\"1970-01-01T00:00:00Z\"}}"), &s, &e),
           -1, "no end: refused");
    is_int(acme_parse_ari(S("{\"suggestedWindow\":{\"start\":\"then\",\"end\":"
                            "\"1970-01-01T00:00:00Z\"}}"),
                          &s, &e),
           -1, "a start no time: refused");
    is_int(acme_parse_ari(S("{\"suggestedWindow\":{\"start\":\"1970-01-01T00:00:00Z\",\"end\":"
                            "\"later\"}}"),
                          &s, &e),
           -1, "an end no time: refused");
    is_int(acme_parse_ari(S("{\"suggestedWindow\":{\"start\":\"1970-01-02T00:00:00Z\",\"end\":"
                            "\"1970-01-01T00:00:00Z\"}}"),
                          &s, &e),
           -1, "an end before its start: refused");
}

static void test_header_edges(void)
{
    acme_head_t h;
    char big[1200];
    memset(&h, 0, sizeof h);
    h.retry_after = -1;
    acme_parse_header(&h, S("Replay-Nonce abc\r\n"), 0);
    acme_parse_header(&h, S("X-Nonce: abc\r\n"), 0);
    acme_parse_header(&h, S("Replay-Nonces: abc\r\n"), 0);
    is_str(h.nonce, "", "no colon, another name, a longer name: nothing taken");
    acme_parse_header(&h, S("Replay-Nonca: x\r\n"), 0);
    acme_parse_header(&h, S("Locatiox: x\r\n"), 0);
    acme_parse_header(&h, S("Lynk: <x>;rel=alternate\r\n"), 0);
    acme_parse_header(&h, S("Retry-Aftex: 5\r\n"), 0);
    ok(!h.nonce[0] && !h.location[0] && !h.nalt && h.retry_after == -1,
       "names of the right lengths, not the right names: nothing taken");
    acme_parse_header(&h, S("Replay-Nonce: \t a\tb \t\r\n"), 0);
    is_str(h.nonce, "a\tb", "blanks trimmed at both ends only");
    acme_parse_header(&h, "Replay-Nonce: x\0y\r\n", 18, 0);
    is_str(h.nonce, "a\tb", "a value with a NUL is not taken");
    snprintf(big, sizeof big, "Location: %01100d\r\n", 0);
    acme_parse_header(&h, S(big), 0);
    is_str(h.location, "", "a Location past its room is not taken");
    acme_parse_header(&h, S("Link: https://ca/c/1;rel=\"alternate\"\r\n"), 0);
    acme_parse_header(&h, S("Link: <https://ca/c/2;rel=\"alternate\"\r\n"), 0);
    is_int(h.nalt, 0, "a Link without <...> is not taken");
    acme_parse_header(&h, S("Link: <a1>;rel=alternate,<a2>;rel=\"up\",<a3>;rel=\"alternate\","
                            "<a4>;rel=alternate,<a5>;rel=alternate,<a6>;rel=alternate\r\n"),
                      0);
    ok(h.nalt == ACME_ALTS_MAX && !strcmp(h.alt[0], "a1") && !strcmp(h.alt[1], "a3"),
       "rel unquoted, not alternate skipped, four at most");
    memset(&h, 0, sizeof h);
    snprintf(big, sizeof big, "Link: <%01100d>;rel=\"alternate\"\r\n", 0);
    acme_parse_header(&h, S(big), 0);
    is_int(h.nalt, 0, "an alternate past ACME_URL_MAX is not taken");
    h.retry_after = -1;
    acme_parse_header(&h, S("Retry-After: -5\r\n"), 0);
    is_int(h.retry_after, -1, "a negative Retry-After: ignored");
    acme_parse_header(&h, S("Retry-After: soon\r\n"), 0);
    is_int(h.retry_after, -1, "a Retry-After neither seconds nor a date: ignored");
    acme_parse_header(&h, S("Retry-After:  \r\n"), 0);
    is_int(h.retry_after, -1, "an empty Retry-After: ignored");
    acme_parse_header(&h, S("Retry-After: Thu, 01 Jan 1970 00:10:00 GMT\r\n"), 3600);
    is_int(h.retry_after, 0, "a date already past: at once");
    char tok[ACME_TOKEN_MAX + 2];
    memset(tok, 'a', sizeof tok - 1);
    tok[sizeof tok - 1] = 0;
    ok(!acme_token_ok(tok) && (tok[ACME_TOKEN_MAX] = 0, acme_token_ok(tok)),
       "a token of ACME_TOKEN_MAX characters, not one more");
}

int main(void)
{
    test_dir();
    test_order_authz();
    test_problem_ari();
    test_headers();
    test_dir_refusals();
    test_order_refusals();
    test_authz_refusals();
    test_problem_time();
    test_ari_refusals();
    test_header_edges();
    return tap_done();
}
