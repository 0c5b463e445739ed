/*
 * Both sides of an HTTP/2 proxy at once: a client's frames (h2/h2.c, as
 * fuzz_h2) and a hostile h2c/ backend's (handlers/proxy_h2.c, nghttp2's
 * client session), interleaved as the input says, so that a client's reset
 * or end of stream reaches proxy_h2.c at every point of the backend
 * connection's life: before it is opened, while it connects (the loop not
 * turned yet), before its HEADERS went out, mid-body, after the answer
 * began.  fuzz_h2b drives the backend's side alone.
 *
 * The input is a list of operations, each an opcode byte (taken modulo
 * NOPS) and its argument bytes (0 once the input is over):
 *
 *   client (stream i: the i-th it opened, modulo how many it has)
 *     OPEN kind         HEADERS of a new stream (a new session first, if
 *                       none): kind & 3: GET /a, POST /p, gRPC POST /g.S/M,
 *                       POST /p with content-length (kind >> 4) * 512;
 *                       kind & 4: END_STREAM; kind & 8: te: trailers, or
 *                       grpc-timeout: 50m for gRPC
 *     DATA i len fl     len (< 128 as is, else (len - 127) * 512) bytes in
 *                       frames of at most 16 KiB; fl & 1: END_STREAM on the
 *                       last (len 0: an empty DATA frame), fl & 2: padded
 *     RST i code        RST_STREAM
 *     WINDOW i incr     WINDOW_UPDATE of (incr + 1) KiB; i & 0x80: stream 0
 *     CLOSE how code    how & 1: GOAWAY (code); else the session goes
 *                       (h2_free: the client's connection closed)
 *   backend (k: one of NBE sockets the harness accepted)
 *     ACCEPT set        take a pending connection into a free slot, and
 *                       send set % 4: nothing, an empty SETTINGS,
 *                       MAX_CONCURRENT_STREAMS 1, INITIAL_WINDOW_SIZE 0,
 *                       each but the first with the ACK of gatling's
 *                       SETTINGS (its windows) unless set & 4
 *     ABORT k           reset slot k (SO_LINGER 0); an empty slot: the next
 *                       pending connection is reset (its connect fails)
 *     CLOSE k           slot k closes (FIN)
 *     STALL k           slot k stops (or starts again) reading what gatling
 *                       sends, whose socket then fills (gatling's end of
 *                       each connection has a send buffer of 4 KiB)
 *     HEADERS k s v     a head on stream s (< 128: 2s + 1, else 2(s & 127)):
 *                       :status of v & 7 (200, 204, 404, 500, 103, 200 with
 *                       content-type application/grpc, 304, 200 with
 *                       content-length 5); v & 8: END_STREAM; v & 16: a
 *                       trailer section instead (grpc-status: 0, END_STREAM)
 *     DATA k s len fl   as the client's (s as for HEADERS)
 *     RST k s code      RST_STREAM
 *     GOAWAY k s code   GOAWAY, last stream s
 *     WINDOW k s incr   WINDOW_UPDATE of (incr + 1) KiB (s 0xff: stream 0)
 *     RAW k len bytes   len bytes as they are (frames of the fuzzer's own)
 *   the loop
 *     TURN n            n % 8 + 1 turns of the loop, the client's output
 *                       drained, what gatling sent the backend read
 *     TIME t            the clock moves (t + 1)^2 * 10 ms, then a turn:
 *                       -Q (30 s), grpc-timeout, the idle close
 *
 * Then the backend goes (every slot closed, every later connection
 * refused): the member must hold no connection, and every stream the
 * client opened and did not reset must have been ended by the server
 * (END_STREAM or RST_STREAM, once the client's windows let it); then the
 * client's session ends and no request is outstanding.  Every turn and
 * operation, the client's output must be whole frames of at most 16 KiB,
 * and the error log (a pipe here) never says "out of memory": malloc does
 * not fail here, so a request failed as if it had is a bug.
 * FUZZ_H2BC_TRACE=1 prints the operations, the client's frames and the log.
 */
#define _GNU_SOURCE
#include "fuzz_h2back.h"

#include <netinet/tcp.h>
#include <sys/syscall.h>
#include <time.h>

#define NBE 4        /* backend connections the harness holds */
#define NCS 16       /* client streams it remembers for its operations */
#define NFATES 4096  /* client streams whose end it follows: ids 1..8191 */

static char dir[64] = "/dev/shm/fuzz_h2bc.XXXXXX";
static int trace;
static int logp[2] = {-1, -1}; /* the error log: [1] the site's, [0] read here */

/* ---- the clock: CLOCK_MONOTONIC runs ahead of the kernel's by skew ---- */

static int64_t skew_ms;

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int r = (int)syscall(SYS_clock_gettime, id, ts);
    if (!r && skew_ms && (id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE)) {
        ts->tv_sec += skew_ms / 1000;
        ts->tv_nsec += skew_ms % 1000 * 1000000;
        if (ts->tv_nsec >= 1000000000)
            ts->tv_sec++, ts->tv_nsec -= 1000000000;
    }
    return r;
}

/* ---- the input ---- */

typedef struct {
    const uint8_t *p;
    size_t n;
} input_t;

static unsigned take(input_t *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

/* ---- the client ---- */

typedef struct {
    fuzz_client_t c;
    int open;
    uint32_t next;      /* its next stream id */
    uint32_t sid[NCS];  /* the streams it opened, the last NCS */
    unsigned n;
} client_t;

static client_t cl;

/* What became of the client's streams: opened, reset by the client, ended
   by the server (END_STREAM on HEADERS or DATA, or RST_STREAM). */
enum { S_OPEN = 1, S_RESET = 2, S_ENDED = 4 };
static uint8_t fate[NFATES];

static void fate_set(uint32_t sid, unsigned bit)
{
    if (sid & 1 && (sid - 1) / 2 < NFATES)
        fate[(sid - 1) / 2] |= (uint8_t)bit;
}

/* Each frame the client got: the streams the server ended. */
static void on_frame(const uint8_t *hd)
{
    uint32_t sid = (uint32_t)(hd[5] & 0x7f) << 24 | (uint32_t)hd[6] << 16 |
                   (uint32_t)hd[7] << 8 | hd[8];
    if (hd[3] == 3 || (hd[3] <= 1 && hd[4] & 1))
        fate_set(sid, S_ENDED);
}

/* The error log so far: never an allocation that failed. */
static void check_log(void)
{
    char buf[8192];
    ssize_t k;
    while ((k = read(logp[0], buf, sizeof buf - 1)) > 0) {
        buf[k] = 0;
        if (trace)
            fputs(buf, stderr);
        CHECK(!strstr(buf, "out of memory") && !strstr(buf, "Cannot allocate memory"));
    }
    site.elog.lines = 0; /* its rate limit never drops a line here */
}

static void client_drain(void)
{
    if (cl.open)
        fuzz_drain(&cl.c);
    check_log();
}

static void client_close(void)
{
    if (!cl.open)
        return;
    fuzz_drain(&cl.c);
    h2_free(cl.c.h);
    gio_batch_free(&cl.c.out);
    cl.open = 0;
}

/* One frame from the client; a connection error ends the session. */
static void client_frame(unsigned type, unsigned flags, uint32_t sid, const uint8_t *p,
                         size_t n)
{
    if (!cl.open)
        return;
    uint8_t *f = malloc(9 + n); /* of its exact size: ASan sees an over-read */
    CHECK(f);
    f[0] = (uint8_t)(n >> 16), f[1] = (uint8_t)(n >> 8), f[2] = (uint8_t)n;
    f[3] = (uint8_t)type, f[4] = (uint8_t)flags;
    f[5] = (uint8_t)(sid >> 24 & 0x7f), f[6] = (uint8_t)(sid >> 16);
    f[7] = (uint8_t)(sid >> 8), f[8] = (uint8_t)sid;
    if (n)
        memcpy(f + 9, p, n);
    int r = h2_recv(cl.c.h, f, 9 + n);
    free(f);
    if (r < 0)
        client_close();
    else
        client_drain();
}

static int client_open(void)
{
    static const uint8_t zero = 0;
    const uint8_t *p = &zero;
    size_t n = 1, cut;
    if (cl.open)
        return 0;
    if (fuzz_client_open(&cl.c, &p, &n, &cut) < 0)
        return -1;
    cl.c.fr.trace = trace;
    cl.c.fr.on_frame = on_frame;
    cl.open = 1, cl.next = 1, cl.n = 0;
    memset(fate, 0, sizeof fate);
    if (h2_recv(cl.c.h, (const uint8_t *)H2_PREFACE, H2_PREFACE_LEN) < 0) {
        client_close();
        return -1;
    }
    client_frame(4, 0, 0, NULL, 0); /* SETTINGS */
    return cl.open ? 0 : -1;
}

/* A field line, literal without indexing: a static table name (idx) or
   the name itself. */
static size_t hpack_field(uint8_t *q, unsigned idx, const char *name, const char *v)
{
    size_t k = 0, vl = strlen(v);
    if (idx && idx < 15) {
        q[k++] = (uint8_t)idx;
    } else if (idx) {
        q[k++] = 0x0f, q[k++] = (uint8_t)(idx - 15);
    } else {
        q[k++] = 0, q[k++] = (uint8_t)strlen(name);
        memcpy(q + k, name, strlen(name)), k += strlen(name);
    }
    q[k++] = (uint8_t)vl;
    memcpy(q + k, v, vl);
    return k + vl;
}

static void op_open(unsigned kind)
{
    static const char *const path[] = {"/a", "/p", "/g.S/M", "/p"};
    uint8_t b[256];
    size_t k = 0;
    if (client_open() < 0)
        return;
    b[k++] = (kind & 3) ? 0x83 : 0x82; /* :method POST, GET */
    b[k++] = 0x86;                     /* :scheme http */
    k += hpack_field(b + k, 4, NULL, path[kind & 3]);
    k += hpack_field(b + k, 1, NULL, "localhost");
    if ((kind & 3) == 2) {
        k += hpack_field(b + k, 31, NULL, "application/grpc");
        k += hpack_field(b + k, 0, "te", "trailers");
        if (kind & 8)
            k += hpack_field(b + k, 0, "grpc-timeout", "50m");
    } else if (kind & 8) {
        k += hpack_field(b + k, 0, "te", "trailers");
    }
    if ((kind & 3) == 3) {
        char len[16];
        snprintf(len, sizeof len, "%u", (kind >> 4) * 512);
        k += hpack_field(b + k, 28, NULL, len);
    }
    uint32_t sid = cl.next;
    cl.next += 2;
    cl.sid[cl.n++ % NCS] = sid;
    fate_set(sid, S_OPEN);
    client_frame(1, 4 | (kind & 4 ? 1 : 0), sid, b, k); /* END_HEADERS */
}

static uint32_t client_sid(unsigned i)
{
    return cl.n ? cl.sid[i % (cl.n < NCS ? cl.n : NCS)] : 1;
}

/* DATA of len bytes (the input's coding) on sid, in frames of 16 KiB,
   through send(type 0, flags, sid, payload, n). */
static void data_frames(void (*send)(unsigned, unsigned, uint32_t, const uint8_t *, size_t),
                        uint32_t sid, unsigned len, unsigned fl)
{
    static uint8_t zeros[16384 + 8];
    size_t n = len < 128 ? len : (size_t)(len - 127) * 512;
    do {
        size_t k = n > 16384 - 8 ? 16384 - 8 : n;
        n -= k;
        unsigned end = !n && (fl & 1) ? 1 : 0;
        if (fl & 2) { /* padded: a length byte, 7 bytes of padding */
            zeros[0] = 7;
            send(0, end | 8, sid, zeros, k + 8);
            zeros[0] = 0;
        } else {
            send(0, end, sid, zeros, k);
        }
    } while (n);
}

static void put32(uint8_t *q, uint32_t v)
{
    q[0] = (uint8_t)(v >> 24), q[1] = (uint8_t)(v >> 16), q[2] = (uint8_t)(v >> 8);
    q[3] = (uint8_t)v;
}

static void op_client(unsigned op, input_t *in)
{
    uint8_t b[8];
    unsigned i = take(in), a = op == 0 ? 0 : take(in);
    switch (op) {
    case 0: /* OPEN */
        op_open(i);
        break;
    case 1: /* DATA */
        data_frames(client_frame, client_sid(i), a, take(in));
        break;
    case 2: /* RST_STREAM */
        put32(b, a % 14);
        fate_set(client_sid(i), S_RESET);
        client_frame(3, 0, client_sid(i), b, 4);
        break;
    case 3: /* WINDOW_UPDATE */
        put32(b, (a + 1) * 1024);
        client_frame(8, 0, i & 0x80 ? 0 : client_sid(i), b, 4);
        break;
    case 4: /* CLOSE */
        if (i & 1) {
            put32(b, cl.next > 1 ? cl.next - 2 : 0), put32(b + 4, a % 14);
            client_frame(7, 0, 0, b, 8);
        } else {
            client_close();
        }
        break;
    }
}

/* ---- the backend ---- */

static int be[NBE] = {-1, -1, -1, -1};
static uint8_t stalled[NBE];
static int cur = -1; /* the slot backend_frame writes to */

/* One frame to slot cur, in one send (Nagle would hold a second one). */
static void backend_frame(unsigned type, unsigned flags, uint32_t sid, const uint8_t *p,
                          size_t n)
{
    static uint8_t f[9 + 16384];
    if (cur < 0 || be[cur] < 0 || n > 16384)
        return;
    f[0] = (uint8_t)(n >> 16), f[1] = (uint8_t)(n >> 8), f[2] = (uint8_t)n;
    f[3] = (uint8_t)type, f[4] = (uint8_t)flags;
    put32(f + 5, sid & 0x7fffffff);
    if (n)
        memcpy(f + 9, p, n);
    backend_write(be[cur], f, 9 + n);
}

static uint32_t backend_sid(unsigned s)
{
    if (s == 0xff)
        return 0;
    return s < 128 ? 2 * s + 1 : 2 * (s & 127);
}

/* gatling's end of the backend connection fd: its send buffer made small
   (a slow network's), so that a backend that stops reading fills it after a
   few frames rather than megabytes. */
static void shrink_peer(int fd)
{
    struct sockaddr_in a, b;
    socklen_t al = sizeof a, bl;
    int small = 4096;
    if (getpeername(fd, (struct sockaddr *)&a, &al) < 0)
        return;
    for (int f = 3; f < 1024; f++) {
        bl = sizeof b;
        if (f != fd && getsockname(f, (struct sockaddr *)&b, &bl) == 0 && bl == sizeof b &&
            b.sin_family == AF_INET && b.sin_port == a.sin_port &&
            b.sin_addr.s_addr == a.sin_addr.s_addr) {
            setsockopt(f, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
            return;
        }
    }
}

static void backend_accept(unsigned set)
{
    static const uint8_t mcs[6] = {0, 3, 0, 0, 0, 1}, iws[6] = {0, 4, 0, 0, 0, 0};
    static const uint8_t ack[9] = {0, 0, 0, 4, 1, 0, 0, 0, 0};
    int k = 0, one = 1;
    while (k < NBE && be[k] >= 0)
        k++;
    if (k == NBE)
        return;
    for (int i = 0; i < 3 && be[k] < 0; i++) /* the handshake may still be on its way */
        if ((be[k] = accept4(lst, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) < 0)
            usleep(20);
    if (be[k] < 0)
        return;
    setsockopt(be[k], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    shrink_peer(be[k]);
    stalled[k] = 0, cur = k;
    if (set % 4)
        backend_frame(4, 0, 0, set % 4 == 2 ? mcs : iws, set % 4 == 1 ? 0 : 6);
    if (set % 4 && !(set & 4))
        backend_write(be[k], ack, sizeof ack);
}

static void backend_abort(int fd)
{
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

/* A response head or trailer section (v: see the top). */
static void backend_headers(uint32_t sid, unsigned v)
{
    static const uint8_t status[8] = {0x88, 0x89, 0x8d, 0x8e, 0, 0x88, 0x8b, 0x88};
    uint8_t b[64];
    size_t k = 0;
    if (v & 16) {
        k += hpack_field(b + k, 0, "grpc-status", "0");
        backend_frame(1, 5, sid, b, k);
        return;
    }
    if (v % 8 == 4)
        k += hpack_field(b + k, 8, NULL, "103");
    else
        b[k++] = status[v % 8];
    if (v % 8 == 5)
        k += hpack_field(b + k, 31, NULL, "application/grpc");
    if (v % 8 == 7)
        k += hpack_field(b + k, 28, NULL, "5");
    backend_frame(1, 4 | (v & 8 ? 1 : 0), sid, b, k);
}

static void op_backend(unsigned op, input_t *in)
{
    uint8_t b[256];
    unsigned arg = take(in), k = arg % NBE, s, a;
    if (op == 0) {
        backend_accept(arg);
        return;
    }
    if (op == 1 && be[k] < 0) { /* a connect that fails */
        int fd = accept4(lst, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            backend_abort(fd);
        return;
    }
    if (be[k] < 0) {
        if (op == 9) /* RAW: its bytes are skipped all the same */
            for (a = take(in); a--;)
                take(in);
        return;
    }
    cur = (int)k;
    switch (op) {
    case 1: /* ABORT */
        backend_abort(be[k]), be[k] = -1;
        break;
    case 2: /* CLOSE */
        close(be[k]), be[k] = -1;
        break;
    case 3: /* STALL */
        stalled[k] ^= 1;
        break;
    case 4: /* HEADERS */
        s = take(in);
        backend_headers(backend_sid(s), take(in));
        break;
    case 5: /* DATA */
        s = take(in), a = take(in);
        data_frames(backend_frame, backend_sid(s), a, take(in));
        break;
    case 6: /* RST_STREAM */
        s = take(in);
        put32(b, take(in) % 14);
        backend_frame(3, 0, backend_sid(s), b, 4);
        break;
    case 7: /* GOAWAY */
        s = take(in);
        put32(b, backend_sid(s)), put32(b + 4, take(in) % 14);
        backend_frame(7, 0, 0, b, 8);
        break;
    case 8: /* WINDOW_UPDATE */
        s = take(in);
        put32(b, (take(in) + 1) * 1024);
        backend_frame(8, 0, backend_sid(s), b, 4);
        break;
    case 9: /* RAW */
        a = take(in);
        for (s = 0; s < a; s++)
            b[s] = (uint8_t)take(in);
        backend_write(be[k], b, a);
        break;
    }
}

/* ---- the loop ---- */

static void turn_all(unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        turn();
        client_drain();
        for (int k = 0; k < NBE; k++)
            if (!stalled[k])
                swallow(be[k]);
    }
}

static void setup(void)
{
    trace = getenv("FUZZ_H2BC_TRACE") != NULL;
    back_setup(dir, 8192);
    if (pipe2(logp, O_NONBLOCK | O_CLOEXEC) < 0)
        abort();
    site.elog.fd = logp[1];
}

/* Once the backend is gone, every stream the client opened and did not
   reset has been ended by the server: given the window to say so, it has. */
static void check_fates(void)
{
    uint8_t w[4];
    put32(w, 1u << 30);
    client_frame(8, 0, 0, w, 4);
    for (uint32_t i = 0; cl.open && i < NFATES && 2 * i + 1 < cl.next; i++)
        if (fate[i] == S_OPEN)
            client_frame(8, 0, 2 * i + 1, w, 4);
    turn_all(2);
    for (uint32_t i = 0; cl.open && i < NFATES && 2 * i + 1 < cl.next; i++) {
        if (fate[i] != S_OPEN)
            continue; /* reset by the client, or ended */
        fprintf(stderr, "client stream %u: never ended by the server\n", 2 * i + 1);
        CHECK(fate[i] & S_ENDED);
    }
}

/* The backend goes, then the client: nothing may be left. */
static void finish(void)
{
    turn_all(4);
    for (int k = 0; k < NBE; k++)
        if (be[k] >= 0)
            close(be[k]), be[k] = -1;
    refuse_others();
    for (int i = 0; i < 400 && member()->h2; i++) {
        turn_all(1);
        refuse_others();
        if (member()->h2)
            usleep(50);
    }
    CHECK(!member()->h2);
    if (cl.open)
        check_fates();
    if (cl.open) {
        h2_goaway(cl.c.h);
        client_close();
    }
    turn_all(1);
    refuse_others();
    CHECK(!member()->outstanding);
}

enum { NOPS = 17 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const name[NOPS] = {
        "OPEN", "DATA", "RST", "WINDOW", "CLOSE", "b ACCEPT", "b ABORT", "b CLOSE", "b STALL",
        "b HEADERS", "b DATA", "b RST", "b GOAWAY", "b WINDOW", "b RAW", "TURN", "TIME"};
    if (!loop)
        setup();
    input_t in = {data, size};
    while (in.n) {
        unsigned op = take(&in) % NOPS;
        if (trace)
            fprintf(stderr, "op %s\n", name[op]);
        if (op < 5) {
            op_client(op, &in);
        } else if (op < 15) {
            op_backend(op - 5, &in);
        } else if (op == 15) {
            turn_all(take(&in) % 8 + 1);
        } else {
            unsigned t = take(&in) + 1;
            skew_ms += (int64_t)t * t * 10;
            turn_all(1);
        }
        check_log();
    }
    finish();
    return 0;
}
