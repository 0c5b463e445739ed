/*
 * gio_udp.c — batched datagram I/O (see gio_udp.h).
 *
 * Linux has recvmmsg/sendmmsg and UDP_SEGMENT; elsewhere the same calls loop
 * over recvmsg/sendmsg and split trains themselves.  The ancillary data is
 * the portable part: IP_PKTINFO where the OS has it (Linux, macOS), else
 * IP_RECVDSTADDR/IP_SENDSRCADDR (FreeBSD, OpenBSD); IPV6_PKTINFO everywhere.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define __APPLE_USE_RFC_3542 1 /* macOS: IPV6_PKTINFO and IPV6_RECVPKTINFO */
#include "gio_udp.h"
#include "gio.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#ifdef __linux__
#include <netinet/udp.h>
#endif
#if defined(__linux__) && !defined(UDP_SEGMENT)
#define UDP_SEGMENT 103 /* linux/udp.h; glibc's netinet/udp.h before 2.29 lacks it */
#endif
#if defined(__linux__) && !defined(SOL_UDP)
#define SOL_UDP 17
#endif

/* room for packet info (in6_pktinfo is the larger), TOS/TCLASS and a segment size */
#define CMSG_ROOM 128

typedef union {
    struct cmsghdr align;
    unsigned char buf[CMSG_ROOM];
} ctl_t;

static int on(int fd, int level, int opt)
{
    int one = 1;
    return setsockopt(fd, level, opt, &one, sizeof one);
}

int gio_udp_setup(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    int r = -1;
    if (ss.ss_family == AF_INET6) {
        r = on(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO);
        on(fd, IPPROTO_IPV6, IPV6_RECVTCLASS);
    }
#ifdef IP_RECVTOS
    on(fd, IPPROTO_IP, IP_RECVTOS); /* also IPv4 arriving at a dual-stack socket */
#endif
    if (ss.ss_family == AF_INET) {
#if defined(IP_PKTINFO)
        r = on(fd, IPPROTO_IP, IP_PKTINFO);
#elif defined(IP_RECVDSTADDR)
        r = on(fd, IPPROTO_IP, IP_RECVDSTADDR);
#endif
    }
#ifdef IP_MTU_DISCOVER
    /* QUIC sizes its own packets (RFC 9000 14): never let the kernel fragment */
    int pmtu = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
#endif
#ifdef IPV6_MTU_DISCOVER
    if (ss.ss_family == AF_INET6) {
        int pmtu6 = IPV6_PMTUDISC_DO;
        setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu6, sizeof pmtu6);
    }
#endif
    return r;
}

int gio_udp_open(const struct sockaddr *addr, socklen_t len, int reuseport)
{
    int fd = socket(addr->sa_family, SOCK_DGRAM, 0);
    if (fd < 0)
        return -1;
    int zero = 0;
    /* never into a CGI or an upgraded binary (SOCK_CLOEXEC is not everywhere) */
    if (gio_nonblock(fd) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        goto fail;
    on(fd, SOL_SOCKET, SO_REUSEADDR);
#ifdef SO_REUSEPORT
    if (reuseport)
        on(fd, SOL_SOCKET, SO_REUSEPORT);
#else
    (void)reuseport;
#endif
    if (addr->sa_family == AF_INET6) /* [::] takes IPv4 too */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (bind(fd, addr, len) < 0)
        goto fail;
    gio_udp_setup(fd);
    return fd;
fail:;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

#ifndef SO_RCVBUFFORCE /* Linux's: past rmem_max/wmem_max, for CAP_NET_ADMIN */
#define SO_RCVBUFFORCE SO_RCVBUF
#define SO_SNDBUFFORCE SO_SNDBUF
#endif

/* The forced option where we may, else the one the system caps. */
static void set_buf(int fd, int force, int opt, int bytes)
{
    if (force == opt || setsockopt(fd, SOL_SOCKET, force, &bytes, sizeof bytes) < 0)
        setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
}

int gio_udp_buffers(int fd, int bytes)
{
    set_buf(fd, SO_RCVBUFFORCE, SO_RCVBUF, bytes);
    set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, bytes);
    int got = 0;
    socklen_t len = sizeof got;
    if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &len) < 0)
        return -1;
#ifdef __linux__
    got /= 2; /* Linux reports twice the size asked: half is its bookkeeping */
#endif
    return got;
}

int gio_udp_gso_probe(int fd)
{
#ifdef __linux__
    int v = 0;
    socklen_t len = sizeof v;
    return getsockopt(fd, SOL_UDP, UDP_SEGMENT, &v, &len) == 0;
#else
    (void)fd;
    return 0;
#endif
}

/* --- receiving ------------------------------------------------------------------ */

static void take_pktinfo(gio_dgram_t *d, struct cmsghdr *c)
{
    unsigned char *p = CMSG_DATA(c);
    if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
        struct in6_pktinfo pi;
        memcpy(&pi, p, sizeof pi);
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&d->local;
        memset(s6, 0, sizeof *s6);
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = pi.ipi6_addr;
        d->ifindex = pi.ipi6_ifindex;
        return;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)&d->local;
#if defined(IP_PKTINFO)
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
        struct in_pktinfo pi;
        memcpy(&pi, p, sizeof pi);
        memset(s4, 0, sizeof *s4);
        s4->sin_family = AF_INET;
        s4->sin_addr = pi.ipi_addr;
        d->ifindex = pi.ipi_ifindex;
    }
#elif defined(IP_RECVDSTADDR)
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVDSTADDR) {
        memset(s4, 0, sizeof *s4);
        s4->sin_family = AF_INET;
        memcpy(&s4->sin_addr, p, sizeof s4->sin_addr);
    }
#endif
}

/* What the kernel attached to a received datagram: local address, ECN. */
static void parse_ctl(gio_dgram_t *d, struct msghdr *m)
{
    d->local.ss_family = 0;
    d->ifindex = 0;
    d->ecn = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        unsigned char *p = CMSG_DATA(c);
        size_t n = c->cmsg_len - CMSG_LEN(0);
        if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS && n >= sizeof(int)) {
            int v;
            memcpy(&v, p, sizeof v);
            d->ecn = (uint8_t)(v & 3);
        }
#ifdef IP_RECVTOS
        else if (c->cmsg_level == IPPROTO_IP && (c->cmsg_type == IP_TOS
                                                 || c->cmsg_type == IP_RECVTOS) && n >= 1)
            d->ecn = p[0] & 3; /* one byte on Linux and the BSDs */
#endif
        else
            take_pktinfo(d, c);
    }
}

static void recv_prepare(gio_dgram_t *d, struct msghdr *m, struct iovec *iov, ctl_t *ctl)
{
    iov->iov_base = d->buf;
    iov->iov_len = d->cap;
    *m = (struct msghdr){.msg_name = &d->peer, .msg_namelen = sizeof d->peer,
                         .msg_iov = iov, .msg_iovlen = 1,
                         .msg_control = ctl->buf, .msg_controllen = sizeof ctl->buf};
}

static void recv_finish(gio_dgram_t *d, struct msghdr *m, size_t got)
{
    d->peerlen = m->msg_namelen;
    d->truncated = (m->msg_flags & MSG_TRUNC) != 0;
    d->len = got > d->cap ? d->cap : got;
    d->segsize = 0;
    parse_ctl(d, m);
}

static long udp_error(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? GIO_AGAIN : GIO_ERR;
}

long gio_udp_recv(int fd, gio_dgram_t *d, unsigned n)
{
    if (n > GIO_UDP_BATCH)
        n = GIO_UDP_BATCH;
    if (n == 0)
        return 0;
    struct iovec iov[GIO_UDP_BATCH];
    ctl_t ctl[GIO_UDP_BATCH];
#ifdef __linux__
    struct mmsghdr mm[GIO_UDP_BATCH];
    for (unsigned i = 0; i < n; i++)
        recv_prepare(&d[i], &mm[i].msg_hdr, &iov[i], &ctl[i]);
    int r = recvmmsg(fd, mm, n, MSG_DONTWAIT, NULL);
    if (r < 0)
        return udp_error();
    for (int i = 0; i < r; i++)
        recv_finish(&d[i], &mm[i].msg_hdr, mm[i].msg_len);
    return r;
#else
    unsigned i;
    for (i = 0; i < n; i++) {
        struct msghdr m;
        recv_prepare(&d[i], &m, &iov[i], &ctl[i]);
        ssize_t got = recvmsg(fd, &m, MSG_DONTWAIT);
        if (got < 0)
            break;
        recv_finish(&d[i], &m, (size_t)got);
    }
    return i > 0 ? (long)i : udp_error();
#endif
}

/* --- sending -------------------------------------------------------------------- */

static int is_v4(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return 1;
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
    return ss->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr);
}

/* Append one control message; returns the space it took (0 if no room). */
static size_t put_cmsg(struct msghdr *m, size_t used, int level, int type, const void *v,
                       size_t n)
{
    if (used + CMSG_SPACE(n) > CMSG_ROOM)
        return 0;
    struct cmsghdr *c = (struct cmsghdr *)((unsigned char *)m->msg_control + used);
    memset(c, 0, CMSG_SPACE(n));
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(n);
    memcpy(CMSG_DATA(c), v, n);
    return CMSG_SPACE(n);
}

static size_t put_source(const gio_dgram_t *d, struct msghdr *m, size_t used)
{
    if (d->local.ss_family == AF_INET6) {
        struct in6_pktinfo pi = {
            .ipi6_addr = ((const struct sockaddr_in6 *)&d->local)->sin6_addr,
            .ipi6_ifindex = d->ifindex};
        return put_cmsg(m, used, IPPROTO_IPV6, IPV6_PKTINFO, &pi, sizeof pi);
    }
    if (d->local.ss_family != AF_INET)
        return 0;
    struct in_addr a = ((const struct sockaddr_in *)&d->local)->sin_addr;
#if defined(IP_PKTINFO)
    struct in_pktinfo pi = {.ipi_spec_dst = a, .ipi_ifindex = (int)d->ifindex};
    return put_cmsg(m, used, IPPROTO_IP, IP_PKTINFO, &pi, sizeof pi);
#elif defined(IP_SENDSRCADDR)
    return put_cmsg(m, used, IPPROTO_IP, IP_SENDSRCADDR, &a, sizeof a);
#else
    (void)a;
    return 0;
#endif
}

/* Fill one message: bytes [off, off+len) of d, with its source, ECN and, for
   a train handed to the kernel whole, UDP_SEGMENT. */
static void send_prepare(const gio_dgram_t *d, size_t off, size_t len, int gso,
                         struct msghdr *m, struct iovec *iov, ctl_t *ctl)
{
    iov->iov_base = (unsigned char *)d->buf + off;
    iov->iov_len = len;
    *m = (struct msghdr){.msg_name = (void *)&d->peer, .msg_namelen = d->peerlen,
                         .msg_iov = iov, .msg_iovlen = 1, .msg_control = ctl->buf};
    size_t used = put_source(d, m, 0);
    if (d->ecn) {
        int tos = d->ecn & 3;
        if (is_v4(&d->peer))
            used += put_cmsg(m, used, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
        else
            used += put_cmsg(m, used, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
    }
#ifdef __linux__
    if (gso) {
        uint16_t seg = d->segsize;
        used += put_cmsg(m, used, SOL_UDP, UDP_SEGMENT, &seg, sizeof seg);
    }
#else
    (void)gso;
#endif
    m->msg_controllen = used;
    if (used == 0)
        m->msg_control = NULL;
}

typedef struct {
#ifdef __linux__
    struct mmsghdr mm[GIO_UDP_BATCH];
#else
    struct {
        struct msghdr msg_hdr;
    } mm[GIO_UDP_BATCH];
#endif
    struct iovec iov[GIO_UDP_BATCH];
    ctl_t ctl[GIO_UDP_BATCH];
    unsigned owner[GIO_UDP_BATCH]; /* which d[] a message belongs to */
    unsigned k;
} out_t;

/* Send the k messages gathered in o; returns how many left, or -1 (errno). */
static int out_flush(int fd, out_t *o)
{
#ifdef __linux__
    return sendmmsg(fd, o->mm, o->k, MSG_DONTWAIT | MSG_NOSIGNAL);
#else
    unsigned i;
    for (i = 0; i < o->k; i++)
        if (sendmsg(fd, &o->mm[i].msg_hdr, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
            break;
    return i > 0 ? (int)i : -1;
#endif
}

/* Gather messages from d[*i] (at byte *off) on until o is full or d[] ends. */
static void out_gather(out_t *o, const gio_dgram_t *d, unsigned n, unsigned *i, size_t *off,
                       int flags)
{
    for (o->k = 0; *i < n && o->k < GIO_UDP_BATCH;) {
        const gio_dgram_t *x = &d[*i];
        size_t seg = x->segsize ? x->segsize : x->len;
        int train = x->segsize && x->len > seg;
        size_t left = x->len - *off;
        size_t len = (flags & GIO_UDP_GSO) || !train ? left : (left < seg ? left : seg);
        int gso = train && (flags & GIO_UDP_GSO);
        send_prepare(x, *off, len, gso, &o->mm[o->k].msg_hdr, &o->iov[o->k], &o->ctl[o->k]);
        o->owner[o->k++] = *i;
        *off += len;
        if (*off >= x->len) {
            (*i)++;
            *off = 0;
        }
    }
}

long gio_udp_send(int fd, const gio_dgram_t *d, unsigned n, int flags)
{
    if (n > GIO_UDP_BATCH)
        n = GIO_UDP_BATCH;
    out_t o;
    unsigned done = 0, i = 0; /* d[0..done-1] wholly handed to the kernel */
    size_t off = 0;           /* within d[i], when a split train spans flushes */
    while (done < n) {
        int mid = off != 0;   /* this flush starts inside a train partly sent */
        out_gather(&o, d, n, &i, &off, flags);
        int r = out_flush(fd, &o);
        /* a train cut short counts as sent: QUIC recovers lost packets, and
           sending its first segments again would only duplicate them */
        if (r < 0)
            return mid ? (long)done + 1 : done > 0 ? (long)done : udp_error();
        if ((unsigned)r < o.k) {
            unsigned at = o.owner[r];
            int started = r > 0 ? o.owner[r - 1] == at : mid;
            return (long)(started ? at + 1 : at);
        }
        done = i; /* d[i] itself, if partly gathered, is not done yet */
    }
    return (long)done;
}
