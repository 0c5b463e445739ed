/*
 * What kb-stream's processes share: the clock, the record to the parent, socket
 * options, the start barrier and a receiving process's own socket.  Called by
 * kb_stream.c and its parts (kb_stream_tcp.c, _udp.c, _relay.c); calls none of
 * them.  See kb_stream_util.h.
 */
#define _GNU_SOURCE
#include "kb_stream_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile int ks_stop;

double ks_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void ks_report(int fd, const ks_rec_t *r)
{
    /* sizeof *r < PIPE_BUF: one write, never interleaved with another process's */
    if (write(fd, r, sizeof *r) != (ssize_t)sizeof *r)
        _exit(1);
}

void ks_sockbuf(const ks_opts_t *o, int fd)
{
    /* past net.core.[rw]mem_max where we may (CAP_NET_ADMIN), else up to it */
    if (o->wbuf) {
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &o->wbuf, sizeof o->wbuf) < 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &o->wbuf, sizeof o->wbuf);
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &o->wbuf, sizeof o->wbuf) < 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &o->wbuf, sizeof o->wbuf);
    }
}

/* -C: the sending socket's congestion control (TCP_CONGESTION, as iperf3 -C); -1 if refused */
int ks_congestion(const ks_opts_t *o, int fd)
{
    if (!o->cc || o->udp)
        return 0;
    return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, o->cc, (socklen_t)strlen(o->cc));
}

void ks_peer(const struct sockaddr *sa, char *out, size_t len)
{
    char h[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s->sin6_addr, h, sizeof h);
        port = ntohs(s->sin6_port);
        snprintf(out, len, "[%s]:%d", h, port);
        return;
    }
    const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &s->sin_addr, h, sizeof h);
    snprintf(out, len, "%s:%d", h, ntohs(s->sin_port));
}

/* A process is ready (its sockets set up): tell the parent, wait for the start. */
int ks_wait_go(int ready_fd, int go_fd)
{
    char c = 'r';
    if (write(ready_fd, &c, 1) != 1)
        return -1;
    ssize_t r;
    while ((r = read(go_fd, &c, 1)) < 0 && errno == EINTR && !ks_stop)
        ;
    return r == 1 ? 0 : -1;
}

/*
 * Process p's receiving socket: the first the one bound here, the others one of
 * their own in the port's SO_REUSEPORT group, so that the kernel spreads the
 * streams over the processes by their addresses (and keeps each on one).
 */
int ks_own_socket(const ks_opts_t *o, int p, int lfd)
{
    if (p == 0)
        return lfd;
    int one = 1, fd = socket(o->family, o->udp ? SOCK_DGRAM : SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    ks_sockbuf(o, fd);
    if (bind(fd, (const struct sockaddr *)&o->addr, o->alen) < 0 ||
        (!o->udp && listen(fd, 1024) < 0)) {
        close(fd);
        return -1;
    }
    close(lfd);
    return fd;
}
