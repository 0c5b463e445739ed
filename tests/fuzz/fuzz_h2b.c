/*
 * A hostile HTTP/2 backend: its bytes into proxy_h2.c's client session
 * (handlers/proxy_h2.c, libnghttp2), on a real site whose -P rule sends
 * every path to an h2c/ backend -- the harness, on a loopback socket of its
 * own.  Each input: a client's HTTP/2 session (h2/h2.c, as fuzz_h2) asks
 * for two paths, a GET and a gRPC POST with a body; the proxy connects, the
 * harness accepts and reads what it sent, then writes the input to it as
 * the backend's frames (an empty SETTINGS first unless the input starts
 * with a SETTINGS frame), cut into writes as the first byte says (0: at
 * once, else pieces of 1..63 bytes), the loop turned after each; then the
 * backend closes.  What the client gets must be whole frames of at most
 * 16 KiB, and once the backend is gone the member holds no connection and
 * no request outstanding (nothing leaks: ASan's leak check at exit).
 */
#define _GNU_SOURCE
#include "fuzz_h2back.h"

static char dir[64] = "/dev/shm/fuzz_h2b.XXXXXX";

/* The client: SETTINGS, a GET of /a, a gRPC POST of /g.S/M with 5 bytes. */
static const uint8_t client[] = {
    0, 0, 0, 4, 0, 0, 0, 0, 0,                              /* SETTINGS */
    0, 0, 17, 1, 5, 0, 0, 0, 1, 0x82, 0x86, 0x04, 2, '/', 'a', /* HEADERS 1, END_STREAM */
    0x41, 9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't',
    0, 0, 52, 1, 4, 0, 0, 0, 3, 0x83, 0x86, 0x04, 6, '/', 'g', '.', 'S', '/', 'M', /* HEADERS 3 */
    0x41, 9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't',
    0x5f, 16, 'a', 'p', 'p', 'l', 'i', 'c', 'a', 't', 'i', 'o', 'n', '/', 'g', 'r', 'p', 'c',
    0x00, 2, 't', 'e', 8, 't', 'r', 'a', 'i', 'l', 'e', 'r', 's',
    0, 0, 5, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, /* DATA 3, END_STREAM: an empty message */
};

/* Turn the loop until the proxy has connected: the accepted socket, or -1. */
static int backend_accept(void)
{
    for (int i = 0; i < 50; i++) {
        turn();
        int be = accept4(lst, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (be >= 0)
            return be;
        usleep(100);
    }
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    if (!loop)
        back_setup(dir, 0);
    fuzz_client_t c;
    size_t cut;
    if (fuzz_client_open(&c, &data, &size, &cut) < 0)
        return 0;
    int ok = h2_recv(c.h, (const uint8_t *)H2_PREFACE, H2_PREFACE_LEN) == 0 &&
             h2_recv(c.h, client, sizeof client) == 0;
    fuzz_drain(&c);
    int be = ok ? backend_accept() : -1;
    swallow(be);
    if (be >= 0 && !(size >= 9 && data[3] == 4 && !(data[4] & 1)))
        backend_write(be, settings, sizeof settings);
    while (be >= 0 && size) {
        size_t k = cut && cut < size ? cut : size;
        uint8_t *piece = (uint8_t *)fuzz_copy(data, k);
        backend_write(be, piece, k);
        free(piece);
        data += k, size -= k;
        turn();
        fuzz_drain(&c);
        swallow(be);
        refuse_others();
    }
    for (int i = 0; i < 4; i++) {
        turn();
        fuzz_drain(&c);
        swallow(be);
        refuse_others();
    }
    if (be >= 0)
        close(be); /* the backend goes: whatever it left open fails */
    for (int i = 0; i < 400 && member()->h2; i++) {
        turn();
        fuzz_drain(&c);
        refuse_others();
        if (member()->h2)
            usleep(50);
    }
    CHECK(!member()->h2);
    h2_goaway(c.h);
    fuzz_drain(&c);
    h2_free(c.h);
    turn();
    CHECK(!member()->outstanding);
    gio_batch_free(&c.out);
    return 0;
}
