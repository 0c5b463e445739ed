/*
 * The listening sockets: opened (-p, -e, -f, -i), adopted from an old binary
 * (SIGUSR2) or passed by the service manager, their options, and the ports
 * they are bound to; and -u's drop of privileges.  See listeners.h.
 */
#define _GNU_SOURCE
#include "listeners.h"
#include "handover.h"
#include "quic/quic.h"
#include "gio_os.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define SERVER_UNSENT_MAX (128 << 10) /* bytes a socket may hold unsent */

/*
 * What accepted sockets inherit from their listener: no send queue holds
 * more than SERVER_UNSENT_MAX unsent, so a slow reader costs a bounded copy
 * per wake-up (see gio_os.h); and TCP_NODELAY (on Linux a copied flag), so
 * that it costs no system call per connection.
 */
static void listener_options(int fd)
{
    int one = 1;
    gio_limit_unsent(fd, SERVER_UNSENT_MAX);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int open_listener(int family, const void *addr, int port, int reuseport, int backlog)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    listener_options(fd);
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } sa = {0};
    socklen_t len;
    if (family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero); /* [::] takes IPv4 too */
        sa.in6.sin6_family = AF_INET6;
        sa.in6.sin6_port = htons(port);
        memcpy(&sa.in6.sin6_addr, addr, 16);
        len = sizeof sa.in6;
    } else {
        sa.in4.sin_family = AF_INET;
        sa.in4.sin_port = htons(port);
        memcpy(&sa.in4.sin_addr, addr, 4);
        len = sizeof sa.in4;
    }
    if (bind(fd, &sa.sa, len) < 0 || (backlog > 0 && listen(fd, backlog) < 0)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* One listener on -i's address (or [::], falling back to 0.0.0.0) and port. */
static int listen_on(const char *addr, int port, int reuseport, int backlog, int quiet)
{
    unsigned char a[16];
    int fd;
    const char *shown = addr ? addr : "::";
    if (!addr) { /* all addresses: dual-stack [::], or 0.0.0.0 without IPv6 */
        memset(a, 0, sizeof a);
        fd = open_listener(AF_INET6, a, port, reuseport, backlog);
        if (fd < 0 && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)) {
            fd = open_listener(AF_INET, a, port, reuseport, backlog);
            shown = "0.0.0.0";
        }
    } else if (inet_pton(AF_INET, addr, a) == 1) {
        fd = open_listener(AF_INET, a, port, reuseport, backlog);
    } else if (inet_pton(AF_INET6, addr, a) == 1) {
        fd = open_listener(AF_INET6, a, port, reuseport, backlog);
    } else {
        fprintf(stderr, "gatling: %s: not an IPv4 or IPv6 address\n", addr);
        errno = EINVAL;
        return -2;
    }
    if (fd < 0 && !quiet)
        fprintf(stderr, "gatling: bind() to %s port %d failed: %s\n", shown, port, strerror(errno));
    return fd;
}

/* Does the listener hand over connections with data only (-a, or systemd's DeferAcceptSec=)? */
int server_deferred(int fd)
{
#ifdef TCP_DEFER_ACCEPT
    int secs = 0;
    socklen_t len = sizeof secs;
    return getsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, &len) == 0 && secs > 0;
#else
    (void)fd;
    return 0;
#endif
}

/*
 * -a: the kernel hands a connection over only once its first bytes arrived
 * (or secs passed), so the read right after accept finds the request.  On by
 * default (1 s, as h2o): a connection accepted at the handshake's last ACK
 * has sent nothing yet, so the loop registered it, went to sleep in the wait
 * and was woken again by the request a few microseconds later, two wake-ups
 * per short connection where one does (issue 23: 0.66 voluntary context
 * switches per connection against 0.06, and 1.3x h2o's CPU).  A connection
 * that stays silent reaches us after secs (the kernel's SYN-ACK retransmit
 * is acknowledged), and its -s head time runs from then.
 *   A passed socket (systemd's DeferAcceptSec=, or the binary before an
 * upgrade) keeps what it has unless -a was given.
 */
static void defer_accept(const config_t *cfg, int fd, int adopted)
{
#ifdef TCP_DEFER_ACCEPT
    int secs = cfg->defer_accept;
    if (adopted ? cfg->defer_accept_given || (secs > 0 && !server_deferred(fd)) : secs > 0)
        setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof secs);
#else
    (void)cfg, (void)fd, (void)adopted;
#endif
}

/* Is the UDP port of TCP listener fd's address free?  -e 0 with HTTP/3: the
   kernel picks a TCP port, and HTTP/3 binds the same number in UDP, where
   another socket may hold it (an HTTP/3 client's, say): HTTPS would then go
   without HTTP/3.  Nothing to say here: the group's own bind says why. */
static int udp_port_free(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int u = getsockname(fd, (struct sockaddr *)&ss, &len) < 0
                ? -1
                : socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (u < 0)
        return 1;
    int ok = bind(u, (struct sockaddr *)&ss, len) == 0 || errno != EADDRINUSE;
    close(u);
    return ok;
}

/* The HTTPS listener; on a port the kernel picks (-e 0) one whose number is
   free in UDP too when HTTP/3 is wanted (8 tries; then HTTP/3's bind says). */
static int listen_https(const config_t *cfg, const proc_t *p, int reuseport, int backlog)
{
    const char *addr = cfg->tls_addr ? cfg->tls_addr : cfg->addr;
    int tries = !p->tls_port && server_h3_wanted(cfg, p) ? 8 : 1, fd;
    while ((fd = listen_on(addr, p->tls_port, reuseport, backlog, !cfg->tls_port_given)) >= 0 &&
           --tries > 0 && !udp_port_free(fd))
        close(fd);
    return fd;
}

static int listen_http(const config_t *cfg, proc_t *p, listener_t *lst, int *n, int reuseport,
                       int backlog)
{
    int fd = listen_on(cfg->addr, p->port, reuseport, backlog, 0);
    if (fd < 0)
        return -1;
    defer_accept(cfg, fd, 0);
    lst[0] = (listener_t){.fd = fd};
    *n = 1;
    if (!p->tls || p->tls_skipped)
        return 0;
    /* HTTPS beside it: a busy default port is a note, a busy -e port an error */
    if ((fd = listen_https(cfg, p, reuseport, backlog)) < 0) {
        if (cfg->tls_port_given || fd == -2) {
            close(lst[0].fd);
            return -1;
        }
        fprintf(stderr,
                "gatling: HTTPS port %d: %s: serving HTTP only (-e insists, -E is "
                "quiet)\n",
                p->tls_port, strerror(errno));
        p->tls_skipped = 1;
        return 0;
    }
    defer_accept(cfg, fd, 0);
    lst[1] = (listener_t){.fd = fd, .tls = 1};
    if (!p->tls_port) /* -e 0: the kernel chose; -W workers take the same */
        p->tls_port = server_port(&lst[1]);
    *n = 2;
    return 0;
}

/* -f: FTP beside HTTP (and HTTPS), on -i's address.  The server speaks
   first on FTP, so no TCP_DEFER_ACCEPT there. */
int server_listen(const config_t *cfg, proc_t *p, listener_t *lst, int *n, int reuseport,
                  int backlog)
{
    if (listen_http(cfg, p, lst, n, reuseport, backlog) < 0)
        return -1;
    if (p->ftp_port < 0)
        return 0;
    int fd = listen_on(cfg->addr, p->ftp_port, reuseport, backlog, 0);
    if (fd < 0) {
        for (int i = 0; i < *n; i++)
            close(lst[i].fd);
        return -1;
    }
    lst[*n] = (listener_t){.fd = fd, .ftp = 1};
    if (!p->ftp_port) /* -f 0: the kernel chose; -W workers take the same */
        p->ftp_port = server_port(&lst[*n]);
    (*n)++;
    return 0;
}

void server_adopt(const config_t *cfg, const proc_t *p, const int *fds, int n, listener_t *lst)
{
    for (int i = 0; i < n; i++) {
        listener_options(fds[i]);
        lst[i] = (listener_t){.fd = fds[i]};
        int kind = server_passed_kind(cfg, p, fds[i], server_port(&lst[i]));
        lst[i].ftp = kind == HANDOVER_FTP;
        if (!lst[i].ftp)
            defer_accept(cfg, fds[i], 1);
        lst[i].tls = kind == HANDOVER_HTTPS;
    }
}

int server_passed_kind(const config_t *cfg, const proc_t *p, int fd, int port)
{
    int named = handover_role(fd), https = p->tls && !cfg->tls_off;
    if (p->ftp_port >= 0 && (named ? named == HANDOVER_FTP : port == p->ftp_port))
        return HANDOVER_FTP;
    if (https && (named ? named == HANDOVER_HTTPS : port == p->tls_port))
        return HANDOVER_HTTPS;
    return HANDOVER_HTTP;
}

void server_passed_ports(proc_t *p, const int *fds, int n)
{
    for (int i = 0; i < n; i++) {
        listener_t l = {.fd = fds[i]};
        int named = handover_role(fds[i]);
        if (named == HANDOVER_HTTPS && !p->tls_port)
            p->tls_port = server_port(&l);
        if (named == HANDOVER_FTP && !p->ftp_port)
            p->ftp_port = server_port(&l);
    }
}

int server_drop_privileges(const config_t *cfg, const proc_t *p)
{
    if (p->uid < 0)
        return 0;
    if (getuid() == (uid_t)p->uid && geteuid() == (uid_t)p->uid &&
        getgid() == (gid_t)p->gid && getegid() == (gid_t)p->gid)
        return 0;
    /* the job threads lower themselves to SCHED_IDLE and a stop raises a running one
       again (site/jobs.c): without privileges only RLIMIT_NICE allows that, up to the
       nice the server started at and no further (20 - nice, setpriority(2)) */
    struct rlimit rn;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && getrlimit(RLIMIT_NICE, &rn) == 0 && rn.rlim_cur < (rlim_t)(20 - nice)) {
        rn.rlim_cur = (rlim_t)(20 - nice);
        if (rn.rlim_max < rn.rlim_cur)
            rn.rlim_max = rn.rlim_cur;
        (void)setrlimit(RLIMIT_NICE, &rn); /* as root; else an exit waits for a starved thread */
    }
    if (setgroups(0, NULL) < 0 || setgid((gid_t)p->gid) < 0 || setuid((uid_t)p->uid) < 0) {
        fprintf(stderr, "gatling: cannot become user %s: %s\n", cfg->user, strerror(errno));
        return -1;
    }
    gio_proc_private(); /* a change of uid may make the process dumpable again */
    return 0;
}

int server_port(const listener_t *lst)
{
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } sa;
    socklen_t len = sizeof sa;
    if (getsockname(lst->fd, &sa.sa, &len) < 0)
        return -1;
    return ntohs(sa.sa.sa_family == AF_INET6 ? sa.in6.sin6_port : sa.in4.sin_port);
}

int server_h3_wanted(const config_t *cfg, const proc_t *p)
{
    return H3_BUILT && !cfg->h3_off && p->tls && !p->tls_skipped;
}
