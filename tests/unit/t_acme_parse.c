/* t_acme_parse — what the ACME client reads from a CA (gatling/acme/acme_parse.c):
   Pebble's directory, orders and authorizations, problem documents, RFC 9773
   windows and RFC 3339 times, the response headers; and refusals of what is
   not JSON, lacks a field, or does not fit. */
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

int main(void)
{
    test_dir();
    test_order_authz();
    test_problem_ari();
    test_headers();
    return tap_done();
}
