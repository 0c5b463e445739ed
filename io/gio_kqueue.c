/*
 * gio backend: kqueue (FreeBSD, OpenBSD, NetBSD, macOS).  Included by gio.c
 * only.
 *
 * Read and write are separate filters.  A filter is added (EV_ADD) the first
 * time it is wanted and afterwards only enabled and disabled (EV_ENABLE,
 * EV_DISABLE), which keeps its knote: toggling costs no allocation.
 * backend_update() does not call the kernel; it appends to a change list
 * that goes in with the next kevent() wait, so a round costs one syscall
 * however many interests changed.  No EV_CLEAR: filters are
 * level-triggered, a still-ready fd is returned by every kevent().
 *
 * gio_del() is the exception: its EV_DELETEs go out at once, while the fd is
 * surely open.  Queued, they would reach the kernel after the caller's
 * close() and perhaps a new file with the same number, and delete its
 * filters.  (The change list is empty at that point anyway: sync_changes()
 * fills it right before backend_poll() hands it over.)
 */
#include <sys/types.h>
#include <sys/event.h>
#include <sys/time.h>

#ifndef EV_RECEIPT
#define EV_RECEIPT 0 /* then a del may drain a few events: level-triggered, they come back */
#endif

typedef struct {
    int kq;
    struct kevent *changes; /* at most 2 per fd per round */
    int nchanges;
    struct kevent *events;
    uint8_t *added; /* fd -> filters with a knote, as GIO_READ/GIO_WRITE */
} kqueue_state_t;

static int backend_create(gio_loop_t *l)
{
    kqueue_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->changes = calloc(2 * (size_t)l->maxfds, sizeof *s->changes);
    s->events = calloc(l->maxfds, sizeof *s->events);
    s->added = calloc(l->maxfds, 1);
    s->kq = kqueue();
    if (!s->changes || !s->events || !s->added || s->kq < 0) {
        int e = errno;
        if (s->kq >= 0)
            close(s->kq);
        free(s->changes), free(s->events), free(s->added), free(s);
        errno = e;
        return -1;
    }
    fcntl(s->kq, F_SETFD, FD_CLOEXEC);
    l->api = s;
    return 0;
}

static void backend_free(gio_loop_t *l)
{
    kqueue_state_t *s = l->api;
    close(s->kq);
    free(s->changes), free(s->events), free(s->added), free(s);
}

static int backend_add(gio_loop_t *l, int fd)
{
    (void)l, (void)fd;
    return 0;
}

static int backend_update(gio_loop_t *l, int fd, unsigned old, unsigned want)
{
    static const struct {
        unsigned bit;
        short filter;
    } f[2] = {{GIO_READ, EVFILT_READ}, {GIO_WRITE, EVFILT_WRITE}};
    kqueue_state_t *s = l->api;
    for (int i = 0; i < 2; i++) {
        unsigned short flags;
        if ((want & f[i].bit) && !(old & f[i].bit)) {
            flags = s->added[fd] & f[i].bit ? EV_ENABLE : EV_ADD;
            s->added[fd] |= f[i].bit;
        } else if (!(want & f[i].bit) && (old & f[i].bit)) {
            flags = EV_DISABLE;
        } else {
            continue;
        }
        EV_SET(&s->changes[s->nchanges++], fd, f[i].filter, flags, 0, 0, 0);
    }
    return 0;
}

static void backend_del(gio_loop_t *l, int fd, unsigned kernel, int closing)
{
    (void)closing;
    kqueue_state_t *s = l->api;
    struct kevent ch[2], out[2];
    struct timespec zero = {0, 0};
    int n = 0;
    (void)kernel;
    if (s->added[fd] & GIO_READ)
        EV_SET(&ch[n++], fd, EVFILT_READ, EV_DELETE | EV_RECEIPT, 0, 0, 0);
    if (s->added[fd] & GIO_WRITE)
        EV_SET(&ch[n++], fd, EVFILT_WRITE, EV_DELETE | EV_RECEIPT, 0, 0, 0);
    s->added[fd] = 0;
    /* an eventlist, so that a failing delete (fd closed already) cannot stop
       the other one; what comes back is ignored */
    if (n)
        kevent(s->kq, ch, n, out, n, &zero);
}

/* One kevent to gio's bits.  EV_EOF on read is just readable (read() says 0). */
static unsigned kev_events(const struct kevent *k)
{
    if (k->flags & EV_ERROR)
        return GIO_ERROR;
    unsigned ev = k->filter == EVFILT_READ ? GIO_READ : GIO_WRITE;
    if ((k->flags & EV_EOF) && k->filter == EVFILT_WRITE)
        ev |= GIO_HANGUP; /* the peer is gone: writes will fail */
    if ((k->flags & EV_EOF) && k->fflags)
        ev |= GIO_ERROR; /* fflags holds the socket error */
    return ev;
}

static int backend_poll(gio_loop_t *l, int timeout_ms)
{
    kqueue_state_t *s = l->api;
    struct timespec ts = {timeout_ms / 1000, timeout_ms % 1000 * 1000000L};
    int n =
        kevent(s->kq, s->changes, s->nchanges, s->events, l->maxfds, timeout_ms < 0 ? NULL : &ts);
    /* changes are applied before kevent() sleeps, so also on EINTR; a change
       that failed comes back as an EV_ERROR event of its fd */
    s->nchanges = 0;
    for (int i = 0; i < n; i++) {
        l->fired[i].fd = (int)s->events[i].ident;
        l->fired[i].events = kev_events(&s->events[i]);
    }
    return n;
}

static const char *backend_name(void)
{
    return "kqueue";
}
