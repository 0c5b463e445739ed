/*
 * gio_udp — datagram sockets for gio's loop (QUIC's transport).
 *
 * A UDP socket is one more readable descriptor on any backend (gio_add, then
 * gio_want(GIO_READ)); these calls move many datagrams per system call:
 *
 *   int fd = gio_udp_open(sa, salen, reuseport);   bound, non-blocking,
 *                                                   packet info and ECN on
 *   int gso = gio_udp_gso_probe(fd);                kernel has UDP_SEGMENT?
 *   gio_dgram_t d[GIO_UDP_BATCH];  ... .buf/.cap set ...
 *   long n = gio_udp_recv(fd, d, GIO_UDP_BATCH);    recvmmsg where there is one
 *   long m = gio_udp_send(fd, d, k, gso ? GIO_UDP_GSO : 0);   sendmmsg
 *
 * Each datagram carries the peer's address and the local address it arrived
 * at (IP_PKTINFO / IPV6_PKTINFO), which a reply names again so that it leaves
 * from the address the client spoke to (a server bound to [::] on a host with
 * several addresses would otherwise answer from the route's choice, and the
 * client would drop it).  The ECN codepoint travels both ways where the OS
 * passes it (IP_TOS / IPV6_TCLASS).
 *
 * A datagram to send may be a train of equal segments (segsize, the last one
 * may be shorter): with GIO_UDP_GSO it goes to the kernel as one message with
 * UDP_SEGMENT (Linux 4.18+), otherwise gio_udp_send splits it into datagrams
 * itself.  The receiver sees separate datagrams either way.
 *
 * Return convention as for the rest of gio: a count (> 0), GIO_AGAIN, GIO_ERR
 * (errno set).  Only the batch calls are platform-specific; elsewhere they
 * loop over recvmsg/sendmsg.
 */
#ifndef GIO_UDP_H
#define GIO_UDP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define GIO_UDP_BATCH 64     /* datagrams per gio_udp_recv/send call, at most */
#define GIO_UDP_GSO_MAX 64   /* segments per GSO datagram (the kernel's UDP_MAX_SEGMENTS) */

enum { GIO_UDP_GSO = 1 };

typedef struct gio_dgram {
    void *buf;      /* recv: where the datagram goes; send: the bytes */
    size_t cap;     /* recv: room at buf */
    size_t len;     /* recv: bytes received; send: bytes at buf */
    struct sockaddr_storage peer; /* recv: sender; send: destination */
    socklen_t peerlen;
    /* recv: the address the datagram came to (port 0: the caller knows its
       own); send: the source to use (family 0: the kernel chooses) */
    struct sockaddr_storage local;
    unsigned ifindex;  /* recv: arrival interface; send: 0, or the interface */
    uint16_t segsize;  /* send: segment size of a train (0: one datagram) */
    uint8_t ecn;       /* ECN codepoint (low two bits of TOS/traffic class) */
    uint8_t truncated; /* recv: larger than cap, cut (MSG_TRUNC) */
} gio_dgram_t;

/*
 * A UDP socket bound to addr (sockaddr_in or sockaddr_in6; an IPv6 wildcard
 * takes IPv4 too), non-blocking and close-on-exec, with SO_REUSEADDR
 * (and SO_REUSEPORT when reuseport), packet info and ECN reception on.
 * Returns the descriptor, or -1 with errno set.
 */
int gio_udp_open(const struct sockaddr *addr, socklen_t len, int reuseport);

/* Turn on packet info and ECN reception on an existing UDP socket (one
   handed over, say).  0, or -1 if the OS has no way to report the local
   address (replies then leave from the kernel's choice). */
int gio_udp_setup(int fd);

/* Size fd's receive and send buffers to bytes each: past net.core.rmem_max
   and wmem_max where the process may (SO_RCVBUFFORCE, CAP_NET_ADMIN), else
   as far as they allow.  Returns the receive buffer's payload room obtained
   (what arrives beyond it at once is dropped by the kernel), or -1. */
int gio_udp_buffers(int fd, int bytes);

/* 1 if the kernel takes UDP_SEGMENT on fd (GIO_UDP_GSO may be passed), else 0. */
int gio_udp_gso_probe(int fd);

/*
 * Receive up to n (<= GIO_UDP_BATCH) datagrams into d[i].buf (each d[i].cap
 * bytes).  Returns how many arrived (d[0..r-1] filled), GIO_AGAIN (EINTR
 * too) or GIO_ERR.  A datagram larger than its buffer is cut, flagged
 * truncated.
 */
long gio_udp_recv(int fd, gio_dgram_t *d, unsigned n);

/*
 * Send n (<= GIO_UDP_BATCH) datagrams (trains where segsize is set).
 * Returns how many of d[] left whole (a count < n: the socket's buffer
 * filled; send the rest later), GIO_AGAIN when not even d[0] went, or
 * GIO_ERR with errno for d[0] (EIO from a GSO send: the device cannot
 * segment; probe off and send without GIO_UDP_GSO).  An error on a later
 * datagram ends the count there and is reported by the next call.
 */
long gio_udp_send(int fd, const gio_dgram_t *d, unsigned n, int flags);

#endif
