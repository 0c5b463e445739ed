/*
 * gio backend: poll(2).  Portable and O(n) per wait in the number of
 * descriptors with interest — the baseline the other backends are measured
 * against.  Included by gio.c only.
 */
typedef struct {
    struct pollfd *pfd; /* dense array of descriptors with interest */
    int *slot;          /* fd -> index in pfd, -1 if absent */
    int n;
} poll_state_t;

static int backend_create(gio_loop_t *l)
{
    poll_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->pfd = calloc(l->maxfds, sizeof *s->pfd);
    s->slot = malloc(l->maxfds * sizeof *s->slot);
    if (!s->pfd || !s->slot) {
        free(s->pfd), free(s->slot), free(s);
        return -1;
    }
    for (int i = 0; i < l->maxfds; i++)
        s->slot[i] = -1;
    l->api = s;
    return 0;
}

static void backend_free(gio_loop_t *l)
{
    poll_state_t *s = l->api;
    free(s->pfd), free(s->slot), free(s);
}

static int backend_add(gio_loop_t *l, int fd)
{
    (void)l, (void)fd;
    return 0;
}

static void poll_remove(poll_state_t *s, int fd)
{
    int i = s->slot[fd];
    if (i < 0)
        return;
    s->pfd[i] = s->pfd[--s->n]; /* move the last one into the hole */
    s->slot[s->pfd[i].fd] = i;
    s->slot[fd] = -1;
}

static int backend_update(gio_loop_t *l, int fd, unsigned old, unsigned want)
{
    poll_state_t *s = l->api;
    (void)old;
    if (!want) {
        poll_remove(s, fd);
        return 0;
    }
    if (s->slot[fd] < 0) {
        s->slot[fd] = s->n;
        s->pfd[s->n++].fd = fd;
    }
    s->pfd[s->slot[fd]].events = (short)want;
    return 0;
}

static void backend_del(gio_loop_t *l, int fd, unsigned kernel, int closing)
{
    (void)closing;
    (void)kernel;
    poll_remove(l->api, fd);
}

static int backend_poll(gio_loop_t *l, int timeout_ms)
{
    poll_state_t *s = l->api;
    int n = poll(s->pfd, s->n, timeout_ms), k = 0;
    for (int i = 0; i < s->n && k < n; i++) {
        if (!s->pfd[i].revents)
            continue;
        if (s->pfd[i].revents & POLLNVAL) /* closed behind our back */
            s->pfd[i].revents = POLLERR;
        l->fired[k].fd = s->pfd[i].fd;
        l->fired[k++].events = (unsigned short)s->pfd[i].revents;
    }
    return n < 0 ? -1 : k;
}

static const char *backend_name(void)
{
    return "poll";
}
