/*
 * t_h2_frame — HTTP/2's wire format (gatling/h2/h2_frame.c), pure: the
 * frame header and SETTINGS entries byte by byte both ways, the reserved
 * bit, GOAWAY's bound, the floods frames count towards, RFC 9218's priority
 * field, and RFC 9113 8.2/8.3's request-field rules (pseudo-header order,
 * connection-specific fields, upper case, TE, content-length).
 */
#include "h2_frame.h"
#include "response.h"
#include "stats.h"
#include "tap.h"

#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <string.h>

#define U8(s) ((const uint8_t *)(s))

static void test_header(void)
{
    uint8_t b[H2_FRAME_HD + 1];
    memset(b, 0xee, sizeof b);
    h2f_put_hd(b, 0xabcdef, FR_HEADERS, FL_END_HEADERS | FL_END_STREAM, 0x01020304);
    static const uint8_t want[] = {0xab, 0xcd, 0xef, 1, 5, 1, 2, 3, 4};
    ok(!memcmp(b, want, 9), "frame header: length, type, flags, id big-endian");
    is_int(b[9], 0xee, "frame header: nothing written past its 9 bytes");
    h2_frame_hd_t hd = h2f_hd(b);
    is_int(hd.len, 0xabcdef, "parsed length (24 bits)");
    is_int(hd.type, FR_HEADERS, "parsed type");
    is_int(hd.flags, 5, "parsed flags");
    is_int(hd.id, 0x01020304, "parsed stream id");
    static const uint8_t rsv[] = {0, 0, 0, 4, 0, 0xff, 0xff, 0xff, 0xff};
    hd = h2f_hd(rsv);
    is_int(hd.id, 0x7fffffff, "the reserved bit is dropped from the id");
    is_int(hd.len, 0, "an empty frame");
    static const uint8_t max[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    hd = h2f_hd(max);
    is_int(hd.len, 0xffffff, "the largest length");
    is_int(hd.type, 0xff, "an unknown type as it is");
    is_int(h2f_be31(U8("\x80\0\0\x01")), 1, "be31 drops the top bit");
    uint8_t w[4];
    h2f_put32(w, 0xdeadbeef);
    ok(!memcmp(w, "\xde\xad\xbe\xef", 4), "put32 big-endian");
}

static void test_settings(void)
{
    uint8_t b[6];
    uint16_t k;
    uint32_t v;
    h2f_put_setting(b, SET_INITIAL_WINDOW_SIZE, 0x7fffffff);
    ok(!memcmp(b, "\0\x04\x7f\xff\xff\xff", 6), "a SETTINGS entry's 6 bytes");
    h2f_setting(b, &k, &v);
    ok(k == SET_INITIAL_WINDOW_SIZE && v == 0x7fffffff, "... read back");
    h2f_setting(U8("\xff\xfe\xff\xff\xff\xff"), &k, &v);
    ok(k == 0xfffe && v == 0xffffffff, "all 32 bits of a value (no reserved bit)");
    is_int(h2f_setting_check(SET_ENABLE_PUSH, 1), 0, "ENABLE_PUSH 1");
    is_int(h2f_setting_check(SET_ENABLE_PUSH, 2), E_PROTOCOL, "ENABLE_PUSH 2");
    is_int(h2f_setting_check(SET_NO_RFC7540_PRIORITIES, 2), E_PROTOCOL, "NO_RFC7540 2");
    is_int(h2f_setting_check(SET_INITIAL_WINDOW_SIZE, 0x7fffffff), 0, "window 2^31-1");
    is_int(h2f_setting_check(SET_INITIAL_WINDOW_SIZE, 0x80000000), E_FLOW_CONTROL,
           "window 2^31");
    is_int(h2f_setting_check(SET_MAX_FRAME_SIZE, 16383), E_PROTOCOL, "frame size 16383");
    is_int(h2f_setting_check(SET_MAX_FRAME_SIZE, 16384), 0, "frame size 16384");
    is_int(h2f_setting_check(SET_MAX_FRAME_SIZE, 16777215), 0, "frame size 2^24-1");
    is_int(h2f_setting_check(SET_MAX_FRAME_SIZE, 16777216), E_PROTOCOL, "frame size 2^24");
    is_int(h2f_setting_check(0x77, 0xffffffff), 0, "an unknown setting is ignored");
}

static void test_goaway(void)
{
    uint8_t b[18];
    memset(b, 0xee, sizeof b);
    is_int(h2f_goaway(b, 16, 7, E_NO_ERROR), 0, "GOAWAY: 16 bytes are too few");
    is_int(b[0], 0xee, "... and none is written");
    is_int(h2f_goaway(b, 17, 0x7fffffff, E_ENHANCE_YOUR_CALM), 17, "GOAWAY in 17 bytes");
    static const uint8_t want[] = {0, 0, 8, FR_GOAWAY, 0, 0, 0, 0, 0,
                                   0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 11};
    ok(!memcmp(b, want, 17), "GOAWAY's bytes: stream 0, last stream, code");
    is_int(b[17], 0xee, "nothing past them");
}

static void test_floods(void)
{
    is_int(h2f_flood_kind(NULL, 0, FR_DATA, 0), H2_FLOOD_EMPTY_DATA, "empty DATA");
    is_int(h2f_flood_kind(NULL, 0, FR_DATA, FL_END_STREAM), -1, "empty DATA ending a stream");
    is_int(h2f_flood_kind(U8("x"), 1, FR_DATA, 0), -1, "DATA with a byte");
    is_int(h2f_flood_kind(U8("\x02pp"), 3, FR_DATA, FL_PADDED), H2_FLOOD_EMPTY_DATA,
           "DATA of padding only");
    is_int(h2f_flood_kind(U8("\x01pp"), 3, FR_DATA, FL_PADDED), -1, "padded DATA with a byte");
    is_int(h2f_flood_kind(NULL, 0, FR_DATA, FL_PADDED), H2_FLOOD_EMPTY_DATA,
           "padded DATA with no pad length");
    is_int(h2f_flood_kind(NULL, 0, FR_SETTINGS, 0), H2_FLOOD_SETTINGS, "SETTINGS");
    is_int(h2f_flood_kind(NULL, 0, FR_SETTINGS, FL_ACK), -1, "SETTINGS ack");
    is_int(h2f_flood_kind(U8("12345678"), 8, FR_PING, 0), H2_FLOOD_PING, "PING");
    is_int(h2f_flood_kind(U8("12345678"), 8, FR_PING, FL_ACK), -1, "PING ack");
    is_int(h2f_flood_kind(U8("\0\0\0\x01"), 4, FR_WINDOW_UPDATE, 0), -1,
           "WINDOW_UPDATE of 1: by what it buys, which the session knows");
    is_int(h2f_flood_kind(U8("\0\0\0"), 3, FR_WINDOW_UPDATE, 0), -1,
           "a short WINDOW_UPDATE (a frame size error, not a flood)");
    is_int(h2f_flood_kind(U8("\0\0\0\0"), 4, FR_RST_STREAM, 0), H2_FLOOD_RAPID_RESET, "RST");
    is_int(h2f_flood_kind(NULL, 0, FR_HEADERS, 0), -1, "HEADERS");
    is_int(h2f_flood_kind(NULL, 0, FR_CONTINUATION, 0), -1, "CONTINUATION");
    is_int(h2f_flood_kind(NULL, 0, FR_PRIORITY, 0), H2_FLOOD_OTHER, "PRIORITY");
    is_int(h2f_flood_kind(NULL, 0, 0xfa, 0), H2_FLOOD_OTHER, "an unknown type");
}

static void prio(const char *v, int u0, int i0, int u, int i, const char *what)
{
    uint8_t ug = (uint8_t)u0, inc = (uint8_t)i0;
    h2f_priority(U8(v), strlen(v), &ug, &inc);
    ok(ug == u && inc == i, "priority \"%s\": %s (got u=%d i=%d)", v, what, ug, inc);
}

static void test_priority(void)
{
    prio("u=0", 3, 0, 0, 0, "urgency 0");
    prio("u=7, i", 3, 0, 7, 1, "urgency 7, incremental");
    prio("u=8", 3, 0, 3, 0, "urgency 8 ignored");
    prio("u=", 3, 0, 3, 0, "urgency without a digit ignored");
    prio("u=12", 3, 0, 3, 0, "two digits ignored");
    prio("u=2;x=1", 3, 0, 2, 0, "parameters after the urgency");
    prio("i=?0", 3, 1, 3, 0, "i=?0 clears incremental");
    prio("i=?1,u=5", 3, 0, 5, 1, "i=?1 then u");
    prio(" ,\t,", 4, 1, 4, 1, "separators only: nothing changes");
    prio("", 4, 1, 4, 1, "empty: nothing changes");
    prio("ix, u=1", 3, 0, 1, 0, "an unknown key is skipped");
    prio("u", 3, 0, 3, 0, "a lone u");
    uint8_t u = 3, i = 0;
    h2f_priority(U8("u=1"), 2, &u, &i); /* the 1 is past n */
    is_int(u, 3, "the field's bound is kept (u= at the end)");
}

static int field(h2f_fields_t *fs, const char *n, const char *v)
{
    return h2f_field_ok(fs, U8(n), strlen(n), U8(v), strlen(v));
}

static void test_fields(void)
{
    h2f_fields_t fs = {0};
    ok(field(&fs, ":method", "GET") && field(&fs, ":scheme", "https") &&
           field(&fs, ":path", "/") && field(&fs, ":authority", "a"),
       "the four pseudo-headers");
    ok(field(&fs, "accept", "*/*") && h2f_fields_complete(&fs), "then a field: complete");
    ok(!field(&fs, ":path", "/x"), "a pseudo-header after a regular field");
    fs = (h2f_fields_t){0};
    ok(field(&fs, ":path", "/") && !field(&fs, ":path", "/"), "a pseudo-header twice");
    fs = (h2f_fields_t){0};
    ok(!field(&fs, ":status", "200"), "a response's pseudo-header");
    ok(!field(&fs, ":foo", "1"), "an unknown pseudo-header");
    ok(!field(&fs, ":Path", "/") && !field(&fs, ":path ", "/") && !field(&fs, "::path", "/"),
       "a pseudo-header's name in capitals, with a space, with two colons");
    fs = (h2f_fields_t){0};
    ok(!field(&fs, ":path", ""), "an empty :path");
    fs = (h2f_fields_t){0};
    ok(!field(&fs, ":path", "https://admin.example/x"), "a :path that is a URI (8.3.1)");
    fs = (h2f_fields_t){0};
    ok(!field(&fs, ":path", "x"), "a :path without its slash");
    fs = (h2f_fields_t){0};
    ok(field(&fs, ":path", "*"), "OPTIONS' *");
    fs = (h2f_fields_t){.trailer = 1};
    ok(!field(&fs, ":method", "GET"), "a pseudo-header in a trailer section");
    ok(field(&fs, "x-sum", "1") && h2f_fields_complete(&fs), "a trailer's field");
    fs = (h2f_fields_t){0};
    ok(!field(&fs, "Accept", "x"), "an upper-case name");
    ok(!field(&fs, "", "x"), "an empty name");
    ok(!field(&fs, "a b", "x"), "a space in a name");
    ok(!field(&fs, "x", "a\r\nb"), "CR LF in a value");
    ok(!field(&fs, "x", " a"), "white space leading a value");
    const char *conn[] = {"connection", "keep-alive", "proxy-connection", "transfer-encoding",
                          "upgrade"};
    for (size_t k = 0; k < sizeof conn / sizeof conn[0]; k++)
        ok(!field(&fs, conn[k], "x"), "connection-specific %s", conn[k]);
    ok(field(&fs, "connectionx", "x") && field(&fs, "upgrad", "x"), "names near them pass");
    ok(field(&fs, "te", "trailers"), "te: trailers");
    ok(!field(&fs, "te", "gzip") && !field(&fs, "te", "trailers2"), "te: anything else");
    is_int(resp_conn_specific("upgrade", 6), 0, "resp_conn_specific keeps to its length");
}

static void test_complete(void)
{
    h2f_fields_t fs = {0};
    field(&fs, ":method", "GET"), field(&fs, ":scheme", "https"), field(&fs, ":path", "/");
    ok(!h2f_fields_complete(&fs), "https without an authority or Host");
    field(&fs, "host", "a");
    ok(h2f_fields_complete(&fs), "https with Host");
    fs = (h2f_fields_t){0};
    field(&fs, ":method", "GET"), field(&fs, ":scheme", "foo"), field(&fs, ":path", "/");
    ok(h2f_fields_complete(&fs), "another scheme needs no authority");
    fs = (h2f_fields_t){0};
    field(&fs, ":method", "GET"), field(&fs, ":path", "/");
    ok(!h2f_fields_complete(&fs), "no :scheme");
    fs = (h2f_fields_t){0};
    field(&fs, ":method", "CONNECT"), field(&fs, ":authority", "a:1");
    ok(fs.connect && h2f_fields_complete(&fs), "CONNECT with :authority only");
    field(&fs, ":path", "/");
    ok(!h2f_fields_complete(&fs), "CONNECT with a :path");
}

static void test_content_length(void)
{
    uint64_t v = 99;
    ok(!h2f_content_length(U8("0"), 1, &v) && v == 0, "content-length 0");
    ok(!h2f_content_length(U8("999999999999999999"), 18, &v) && v == 999999999999999999ULL,
       "18 digits");
    ok(h2f_content_length(U8("1000000000000000000"), 19, &v) < 0, "19 digits");
    ok(h2f_content_length(U8(""), 0, &v) < 0, "empty");
    ok(h2f_content_length(U8("1 "), 2, &v) < 0 && h2f_content_length(U8("-1"), 2, &v) < 0,
       "a space, a sign");
    ok(!h2f_content_length(U8("12x"), 2, &v) && v == 12, "the bound is kept");
}

/*
 * Our name and value checks say what libnghttp2's said (h2f_field_ok called
 * them for every field): every byte, first, inside and last, of names and
 * values of 1 to 3 bytes, and a colon before each name.
 */
static void test_checks_as_nghttp2(void)
{
    int differ = 0;
    for (unsigned c = 0; c < 256; c++)
        for (size_t len = 1; len <= 3; len++)
            for (size_t at = 0; at < len; at++)
                for (int colon = 0; colon < 2; colon++) {
                    uint8_t b[4] = {':', 'a', 'a', 'a'};
                    const uint8_t *p = b + !colon;
                    size_t n = len + (size_t)colon;
                    b[1 + at] = (uint8_t)c;
                    differ += !h2f_name_ok(p, n) != !nghttp2_check_header_name(p, n);
                    differ += !h2f_value_ok(p, n) != !nghttp2_check_header_value_rfc9113(p, n);
                }
    differ += h2f_name_ok(U8(":"), 1) || h2f_name_ok(U8(""), 0) || !h2f_value_ok(U8(""), 0);
    is_int(differ, 0, "names and values judged as libnghttp2 judges them, every byte");
}

int main(void)
{
    test_header();
    test_settings();
    test_goaway();
    test_floods();
    test_priority();
    test_fields();
    test_complete();
    test_content_length();
    test_checks_as_nghttp2();
    return tap_done();
}
