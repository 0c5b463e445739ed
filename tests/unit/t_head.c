/* A response's head as every protocol sends it (http/head.c): which
   responses have a body, and the fields its table holds, in their order;
   the reason phrase of each status the server sends (RFC 9110, 15) and the
   error page that repeats it (http/response.c). */
#include "head.h"
#include "response.h"
#include "tap.h"

#include <stdio.h>
#include <strings.h>

static void test_has_body(void)
{
    static const struct {
        int head_only, status, body;
    } t[] = {
        {0, 200, 1}, {0, 201, 1}, {0, 206, 1}, {0, 301, 1}, {0, 404, 1}, {0, 500, 1},
        {0, 599, 1}, {0, 204, 0}, {0, 304, 0}, {0, 100, 0}, {0, 101, 0}, {0, 103, 0},
        {0, 199, 0}, {1, 200, 0}, {1, 404, 0}, {1, 204, 0}, {1, 304, 0}, {1, 101, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        is_int(head_has_body(t[i].head_only, t[i].status), t[i].body, "%s %d: %s",
               t[i].head_only ? "HEAD" : "GET", t[i].status, t[i].body ? "a body" : "none");
}

/* The fields as "name=value;" each (the status as ":status=N"), a "!"
   before one whose lengths, or name in lower case, do not match, or that
   is not the server's before t.handler or the handler's from there. */
static const char *walk(const head_t *h)
{
    static char out[1024];
    head_fields_t t;
    size_t n = 0;
    out[0] = 0;
    head_build(h, &t);
    for (unsigned i = 0; i < t.n; i++) {
        const http_field_t *f = &t.low[i];
        int same = f->nlen == strlen(t.name[i]) && f->vlen == strlen(f->value) &&
                   (!f->name || !strcasecmp(f->name, t.name[i])) && (f->name != NULL) == (i < t.handler);
        n += (size_t)snprintf(out + n, sizeof out - n, "%s%.*s=%.*s;", same ? "" : "!",
                              (int)f->nlen, t.name[i], (int)f->vlen, f->value);
    }
    return out;
}

static void test_walk(void)
{
    ex_field_t fields[] = {{"ETag", "\"x\""}, {"Vary", "Accept-Encoding"}};
    head_t h = {.status = 200, .server = "gatling/t", .date = "D", .ctype = "text/plain",
                .len = 12, .modified = "M", .hsts = -1, .fields = fields, .nfields = 2};
    is_str(walk(&h),
           ":status=200;Server=gatling/t;Date=D;Content-Type=text/plain;Content-Length=12;"
           "Last-Modified=M;ETag=\"x\";Vary=Accept-Encoding;",
           "a file: the server's fields in order, then the handler's");
    h.hsts = 600, h.connection = "close", h.ctype = NULL, h.modified = NULL, h.nfields = 0;
    is_str(walk(&h),
           ":status=200;Server=gatling/t;Date=D;Content-Length=12;"
           "Strict-Transport-Security=max-age=600;Connection=close;",
           "HSTS's max-age, HTTP/1.1's Connection; no type, no date of change");
    h.len = EX_LEN_STREAM, h.framing = "chunked", h.connection = NULL, h.hsts = -1;
    is_str(walk(&h), ":status=200;Server=gatling/t;Date=D;Transfer-Encoding=chunked;",
           "a length not known: HTTP/1.1's framing instead");
    h.framing = NULL;
    is_str(walk(&h), ":status=200;Server=gatling/t;Date=D;", "... or none");
    h.len = 5;
    static const int none[] = {204, 304, 101, 103};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        h.status = none[i];
        const char *w = walk(&h);
        ok(w && !strstr(w, "Content-Length"), "%d: no Content-Length (%s)", none[i], w);
    }
    h.status = 404;
    ok(strstr(walk(&h), "Content-Length=5;") != NULL, "404: its page's length");
}

static void test_reasons(void)
{
    static const struct {
        int status;
        const char *reason;
    } t[] = {
        {100, "Continue"}, {101, "Switching Protocols"}, {200, "OK"}, {201, "Created"},
        {202, "Accepted"}, {204, "No Content"}, {206, "Partial Content"},
        {301, "Moved Permanently"}, {302, "Found"}, {303, "See Other"}, {304, "Not Modified"},
        {307, "Temporary Redirect"}, {308, "Permanent Redirect"}, {400, "Bad Request"},
        {401, "Unauthorized"}, {403, "Forbidden"}, {404, "Not Found"},
        {405, "Method Not Allowed"}, {406, "Not Acceptable"}, {408, "Request Timeout"},
        {409, "Conflict"}, {410, "Gone"}, {411, "Length Required"},
        {412, "Precondition Failed"}, {413, "Content Too Large"}, {414, "URI Too Long"},
        {415, "Unsupported Media Type"}, {416, "Range Not Satisfiable"},
        {421, "Misdirected Request"}, {422, "Unprocessable Content"},
        {429, "Too Many Requests"}, {431, "Request Header Fields Too Large"},
        {500, "Internal Server Error"}, {501, "Not Implemented"}, {502, "Bad Gateway"},
        {503, "Service Unavailable"}, {504, "Gateway Timeout"},
        {505, "HTTP Version Not Supported"}, {418, "Unknown"}, {599, "Unknown"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        is_str(resp_reason(t[i].status), t[i].reason, "%d %s", t[i].status, t[i].reason);
    char buf[RESP_PAGE_MAX];
    hbuf_t b = hb_init(buf, sizeof buf);
    resp_page(&b, 431);
    ok(!b.over, "the longest reason's page fits RESP_PAGE_MAX");
    is_str(hb_str(&b),
           "<!DOCTYPE html>\n<html><head><title>431 Request Header Fields Too Large</title>"
           "</head>\n<body><h1>431 Request Header Fields Too Large</h1></body></html>\n",
           "the error page names the status and its reason twice");
}

int main(void)
{
    test_has_body();
    test_reasons();
    test_walk();
    return tap_done();
}
