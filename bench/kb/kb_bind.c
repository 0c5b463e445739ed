/*
 * kb-bind: socket() + bind() to port 0 (the kernel picks a free port) as the
 * number of bound sockets grows: the cost of the kernel's free-port search.
 * Stops with a message when the ephemeral port range is used up.
 */
#include "kb.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    kb_opts_t o;
    kb_start(argc, argv, "kb-bind",
             "latency of socket() + bind() to port 0 on loopback as bound sockets grow",
             "socket+bind\tbind", 10000, 1, 0, &o);
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    struct sockaddr *sa = o.ipv6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4;
    socklen_t len = o.ipv6 ? sizeof a6 : sizeof a4;
    int rc = KB_OK;
    long n;
    for (n = 1; n <= o.n && !kb_stop; n++) {
        uint64_t t0 = kb_now();
        int fd = socket(o.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
        if (fd < 0) {
            rc = kb_fail("socket()", errno, n - 1);
            break;
        }
        uint64_t t1 = kb_now();
        if (bind(fd, sa, len) < 0) {
            rc = kb_fail("bind()", errno, n - 1);
            break;
        }
        uint64_t t2 = kb_now();
        uint64_t d[2] = {t2 - t0, t2 - t1};
        if (kb_due(n))
            kb_sample(n, 2, d);
    }
    return kb_end(n - 1, rc);
}
