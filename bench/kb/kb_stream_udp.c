/*
 * kb-stream over UDP: a sending process's flows (a connected socket each,
 * datagrams round robin at -b's pace, from 16 bytes on with a header: magic,
 * flow, sequence number; at the end three FIN datagrams with the count sent),
 * and a receiving process's (flows told apart by their source address: loss
 * from the FIN's count, reordering from the sequence numbers).  With
 * SO_REUSEPORT each flow stays on one receiving socket.  See kb_stream_udp.h.
 */
#define _GNU_SOURCE
#include "kb_stream_udp.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    uint32_t magic, id;
    uint64_t seq;
} hdr_t;

typedef struct {
    int used, done, id;
    struct sockaddr_storage from;
    uint64_t recv, bytes, next, reordered, sent;
    double t0, t1;
} flow_t;

#define TABLE 4096 /* > 2 * KS_MAX_STREAMS */

static void proc_report(int p, int out, double t0)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    ks_rec_t r = {.kind = 1, .proc = p, .t0 = t0, .t1 = ks_now(),
                  .usr = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
                  .sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6};
    ks_report(out, &r);
}

static void pause_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Datagrams round robin over the flows until -t, paced to -b if set. */
static void udp_blast(const ks_opts_t *o, const int *fds, const int *ids, uint64_t *sent, int k,
                      char *buf)
{
    int hdr = o->len >= (long)sizeof(hdr_t), wire = (o->family == AF_INET6 ? 48 : 28);
    /* this process's share of -b: its flows' share of all */
    double pps = o->rate > 0 ? o->rate * k / o->n / (8.0 * (double)(o->len + wire)) : 0;
    double t0 = ks_now(), now = t0, end = t0 + o->secs;
    uint64_t total = 0;
    for (int i = 0; !ks_stop && now < end; i = (i + 1) % k) {
        if (pps > 0) {
            double due = t0 + (double)total / pps;
            if (due > now + 0.0005)
                pause_s(due - now);
        }
        if (hdr) {
            hdr_t h = {htonl(KS_MAGIC), htonl((uint32_t)ids[i]), htobe64(sent[i])};
            memcpy(buf, &h, sizeof h);
        }
        if (send(fds[i], buf, (size_t)o->len, 0) >= 0)
            sent[i]++, total++;
        if ((total & 63) == 0 || pps > 0)
            now = ks_now();
    }
}

int ks_udp_send(const ks_opts_t *o, int p, int ready, int go, int out)
{
    int k = (int)((o->n - p + o->procs - 1) / o->procs), fds[KS_MAX_STREAMS];
    uint64_t sent[KS_MAX_STREAMS] = {0};
    int ids[KS_MAX_STREAMS];
    char *buf = aligned_alloc(4096, ((size_t)o->len + 16 + 4095) & ~(size_t)4095); /* KS_ALIGN */
    ks_rec_t recs[KS_MAX_STREAMS];
    for (int i = 0; i < k; i++) {
        ids[i] = p + i * o->procs;
        recs[i] = (ks_rec_t){.id = ids[i], .proc = p};
        fds[i] = socket(o->family, SOCK_DGRAM, 0);
        if (fds[i] < 0 || (ks_sockbuf(o, fds[i]), 0) ||
            connect(fds[i], (const struct sockaddr *)&o->addr, o->alen) < 0) {
            recs[i].state = ST_ERROR, recs[i].err = errno;
            ks_report(out, &recs[i]);
            return 1;
        }
        struct sockaddr_storage me;
        socklen_t l = sizeof me;
        getsockname(fds[i], (struct sockaddr *)&me, &l);
        ks_peer((struct sockaddr *)&me, recs[i].peer, sizeof recs[i].peer);
    }
    if (!buf)
        return 1;
    memset(buf, 'k', (size_t)o->len + 16);
    if (ks_wait_go(ready, go) < 0)
        return 1;
    double t0 = ks_now();
    udp_blast(o, fds, ids, sent, k, buf);
    double t1 = ks_now();
    pause_s(0.1); /* let the queues drain before the FINs */
    for (int rep = 0; rep < 3; rep++, pause_s(0.02))
        for (int i = 0; i < k; i++) {
            hdr_t h = {htonl(KS_FIN), htonl((uint32_t)ids[i]), htobe64(sent[i])};
            send(fds[i], &h, sizeof h, 0);
        }
    for (int i = 0; i < k; i++) {
        recs[i].sent = recs[i].recv = sent[i], recs[i].t0 = t0, recs[i].t1 = t1;
        recs[i].bytes = sent[i] * (uint64_t)o->len;
        close(fds[i]);
        ks_report(out, &recs[i]);
    }
    proc_report(p, out, t0);
    return 0;
}

static flow_t *flow_of(flow_t *tab, const struct sockaddr_storage *from)
{
    const struct sockaddr_in *a = (const void *)from;
    const struct sockaddr_in6 *b = (const void *)from;
    uint32_t h = from->ss_family == AF_INET6 ? b->sin6_port ^ b->sin6_addr.s6_addr32[3]
                                             : a->sin_port ^ a->sin_addr.s_addr;
    size_t len = from->ss_family == AF_INET6 ? sizeof *b : sizeof *a;
    for (uint32_t i = (h * 2654435761u) % TABLE, n = 0; n < TABLE; i = (i + 1) % TABLE, n++) {
        if (!tab[i].used) {
            tab[i] = (flow_t){.used = 1, .id = -1};
            memcpy(&tab[i].from, from, len);
            return &tab[i];
        }
        if (memcmp(&tab[i].from, from, len) == 0)
            return &tab[i];
    }
    return NULL;
}

static void flow_report(flow_t *f, int p, int out)
{
    ks_rec_t r = {.id = f->id, .proc = p, .recv = f->recv, .bytes = f->bytes,
                  .reordered = f->reordered, .t0 = f->t0, .t1 = f->t1,
                  .state = f->done ? ST_OK : ST_NOFIN, .sent = f->done ? f->sent : f->next};
    r.lost = r.sent > f->recv ? r.sent - f->recv : 0;
    ks_peer((struct sockaddr *)&f->from, r.peer, sizeof r.peer);
    ks_report(out, &r);
}

/* One datagram of n bytes from a flow: count it, or end the flow at its FIN. */
static void datagram(flow_t *f, const char *buf, ssize_t n, int p, int out)
{
    hdr_t h;
    if (n == (ssize_t)sizeof h)
        memcpy(&h, buf, sizeof h);
    if (n == (ssize_t)sizeof h && ntohl(h.magic) == KS_FIN) {
        if (!f->done) {
            f->done = 1, f->id = (int)ntohl(h.id), f->sent = be64toh(h.seq);
            flow_report(f, p, out);
        }
        return;
    }
    if (f->done)
        return; /* a late datagram of an ended flow (reported already) */
    double now = ks_now();
    if (!f->recv)
        f->t0 = now;
    f->recv++, f->bytes += (uint64_t)n, f->t1 = now;
    if (n < (ssize_t)sizeof h)
        return;
    memcpy(&h, buf, sizeof h);
    uint64_t seq = be64toh(h.seq);
    if (ntohl(h.magic) != KS_MAGIC)
        return;
    if (f->id < 0)
        f->id = (int)ntohl(h.id);
    if (seq < f->next)
        f->reordered++;
    else
        f->next = seq + 1;
}

int ks_udp_recv(const ks_opts_t *o, int p, int lfd, int ready, int go, int out)
{
    int fd = ks_own_socket(o, p, lfd);
    flow_t *tab = calloc(TABLE, sizeof *tab);
    char *buf = aligned_alloc(4096, 65536); /* KS_ALIGN */
    if (fd < 0 || !tab || !buf || ks_wait_go(ready, go) < 0)
        return 1;
    double t0 = ks_now(), end = t0 + o->secs, last = 0;
    while (!ks_stop && ks_now() < end && !(last && ks_now() - last > o->idle)) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        struct sockaddr_storage from;
        for (int i = 0; i < 64; i++) {
            socklen_t l = sizeof from;
            memset(&from, 0, sizeof from);
            ssize_t n = recvfrom(fd, buf, 65536, MSG_DONTWAIT, (struct sockaddr *)&from, &l);
            if (n < 0)
                break;
            flow_t *f = flow_of(tab, &from);
            if (f)
                datagram(f, buf, n, p, out);
            last = ks_now();
        }
    }
    double first = 0; /* the CPU share from the first datagram on */
    for (int i = 0; i < TABLE; i++) {
        if (tab[i].used && !tab[i].done)
            flow_report(&tab[i], p, out);
        if (tab[i].used && tab[i].t0 > 0 && (!first || tab[i].t0 < first))
            first = tab[i].t0;
    }
    proc_report(p, out, first ? first : t0);
    return 0;
}
