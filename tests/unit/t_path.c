/* Request-target decoding and normalisation: nothing may climb out of "/". */
#include "path.h"
#include "tap.h"

static void norm(const char *target, const char *want)
{
    char out[512];
    path_t p;
    int st = path_from_target(target, strlen(target), out, sizeof out, &p);
    if (st) {
        ok(0, "%s -> %s (got status %d)", target, want, st);
        return;
    }
    is_str(p.path, want, "%s -> %s", target, want);
    ok(strlen(p.path) == p.len, "length of %s", target);
}

static void status(const char *target, int want)
{
    char out[512];
    path_t p;
    is_int(path_from_target(target, strlen(target), out, sizeof out, &p), want, "%s -> %d", target,
           want);
}

int main(void)
{
    norm("/", "/");
    norm("/index.html", "/index.html");
    norm("/a/b/", "/a/b/");
    norm("/a%20b.txt", "/a b.txt");
    norm("/a//b", "/a/b");
    norm("//etc/passwd", "/etc/passwd");
    norm("/../etc/passwd", "/etc/passwd");
    norm("/..", "/");
    norm("/a/..", "/");
    norm("/a/b/..", "/a/");
    norm("/a/./b", "/a/b");
    norm("/a/.", "/a/");
    norm("/x/../../etc/passwd", "/etc/passwd");
    norm("/%2e%2e/%2e%2e/etc/passwd", "/etc/passwd");
    norm("/%2E%2E%2F..%2fetc", "/etc");
    norm("/a/..%2f..%2f..%2fb", "/b");
    norm("/...", "/...");
    norm("/..a", "/..a");
    norm("/a?x=1/../..", "/a");
    norm("http://example.org/a/../b", "/b");
    norm("HTTP://example.org", "/");
    norm("http://example.org?q", "/");
    status("/%00", 400);
    status("/a%00.html", 400);
    status("/%", 400);
    status("/%4", 400);
    status("/%zz", 400);
    status("*", 400);
    status("a/b", 400);
    status("", 400);
    status("/a#frag", 400);

    char out[64];
    path_t p;
    path_from_target("/d?a=b&c", 8, out, sizeof out, &p);
    ok(p.query && p.query_len == 5 && !memcmp(p.query, "a=b&c", 5), "query split off");
    path_from_target("/d", 2, out, sizeof out, &p);
    ok(p.query == NULL, "no query");
    is_int(path_from_target("/abc", 4, out, 5, &p), 400, "output buffer too small");

    char enc[64];
    size_t n = path_encode(enc, "/a b/\"<x>%", 10, PATH_KEEP);
    enc[n] = 0;
    is_str(enc, "/a%20b/%22%3Cx%3E%25", "path_encode escapes what a URL cannot carry");
    return tap_done();
}
