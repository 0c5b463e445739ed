/*
 * watch — a descriptor on the loop that a layer above the connection owns:
 * a CGI process's pipes, a backend server's socket (handlers/cgi.c,
 * proxy.c), a pool's idle backend connection.  The loop's owner (server.c)
 * tells a cookie's kind by its first int; a watch's is COOKIE_WATCH, and
 * server.c hands its readiness, and its passed deadline (events 0), to
 * on().  Register it with gio_add(site->loop, fd, w); gio_del before the
 * watch's memory goes.
 */
#ifndef GATLING_WATCH_H
#define GATLING_WATCH_H

#define COOKIE_WATCH 64 /* beside server.h's COOKIE_* */

typedef struct watch {
    int kind; /* COOKIE_WATCH: first */
    void (*on)(struct watch *w, unsigned events);
} watch_t;

static inline void watch_init(watch_t *w, void (*on)(watch_t *w, unsigned events))
{
    w->kind = COOKIE_WATCH;
    w->on = on;
}

#endif
