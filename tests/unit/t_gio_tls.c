/*
 * t_gio_tls — io/gio_tls.c.
 *
 * gio_tls_free_buffers_safe: which libssl versions may have their buffers
 * freed by SSL_free_buffers after a send (the bug: a version with
 * CVE-2024-4741 let through, whose SSL_free_buffers frees a read buffer
 * that still holds part of a record; or a fixed one refused, which keeps
 * OpenSSL freeing and allocating its write buffer around every record).
 *
 * A session over a socket pair: a batch sent inside the handshake (one
 * SSL_write a record through the socket: the bug would be a batch lost or
 * consumed before the handshake let it out), then one of a buffer and a
 * file range (the gathered records), each read back byte for byte; a send
 * to a peer gone is an error, not a hang; close_notify reads as GIO_EOF.
 */
#include "gio.h"
#include "gio_tls.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void versions(void)
{
    static const struct {
        unsigned long v;
        int safe;
        const char *name;
    } cases[] = {
        {0x1010117fUL, 0, "1.1.1w"},     {0x30000000UL, 0, "3.0.0"},
        {0x300000d0UL, 0, "3.0.13"},     {0x300000e0UL, 1, "3.0.14"},
        {0x30000160UL, 1, "3.0.22"},     {0x30100050UL, 0, "3.1.5"},
        {0x30100060UL, 1, "3.1.6"},      {0x30200010UL, 0, "3.2.1"},
        {0x30200020UL, 1, "3.2.2"},      {0x30300000UL, 0, "3.3.0"},
        {0x30300010UL, 1, "3.3.1"},      {0x30400000UL, 1, "3.4.0"},
        {0x30500010UL, 1, "3.5.1"},      {0x40000000UL, 1, "4.0.0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ok(gio_tls_free_buffers_safe(cases[i].v) == cases[i].safe, "%s: %s", cases[i].name,
           cases[i].safe ? "SSL_free_buffers after a send" : "the mode kept as it is");
}

static SSL_CTX *server_ctx(void)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"t", -1, -1, 0);
    X509_set_issuer_name(x, n);
    X509_sign(x, key, EVP_sha256());
    SSL_CTX *c = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate(c, x);
    SSL_CTX_use_PrivateKey(c, key);
    X509_free(x);
    EVP_PKEY_free(key);
    return c;
}

/* A client and a server session on the two ends of a non-blocking pair. */
static void pair(SSL_CTX *sc, SSL_CTX *cc, SSL **srv, SSL **cli, int fds[2])
{
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds);
    *srv = SSL_new(sc), *cli = SSL_new(cc);
    SSL_set_fd(*srv, fds[0]), SSL_set_fd(*cli, fds[1]);
    SSL_set_accept_state(*srv), SSL_set_connect_state(*cli);
}

/* Read from s until want bytes came (or a round of tries passed). */
static size_t read_all(SSL *s, char *buf, size_t want)
{
    size_t got = 0;
    unsigned w;
    for (int i = 0; i < 10000 && got < want; i++) {
        long r = gio_tls_read(s, buf + got, want - got, &w);
        if (r > 0)
            got += (size_t)r;
        else if (r != GIO_AGAIN)
            break;
    }
    return got;
}

static void session(void)
{
    SSL_CTX *sc = server_ctx(), *cc = SSL_CTX_new(TLS_client_method());
    SSL *srv, *cli;
    int fds[2];
    pair(sc, cc, &srv, &cli, fds);
    gio_batch_t b;
    gio_batch_init(&b);
    gio_batch_add_buf(&b, "hello, handshake", 16, 0);
    unsigned want = 0;
    long r = gio_tls_send(cli, &b, 0, &want);
    ok(r == GIO_AGAIN && want == GIO_READ, "a send inside the handshake waits to read (%ld)", r);
    ok(!gio_batch_done(&b), "... and keeps its batch");
    for (int i = 0; i < 100 && r == GIO_AGAIN; i++) {
        unsigned w;
        gio_tls_handshake(srv, &w);
        r = gio_tls_send(cli, &b, 7, &want);
    }
    is_int((int)r, 7, "the batch goes once the handshake lets it, up to the budget");
    r = gio_tls_send(cli, &b, 0, &want);
    is_int((int)r, 9, "... the rest next");
    char buf[70000];
    ok(read_all(srv, buf, 16) == 16 && !memcmp(buf, "hello, handshake", 16),
       "... and arrives whole");
    gio_tls_write_small(srv, "", 0);
    gio_tls_write_small(srv, "100", 3);
    ok(read_all(cli, buf, 3) == 3 && !memcmp(buf, "100", 3), "a small message (none for 0 bytes)");

    /* a buffer and a file range, past two records: the gathered path */
    FILE *f = tmpfile();
    static char data[40000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)('a' + i % 26);
    fwrite(data, 1, sizeof data, f);
    fflush(f);
    gio_batch_add_buf(&b, "head:", 5, 0);
    gio_batch_add_file(&b, fileno(f), 0, sizeof data, 0);
    size_t sent = 0, got = 0;
    for (int i = 0; i < 1000 && !gio_batch_done(&b); i++) {
        r = gio_tls_send(cli, &b, 0, &want);
        if (r > 0)
            sent += (size_t)r;
        else if (r != GIO_AGAIN)
            break;
        got += read_all(srv, buf + got, 1); /* make room in the pair */
        got += read_all(srv, buf + got, sent - got < 4096 ? sent - got : 4096);
    }
    got += read_all(srv, buf + got, 5 + sizeof data - got);
    ok(gio_batch_done(&b) && sent == 5 + sizeof data, "a buffer and a file range sent (%zu)",
       sent);
    ok(got == 5 + sizeof data && !memcmp(buf, "head:", 5) && !memcmp(buf + 5, data, sizeof data),
       "... and read back byte for byte (%zu)", got);

    /* a budget on the gathered path: at most that much taken from the batch */
    gio_batch_add_buf(&b, data, sizeof data, 0);
    r = gio_tls_send(cli, &b, 20000, &want);
    ok(r > 0 && r <= 20000, "a budget of 20000 on the gathered path: %ld sent", r);
    for (int i = 0; i < 1000 && !gio_batch_done(&b); i++) {
        read_all(srv, buf, sizeof buf / 2);
        gio_tls_send(cli, &b, 0, &want);
    }
    ok(gio_batch_done(&b), "... the rest next");
    got = 0;
    for (int i = 0; i < 1000 && got < sizeof data - (size_t)r; i++)
        got += read_all(srv, buf, sizeof buf);
    gio_tls_shutdown(srv);
    is_int((int)gio_tls_read(cli, buf, sizeof buf, &want), GIO_EOF, "close_notify: GIO_EOF");
    SSL_free(srv), SSL_free(cli);
    close(fds[0]), close(fds[1]);

    /* a peer that sends no TLS: the handshake fails as a protocol error */
    pair(sc, cc, &srv, &cli, fds);
    if (write(fds[1], "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27) != 27)
        perror("write");
    errno = 0;
    is_int(gio_tls_handshake(srv, &want), GIO_ERR, "plain HTTP to a TLS session: GIO_ERR");
    is_int(errno, EPROTO, "... EPROTO");
    SSL_free(srv), SSL_free(cli);
    close(fds[0]), close(fds[1]);

    /* the peer's socket closed without close_notify: an error, not an EOF */
    pair(sc, cc, &srv, &cli, fds);
    r = GIO_AGAIN;
    for (int i = 0; i < 100 && r != 1; i++) {
        unsigned w;
        gio_tls_handshake(srv, &w);
        r = gio_tls_handshake(cli, &w);
    }
    gio_tls_handshake(srv, &want);
    close(fds[1]);
    r = gio_tls_read(srv, buf, sizeof buf, &want);
    is_int((int)r, GIO_ERR, "a peer gone without close_notify: GIO_ERR, not an end");
    SSL_free(srv), SSL_free(cli);
    close(fds[0]);

    /* the peer gone inside the handshake: an error, the batch kept */
    pair(sc, cc, &srv, &cli, fds);
    close(fds[0]);
    gio_batch_add_buf(&b, "lost", 4, 0);
    r = gio_tls_send(cli, &b, 0, &want);
    is_int((int)r, GIO_ERR, "a send inside the handshake to a peer gone: GIO_ERR");
    SSL_free(srv), SSL_free(cli);
    close(fds[1]);
    gio_batch_free(&b);
    fclose(f);
    SSL_CTX_free(sc), SSL_CTX_free(cc);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as gatling: a peer gone is EPIPE */
    versions();
    session();
    return tap_done();
}
