/*
 * What fuzz_h2b and fuzz_h2bc share: a real site (fuzz_h2site.h) whose one
 * -P rule sends every path to an h2c/ backend that is the harness itself,
 * on a loopback listening socket of its own, and the loop turned as
 * server.c's run_round turns it.  Each harness is one file that includes
 * this once: the statics below are its own.
 */
#ifndef FUZZ_H2BACK_H
#define FUZZ_H2BACK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fuzz_h2site.h"
#include "handlers/hstate.h"
#include "handlers/proxy_int.h"
#include "route/router.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>

static char *back_dir;
static char back_rule[64];
static int lst = -1; /* the backend's listening socket */

static void back_cleanup(void)
{
    unlinkat(site.rootfd, ".proxy", 0);
    rmdir(back_dir);
}

/* The site in dir (a mkdtemp template, /dev/shm/NAME.XXXXXX), its rule
   h2c/127.0.0.1/PORT/^/ for lst's port; rcvbuf > 0: the backend's
   sockets take that little (so gatling's writes to them can fill). */
static void back_setup(char *dir, int rcvbuf)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t al = sizeof a;
    back_dir = dir;
    lst = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lst < 0 || (rcvbuf > 0 && setsockopt(lst, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
                                             sizeof rcvbuf) < 0) ||
        bind(lst, (struct sockaddr *)&a, sizeof a) < 0 || listen(lst, 16) < 0 ||
        getsockname(lst, (struct sockaddr *)&a, &al) < 0)
        abort();
    snprintf(back_rule, sizeof back_rule, "h2c/127.0.0.1/%u/^/", ntohs(a.sin_port));
    int home = fuzz_site_enter(dir);
    int fd = open(".proxy", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        abort();
    close(fd);
    atexit(back_cleanup);
    config_t c = {.timeout = 23, .head_timeout = 10, .min_rate = 512, .threads = 1,
                  .vhosts = 0, .max_age = -1, .mem_file_max = 16384, .hsts = -1,
                  .dyn_timeout = 30, .tunnel_timeout = 3600, .nproxy_rules = 1};
    c.proxy_rule[0] = back_rule;
    fuzz_site_open(&c);
    if (router_init(&site) < 0)
        abort();
    fuzz_site_leave(home);
}

/* One turn of the loop, as server.c's run_round (no wait): events, then
   the descriptors whose deadline passed (told with no event), then timers. */
static void turn(void)
{
    unsigned ev;
    int fd;
    if (gio_wait(loop, 0) < 0 && errno != EINTR)
        abort();
    while ((fd = gio_next(loop, &ev)) >= 0) {
        watch_t *w = gio_cookie(loop, fd);
        w->on(w, ev);
    }
    while ((fd = gio_next_timeout(loop)) >= 0) {
        watch_t *w = gio_cookie(loop, fd);
        w->on(w, 0);
    }
    gio_timers_run(loop);
}

/* What gatling sent the backend on be: read and dropped. */
static void swallow(int be)
{
    static char buf[65536];
    while (be >= 0 && read(be, buf, sizeof buf) > 0)
        ;
}

/* The proxy's one backend. */
static px_member_t *member(void)
{
    proxy_t *px = hstate(&site, HSTATE_PROXY);
    CHECK(px && px->npools == 1 && px->pool[0]->n == 1);
    return px->pool[0]->m[0];
}

/* Connections not taken by the harness: accepted and closed at once, so
   their streams fail. */
static void refuse_others(void)
{
    int fd;
    while ((fd = accept4(lst, NULL, NULL, SOCK_CLOEXEC)) >= 0)
        close(fd);
}

/* p[0..n) to the backend's socket be, as far as it takes it. */
static void backend_write(int be, const uint8_t *p, size_t n)
{
    while (be >= 0 && n) {
        ssize_t w = send(be, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return; /* gatling closed it, or its window is full: the rest is dropped */
        p += w, n -= (size_t)w;
    }
}

#endif
