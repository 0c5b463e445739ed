/*
 * kb-socket: the latency of socket() as the number of open descriptors
 * grows.  socket() takes the lowest free descriptor number: a kernel that
 * searches for it linearly shows a slope here.
 */
#include "kb.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    kb_opts_t o;
    kb_start(argc, argv, "kb-socket", "latency of socket() as open descriptors grow",
             "socket", 10000, 1, 0, &o);
    int rc = KB_OK;
    long n;
    for (n = 1; n <= o.n && !kb_stop; n++) {
        uint64_t t0 = kb_now();
        int fd = socket(o.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
        uint64_t t1 = kb_now();
        if (fd < 0) {
            rc = kb_fail("socket()", errno, n - 1);
            break;
        }
        uint64_t d = t1 - t0;
        if (kb_due(n))
            kb_sample(n, 1, &d);
    }
    return kb_end(n - 1, rc); /* the descriptors go with the process */
}
