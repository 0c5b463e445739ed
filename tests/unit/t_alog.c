/* alog --log-format json: every byte a request can carry comes out as valid
   JSON (RFC 8259): controls as \u00XX, '"' and '\' escaped, valid UTF-8 kept,
   each byte of an invalid sequence U+FFFD.  With T_ALOG_OUT=FILE the lines are
   left in FILE, for test_log_json.py to read with Python's json and jq. */
#include "alog.h"
#include "tap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char out[1 << 20];

static size_t slurp(const char *path)
{
    int fd = open(path, O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, out, sizeof out - 1);
    if (fd >= 0)
        close(fd);
    out[n > 0 ? n : 0] = 0;
    return n > 0 ? (size_t)n : 0;
}

/* Is s[0..n) valid UTF-8 with no raw control byte but the newlines? */
static int clean_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!k || i + k > n || ((c < 0x20 && c != '\n') || c == 0x7f))
            return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
        i += k;
    }
    return 1;
}

int main(void)
{
    const char *keep = getenv("T_ALOG_OUT");
    char path[] = "/tmp/t_alog.XXXXXX";
    int fd = keep ? open(keep, O_WRONLY | O_CREAT | O_TRUNC, 0644) : mkstemp(path);
    ok(fd >= 0, "log file");
    alog_t l;
    alog_init(&l, fd);
    l.json = 1;
    char every[256 + 64], ua[] = "\"q\\b\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\xc0\xaf\xed\xa0\x80"
                                 "\xf4\x90\x80\x80\xe2\x82|\xff";
    for (int i = 0; i < 256; i++)
        every[i] = (char)i;
    static char big[5000];
    memset(big, '\x01', sizeof big);
    http_request_t req = {.line = {every, 256}, .nheaders = 2};
    req.headers[0] = (http_header_t){{"User-Agent", 10}, {ua, sizeof ua - 1}};
    req.headers[1] = (http_header_t){{"Referer", 7}, {big, sizeof big}};
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "192.0.2.7", &a.sin_addr);
    exchange_t ex;
    memset(&ex, 0, sizeof ex);
    memcpy(ex.vhost, "v\"h\x01", 5);
    strcpy(ex.log_upstream, "127.0.0.1/8001");
    ex.upstream_us = 1234;
    alog_facts_t f = {.proto = "h2", .tls_version = "TLSv1.3", .tls_cipher = "X", .ex = &ex,
                      .duration_us = 5678};
    alog_request(&l, 1795000000, NULL, (struct sockaddr *)&a, &req, 200, 42, ALOG_TLS, &f);
    alog_request(&l, 1795000000, NULL, (struct sockaddr *)&a, NULL, 400, 0, 0, NULL);
    alog_flush(&l);
    size_t n = slurp(keep ? keep : path);
    ok(n > 256 * 2, "written: %zu bytes", n);
    ok(clean_utf8((const unsigned char *)out, n), "valid UTF-8, no raw control byte");
    ok(strstr(out, "\\u0000\\u0001") && strstr(out, "\\u001f !\\\"#") &&
           strstr(out, "[\\\\]") && strstr(out, "~\\u007f\\ufffd"),
       "controls as \\u00XX, quote and backslash escaped, 0x80 as U+FFFD");
    ok(strstr(out, "\"user_agent\":\"\\\"q\\\\b\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|"
                   "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"
                   "\\ufffd|\\ufffd\"") != NULL,
       "valid UTF-8 kept; overlong, surrogate, > U+10FFFF, cut short: U+FFFD each byte");
    ok(strstr(out, "\"vhost\":\"v\\\"h\\u0001\"") &&
           strstr(out, "\"upstream\":\"127.0.0.1/8001\"") &&
           strstr(out, "\"upstream_us\":1234") && strstr(out, "\"duration_us\":5678") &&
           strstr(out, "\"remote\":\"192.0.2.7\"") && strstr(out, "\"time\":\"2026-11-18T"),
       "the facts");
    ok(strstr(out, "\"request\":null,\"status\":400") != NULL, "no request: null");
    char *nl = strchr(out, '\n');
    ok(nl && nl[1] == '{' && strchr(nl + 1, '\n') == out + n - 1, "two lines");
    alog_free(&l);
    close(fd);
    if (!keep)
        unlink(path);
    return tap_done();
}
