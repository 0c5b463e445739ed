/* gio backend: Linux epoll, level-triggered.  Included by gio.c only. */
#include <sys/epoll.h>

/* the event bits are poll's: nothing to translate (lighttpd's trick) */
_Static_assert(EPOLLIN == POLLIN && EPOLLOUT == POLLOUT && EPOLLERR == POLLERR &&
                   EPOLLHUP == POLLHUP,
               "epoll bits differ from poll bits");

typedef struct {
    int epfd;
    struct epoll_event *events;
} epoll_state_t;

static int backend_create(gio_loop_t *l)
{
    epoll_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->events = calloc(l->maxfds, sizeof *s->events);
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!s->events || s->epfd < 0) {
        free(s->events);
        free(s);
        return -1;
    }
    l->api = s;
    return 0;
}

static void backend_free(gio_loop_t *l)
{
    epoll_state_t *s = l->api;
    close(s->epfd);
    free(s->events);
    free(s);
}

static int backend_add(gio_loop_t *l, int fd)
{
    (void)l, (void)fd;
    return 0;
}

static int backend_update(gio_loop_t *l, int fd, unsigned old, unsigned want)
{
    epoll_state_t *s = l->api;
    struct epoll_event ev = {.events = want, .data.fd = fd};
    int op = !old ? EPOLL_CTL_ADD : !want ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    int r = epoll_ctl(s->epfd, op, fd, &ev);
    if (r < 0 && op == EPOLL_CTL_ADD && errno == EEXIST)
        r = epoll_ctl(s->epfd, EPOLL_CTL_MOD, fd, &ev);
    return r;
}

static void backend_del(gio_loop_t *l, int fd, unsigned kernel, int closing)
{
    epoll_state_t *s = l->api;
    struct epoll_event ev = {0};
    /* closing the last reference to the file removes it from the epoll set */
    if (kernel && closing != GIO_DEL_SOLE)
        epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, &ev);
}

static int backend_poll(gio_loop_t *l, int timeout_ms)
{
    epoll_state_t *s = l->api;
    int n = epoll_wait(s->epfd, s->events, l->maxfds, timeout_ms);
    for (int i = 0; i < n; i++) {
        l->fired[i].fd = s->events[i].data.fd;
        l->fired[i].events = s->events[i].events;
    }
    return n;
}

static const char *backend_name(void)
{
    return "epoll";
}
