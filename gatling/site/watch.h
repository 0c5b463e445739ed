/*
 * watch — what every descriptor on the loop has for its cookie: the call
 * that handles it.  A connection, a listener, the signal pipe, an FTP
 * session or its data link, a CGI process's pipes, a backend server's socket
 * (handlers/cgi.c, proxy.c), a pool's idle backend connection, QUIC's
 * socket: each begins with (or embeds) a watch_t, and the loop (server.c)
 * hands a descriptor's readiness, and its passed deadline (events 0), to
 * its on() without knowing what it is.  Register it with
 * gio_add(site->loop, fd, w); gio_del before the watch's memory goes.  The
 * owner finds its struct from w (w first, or offsetof).
 */
#ifndef GATLING_WATCH_H
#define GATLING_WATCH_H

typedef struct watch {
    void (*on)(struct watch *w, unsigned events);
} watch_t;

static inline void watch_init(watch_t *w, void (*on)(watch_t *w, unsigned events))
{
    w->on = on;
}

#endif
