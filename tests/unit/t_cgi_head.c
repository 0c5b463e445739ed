/*
 * The CGI response head parser (http/cgi_head.c) and the CGI environment
 * (handlers/cgienv.c): whole and byte by byte, the fields read out, every
 * kind of injection refused, the bounds.
 */
#include "tap.h"
#include "cgi_head.h"
#include "cgienv.h"

#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdlib.h>

static cgi_head_t H;
static char *last; /* the last input, kept while H points into it */

/* Parse s whole, in a buffer of its exact size (ASan sees an over-read). */
static long whole(const char *s)
{
    size_t n = strlen(s);
    char *b = malloc(n ? n : 1);
    memcpy(b, s, n);
    memset(&H, 0, sizeof H);
    long r = cgi_head_parse(b, n, &H);
    free(last);
    last = b;
    return r;
}

/* The same, fed a byte at a time into one buffer: the verdict must match. */
static long dripped(const char *s)
{
    size_t n = strlen(s);
    char *b = malloc(n ? n : 1);
    memcpy(b, s, n);
    memset(&H, 0, sizeof H);
    long r = CGI_INCOMPLETE;
    for (size_t k = 0; k <= n && r == CGI_INCOMPLETE; k++)
        r = cgi_head_parse(b, k, &H);
    free(b);
    return r;
}

static int str_is(http_str_t s, const char *want)
{
    return s.p && s.n == strlen(want) && !memcmp(s.p, want, s.n);
}

static void test_basic(void)
{
    const char *s = "Content-Type: text/plain\r\nX-A: 1\r\n\r\nbody";
    is_int(whole(s), (long)strlen(s) - 4, "CR LF head: its length, the body after");
    ok(str_is(H.content_type, "text/plain"), "Content-Type read out");
    is_int(H.status, 0, "no Status");
    is_int(H.content_length, -1, "no Content-Length");
    is_int(H.nfields, 1, "one other field");
    ok(str_is(H.fields[0].name, "X-A") && str_is(H.fields[0].value, "1"), "X-A: 1");
    is_int(dripped(s), (long)strlen(s) - 4, "the same a byte at a time");
    s = "Content-type:   text/html  \n\nx";
    is_int(whole(s), (long)strlen(s) - 1, "bare LF head");
    ok(str_is(H.content_type, "text/html"), "value trimmed, name any case");
    is_int(whole("Content-Type: a\n"), CGI_INCOMPLETE, "no empty line yet: incomplete");
    is_int(whole("Content-Type: a\r\n\r"), CGI_INCOMPLETE, "CR at the end: incomplete");
    is_int(whole(""), CGI_INCOMPLETE, "nothing: incomplete");
    is_int(whole("\r\n"), CGI_MALFORMED, "an empty head: malformed");
    is_int(whole("\n"), CGI_MALFORMED, "an empty head (LF): malformed");
}

static void test_status(void)
{
    const char *s = "Status: 404 Not Here\r\nContent-Type: text/plain\r\n\r\n";
    is_int(whole(s), (long)strlen(s), "Status head");
    is_int(H.status, 404, "Status 404");
    ok(str_is(H.reason, "Not Here"), "its reason");
    is_int(whole("Status: 204\n\n"), 13, "Status without a reason");
    ok(H.status == 204 && H.reason.n == 0, "204, empty reason");
    is_int(whole("Status: 20\n\n"), CGI_MALFORMED, "two digits: malformed");
    is_int(whole("Status: 2000\n\n"), CGI_MALFORMED, "four digits: malformed");
    is_int(whole("Status: 099\n\n"), CGI_MALFORMED, "leading 0: malformed");
    is_int(whole("Status: abc\n\n"), CGI_MALFORMED, "letters: malformed");
    is_int(whole("Status: 200\nStatus: 302\n\n"), CGI_MALFORMED, "Status twice: malformed");
    s = "Location: /elsewhere?x=1\n\n";
    is_int(whole(s), (long)strlen(s), "Location head");
    ok(str_is(H.location, "/elsewhere?x=1"), "Location read out");
    is_int(whole("Location: /a\nLocation: /b\n\n"), CGI_MALFORMED, "Location twice");
    is_int(whole("Location:\n\n"), CGI_MALFORMED, "empty Location");
    s = "Content-Length: 12\nContent-Type: a/b\n\n";
    is_int(whole(s), (long)strlen(s), "Content-Length head");
    is_int(H.content_length, 12, "Content-Length 12");
    is_int(whole("Content-Length: 1x\n\n"), CGI_MALFORMED, "Content-Length 1x");
    is_int(whole("Content-Length: -1\n\n"), CGI_MALFORMED, "Content-Length -1");
    is_int(whole("Content-Length: 1234567890123456789\n\n"), CGI_MALFORMED,
           "Content-Length of 19 digits");
    is_int(whole("Content-Length: 1\nContent-Length: 1\n\n"), CGI_MALFORMED,
           "Content-Length twice");
    static const char *const bad[] = {
        "Status: 2x0\n\n", "Status: 20x\n\n", "Status: x00\n\n", "Status: 200x\n\n",
        "Status:\n\n", "Content-Length:\n\n",
        "Content-Type:\n\n", "Content-Type: a\nContent-Type: b\n\n", "X Y: 1\n\n",
        "X(: 1\n\n", "X@: 1\n\n", "X:1\n Y\n\n", "Field\n\n", ": v\n\n", "X\177: 1\n\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        is_int(whole(bad[i]), CGI_MALFORMED, "malformed: %.*s", (int)strcspn(bad[i], "\n"),
               bad[i]);
    s = "X-A!#$%&'*+-.^_`|~z09: \t v \t\nStatus: 999 Odd\n\n";
    is_int(whole(s), (long)strlen(s), "every tchar in a name, OWS around a value, status 999");
    ok(H.nfields == 1 && str_is(H.fields[0].value, "v") && H.status == 999, "... read out");
}

static void test_nph(void)
{
    const char *s = "HTTP/1.1 201 Made\r\nContent-Type: text/plain\r\n\r\n";
    is_int(whole(s), (long)strlen(s), "NPH head");
    ok(H.nph && H.status == 201 && str_is(H.reason, "Made"), "NPH: 201 Made");
    is_int(whole("HTTP/1.0 200 OK\r\n\r\n"), 19, "NPH status line alone");
    is_int(whole("HTTP/1.0 200 OK\r\nStatus: 404\r\n\r\n"), CGI_MALFORMED,
           "NPH line and Status: malformed");
    is_int(whole("HTTP/2 200 OK\r\n\r\n"), CGI_MALFORMED, "HTTP/2 status line: malformed");
    static const char *const bad[] = {"HTTP/1.x 200 OK\r\n\r\n", "HTTP/1.1x200 OK\r\n\r\n",
                                      "HTTP/1.1 2000\r\n\r\n", "HTTP/1.1 20\r\n\r\n",
                                      "HTTP/3.0 200 OK\r\n\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        is_int(whole(bad[i]), CGI_MALFORMED, "malformed status line: %.15s", bad[i]);
    is_int(whole("HTTP/1.1 200\r\n\r\n"), 16, "NPH without a reason");
    is_int(whole("X: 1\r\nHTTP/1.0 200 OK\r\n\r\n"), CGI_MALFORMED, "status line later: malformed");
}

static void test_injection(void)
{
    is_int(whole("X: a\rb\r\n\r\n"), CGI_MALFORMED, "bare CR in a value");
    is_int(whole("X: a\rSet-Cookie: x\n\n"), CGI_MALFORMED, "bare CR before a field");
    char nul[] = "X: a\0b\n\n";
    memset(&H, 0, sizeof H);
    is_int(cgi_head_parse(nul, sizeof nul - 1, &H), CGI_MALFORMED, "NUL in a value");
    is_int(whole("X: a\x01\n\n"), CGI_MALFORMED, "control character");
    is_int(whole("X: a\x7f\n\n"), CGI_MALFORMED, "DEL");
    is_int(whole("X: a\tb\n\n"), 8, "HTAB in a value is fine");
    is_int(whole("X: a\n b\n\n"), CGI_MALFORMED, "obs-fold");
    is_int(whole("X : a\n\n"), CGI_MALFORMED, "space before the colon");
    is_int(whole(": a\n\n"), CGI_MALFORMED, "no name");
    is_int(whole("X a\n\n"), CGI_MALFORMED, "no colon");
    is_int(whole("X(: a\n\n"), CGI_MALFORMED, "name not a token");
    const char *hop = "Connection: close\nTransfer-Encoding: chunked\nDate: x\nServer: y\nX: 1\n\n";
    is_int(whole(hop), (long)strlen(hop), "hop-by-hop and codec fields accepted ...");
    ok(H.nfields == 1 && str_is(H.fields[0].name, "X"), "... and dropped");
}

static void test_bounds(void)
{
    size_t n = CGI_LINE_MAX;
    char *b = malloc(n + 16);
    memcpy(b, "X: ", 3);
    memset(b + 3, 'a', n - 3);
    memcpy(b + n, "\r\n\r\n", 4);
    memset(&H, 0, sizeof H);
    is_int(cgi_head_parse(b, n + 4, &H), (long)n + 4, "a line of CGI_LINE_MAX bytes (CR LF)");
    memcpy(b + n, "\n\n", 2);
    memset(&H, 0, sizeof H);
    is_int(cgi_head_parse(b, n + 2, &H), (long)n + 2, "a line of CGI_LINE_MAX bytes (LF)");
    b[n] = 'a';
    memcpy(b + n + 1, "\n\n", 2);
    memset(&H, 0, sizeof H);
    is_int(cgi_head_parse(b, n + 3, &H), CGI_MALFORMED, "one byte more: malformed");
    memset(&H, 0, sizeof H);
    is_int(cgi_head_parse(b, n + 1, &H), CGI_MALFORMED, "... as soon as it is seen");
    free(b);
    n = CGI_HEAD_MAX + 100;
    b = malloc(n);
    for (size_t i = 0; i + 8 <= n; i += 8)
        memcpy(b + i, "X: abcd\n", 8);
    memset(&H, 0, sizeof H);
    is_int(cgi_head_parse(b, n, &H), CGI_MALFORMED, "a head over CGI_HEAD_MAX: malformed");
    free(b);
    char many[CGI_FIELDS_MAX * 8 + 16], *p = many;
    for (int i = 0; i <= CGI_FIELDS_MAX; i++)
        p += sprintf(p, "X%02d: 1\n", i);
    strcpy(p, "\n");
    is_int(whole(many), CGI_MALFORMED, "more than CGI_FIELDS_MAX fields");
}

/* The environment of a request, with the string for name looked up. */
static char envbuf[CGIENV_MAX];
static int envn;
static size_t envused;

static const char *var(const char *name)
{
    size_t nl = strlen(name);
    const char *p = envbuf;
    for (int i = 0; i < envn; i++, p += strlen(p) + 1)
        if (!strncmp(p, name, nl) && p[nl] == '=')
            return p + nl + 1;
    return NULL;
}

static long envof(const char *head, exchange_t *ex, const cgi_script_t *sc)
{
    static http_request_t req;
    int st;
    long r = http_parse_request(head, strlen(head), &req, &st);
    ex->req = &req;
    envn = cgienv_build(ex, sc, envbuf, sizeof envbuf, &envused);
    return r;
}

static void test_env(void)
{
    struct sockaddr_in6 peer = {.sin6_family = AF_INET6, .sin6_port = htons(4321)};
    inet_pton(AF_INET6, "::ffff:10.1.2.3", &peer.sin6_addr);
    exchange_t ex = {.local_port = 8080, .peer = (struct sockaddr *)&peer, .req_len = 5};
    cgi_script_t sc = {.script_name = "/cgi/x.sh", .path_info = "/a/b",
                       .filename = "/srv/www/cgi/x.sh", .docroot = "/srv/www", .path = "/bin"};
    const char *head = "POST /cgi/x.sh/a/b?q=1&r HTTP/1.1\r\nHost: Example.org:8080\r\n"
                       "Content-Type: text/plain\r\nContent-Length: 5\r\nProxy: evil\r\n"
                       "Accept: a\r\nX_Under: u\r\naccept: b\r\nCookie: c=1\r\nCookie: d=2\r\n"
                       "Authorization: Basic eDp5\r\n\r\n";
    ok(envof(head, &ex, &sc) > 0 && envn > 0, "environment built");
    is_str(var("GATEWAY_INTERFACE"), "CGI/1.1", "GATEWAY_INTERFACE");
    is_str(var("SERVER_NAME"), "Example.org", "SERVER_NAME without the port");
    is_str(var("SERVER_PORT"), "8080", "SERVER_PORT");
    is_str(var("SERVER_PROTOCOL"), "HTTP/1.1", "SERVER_PROTOCOL");
    is_str(var("REQUEST_METHOD"), "POST", "REQUEST_METHOD");
    is_str(var("REQUEST_URI"), "/cgi/x.sh/a/b?q=1&r", "REQUEST_URI");
    is_str(var("QUERY_STRING"), "q=1&r", "QUERY_STRING");
    is_str(var("SCRIPT_NAME"), "/cgi/x.sh", "SCRIPT_NAME");
    is_str(var("SCRIPT_FILENAME"), "/srv/www/cgi/x.sh", "SCRIPT_FILENAME");
    is_str(var("PATH_INFO"), "/a/b", "PATH_INFO");
    is_str(var("PATH_TRANSLATED"), "/srv/www/a/b", "PATH_TRANSLATED");
    is_str(var("DOCUMENT_ROOT"), "/srv/www", "DOCUMENT_ROOT");
    is_str(var("REMOTE_ADDR"), "10.1.2.3", "REMOTE_ADDR, IPv4-mapped as IPv4");
    is_str(var("REMOTE_PORT"), "4321", "REMOTE_PORT");
    is_str(var("CONTENT_TYPE"), "text/plain", "CONTENT_TYPE");
    is_str(var("CONTENT_LENGTH"), "5", "CONTENT_LENGTH");
    is_str(var("REDIRECT_STATUS"), "200", "REDIRECT_STATUS");
    is_str(var("PATH"), "/bin", "PATH");
    ok(!var("HTTPS"), "no HTTPS over plain HTTP");
    ok(!var("REMOTE_USER") && !var("AUTH_TYPE"), "no REMOTE_USER without a check");
    ok(!var("HTTP_PROXY"), "httpoxy: no HTTP_PROXY");
    ok(!var("HTTP_CONTENT_TYPE") && !var("HTTP_CONTENT_LENGTH"), "no HTTP_CONTENT_*");
    ok(!var("HTTP_AUTHORIZATION"), "no HTTP_AUTHORIZATION");
    ok(!var("HTTP_X_UNDER"), "a name with '_' is not passed");
    is_str(var("HTTP_ACCEPT"), "a, b", "repeated fields joined");
    is_str(var("HTTP_COOKIE"), "c=1; d=2", "Cookie joined with ;");
    is_str(var("HTTP_HOST"), "Example.org:8080", "HTTP_HOST");
    ex.secure = 1, ex.req_len = -1;
    sc.remote_user = "alice", sc.path_info = "";
    envof("GET /x HTTP/1.0\r\n\r\n", &ex, &sc);
    is_str(var("HTTPS"), "on", "HTTPS=on over TLS");
    is_str(var("REMOTE_USER"), "alice", "REMOTE_USER after a check");
    is_str(var("AUTH_TYPE"), "Basic", "AUTH_TYPE");
    is_str(var("SERVER_NAME"), "localhost", "SERVER_NAME without a Host");
    is_str(var("SERVER_PROTOCOL"), "HTTP/1.0", "SERVER_PROTOCOL 1.0");
    is_str(var("QUERY_STRING"), "", "empty QUERY_STRING");
    ok(!var("PATH_INFO") && !var("PATH_TRANSLATED"), "no PATH_INFO, no PATH_TRANSLATED");
    ok(!var("CONTENT_LENGTH"), "no CONTENT_LENGTH for a chunked body");
    is_str(envbuf, "GATEWAY_INTERFACE=CGI/1.1", "GATEWAY_INTERFACE the first string");
    char small[64];
    size_t used;
    is_int(cgienv_build(&ex, &sc, small, sizeof small, &used), -1, "buffer too small: -1");
    http_request_t h3 = *ex.req; /* as h3.c makes it: version 30 */
    h3.version = 30;
    ex.req = &h3;
    envn = cgienv_build(&ex, &sc, envbuf, sizeof envbuf, &envused);
    is_str(var("SERVER_PROTOCOL"), "HTTP/3.0", "SERVER_PROTOCOL over HTTP/3 (RFC 3875 4.1.16)");
}

int main(void)
{
    test_basic();
    test_status();
    test_nph();
    test_injection();
    test_bounds();
    test_env();
    free(last);
    return tap_done();
}
