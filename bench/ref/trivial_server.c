/*
 * trivial-server — the floor of a read/write server, for bench/fastpath.
 *
 * It answers every request with the same 1 KiB response, prepared once:
 * one read(2) per request (or per pipelined batch), one write(2) per
 * response, level-triggered epoll, nothing else.  No parsing beyond finding
 * the end of each head and a "Connection: close"; no files, no logging, no
 * timeouts, no limits.  It is not a web server; it is what bench/fastpath
 * measures real servers against: the system calls and CPU that a
 * read/write design cannot go below.
 *
 * usage: trivial-server [-i addr] [-p port] [-s size]
 * Prints "listening on ADDR port N" on stderr once ready (port 0: any).
 */
#define _GNU_SOURCE /* memmem, accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define IN_CAP 16384
#define BODY_MAX (1 << 20)

typedef struct {
    int fd;
    size_t have; /* bytes of an unfinished head kept from the last read */
    char in[IN_CAP];
} tconn_t;

static char *resp_ka, *resp_close; /* keep-alive and closing responses */
static size_t resp_ka_len, resp_close_len;

static void make_responses(size_t size)
{
    char head[256];
    char *body = malloc(size ? size : 1);
    if (!body)
        exit(1);
    for (size_t i = 0; i < size; i++)
        body[i] = (char)('a' + i % 26);
    for (int close = 0; close < 2; close++) {
        int hl = snprintf(head, sizeof head,
                          "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                          "Content-Length: %zu\r\n%s\r\n",
                          size, close ? "Connection: close\r\n" : "");
        char *r = malloc((size_t)hl + size);
        if (!r || hl < 0 || (size_t)hl >= sizeof head)
            exit(1);
        memcpy(r, head, (size_t)hl);
        memcpy(r + hl, body, size);
        if (close)
            resp_close = r, resp_close_len = (size_t)hl + size;
        else
            resp_ka = r, resp_ka_len = (size_t)hl + size;
    }
    free(body);
}

/* Write all of r (a full socket buffer is waited out: the benchmark's
   responses are small, and this is a floor, not a server). */
static int send_all(int fd, const char *r, size_t len)
{
    while (len) {
        ssize_t n = write(fd, r, len);
        if (n < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            poll(&p, 1, -1);
            continue;
        }
        if (n <= 0)
            return -1;
        r += n, len -= (size_t)n;
    }
    return 0;
}

/* Answer every complete head in c->in; 1 to close, -1 on error. */
static int answer(int fd, tconn_t *c)
{
    size_t start = 0;
    char *end;
    while ((end = memmem(c->in + start, c->have - start, "\r\n\r\n", 4))) {
        size_t hlen = (size_t)(end + 4 - (c->in + start));
        int close = memmem(c->in + start, hlen, "Connection: close", 17) != NULL;
        if (send_all(fd, close ? resp_close : resp_ka, close ? resp_close_len : resp_ka_len) < 0)
            return -1;
        if (close)
            return 1;
        start += hlen;
    }
    memmove(c->in, c->in + start, c->have - start);
    c->have -= start;
    return c->have == IN_CAP ? -1 : 0; /* a head larger than the buffer: give up */
}

/* Options into *addr, *port, *size; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, const char **addr, long *port, long *size)
{
    int o;
    while ((o = getopt(argc, argv, "i:p:s:h")) != -1) {
        char *e;
        switch (o) {
        case 'i': *addr = optarg; break;
        case 'p':
            *port = strtol(optarg, &e, 10);
            if (*e || *port < 0 || *port > 65535) {
                fprintf(stderr, "trivial-server: -p %s: not a port\n", optarg);
                return 2;
            }
            break;
        case 's':
            *size = strtol(optarg, &e, 10);
            if (*e || *size < 0 || *size > BODY_MAX) {
                fprintf(stderr, "trivial-server: -s %s: not a size from 0 to %d\n", optarg,
                        BODY_MAX);
                return 2;
            }
            break;
        case 'h':
            printf("usage: trivial-server [-i addr] [-p port] [-s size]\n");
            return 0;
        default:
            fprintf(stderr, "usage: trivial-server [-i addr] [-p port] [-s size]\n");
            return 2;
        }
    }
    return -1;
}

/* A non-blocking listener on addr and *port (0: any; *port gets the one bound);
   the listening descriptor, or -1 with the message printed and *status set. */
static int listen_on(const char *addr, long *port, int *status)
{
    struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)*port)};
    struct sockaddr_in sa4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port)};
    int v6 = inet_pton(AF_INET6, addr, &sa6.sin6_addr) == 1;
    if (!v6 && inet_pton(AF_INET, addr, &sa4.sin_addr) != 1) {
        fprintf(stderr, "trivial-server: -i %s: not an IPv4 or IPv6 address\n", addr);
        *status = 2;
        return -1;
    }
    int one = 1;
    int lfd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* inherited on Linux */
    if (lfd < 0 ||
        bind(lfd, v6 ? (struct sockaddr *)&sa6 : (struct sockaddr *)&sa4,
             v6 ? sizeof sa6 : sizeof sa4) < 0 ||
        listen(lfd, 4096) < 0) {
        fprintf(stderr, "trivial-server: %s port %ld: %s\n", addr, *port, strerror(errno));
        *status = 1;
        return -1;
    }
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    getsockname(lfd, (struct sockaddr *)&got, &gl);
    *port = ntohs(v6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                     : ((struct sockaddr_in *)&got)->sin_port);
    return lfd;
}

/* Take every waiting connection of the listener into the epoll set. */
static void accept_all(int ep, int lfd)
{
    int fd;
    while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        tconn_t *nc = malloc(sizeof *nc);
        struct epoll_event ce = {.events = EPOLLIN, .data.ptr = nc};
        if (!nc || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce) < 0) {
            free(nc);
            close(fd);
            continue;
        }
        nc->fd = fd, nc->have = 0;
    }
}

/* One read on a readable connection, and the answers; closes it when done. */
static void conn_readable(tconn_t *c)
{
    ssize_t r = read(c->fd, c->in + c->have, IN_CAP - c->have);
    if (r < 0 && errno == EAGAIN)
        return;
    int done = r <= 0;
    if (!done) {
        c->have += (size_t)r;
        done = answer(c->fd, c) != 0;
    }
    if (done) { /* closing the last reference leaves the epoll set by itself */
        close(c->fd);
        free(c);
    }
}

int main(int argc, char **argv)
{
    const char *addr = "127.0.0.1";
    long port = 0, size = 1024;
    int status = parse_args(argc, argv, &addr, &port, &size);
    if (status >= 0)
        return status;
    signal(SIGPIPE, SIG_IGN);
    make_responses((size_t)size);
    int lfd = listen_on(addr, &port, &status);
    if (lfd < 0)
        return status;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}, evs[512];
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0) {
        fprintf(stderr, "trivial-server: epoll: %s\n", strerror(errno));
        return 1;
    }
    fprintf(stderr, "trivial-server: listening on %s port %ld\n", addr, port);
    for (;;) {
        int n = epoll_wait(ep, evs, 512, -1);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "trivial-server: epoll_wait: %s\n", strerror(errno));
            return 1;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr)
                conn_readable(evs[i].data.ptr);
            else /* the listener */
                accept_all(ep, lfd);
        }
    }
}
