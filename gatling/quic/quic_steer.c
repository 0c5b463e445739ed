/* HTTP/3's socket group and its steering program: see quic_steer.h. */
#include "quic_steer.h"
#include "gio_udp.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/filter.h>
#endif

#if defined(__linux__) && defined(SO_ATTACH_REUSEPORT_CBPF)
#define STEER_BUILT 1
#else
#define STEER_BUILT 0
#endif

void quic_group_close(quic_group_t *g)
{
    for (int i = 0; i < g->nfds; i++)
        close(g->fds[i]);
    g->nfds = 0;
}

/* Handed over: 2 * per datagram sockets, made close-on-exec. */
static int check_passed(quic_group_t *g, int per, char *err, size_t errlen)
{
    if (g->nfds != 2 * per || g->bank < 0 || g->bank > 1) {
        snprintf(err, errlen, "%d sockets handed over for bank %d, not 2 x %d", g->nfds, g->bank,
                 per);
        return -1;
    }
    for (int i = 0; i < g->nfds; i++) {
        int type = 0;
        socklen_t tl = sizeof type;
        if (getsockopt(g->fds[i], SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_DGRAM ||
            fcntl(g->fds[i], F_SETFD, FD_CLOEXEC) < 0) {
            snprintf(err, errlen, "descriptor %d handed over is not a UDP socket", g->fds[i]);
            return -1;
        }
    }
    return 0;
}

#if STEER_BUILT
/* Nobody else's socket is on addr: a group we join would not start at index
   0 (an older gatling's UDP socket, say, during an upgrade to this one). */
static int port_free(const struct sockaddr *addr, socklen_t len)
{
    int zero = 0, fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (addr->sa_family == AF_INET6) /* as gio_udp_open: [::] takes IPv4 too */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    int r = bind(fd, addr, len);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}
#endif

int quic_group_open(quic_group_t *g, const struct sockaddr *addr, socklen_t len, int per,
                    char *err, size_t errlen)
{
    if (per < 1 || 2 * per > QUIC_STEER_MAX || (!STEER_BUILT && per > 1)) {
        snprintf(err, errlen, "%d workers: %s", per,
                 STEER_BUILT ? "too many" : "steering needs Linux (SO_ATTACH_REUSEPORT_CBPF)");
        quic_group_close(g);
        return -1;
    }
    g->per = per;
    if (g->passed) {
        if (check_passed(g, per, err, errlen) == 0)
            return 0;
        quic_group_close(g);
        return -1;
    }
    g->bank = 0;
#if STEER_BUILT
    if (port_free(addr, len) < 0) {
        snprintf(err, errlen, "UDP port taken (%s): by an older gatling that hands over no "
                 "HTTP/3 sockets? A restart brings HTTP/3 back", strerror(errno));
        return -1;
    }
#endif
    for (int want = STEER_BUILT ? 2 * per : 1; g->nfds < want; g->nfds++) {
        int fd = gio_udp_open(addr, len, 1); /* in order: socket k is index k */
        if (fd < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
            snprintf(err, errlen, "UDP socket: %s", strerror(errno));
            if (fd >= 0)
                close(fd);
            quic_group_close(g);
            return -1;
        }
        g->fds[g->nfds] = fd;
        int got = gio_udp_buffers(fd, QUIC_SOCKBUF); /* now: before -u drops the right */
        if (got > 0 && (!g->rcvbuf || got < g->rcvbuf))
            g->rcvbuf = got;
    }
    if (STEER_BUILT && quic_group_steer(g) < 0) {
        snprintf(err, errlen, "SO_ATTACH_REUSEPORT_CBPF: %s", strerror(errno));
        quic_group_close(g);
        return -1;
    }
    return 0;
}

int quic_group_steer(const quic_group_t *g)
{
#if STEER_BUILT
    /* A = the packet's first byte; X = where its DCID starts, less one: 6 in
       a long header (after flags, version and the DCID's length), 1 in a
       short one.  Loads past the end end the program with 0: socket 0. */
    uint32_t n = (uint32_t)g->nfds, per = (uint32_t)g->per, base = (uint32_t)(g->bank * g->per);
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x80, 0, 2),   /* long header? */
        BPF_STMT(BPF_LDX | BPF_W | BPF_IMM, 5),             /* X + 1: offset 6 */
        BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0),
        BPF_STMT(BPF_LDX | BPF_W | BPF_IMM, 0),             /* X + 1: offset 1 */
        BPF_STMT(BPF_LD | BPF_B | BPF_IND, 2),              /* DCID[1] */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, QUIC_STEER_TAG1, 0, 7),
        BPF_STMT(BPF_LD | BPF_B | BPF_IND, 3),              /* DCID[2] */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, QUIC_STEER_TAG2, 0, 5),
        BPF_STMT(BPF_LD | BPF_B | BPF_IND, 4),              /* DCID[3] */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, QUIC_STEER_TAG3, 0, 3),
        BPF_STMT(BPF_LD | BPF_B | BPF_IND, 1),              /* DCID[0]: the index */
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, n, 1, 0),       /* not ours: as a new one */
        BPF_STMT(BPF_RET | BPF_A, 0),
        BPF_STMT(BPF_LD | BPF_B | BPF_IND, 1),              /* a client's random DCID */
        BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, per),
        BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, base),
        BPF_STMT(BPF_RET | BPF_A, 0),
    };
    struct sock_fprog prog;
    memset(&prog, 0, sizeof prog); /* its padding too: the kernel copies all of it */
    prog.len = sizeof code / sizeof *code, prog.filter = code;
    if (g->nfds < 1)
        return errno = EBADF, -1;
    return setsockopt(g->fds[0], SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog);
#else
    (void)g;
    errno = ENOPROTOOPT;
    return -1;
#endif
}

int quic_group_take(const quic_group_t *g, int i, int *index)
{
    int k = STEER_BUILT ? g->bank * g->per + i : i;
    if (i < 0 || i >= g->per || k >= g->nfds)
        return errno = EBADF, -1;
    *index = STEER_BUILT ? k : -1;
    return fcntl(g->fds[k], F_DUPFD_CLOEXEC, 0);
}

int quic_group_passable(const quic_group_t *g)
{
    return g->per > 0 && g->nfds == 2 * g->per ? g->nfds : 0;
}

void quic_steer_mark(uint8_t *cid, size_t len, int index)
{
    if (index < 0 || len < QUIC_STEER_MARK)
        return;
    cid[0] = (uint8_t)index;
    cid[1] = QUIC_STEER_TAG1;
    cid[2] = QUIC_STEER_TAG2;
    cid[3] = QUIC_STEER_TAG3;
}
