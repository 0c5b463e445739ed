/*
 * What kb-stream's parts share (kb_stream.c: options, processes, report, who calls
 * kb_stream_tcp.c: TCP sender and receiver; kb_stream_udp.c: UDP; kb_stream_relay.c:
 * the copying and splicing relay; and all of them call this, which calls none of them):
 * the options and the result record, the clock, socket options and the start barrier.
 * See man/kb-stream.1.
 */
#ifndef KB_STREAM_UTIL_H
#define KB_STREAM_UTIL_H

#include <stdint.h>
#include <sys/socket.h>

enum { KS_SEND, KS_RECV, KS_RELAY };
/* how a stream ended */
enum { ST_OK, ST_STALL, ST_ERROR, ST_NOREPLY, ST_MISMATCH, ST_UNFINISHED, ST_NOFIN };

/*
 * KS_ALIGN: every buffer that read(2) fills or write(2) drains is page-aligned.  With
 * malloc's 16-byte offset the kernel's copy to user space (rep movsb) ran at a quarter
 * of its speed here, and a 1-stream loopback row measured half of iperf3's (whose
 * buffer is an mmap, page-aligned); aligned, the two agree.
 *
 * KS_HDR: the TCP stream's header is a page (8 bytes that name the stream, zeros), so
 * that every later write starts at a page boundary of the stream too.  The kernel
 * copies a write into its page fragments at the stream's offset; after an 8-byte
 * header every copy of the run had source and destination 8 bytes apart in their
 * cache lines, and one stream on loopback ran at 0.54 of iperf3's (20 alternating
 * pairs); any header of 64 bytes or more lifted it to iperf3's.
 */
#define KS_HDR 4096
#define KS_MAX_STREAMS 1000
#define KS_MAX_PROCS 64
#define KS_MAGIC 0x4b425354u     /* "KBST": TCP stream header, UDP data */
#define KS_FIN 0x4b42464eu       /* "KBFN": UDP end of stream, with the count sent */

typedef struct ks_opts {
    int mode, udp, splice;
    const char *host;  /* -c: where to send (sender, relay) */
    const char *bind;  /* -B: where to listen (receiver, relay) */
    int port;          /* -p: the receiver's port (send, relay: the target's; recv: its own) */
    int lport;         /* -L: the relay's own port */
    long n;            /* -n: streams */
    int procs;         /* -P */
    double secs;       /* -t */
    long len;          /* -l: write size (TCP), payload (UDP) */
    double rate;       /* -b: bits/s, IP datagrams (UDP) */
    int wbuf;          /* -w: SO_SNDBUF and SO_RCVBUF, 0: the kernel's */
    double stall;      /* -S: no progress for this long is a stall */
    double idle;       /* -i: a UDP receiver process with data ends after this long idle */
    const char *cc;    /* -C: TCP congestion control of the sending sockets */
    int cpus[KS_MAX_PROCS], ncpus; /* -A: process p runs on cpus[p % ncpus] */
    struct sockaddr_storage addr; /* the target (send, relay) or the bind address */
    socklen_t alen;
    int family;
} ks_opts_t;

/* One stream's result, or a process's (kind 1), from a process to the parent. */
typedef struct ks_rec {
    int kind, id, proc, state, err;
    uint64_t sent, recv;       /* TCP: bytes; UDP: datagrams (sent: from the FIN) */
    uint64_t bytes;            /* UDP: payload bytes received (sender: sent) */
    uint64_t lost, reordered;  /* UDP receiver */
    double t0, t1;             /* first and last byte (monotonic seconds) */
    double usr, sys;           /* kind 1: the process's CPU seconds */
    char peer[56];
} ks_rec_t;

/* set by kb_stream.c's signal handler: every loop ends at its next check */
extern volatile int ks_stop;

/* CLOCK_MONOTONIC in seconds */
double ks_now(void);
/* One record to the parent's pipe in one write (sizeof *r < PIPE_BUF); _exit(1) if it fails. */
void ks_report(int fd, const ks_rec_t *r);
/* -w: SO_SNDBUF and SO_RCVBUF of fd (forced past the sysctl limits where allowed). */
void ks_sockbuf(const ks_opts_t *o, int fd);
/* -C: the sending socket's congestion control; 0, or -1 if the kernel refused it. */
int ks_congestion(const ks_opts_t *o, int fd);
/* "addr:port" or "[addr]:port" of sa into out (len bytes). */
void ks_peer(const struct sockaddr *sa, char *out, size_t len);
/* Tell the parent this process is ready, wait for the start: 0, or -1 if the parent left. */
int ks_wait_go(int ready_fd, int go_fd);
/* Process p's receiving socket (lfd itself for p 0, else its own in the SO_REUSEPORT
 * group, lfd then closed); -1 on error. */
int ks_own_socket(const ks_opts_t *o, int p, int lfd);

#endif
