/*
 * quic_steer — HTTP/3's UDP sockets as one SO_REUSEPORT group, and a classic
 * BPF program (SO_ATTACH_REUSEPORT_CBPF) that steers every datagram to the
 * socket its Destination Connection ID names, so that -W workers and a
 * binary upgrade can share the port without losing connections.
 *
 * The group has two banks of `per` sockets (one per -W worker, 1 without
 * -W), bound in order at start, so socket k is index k in the kernel's group;
 * the process that opened it (the -W supervisor, or the single server) holds
 * them all for good, and an upgrade hands them all to the new binary, so no
 * socket ever leaves the group and no index ever moves (closing one would
 * move the group's last socket into its place).  A process serves from one
 * bank; the new binary of an upgrade from the other.
 *
 * Every connection ID the server issues starts with the index of the socket
 * that serves it and three fixed bytes (quic_steer_mark); the program reads
 * the Destination CID (offset 1 in a short header, 6 in a long one) and, when
 * the three bytes are there, returns the index: each packet of a connection, after
 * a migration or a NAT rebinding too, reaches the worker that owns it, and
 * one of an old process's connections its old worker while the new process
 * takes the new ones.  Any other DCID is a client's first, random one: the
 * program picks bank + byte % per, the same for each retransmission, in the
 * bank whose process last attached the program (the newest).  An index past
 * the group, or a datagram too short to read, falls back to the kernel's
 * hash.  Limits: a random DCID that happens to carry the three bytes (1 in
 * 2^24) goes where its first byte says, possibly to a draining process, which
 * refuses it, or to the idle bank, where it is lost (the client's handshake
 * times out); the four bytes are the same on every CID of a worker.
 *
 * A group is only opened on a port no other socket is bound to (else its
 * indices would not start at 0): upgraded from a gatling that hands over no
 * HTTP/3 sockets, the new process serves HTTPS without HTTP/3 until a restart.
 *
 * Linux only (the socket option); elsewhere quic_group_open makes one plain
 * SO_REUSEPORT socket and refuses -W.
 */
#ifndef GATLING_QUIC_STEER_H
#define GATLING_QUIC_STEER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define QUIC_STEER_MAX 128  /* sockets in a group: two banks of -W's 64 */
/* each socket's receive and send buffer: a burst of ~1,800 Initials (a flood
   of new visitors), or of trains to many clients, not lost at the socket */
#define QUIC_SOCKBUF (4 << 20)
#define QUIC_STEER_MARK 4    /* the leading CID bytes that name the socket */
#define QUIC_STEER_TAG1 0x67 /* ... after the index: "gtl" */
#define QUIC_STEER_TAG2 0x74
#define QUIC_STEER_TAG3 0x6c

typedef struct quic_group {
    int fds[QUIC_STEER_MAX];
    int nfds;   /* 2 * per, or 0: no group */
    int per;    /* sockets in a bank */
    int bank;   /* the bank this process serves from: 0 or 1 */
    int passed; /* handed over by the old binary: steer once we serve */
    int rcvbuf; /* the smallest receive buffer the sockets opened got (bytes), or 0 */
} quic_group_t;

/*
 * The group on addr: with g->nfds == 0 open it (2 * per sockets, bound in
 * order, close-on-exec) and steer new connections to bank 0; with sockets
 * handed over in g->fds (g->passed) check there are 2 * per datagram
 * sockets.  0, or -1 with why in err (the sockets are closed).
 */
int quic_group_open(quic_group_t *g, const struct sockaddr *addr, socklen_t len, int per,
                    char *err, size_t errlen);

/* Attach the program: new connections go to g's bank from now on.  0, or -1
   with errno. */
int quic_group_steer(const quic_group_t *g);

/* Socket i of our bank, as a new close-on-exec descriptor for the endpoint to
   own; its index in the group in *index.  -1 with errno. */
int quic_group_take(const quic_group_t *g, int i, int *index);

/* How many of g's sockets a binary upgrade hands over: all of them, or 0 if
   there is no group (or no steering: the new process opens its own). */
int quic_group_passable(const quic_group_t *g);

void quic_group_close(quic_group_t *g);

/* A fresh, random connection ID of len bytes (>= QUIC_STEER_MARK) made to
   name socket index (index < 0: left alone). */
void quic_steer_mark(uint8_t *cid, size_t len, int index);

#endif
