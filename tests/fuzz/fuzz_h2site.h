/*
 * What fuzz_h2 and fuzz_h2b share: a real site opened in a document root of
 * its own in /dev/shm, and a client's HTTP/2 session on it (h2/h2.c) whose
 * output is drained as a socket would take it and checked to be whole
 * frames of at most 16 KiB.  Each harness is one file that includes this
 * once: the statics below are its own.
 */
#ifndef FUZZ_H2SITE_H
#define FUZZ_H2SITE_H

#include "fuzz.h"
#include "h2/h2.h"
#include "site/config.h"
#include "site/mime.h"
#include "site/peerlimits.h"
#include "site/site.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

static config_t cfg;
static proc_t proc;
static site_t site; /* the handlers keep their states in it (handlers/hstate.h) */
static gio_loop_t *loop;
static struct sockaddr_in peer;

/* Makes the directory dir names (a mkdtemp template) and goes into it:
   returns where libFuzzer was started, for fuzz_site_leave. */
static inline int fuzz_site_enter(char *dir)
{
    int home = open(".", O_RDONLY | O_DIRECTORY);
    if (home < 0 || !mkdtemp(dir) || chdir(dir) < 0)
        abort();
    return home;
}

/* Opens the site over c in the directory entered, with peer limits; its
   clients come from 127.0.0.1. */
static inline void fuzz_site_open(const config_t *c)
{
    cfg = *c;
    peer = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    proc_init(&proc);
    if (!(loop = gio_loop_new()) || site_init(&site, &cfg, &proc, loop, mime_load(NULL)) < 0)
        abort();
    limits_cfg_t lc = {.free_fails = 5, .max_wait_s = 1};
    if (!(site.limits = limits_new(&lc, 64)))
        abort();
}

/* Back to home, whose relative paths libFuzzer goes on using. */
static inline void fuzz_site_leave(int home)
{
    if (fchdir(home) < 0)
        abort();
    close(home);
}

/* Where the server's output stands in its frames. */
typedef struct {
    uint8_t hd[9];
    size_t have, left;
    int trace; /* each frame's head on stderr, a line each */
    void (*on_frame)(const uint8_t *hd); /* or NULL: told each frame's 9-byte head */
} framing_t;

/* What the client got: whole frames of at most 16 KiB (DATA is cut to one
   TLS record, and nothing else the server sends is larger). */
static inline void fuzz_check_frames(framing_t *fr, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (fr->left) {
            size_t k = n - i < fr->left ? n - i : fr->left;
            i += k, fr->left -= k;
            continue;
        }
        fr->hd[fr->have++] = p[i++];
        if (fr->have == 9) {
            fr->have = 0;
            fr->left = (size_t)fr->hd[0] << 16 | fr->hd[1] << 8 | fr->hd[2];
            CHECK(fr->left <= 16384);
            if (fr->on_frame)
                fr->on_frame(fr->hd);
            if (fr->trace)
                fprintf(stderr, "frame type %u flags %#x stream %u length %zu\n", fr->hd[3],
                        fr->hd[4], (unsigned)fr->hd[8] | (unsigned)fr->hd[7] << 8, fr->left);
        }
    }
}

/* A client's session on the site: the server's h2 session, the batch it
   fills (no socket takes it), and where that output stands in its frames.
   It may not move once open (the session keeps &f). */
typedef struct {
    gio_batch_t out;
    codec_conn_t f;
    framing_t fr;
    h2_t *h;
} fuzz_client_t;

static inline void fuzz_wake(void *conn)
{
    (void)conn;
}

/* Opens c's session for an input whose first byte says how the rest is
   cut into pieces (*cut: 0, whole; else 1..63 bytes a piece); *data and
   *size then stand past that byte.  0, or -1 for an empty input or if
   h2_new failed (nothing to free). */
static inline int fuzz_client_open(fuzz_client_t *c, const uint8_t **data, size_t *size,
                                   size_t *cut)
{
    if (!*size)
        return -1;
    *cut = **data ? **data % 63 + 1 : 0;
    ++*data, --*size;
    gio_batch_init(&c->out);
    c->fr = (framing_t){0};
    c->f = (codec_conn_t){.out = &c->out,
                          .site = &site,
                          .peer = (const struct sockaddr *)&peer,
                          .local_port = 80};
    c->h = h2_new(&c->f, fuzz_wake);
    return c->h ? 0 : -1;
}

/* Takes everything queued, as a socket that reads at once would: h2_fill
   leaves whole frames. */
static inline void fuzz_drain(fuzz_client_t *c)
{
    static char buf[65536];
    for (int rounds = 0; rounds < 64; rounds++) {
        long q = h2_fill(c->h, 256 * 1024);
        CHECK(q >= 0 || q == -1);
        if (q <= 0)
            break;
        while (!gio_batch_done(&c->out)) {
            long k = gio_batch_copy(&c->out, buf, sizeof buf);
            CHECK(k > 0);
            fuzz_check_frames(&c->fr, (const uint8_t *)buf, (size_t)k);
            gio_batch_consume(&c->out, (uint64_t)k);
        }
        CHECK(!c->fr.have && !c->fr.left);
    }
}

#endif
