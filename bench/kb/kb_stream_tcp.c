/*
 * kb-stream over TCP: a sending process's streams (connect, a header of a page,
 * its first 8 bytes naming the stream, writes until -t, then a half close and the receiver's
 * count of what arrived) and a receiving process's (accept, read to the end,
 * answer with the count).  See kb_stream_tcp.h.
 */
#define _GNU_SOURCE
#include "kb_stream_tcp.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

typedef struct {
    int fd, id, state, got;   /* got: bytes of the header (recv) or the count (send) */
    unsigned char buf[8];
    uint64_t sent, recv;
    double t0, t1, last;
    char peer[56];
} conn_t;

static void proc_report(const ks_opts_t *o, int p, int out, double t0)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    ks_rec_t r = {.kind = 1, .proc = p, .t0 = t0, .t1 = ks_now(),
                  .usr = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
                  .sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6};
    (void)o;
    ks_report(out, &r);
}

static void conn_report(conn_t *c, int p, int out)
{
    ks_rec_t r = {.kind = 0, .id = c->id, .proc = p, .state = c->state, .sent = c->sent,
                  .recv = c->recv, .t0 = c->t0, .t1 = c->t1};
    memcpy(r.peer, c->peer, sizeof r.peer);
    ks_report(out, &r);
}

/* Connect stream id (blocking, bounded by -S) and send its header. */
static int tcp_open(const ks_opts_t *o, conn_t *c, int id)
{
    struct timeval tv = {.tv_sec = (long)o->stall + 1};
    *c = (conn_t){.id = id, .fd = socket(o->family, SOCK_STREAM, 0)};
    if (c->fd < 0)
        return -1;
    ks_sockbuf(o, c->fd);
    if (ks_congestion(o, c->fd) < 0)
        return -1;
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(c->fd, (const struct sockaddr *)&o->addr, o->alen) < 0)
        return -1;
    struct sockaddr_storage me;
    socklen_t l = sizeof me;
    getsockname(c->fd, (struct sockaddr *)&me, &l);
    ks_peer((struct sockaddr *)&me, c->peer, sizeof c->peer);
    static const char pad[KS_HDR - 8];
    uint32_t h[2] = {htonl(KS_MAGIC), htonl((uint32_t)id)};
    struct iovec iov[2] = {{h, sizeof h}, {(void *)pad, sizeof pad}};
    if (writev(c->fd, iov, 2) != KS_HDR) /* KS_HDR: see kb_stream_util.h */
        return -1;
    c->sent = KS_HDR;
    fcntl(c->fd, F_SETFL, O_NONBLOCK);
    return 0;
}

/* Write until the deadline; a stream without progress for -S stalls. */
static void send_phase(const ks_opts_t *o, conn_t *cs, int k, int ep, const char *buf)
{
    struct epoll_event evs[64];
    double now = ks_now(), end = now + o->secs, check = now;
    int live = k;
    for (int i = 0; i < k; i++)
        cs[i].t0 = cs[i].last = now;
    while (live && !ks_stop && (now = ks_now()) < end) {
        int n = epoll_wait(ep, evs, 64, 50);
        now = ks_now();
        for (int e = 0; e < n; e++) {
            conn_t *c = &cs[evs[e].data.u32];
            ssize_t w = write(c->fd, buf, (size_t)o->len);
            if (w > 0)
                c->sent += (uint64_t)w, c->last = now;
            else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                c->state = ST_ERROR, c->t1 = now, live--;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
            }
        }
        if (now - check < 0.1)
            continue;
        check = now;
        for (int i = 0; i < k; i++)
            if (cs[i].state == ST_OK && now - cs[i].last > o->stall) {
                cs[i].state = ST_STALL, cs[i].t1 = now, live--;
                epoll_ctl(ep, EPOLL_CTL_DEL, cs[i].fd, NULL);
            }
    }
    for (int i = 0; i < k; i++)
        if (cs[i].state == ST_OK)
            cs[i].t1 = now;
}

/* Half close; read each receiver's count (8 bytes) while counts keep coming. */
static void reply_phase(const ks_opts_t *o, conn_t *cs, int k, int ep)
{
    struct epoll_event evs[64];
    int want = 0;
    for (int i = 0; i < k; i++) {
        if (cs[i].state != ST_OK)
            continue;
        shutdown(cs[i].fd, SHUT_WR);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_MOD, cs[i].fd, &ev);
        cs[i].state = ST_NOREPLY, want++;
    }
    double last = ks_now();
    while (want && ks_now() - last < o->stall + 2) {
        int n = epoll_wait(ep, evs, 64, 100);
        for (int e = 0; e < n; e++) {
            conn_t *c = &cs[evs[e].data.u32];
            ssize_t r = read(c->fd, c->buf + c->got, 8 - (size_t)c->got);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (r > 0)
                c->got += (int)r;
            if (r > 0 && c->got < 8)
                continue;
            epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
            want--, last = ks_now();
            if (c->got == 8) {
                uint64_t v;
                memcpy(&v, c->buf, 8);
                c->recv = be64toh(v);
                c->state = c->recv == c->sent ? ST_OK : ST_MISMATCH;
            }
        }
    }
}

int ks_tcp_send(const ks_opts_t *o, int p, int ready, int go, int out)
{
    int k = 0;
    conn_t *cs = calloc((size_t)(o->n / o->procs + 1), sizeof *cs);
    char *buf = aligned_alloc(4096, ((size_t)o->len + 4095) & ~(size_t)4095); /* KS_ALIGN */
    int ep = epoll_create1(0);
    if (!cs || !buf || ep < 0)
        return 1;
    memset(buf, 'k', (size_t)o->len);
    for (long id = p; id < o->n; id += o->procs, k++) {
        if (tcp_open(o, &cs[k], (int)id) < 0) {
            ks_rec_t r = {.id = (int)id, .proc = p, .state = ST_ERROR, .err = errno};
            ks_report(out, &r);
            return 1;
        }
        struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (uint32_t)k};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[k].fd, &ev);
    }
    if (ks_wait_go(ready, go) < 0)
        return 1;
    double t0 = ks_now();
    send_phase(o, cs, k, ep, buf);
    reply_phase(o, cs, k, ep);
    for (int i = 0; i < k; i++) {
        close(cs[i].fd);
        conn_report(&cs[i], p, out);
    }
    proc_report(o, p, out, t0);
    return 0;
}

/* Readable: count, take the stream's name from the first 8 bytes, answer at the end. */
static int recv_ready(conn_t *c, char *buf, size_t len, int p, int out)
{
    for (int i = 0; i < 8; i++) {
        ssize_t r = read(c->fd, buf, len);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        double now = ks_now();
        if (r > 0) {
            if (!c->recv)
                c->t0 = now;
            for (ssize_t j = 0; j < r && c->got < 8; j++)
                c->buf[c->got++] = (unsigned char)buf[j];
            if (c->got == 8 && c->id < 0) {
                uint32_t h[2];
                memcpy(h, c->buf, 8);
                c->id = ntohl(h[0]) == KS_MAGIC ? (int)ntohl(h[1]) : -2;
            }
            c->recv += (uint64_t)r, c->t1 = now;
            continue;
        }
        uint64_t v = htobe64(c->recv);
        c->state = r == 0 && write(c->fd, &v, 8) == 8 ? ST_OK : ST_ERROR;
        conn_report(c, p, out);
        close(c->fd);
        c->fd = -1;
        return 1;
    }
    return 0;
}

static void accept_all(const ks_opts_t *o, int lfd, int ep, conn_t **cs, int *cap)
{
    struct sockaddr_storage sa;
    socklen_t l = sizeof sa;
    int fd;
    while ((fd = accept4(lfd, (struct sockaddr *)&sa, &l, SOCK_NONBLOCK)) >= 0) {
        if (fd >= *cap) {
            int ncap = fd * 2 + 16;
            conn_t *grown = realloc(*cs, (size_t)ncap * sizeof **cs);
            if (!grown) { /* its sender sees no reply: the stream's state says so */
                close(fd);
                return;
            }
            *cs = grown;
            memset(*cs + *cap, 0, (size_t)(ncap - *cap) * sizeof **cs);
            *cap = ncap;
        }
        conn_t *c = &(*cs)[fd];
        *c = (conn_t){.fd = fd, .id = -1, .state = ST_UNFINISHED};
        ks_peer((struct sockaddr *)&sa, c->peer, sizeof c->peer);
        ks_sockbuf(o, fd);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        l = sizeof sa;
    }
}

int ks_tcp_recv(const ks_opts_t *o, int p, int lfd, int ready, int go, int out)
{
    size_t len = 128 * 1024;
    char *buf = aligned_alloc(4096, len); /* KS_ALIGN: see kb_stream_util.h */
    int cap = 0, ep = epoll_create1(0);
    conn_t *cs = NULL;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u32 = (uint32_t)lfd},
                       evs[64];
    if ((lfd = ks_own_socket(o, p, lfd)) < 0)
        return 1;
    ev.data.u32 = (uint32_t)lfd;
    fcntl(lfd, F_SETFL, O_NONBLOCK);
    if (!buf || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0 || ks_wait_go(ready, go))
        return 1;
    double t0 = ks_now(), end = t0 + o->secs;
    while (!ks_stop && ks_now() < end) {
        int n = epoll_wait(ep, evs, 64, 100);
        for (int e = 0; e < n; e++) {
            int fd = (int)evs[e].data.u32;
            if (fd == lfd)
                accept_all(o, lfd, ep, &cs, &cap);
            else if (fd < cap && cs[fd].fd == fd)
                recv_ready(&cs[fd], buf, len, p, out);
        }
    }
    double first = 0; /* the CPU share from the first byte on, not from the start */
    for (int fd = 0; fd < cap; fd++) {
        if (cs[fd].fd == fd && fd > 0) /* not ended: reported as unfinished */
            conn_report(&cs[fd], p, out);
        if (cs[fd].t0 > 0 && (!first || cs[fd].t0 < first))
            first = cs[fd].t0;
    }
    proc_report(o, p, out, first ? first : t0);
    return 0;
}
