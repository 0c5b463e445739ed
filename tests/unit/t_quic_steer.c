/*
 * t_quic_steer — HTTP/3's socket group and its classic BPF program
 * (gatling/quic/quic_steer.c) on this kernel: a group of two banks of two
 * UDP sockets on a loopback port, datagrams sent to it, and which socket
 * each arrives at: a short or long header whose DCID carries the mark goes
 * to the socket the mark names (any bank); a client's random DCID to the
 * bank last steered to, byte % 2 (the same socket for the same ID); a mark
 * naming no socket as a random ID; a datagram too short to read to socket
 * 0.  Then quic_steer_mark and quic_group_take.
 */
#include "quic_steer.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PER 2

#if defined(__linux__) && defined(SO_ATTACH_REUSEPORT_CBPF)
#define STEERS 1

static struct sockaddr_in to;
static int tx = -1;

/* Send p and say which of the group's sockets it arrived at (-1: none in 2 s). */
static int arrives(const quic_group_t *g, const uint8_t *p, size_t len)
{
    struct pollfd pf[QUIC_STEER_MAX];
    uint8_t buf[2048];
    if (sendto(tx, p, len, 0, (struct sockaddr *)&to, sizeof to) != (ssize_t)len)
        return -2;
    for (int i = 0; i < g->nfds; i++)
        pf[i] = (struct pollfd){.fd = g->fds[i], .events = POLLIN};
    if (poll(pf, (nfds_t)g->nfds, 2000) <= 0)
        return -1;
    for (int i = 0; i < g->nfds; i++)
        if (pf[i].revents & POLLIN) {
            (void)!recv(g->fds[i], buf, sizeof buf, 0);
            return i;
        }
    return -1;
}

/* A packet whose DCID starts with id[0..n): short header or long (an Initial). */
static size_t packet(uint8_t *p, int lng, const uint8_t *id, size_t n)
{
    size_t k = 0;
    if (lng) {
        static const uint8_t head[] = {0xc0, 0, 0, 0, 1, 18};
        memcpy(p, head, sizeof head);
        k = sizeof head;
    } else {
        p[k++] = 0x40;
    }
    memset(p + k, 0x5a, 40);
    memcpy(p + k, id, n);
    return k + 40;
}

static void test_steering(quic_group_t *g)
{
    uint8_t p[128], id[18];
    for (int lng = 0; lng < 2; lng++) {
        for (int k = 0; k < g->nfds; k++) {
            memset(id, 0xee, sizeof id);
            quic_steer_mark(id, sizeof id, k);
            size_t n = packet(p, lng, id, sizeof id);
            is_int(arrives(g, p, n), k, "%s header, marked %d: socket %d",
                   lng ? "long" : "short", k, k);
        }
        for (int b = 0; b < 6; b++) { /* a client's first, random ID: byte % 2 in bank */
            uint8_t r[8] = {(uint8_t)(0x30 + b), 1, 2, 3, 4, 5, 6, 7};
            size_t n = packet(p, lng, r, sizeof r);
            int want = g->bank * PER + (0x30 + b) % PER;
            is_int(arrives(g, p, n), want, "%s header, random ID %#x: bank %d", lng ? "long" :
                   "short", 0x30 + b, g->bank);
            is_int(arrives(g, p, n), want, "... and again the same socket");
        }
        quic_steer_mark(id, sizeof id, 9); /* names no socket: as a random one */
        size_t n = packet(p, lng, id, sizeof id);
        is_int(arrives(g, p, n), g->bank * PER + 9 % PER, "mark 9 of 4 sockets: as random");
    }
    uint8_t one = 0x40;
    is_int(arrives(g, &one, 1), 0, "one byte: the program cannot read a DCID, socket 0");
}
#endif

int main(void)
{
#ifdef STEERS
    char err[256];
    quic_group_t g = {.nfds = 0};
    int probe = socket(AF_INET, SOCK_DGRAM, 0);
    socklen_t len = sizeof to;
    to = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ok(probe >= 0 && bind(probe, (struct sockaddr *)&to, sizeof to) == 0 &&
           getsockname(probe, (struct sockaddr *)&to, &len) == 0,
       "a free loopback UDP port");
    close(probe);
    int r = quic_group_open(&g, (struct sockaddr *)&to, sizeof to, PER, err, sizeof err);
    ok(r == 0, "the group opens: %s", r ? err : "2 banks of 2");
    is_int(g.nfds, 2 * PER, "four sockets");
    quic_group_t again = {.nfds = 0};
    ok(quic_group_open(&again, (struct sockaddr *)&to, sizeof to, PER, err, sizeof err) < 0 &&
           again.nfds == 0 && strstr(err, "port taken"),
       "a second group on the port is refused: %s", err);
    tx = socket(AF_INET, SOCK_DGRAM, 0);
    if (r == 0 && tx >= 0) {
        test_steering(&g); /* bank 0, attached by quic_group_open */
        g.bank = 1;
        ok(quic_group_steer(&g) == 0, "steered to bank 1 (an upgrade's new process)");
        test_steering(&g);
        int index = -1, fd = quic_group_take(&g, 1, &index);
        ok(fd >= 0 && index == 3, "bank 1's socket 1 is index 3 (%d)", index);
        if (fd >= 0)
            close(fd);
        ok(quic_group_take(&g, PER, &index) < 0, "no socket %d in a bank of %d", PER, PER);
    }
    uint8_t id[18] = {0};
    quic_steer_mark(id, sizeof id, 5);
    ok(id[0] == 5 && id[1] == QUIC_STEER_TAG1 && id[2] == QUIC_STEER_TAG2 &&
           id[3] == QUIC_STEER_TAG3 && id[4] == 0,
       "the mark: index, then the three tag bytes, the rest left alone");
    memset(id, 0, sizeof id);
    quic_steer_mark(id, 3, 5);
    quic_steer_mark(id, sizeof id, -1);
    ok(!id[0] && !id[1], "too short an ID, or no group: left alone");
    quic_group_close(&g);
    is_int(g.nfds, 0, "closed");
    if (tx >= 0)
        close(tx);
#else
    ok(1, "# SKIP steering needs Linux's SO_ATTACH_REUSEPORT_CBPF");
#endif
    return tap_done();
}
