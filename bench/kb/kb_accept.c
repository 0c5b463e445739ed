/*
 * kb-accept: N TCP connections over loopback to a listener in a child
 * process, one at a time: the latency of each connect() (here; the call
 * alone, not the socket() before it) and of each accept() (there, timed
 * once the connection is queued) as the connections held on both sides
 * grow, and the total time for N (the OpenBSD study's "20,000 connections
 * in 35 seconds").
 */
#include "kb.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the listening process reports per connection. */
typedef struct {
    uint64_t accept; /* the accept() call's latency */
    int err;         /* 0, or the errno of a failed accept() */
} report_t;

static void acceptor(int lfd, int out)
{
    signal(SIGINT, SIG_IGN); /* the parent decides when we stop */
    for (;;) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            _exit(1);
        uint64_t t0 = kb_now();
        int fd = accept(lfd, NULL, NULL);
        report_t r = {kb_now() - t0, fd < 0 ? errno : 0};
        if (write(out, &r, sizeof r) != sizeof r)
            _exit(0); /* the parent is gone */
        if (fd < 0)
            pause(); /* keep what we hold until the parent ends us */
    }
}

int main(int argc, char **argv)
{
    kb_opts_t o;
    kb_start(argc, argv, "kb-accept",
             "latency of connect() and of accept() (in a child) as connections grow",
             "connect\taccept", 10000, 1, 0, &o);
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    struct sockaddr *sa = o.ipv6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4;
    socklen_t len = o.ipv6 ? sizeof a6 : sizeof a4;
    int lfd = socket(sa->sa_family, SOCK_STREAM, 0), pfd[2];
    if (lfd < 0 || bind(lfd, sa, len) < 0 || listen(lfd, 128) < 0 ||
        getsockname(lfd, sa, &len) < 0 || pipe(pfd) < 0)
        return kb_end(0, kb_fail("listening socket", errno, 0));
    pid_t child = fork();
    if (child < 0)
        return kb_end(0, kb_fail("fork()", errno, 0));
    if (child == 0) {
        close(pfd[0]);
        acceptor(lfd, pfd[1]);
    }
    close(lfd), close(pfd[1]);
    int rc = KB_OK;
    long n;
    for (n = 1; n <= o.n && !kb_stop; n++) {
        int fd = socket(sa->sa_family, SOCK_STREAM, 0);
        if (fd < 0) {
            rc = kb_fail("socket()", errno, n - 1);
            break;
        }
        uint64_t t0 = kb_now(); /* connect() alone: kb-socket times socket() */
        if (connect(fd, sa, len) < 0) {
            rc = kb_fail("connect()", errno, n - 1);
            break;
        }
        uint64_t t1 = kb_now();
        report_t r;
        ssize_t got;
        while ((got = read(pfd[0], &r, sizeof r)) < 0 && errno == EINTR && !kb_stop)
            ;
        if (got != sizeof r) {
            rc = kb_stop ? KB_OK : kb_fail("the listening process", EPIPE, n - 1);
            break;
        }
        if (r.err) {
            rc = kb_fail("accept() in the listening process", r.err, n - 1);
            break;
        }
        uint64_t d[2] = {t1 - t0, r.accept};
        if (kb_due(n))
            kb_sample(n, 2, d);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return kb_end(n - 1, rc);
}
