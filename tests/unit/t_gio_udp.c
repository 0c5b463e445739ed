/*
 * t_gio_udp — datagram sockets (io/gio_udp.c) over loopback: batches in and
 * out through the loop of this build's backend, the local address a reply
 * leaves from (packet info), trains of segments (GSO, and split by hand where
 * the kernel has none) arriving as separate datagrams, ECN, truncation.
 *
 * Each block names the bug it is there to catch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gio.h"
#include "gio_udp.h"
#include "tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define NDGRAM 50

static unsigned char bufs[GIO_UDP_BATCH][2048];
static gio_dgram_t dg[GIO_UDP_BATCH];

static void arm(void)
{
    for (unsigned i = 0; i < GIO_UDP_BATCH; i++) {
        memset(&dg[i], 0, sizeof dg[i]);
        dg[i].buf = bufs[i];
        dg[i].cap = sizeof bufs[i];
    }
}

static struct sockaddr_in v4(const char *ip, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static int port_of(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port); /* same offset in sockaddr_in6 */
}

static int open4(const char *ip)
{
    struct sockaddr_in a = v4(ip, 0);
    return gio_udp_open((struct sockaddr *)&a, sizeof a, 0);
}

/* Receive into dg[got..want-1] until want arrived (or 2 s passed); returns how many came. */
static int recv_more(int fd, int got, int want)
{
    int first = got;
    while (got < want) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2000) <= 0)
            break;
        long r = gio_udp_recv(fd, dg + got, (unsigned)(want - got));
        if (r == GIO_ERR)
            break;
        if (r > 0)
            got += (int)r;
    }
    return got - first;
}

static int recv_all(int fd, int want)
{
    return recv_more(fd, 0, want);
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)(seed * 31 + i);
}

static int check(const unsigned char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != (unsigned char)(seed * 31 + i))
            return 0;
    return 1;
}

/* A batch through the loop: the UDP fd is just another readable descriptor
   on every backend; one recv call takes many datagrams, one send call sends
   many (a batch call that returned 1, or lost order, fails here). */
static void test_batch(void)
{
    gio_loop_t *l = gio_loop_new();
    int srv = open4("127.0.0.1"), cli = open4("127.0.0.1");
    ok(srv >= 0 && cli >= 0, "gio_udp_open binds 127.0.0.1");
    ok(gio_add(l, srv, &srv) == 0, "the UDP socket registers with the %s loop", gio_backend_name());
    gio_want(l, srv, GIO_READ);
    struct sockaddr_in to = v4("127.0.0.1", port_of(srv));
    arm();
    for (unsigned i = 0; i < NDGRAM && i < GIO_UDP_BATCH; i++) {
        dg[i].len = 100 + i * 20;
        fill(bufs[i], dg[i].len, i);
        memcpy(&dg[i].peer, &to, sizeof to);
        dg[i].peerlen = sizeof to;
    }
    is_int(gio_udp_send(cli, dg, NDGRAM, 0), NDGRAM, "one send call sends %d datagrams", NDGRAM);
    int n = gio_wait(l, 2000), fd = -1;
    unsigned ev = 0;
    if (n > 0)
        fd = gio_next(l, &ev);
    ok(fd == srv && (ev & GIO_READ), "the loop reports the UDP socket readable");
    arm();
    long r = gio_udp_recv(srv, dg, GIO_UDP_BATCH);
    ok(r > 1, "one recv call takes several datagrams (%ld)", r);
    int got = r > 0 ? (int)r : 0;
    got += recv_more(srv, got, NDGRAM);
    is_int(got, NDGRAM, "all %d datagrams arrive", NDGRAM);
    int good = 1;
    for (int i = 0; i < got; i++)
        good &= dg[i].len == 100u + i * 20 && check(bufs[i], dg[i].len, i) && !dg[i].truncated;
    ok(good, "datagrams arrive whole and in order");
    is_int(port_of(cli), ntohs(((struct sockaddr_in *)&dg[0].peer)->sin_port),
           "the peer address is the sender's");
    is_int(gio_udp_recv(srv, dg, 4), GIO_AGAIN, "an empty socket says GIO_AGAIN");
    gio_close(l, srv);
    close(cli);
    gio_loop_free(l);
}

#ifdef __linux__ /* all of 127/8 is local on Linux's loopback */
/* The reply leaves from the address the request came to: a server bound to
   the wildcard that let the kernel choose would answer 127.0.0.2's client
   from 127.0.0.1, and a QUIC client drops such a packet. */
static void test_pktinfo(const struct sockaddr *bindto, socklen_t blen, const char *via)
{
    int srv = gio_udp_open(bindto, blen, 0), cli = open4("127.0.0.1");
    ok(srv >= 0, "bound to the wildcard (%s)", via);
    struct sockaddr_in to = v4("127.0.0.2", port_of(srv));
    sendto(cli, "ping", 4, 0, (struct sockaddr *)&to, sizeof to);
    arm();
    ok(recv_all(srv, 1) == 1, "a datagram to 127.0.0.2 arrives (%s)", via);
    char shown[INET6_ADDRSTRLEN] = "?";
    if (dg[0].local.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&dg[0].local)->sin_addr, shown, sizeof shown);
    else if (dg[0].local.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&dg[0].local)->sin6_addr, shown,
                  sizeof shown);
    ok(strcmp(shown, "127.0.0.2") == 0 || strcmp(shown, "::ffff:127.0.0.2") == 0,
       "its local address is 127.0.0.2 (%s: %s)", via, shown);
    ok(dg[0].ifindex > 0, "and the interface is named (%u)", dg[0].ifindex);
    dg[0].buf = "pong";
    dg[0].len = 4;
    is_int(gio_udp_send(srv, dg, 1, 0), 1, "the reply goes out");
    struct sockaddr_in from;
    socklen_t flen = sizeof from;
    char b[16];
    struct pollfd p = {.fd = cli, .events = POLLIN};
    poll(&p, 1, 2000);
    ssize_t n = recvfrom(cli, b, sizeof b, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
    inet_ntop(AF_INET, &from.sin_addr, shown, sizeof shown);
    ok(n == 4 && strcmp(shown, "127.0.0.2") == 0, "the reply leaves from 127.0.0.2 (%s: %s)",
       via, shown);
    close(srv);
    close(cli);
}

/* A train of segments arrives as separate datagrams, with GSO and without
   (a wrong segment count, a lost last short segment or a train sent as one
   big datagram fails here). */
static void test_train(int flags, const char *how)
{
    int srv = open4("127.0.0.1"), cli = open4("127.0.0.1");
    struct sockaddr_in to = v4("127.0.0.1", port_of(srv));
    static unsigned char train[10 * 1200 + 500];
    unsigned char small[3][300];
    for (unsigned i = 0; i < 11; i++)
        fill(train + i * 1200, i < 10 ? 1200 : 500, i);
    gio_dgram_t out[3] = {0};
    for (unsigned i = 0; i < 3; i++) {
        fill(small[i], sizeof small[i], 100 + i);
        out[i].buf = small[i];
        out[i].len = sizeof small[i];
        memcpy(&out[i].peer, &to, sizeof to);
        out[i].peerlen = sizeof to;
    }
    out[1].buf = train; /* small, train, small: order kept around a train */
    out[1].len = sizeof train;
    out[1].segsize = 1200;
    out[1].ecn = 2; /* ECT(0) */
    is_int(gio_udp_send(cli, out, 3, flags), 3, "a train between two datagrams goes (%s)", how);
    arm();
    int n = recv_all(srv, 13);
    is_int(n, 13, "it arrives as 13 datagrams (%s)", how);
    int good = n == 13 && check(bufs[0], dg[0].len, 100) && check(bufs[12], dg[12].len, 102);
    for (int i = 1; good && i < 12; i++)
        good = dg[i].len == (i < 11 ? 1200u : 500u) && check(bufs[i], dg[i].len, i - 1);
    ok(good, "each segment whole, in order, the last one short (%s)", how);
    ok(n == 13 && dg[1].ecn == 2 && dg[11].ecn == 2 && dg[0].ecn == 0,
       "the train's ECN codepoint (ECT(0)) arrives on every segment (%s)", how);
    close(srv);
    close(cli);
}
#endif

/* The ECN codepoint over IPv6 (IPV6_TCLASS both ways), and on a reply to an
   IPv4 client of a dual-stack socket, whose peer is v4-mapped: IP_TOS (the
   bug: the IPv6 option on an IPv4 packet, and the mark lost). */
static void test_ecn_v6(void)
{
    struct sockaddr_in6 lo6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int srv = gio_udp_open((struct sockaddr *)&lo6, sizeof lo6, 0);
    int cli = gio_udp_open((struct sockaddr *)&lo6, sizeof lo6, 0);
    if (srv < 0 || cli < 0) {
        ok(1, "# SKIP no IPv6 loopback");
        return;
    }
    gio_dgram_t out = {.buf = "six", .len = 3, .ecn = 2};
    struct sockaddr_in6 to = lo6;
    to.sin6_port = htons(port_of(srv));
    memcpy(&out.peer, &to, sizeof to);
    out.peerlen = sizeof to;
    is_int(gio_udp_send(cli, &out, 1, 0), 1, "an IPv6 datagram marked ECT(0) goes");
    arm();
    ok(recv_all(srv, 1) == 1 && dg[0].len == 3 && dg[0].ecn == 2,
       "... and arrives marked (IPV6_TCLASS): ecn %d", dg[0].ecn);
    close(srv), close(cli);

    struct sockaddr_in6 any6 = {.sin6_family = AF_INET6};
    srv = gio_udp_open((struct sockaddr *)&any6, sizeof any6, 0);
    cli = open4("127.0.0.1");
    struct sockaddr_in to4 = v4("127.0.0.1", port_of(srv));
    gio_dgram_t q = {.buf = "four", .len = 4};
    memcpy(&q.peer, &to4, sizeof to4);
    q.peerlen = sizeof to4;
    is_int(gio_udp_send(cli, &q, 1, 0), 1, "an IPv4 datagram to a dual-stack socket");
    arm();
    ok(recv_all(srv, 1) == 1 && dg[0].peer.ss_family == AF_INET6, "its peer is v4-mapped");
    dg[0].buf = "back";
    dg[0].len = 4;
    dg[0].ecn = 1; /* ECT(1) */
    is_int(gio_udp_send(srv, dg, 1, 0), 1, "the reply, marked ECT(1), goes");
    arm();
    ok(recv_all(cli, 1) == 1 && dg[0].len == 4 && dg[0].ecn == 1,
       "... and arrives at the IPv4 client marked (IP_TOS): ecn %d", dg[0].ecn);
    close(srv), close(cli);
}

/* A datagram larger than its buffer is cut and says so, never overruns. */
static void test_truncated(void)
{
    int srv = open4("127.0.0.1"), cli = open4("127.0.0.1");
    struct sockaddr_in to = v4("127.0.0.1", port_of(srv));
    unsigned char big[1500];
    fill(big, sizeof big, 7);
    sendto(cli, big, sizeof big, 0, (struct sockaddr *)&to, sizeof to);
    arm();
    dg[0].cap = 1000;
    ok(recv_all(srv, 1) == 1 && dg[0].truncated && dg[0].len == 1000
           && check(bufs[0], 1000, 7) && bufs[0][1000] == 0,
       "a 1500-byte datagram into 1000 bytes: cut, flagged truncated");
    close(srv);
    close(cli);
}

int main(void)
{
    test_batch();
    test_truncated();
    test_ecn_v6();
#ifdef __linux__
    struct sockaddr_in any4 = {.sin_family = AF_INET};
    test_pktinfo((struct sockaddr *)&any4, sizeof any4, "0.0.0.0");
    struct sockaddr_in6 any6 = {.sin6_family = AF_INET6};
    int s6 = socket(AF_INET6, SOCK_DGRAM, 0);
    if (s6 >= 0) {
        close(s6);
        test_pktinfo((struct sockaddr *)&any6, sizeof any6, "[::] dual-stack");
    }
    test_train(0, "split by gio");
    int probe = open4("127.0.0.1");
    if (gio_udp_gso_probe(probe))
        test_train(GIO_UDP_GSO, "UDP_SEGMENT");
    else
        ok(1, "# SKIP the kernel has no UDP_SEGMENT");
    close(probe);
#endif
    return tap_done();
}
