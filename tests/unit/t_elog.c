/* elog: one line per error, escaped, bounded, rate-limited, reopened. */
#include "elog.h"
#include "tap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <unistd.h>

/* The test's own: a server's error log lives as long as its process. */
static void elog_close(elog_t *l)
{
    if (l->path && l->fd >= 0)
        close(l->fd);
    if (l->dirfd >= 0)
        close(l->dirfd);
    l->fd = l->dirfd = -1;
}

static char *slurp(const char *path)
{
    static char buf[1 << 16];
    int fd = open(path, O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

int main(void)
{
    char dir[] = "/tmp/t_elog.XXXXXX", path[64], moved[64];
    ok(mkdtemp(dir) != NULL, "temp dir");
    snprintf(path, sizeof path, "%s/error.log", dir);
    snprintf(moved, sizeof moved, "%s/error.log.1", dir);
    elog_t l;
    char why[256];
    int fd = elog_open(path, -1, -1, NULL, why, sizeof why);
    ok(fd >= 0, "opened");
    elog_init(&l, fd, path);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "2001:db8::7", &a6.sin6_addr);
    elog_error(&l, 1795000000, "sendfile()", 5, (struct sockaddr *)&a6, "/a\nb\x1b[31m");
    char *s = slurp(path);
    ok(strstr(s, "2026-11-18T") == s, "starts with the ISO time: %.24s", s);
    ok(strstr(s, "gatling[") != NULL, "names the process");
    ok(strstr(s, "sendfile() failed: Input/output error") != NULL, "call and error text");
    ok(strstr(s, "(peer 2001:db8::7)") != NULL, "the peer");
    ok(strstr(s, "/a\\x0ab\\x1b[31m") != NULL, "control characters escaped: %s", s);
    is_int(count_lines(s), 1, "one line");
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    elog_error(&l, 1795000000, "openat2()", 24, NULL, big);
    s = slurp(path);
    is_int(count_lines(s), 2, "a long detail is still one line");
    ok(strlen(s) < 2 * ELOG_LINE_MAX, "bounded by ELOG_LINE_MAX");
    ok(strstr(s, "...\n") != NULL, "cut with ...");
    for (int i = 0; i < 1000; i++)
        elog_error(&l, 1795000001, "accept4()", 24, NULL, NULL);
    s = slurp(path);
    is_int(count_lines(s), 2 + ELOG_PER_SECOND, "1000 errors in one second: %d lines",
           ELOG_PER_SECOND);
    elog_error(&l, 1795000002, "accept4()", 24, NULL, NULL);
    s = slurp(path);
    ok(strstr(s, "980 more error messages suppressed") != NULL, "the rest counted and reported");
    ok(rename(path, moved) == 0, "logrotate moves the file");
    elog_reopen(&l);
    elog_error(&l, 1795000003, "malloc()", 12, NULL, NULL);
    s = slurp(path);
    ok(strstr(s, "malloc() failed: Cannot allocate memory") != NULL && count_lines(s) == 1,
       "after reopen the new file gets the lines");
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    inet_pton(AF_INET, "192.0.2.9", &a4.sin_addr);
    elog_event(&l, 1795000003, "HTTP/2 flood", (struct sockaddr *)&a4, "PING frames: 65\n");
    s = slurp(path);
    ok(strstr(s, "Z gatling[") != NULL && strstr(s, "]: HTTP/2 flood (peer 192.0.2.9) PING "
                                                    "frames: 65\\x0a\n") != NULL,
       "an event: what, the peer, the detail escaped, no \"failed\": %s", s);
    is_int(count_lines(s), 2, "one line more");
    elog_close(&l);
    unlink(path), unlink(moved), rmdir(dir);
    return tap_done();
}
