/*
 * The generic half of the reverse proxy that the protocols call (proxy_int.h):
 * backend connections (non-blocking connect, the keep-alive pool of each
 * rule, the fresh list FastCGI's starvation check reads, the retry on a
 * new connection), and what a protocol's reader does with a request
 * (px_room, px_out, px_head, px_field, px_body, px_done, px_fail).  It
 * calls no protocol: proxy.c calls them through a rule's px_ops_t, and
 * they call this; proxy.c calls this too.  Arrows go one way (make layers).
 */
#include "proxy_int.h"
#include "http/hbuf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Close c (its descriptor off the loop) and free it. */
void px_conn_close(proxy_t *px, px_conn_t *c)
{
    gio_close(px->site->loop, c->fd);
    free(c);
}

void px_count(proxy_t *px, const px_member_t *m, int kind)
{
    if (m)
        px->site->stats.backend[m->slot][kind]++;
}

/* Close m's idle connections (of its own kind: not the HTTP/2 ones). */
static void idle_close(proxy_t *px, px_member_t *m)
{
    for (int k = 0; k < m->nidle; k++)
        px_conn_close(px, m->idle[k]);
    m->nidle = 0;
}

void px_member_idle_close(proxy_t *px, px_member_t *m)
{
    idle_close(px, m);
    if (px->h2_close)
        px->h2_close(px, m, 0);
}

void px_member_free(proxy_t *px, px_member_t *m)
{
    px_check_stop(px, m);
    px_member_idle_close(px, m);
    if (px->h2_close)
        px->h2_close(px, m, 1);
    px_member_drop(px, m);
}

/* ---- backend connections ---- */

/* The backend's silence limit (-Q), or a tunnel's idle limit (-Q's second
   value: a WebSocket may sit quiet far longer than a backend may think). */
void px_set_deadline(px_req_t *pr)
{
    gio_loop_t *l = pr->px->site->loop;
    const config_t *cfg = pr->px->site->cfg;
    int secs = pr->state == RS_TUNNEL ? cfg->tunnel_timeout : cfg->dyn_timeout;
    int64_t at = gio_now(l) + secs * 1000LL;
    if (pr->ntries > 1 && pr->state == RS_HEAD && at > pr->t0 + secs * 1000LL)
        at = pr->t0 + secs * 1000LL; /* another backend's try: within the first one's -Q */
    if (pr->be)
        gio_set_deadline(l, pr->be->fd, pr->paused ? 0 : at);
}

/* What the backend connection waits for now. */
void px_interest(px_req_t *pr)
{
    if (!pr->be || pr->ended)
        return;
    unsigned want = 0;
    if (pr->be->connecting || pr->outoff < pr->outlen)
        want |= GIO_WRITE;
    if (!pr->be->connecting && !pr->paused && pr->state != RS_DONE)
        want |= GIO_READ;
    gio_want(pr->px->site->loop, pr->be->fd, want);
}

/* A new connection to backend m, connecting.  NULL with errno. */
static px_conn_t *conn_open(proxy_t *px, px_member_t *m)
{
    const px_mdef_t *r = &m->d;
    int fd = socket(r->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    int one = 1;
    if (r->addr.ss_family != AF_UNIX)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    px_conn_t *c = calloc(1, sizeof *c);
    int err = 0, now = 0;
    if (!c)
        err = ENOMEM;
    else if (!(now = connect(fd, (struct sockaddr *)&r->addr, r->alen) == 0) &&
             errno != EINPROGRESS)
        err = errno; /* a unix socket's full backlog (EAGAIN) too: the backend is overloaded */
    else if (gio_add(px->site->loop, fd, c) < 0)
        err = errno;
    if (err) {
        close(fd);
        free(c);
        errno = err;
        return NULL;
    }
    watch_init(&c->w, px->on_backend);
    c->fd = fd;
    c->px = px;
    c->m = m;
    c->connecting = !now; /* a unix socket connects at once */
    px_count(px, m, BACKEND_CONNECTS);
    return c;
}

/* The most recently used idle connection of m, or NULL; fresh_only: only
   one idle for less than PROXY_BODY_REUSE_MS (a request whose body cannot
   be sent twice must not meet a backend's keep-alive timeout on its way:
   Node closes after 5 s, gunicorn after 2). */
static px_conn_t *pool_take(px_member_t *r, int fresh_only, int64_t now)
{
    if (!r->nidle || (fresh_only && now - r->idle[r->nidle - 1]->idle_at >= PROXY_BODY_REUSE_MS))
        return NULL;
    px_conn_t *c = r->idle[--r->nidle];
    c->reused = 1;
    return c;
}

void px_pool_remove(px_member_t *r, px_conn_t *c)
{
    for (int i = 0; i < r->nidle; i++)
        if (r->idle[i] == c) {
            r->idle[i] = r->idle[--r->nidle];
            return;
        }
}

/* c is free again: keep it idle (the oldest goes when the pool holds idle=). */
static void pool_put(proxy_t *px, px_conn_t *c)
{
    px_member_t *r = c->m;
    gio_loop_t *l = px->site->loop;
    int most = r->pool->o.idle;
    c->req = NULL;
    if (most <= 0) {
        px_conn_close(px, c);
        return;
    }
    if (r->nidle >= most) {
        px_conn_close(px, r->idle[0]);
        memmove(r->idle, r->idle + 1, sizeof r->idle[0] * (size_t)(r->nidle - 1));
        r->nidle--;
    }
    r->idle[r->nidle++] = c;
    c->idle_at = gio_now(l);
    gio_want(l, c->fd, GIO_READ); /* a backend closing it (or babbling) removes it */
    gio_set_deadline(l, c->fd, gio_now(l) + PROXY_IDLE_MS);
}

/* pr's new connection is answered (or let go): off the fresh list. */
void px_unfresh(px_req_t *pr)
{
    px_member_t *r = pr->m;
    if (!pr->fresh)
        return;
    pr->fresh = 0;
    *(pr->fresh_prev ? &pr->fresh_prev->fresh_next : &r->fresh) = pr->fresh_next;
    *(pr->fresh_next ? &pr->fresh_next->fresh_prev : &r->fresh_last) = pr->fresh_prev;
    pr->fresh_prev = pr->fresh_next = NULL;
}

/* pr waits on a new connection: on the fresh list, the newest last. */
static void set_fresh(px_req_t *pr)
{
    px_member_t *r = pr->m;
    pr->fresh = 1;
    pr->fresh_at = gio_now(pr->px->site->loop);
    pr->fresh_prev = r->fresh_last, pr->fresh_next = NULL;
    *(r->fresh_last ? &r->fresh_last->fresh_next : &r->fresh) = pr;
    r->fresh_last = pr;
}

/* A FastCGI backend (php-fpm) gives a connection a process of its own
   until it closes.  While a request waits on a new connection unanswered,
   it may sit in the backlog while our idle connections hold every process:
   a connection that becomes free is then closed, not kept, and frees a
   process for it.  (Only once the request had waited 50 ms, it was: one
   kept idle just before stayed idle, and the request waited out -Q: 19-22
   of a burst of 1,000 slow clients against 16 children got 504.) */
static int starved(const px_member_t *m)
{
    return m->pool->kind == PX_FCGI && m->fresh;
}

/* The attempt on pr->m is over: out of its outstanding requests; a probe
   that ended without a verdict (the client left) lets the next try. */
static void attempt_end(px_req_t *pr)
{
    px_member_t *m = pr->m;
    if (!pr->counted)
        return;
    pr->counted = 0;
    m->outstanding--;
    if (pr->probe)
        m->probing = 0;
    pr->probe = 0;
}

/* Let go of pr's backend connection: back to the pool, or closed. */
void px_release(px_req_t *pr, int reusable)
{
    px_conn_t *c = pr->be;
    px_unfresh(pr);
    attempt_end(pr);
    if (pr->h2s && pr->rule->ops->release)
        pr->rule->ops->release(pr);
    if (!c)
        return;
    pr->be = NULL;
    if (reusable && pr->rule->kind != PX_SCGI && !c->m->draining && !starved(c->m))
        pool_put(pr->px, c);
    else
        px_conn_close(pr->px, c);
}

/* Attach a connection of m to pr (pooled if any, else new).  0, or -1 with errno. */
static int attach(px_req_t *pr, px_member_t *m, int pooled)
{
    if (pr->rule->ops->attach) /* a stream on a connection of the protocol's own */
        return pr->rule->ops->attach(pr, m);
    px_conn_t *c = pooled ? pool_take(m, pr->has_body, gio_now(pr->px->site->loop)) : NULL;
    /* FastCGI: a new connection needs a process our idle ones (too old for a body)
       may hold; and a full backlog (EAGAIN) may be full of what they hold up */
    if (!c && m->pool->kind == PX_FCGI)
        idle_close(pr->px, m);
    if (c) {
        px_count(pr->px, m, BACKEND_REUSES);
    } else if (!(c = conn_open(pr->px, m))) {
        return -1;
    } else {
        set_fresh(pr);
    }
    c->req = pr;
    pr->be = c;
    pr->outoff = 0;
    if (!c->connecting) { /* a connected socket takes a request at once, almost always: no
                             write interest, no wait; a failure shows at the next event */
        ssize_t w = send(c->fd, pr->out, pr->outlen, MSG_NOSIGNAL | MSG_DONTWAIT);
        pr->outoff = w > 0 ? (size_t)w : 0;
    }
    px_set_deadline(pr);
    px_interest(pr);
    return 0;
}

/* What balance=hash keys pr on: a field's value, else the request target. */
static void hash_key(const px_req_t *pr, const char **k, size_t *kl)
{
    const http_request_t *req = pr->ex->req;
    const char *f = pr->rule->pool->o.hash_field;
    const http_str_t *v = *f ? http_header(req, f) : NULL;
    *k = v ? v->p : req->target.p;
    *kl = v ? v->n : req->target.n;
}

/* Begin an attempt of pr on m: counted, a probe if m was down. */
static void attempt_begin(px_req_t *pr, px_member_t *m)
{
    gio_loop_t *l = pr->px->site->loop;
    pr->m = m;
    pr->tried |= 1ULL << m->slot;
    pr->ntries++;
    pr->counted = 1;
    pr->conn_failed = 0;
    m->outstanding++;
    if (m->down)
        m->probing = pr->probe = 1;
    pr->sent_us = gio_now_us(l);
    if (!pr->t0)
        pr->t0 = gio_now(l);
    px_count(pr->px, m, BACKEND_REQUESTS);
}

/* (proxy_int.h) */
int px_may_retry(const px_req_t *pr)
{
    const site_t *s = pr->px->site;
    return !pr->head_sent && !pr->ended && pr->state == RS_HEAD && pr->keep_out &&
           (pr->idempotent || pr->conn_failed) && pr->ntries < pr->rule->pool->o.tries &&
           gio_now(s->loop) - pr->t0 < s->cfg->dyn_timeout * 1000LL;
}

/* "the FastCGI backend unix:/run/a.sock" (m's kind and address as written)
   after prefix into out. */
static const char *backend_named(const px_req_t *pr, const px_member_t *m, const char *prefix,
                                 char *out, size_t cap)
{
    static const char *const kind[] = {[PX_HTTP] = "HTTP", [PX_FCGI] = "FastCGI",
                                       [PX_SCGI] = "SCGI", [PX_H2C] = "HTTP/2",
                                       [PX_H2] = "HTTP/2 (TLS)"};
    snprintf(out, cap, "%s%sthe %s backend %s", prefix, *prefix ? " " : "",
             kind[pr->rule->kind], m->d.label);
    return out;
}

/* The error log's line for a call on m's socket (pr's attempt) that failed
   with err: "connect() to the FastCGI backend unix:/run/a.sock failed: No
   such file or directory (peer ...) /path". */
static void log_errno(const px_req_t *pr, const px_member_t *m, const char *call, int err)
{
    char what[PX_LABEL_MAX + 64];
    site_error(pr->px->site, backend_named(pr, m, call, what, sizeof what), err, pr->ex->peer,
               pr->ex->path);
}

/* pr's attempt on pr->m could not connect (err): nothing reached the
   backend; counted against it, and the attempt is over. */
static void connect_failed(px_req_t *pr, int err)
{
    log_errno(pr, pr->m, "connect() to", err);
    pr->conn_failed = 1;
    px_count(pr->px, pr->m, BACKEND_502);
    px_failed(pr->px, pr->m, pr->probe, gio_now(pr->px->site->loop), strerror(err));
    attempt_end(pr);
}

int px_attempt(px_req_t *pr)
{
    proxy_t *px = pr->px;
    px_pool_t *p = pr->rule->pool;
    const char *key = NULL;
    size_t kl = 0;
    if (p->o.balance == BAL_HASH)
        hash_key(pr, &key, &kl);
    for (;;) {
        px_member_t *m = px_pick(p, pr->tried, key, kl, gio_now(px->site->loop));
        if (!m) {
            pr->none_up = !pr->ntries; /* none usable for its first attempt */
            errno = EHOSTUNREACH;
            return -1;
        }
        attempt_begin(pr, m);
        if (attach(pr, m, pr->rule->kind != PX_SCGI) == 0)
            return 0;
        int err = errno; /* a unix socket gone or full, no descriptor, no memory */
        connect_failed(pr, err);
        if (!px_may_retry(pr)) {
            errno = err;
            return -1;
        }
        px_count(px, m, BACKEND_RETRIES);
    }
}

void px_timed_out(px_req_t *pr)
{
    if (!pr->counted)
        return;
    px_count(pr->px, pr->m, BACKEND_504);
    px_failed(pr->px, pr->m, pr->probe, gio_now(pr->px->site->loop), "silent past -Q");
}

/* ---- the request's life ---- */

/* A spooled body is sent (or dropped): its bytes leave the loop's budget. */
void px_spool_free(px_req_t *pr)
{
    if (!pr->spool)
        return;
    pr->px->spooled -= pr->spoolcap;
    free(pr->spool);
    pr->spool = NULL;
}

void px_req_free(px_req_t *pr)
{
    px_release(pr, 0);
    px_spool_free(pr);
    free(pr->h2s); /* its timer stopped, its stream let go: px_release */
    free(pr->out);
    free(pr->in);
    free(pr->fields);
    free(pr);
}

char *px_room(px_req_t *pr, size_t n)
{
    if (pr->keep_out && pr->outlen + n > PROXY_OUT_MAX)
        pr->keep_out = 0; /* too much to hold for another attempt: sent bytes go */
    if (!pr->keep_out) {
        if (pr->outoff == pr->outlen)
            pr->outoff = pr->outlen = 0;
        else if (pr->outoff && pr->outlen + n > pr->outcap) {
            memmove(pr->out, pr->out + pr->outoff, pr->outlen - pr->outoff);
            pr->outlen -= pr->outoff, pr->outoff = 0;
        }
    }
    char *q = hb_grow(pr->out, &pr->outcap, pr->outlen + n, 1, 4096);
    if (!q)
        return NULL;
    pr->out = q;
    pr->outlen += n;
    return pr->out + pr->outlen - n;
}

int px_out(px_req_t *pr, const void *p, size_t n)
{
    if (!n) /* an empty body's last piece: nothing to hold (and no buffer yet, maybe) */
        return 0;
    char *at = px_room(pr, n);
    if (!at)
        return -1;
    memcpy(at, p, n);
    return 0;
}

/* The answer so far is dropped for another attempt: the parsers start over,
   the fields the head added go. */
static void answer_reset(px_req_t *pr)
{
    pr->state = RS_HEAD;
    pr->framing = FR_NONE;
    pr->left = 0;
    pr->inlen = 0;
    pr->fused = 0;
    pr->got_byte = 0;
    memset(&pr->ch, 0, sizeof pr->ch);
    memset(&pr->fp, 0, sizeof pr->fp);
    memset(&pr->ch_head, 0, sizeof pr->ch_head);
    pr->ex->nfields = pr->nfields0;
}

/* A failure on a reused connection before any answer: the backend closed
   it as we sent (its keep-alive timeout).  An idempotent request goes
   again, once, on a new connection to the same backend: no failure of it.
   1: under way. */
static int stale_retry(px_req_t *pr)
{
    if (!pr->be || !pr->be->reused || pr->got_byte || pr->retried || !pr->idempotent ||
        pr->has_body || pr->head_sent || !pr->counted)
        return 0;
    pr->retried = 1;
    px_member_t *m = pr->m;
    px_release(pr, 0);
    pr->ntries--;
    attempt_begin(pr, m);
    if (attach(pr, m, 0) == 0)
        return 1;
    connect_failed(pr, errno);
    return px_may_retry(pr) && px_attempt(pr) == 0;
}

/* After a failure of pr's backend: another attempt elsewhere, if it may.
   1: under way. */
static int retry(px_req_t *pr)
{
    if (!px_may_retry(pr))
        return 0;
    px_count(pr->px, pr->m, BACKEND_RETRIES);
    px_release(pr, 0);
    answer_reset(pr);
    return px_attempt(pr) == 0;
}

/* px_fail and px_fail_errno: why for the health log, and the error log's
   line named by call and err (0: why says it). */
static void fail(px_req_t *pr, const char *why, const char *call, int err)
{
    if (stale_retry(pr))
        return;
    site_t *s = pr->px->site;
    exchange_t *ex = pr->ex;
    char who[PX_LABEL_MAX + 64]; /* the backend that failed, before a retry picks another */
    const char *line = pr->m ? backend_named(pr, pr->m, err ? call : "", who, sizeof who)
                             : "proxy";
    if (pr->counted) { /* against the backend (not a failure of ours, as ENOMEM, before one) */
        px_count(pr->px, pr->m, BACKEND_502);
        px_failed(pr->px, pr->m, pr->probe, gio_now(s->loop), why);
        if (retry(pr))
            return;
    }
    site_error(s, line, err, ex->peer, err ? ex->path : why);
    px_release(pr, 0);
    pr->state = RS_DONE;
    if (pr->grpc) {
        px_grpc_fail(pr, 14, pr->none_up ? "no backend is up" : "the backend failed");
    } else if (pr->head_sent) {
        ex_body_abort(ex);
    } else {
        pr->head_sent = 1;
        ex_error(ex, pr->none_up ? 503 : 502, pr->none_up ? "Retry-After" : NULL,
                 pr->none_up ? "1" : NULL);
    }
}

void px_fail(px_req_t *pr, const char *why)
{
    fail(pr, why, NULL, 0);
}

void px_fail_errno(px_req_t *pr, const char *call, int err)
{
    char why[96];
    snprintf(why, sizeof why, "%s the backend: %s", call, strerror(err));
    fail(pr, why, call, err);
}

/* The request took us_ microseconds at backend m: its histogram. */
static void observe(proxy_t *px, const px_member_t *m, int64_t us_)
{
    status_counters_t *st = &px->site->stats;
    int b = 0;
    while (b < STATS_BOUNDS && us_ > stats_bounds_us[b])
        b++;
    st->be_duration[m->slot][b]++;
    st->be_duration_us[m->slot] += (uint64_t)(us_ > 0 ? us_ : 0);
}

/* px_done and px_done_trailers: the response ends with t[0..n) (n 0: none). */
static void done(px_req_t *pr, int reusable, const ex_field_t *t, int n)
{
    pr->state = RS_DONE;
    if (pr->counted)
        observe(pr->px, pr->m, gio_now_us(pr->px->site->loop) - pr->sent_us);
    px_release(pr, reusable && pr->keepalive && pr->body_in && pr->outoff == pr->outlen);
    if (n)
        ex_body_trailers(pr->ex, t, n);
    else
        ex_body_end(pr->ex);
}

void px_done(px_req_t *pr, int reusable)
{
    done(pr, reusable, NULL, 0);
}

void px_done_trailers(px_req_t *pr, const ex_field_t *t, int n)
{
    done(pr, 0, t, n);
}

void px_grpc_status(px_req_t *pr, const char *v, size_t n)
{
    int code = n == 1 || n == 2 ? atoi(v) : -1;
    if (pr->ex->grpc_status || code < 0 || code > 16 || (n == 2 && v[0] == '0'))
        return;
    pr->ex->grpc_status = (uint8_t)(code + 1);
    pr->px->site->stats.grpc[code]++;
}

void px_grpc_fail(px_req_t *pr, int code, const char *msg)
{
    exchange_t *ex = pr->ex;
    char num[12];
    snprintf(num, sizeof num, "%d", code);
    px_grpc_status(pr, num, strlen(num));
    pr->state = RS_DONE;
    if (pr->head_sent) { /* the trailers end what the backend began */
        ex_field_t t[2] = {{"grpc-status", num}, {"grpc-message", msg}};
        ex_body_trailers(ex, t, 2);
        return;
    }
    pr->head_sent = 1; /* trailers-only: one HEADERS, with END_STREAM */
    ex->nfields = pr->nfields0;
    ex_field(ex, "grpc-status", num);
    ex_field(ex, "grpc-message", msg);
    if (ex_head(ex, 200, "application/grpc", 0, -1) == 0 && !pr->ended)
        ex_body_end(ex);
}

/* Is the request a gRPC call (application/grpc, +proto and the like; not
   gRPC-Web, which HTTP/1.1 carries)? */
int px_is_grpc(const exchange_t *ex)
{
    const http_str_t *ct = http_header(ex->req, "Content-Type");
    return ct && ct->n >= 16 && !strncasecmp(ct->p, "application/grpc", 16) &&
           (ct->n == 16 || ct->p[16] == '+' || ct->p[16] == ';');
}

/* gRPC over HTTP/1.1: no trailers, so no call can complete: said plainly. */
int px_grpc_refused(exchange_t *ex)
{
    static const char msg[] = "gRPC needs HTTP/2 or HTTP/3 from the client to the backend "
                              "(its status comes in trailers, which HTTP/1.1 cannot carry here)\n";
    int r = ex_head(ex, 505, "text/plain", sizeof msg - 1, -1);
    return r ? (r < 0 ? -1 : 0) : ex_body_buf(ex, msg, sizeof msg - 1, 0);
}

/* Hand buf[0..n) (malloc'd, now the exchange's) to the client. */
static int body_give(px_req_t *pr, char *buf, size_t n)
{
    if (!buf || ex_body_buf(pr->ex, buf, n, EX_FREE) < 0) {
        px_fail(pr, "out of memory");
        return -1;
    }
    if (pr->ended)
        return -1;
    if (ex_queued(pr->ex) > ex_stream_high(pr->ex)) {
        pr->paused = 1; /* drained() resumes; the client's pace is the codec's (-B) */
        px_set_deadline(pr);
    }
    return 0;
}

int px_body(px_req_t *pr, const char *p, size_t n)
{
    if (!n)
        return 0;
    char *copy = malloc(n);
    if (copy)
        memcpy(copy, p, n);
    return body_give(pr, copy, n);
}

/* A body read whole (most reads after the head) was copied once more than
   the kernel needs: 1 MiB proxied cost a 1 MiB memcpy.  A short read's
   buffer is shrunk first (in place, in glibc), so that queued pieces hold
   what they carry, not PROXY_READ each. */
int px_body_last(px_req_t *pr, char *p, size_t n)
{
    if (p != pr->rbuf || !n)
        return px_body(pr, p, n);
    char *buf = pr->rbuf, *small = n < PROXY_READ ? realloc(buf, n) : NULL;
    pr->rbuf = NULL; /* the next read gets a buffer of its own */
    return body_give(pr, small ? small : buf, n);
}

/* A head from pr's backend with status: a failon status counts against
   it, and goes to another backend when the request may; any other, for it.
   1: another attempt is under way (the caller stops). */
static int judged(px_req_t *pr, int status)
{
    proxy_t *px = pr->px;
    int64_t now = gio_now(px->site->loop);
    if (!pr->counted)
        return 0;
    if (!px_failon(pr->rule->pool, status)) {
        px_ok(px, pr->m, pr->probe, now);
        return 0;
    }
    char why[48];
    snprintf(why, sizeof why, "answered %d", status);
    px_count(px, pr->m, BACKEND_502);
    px_failed(px, pr->m, pr->probe, now, why);
    if (!px_may_retry(pr) || !px_any(pr->rule->pool, pr->tried, now))
        return 0; /* no other backend for it: this answer goes to the client as it came */
    if (retry(pr))
        return 1;
    pr->state = RS_DONE; /* the others failed at once: the status, without the body */
    pr->head_sent = 1;
    ex_error(pr->ex, status, NULL, NULL);
    return 1;
}

int px_head(px_req_t *pr, int status, const char *ctype, uint64_t len)
{
    if (judged(pr, status))
        return -1;
    pr->head_sent = 1;
    if (pr->m) /* for the access log: who answered, and how soon */
        ex_log_note(pr->ex->log_upstream, pr->m->d.label);
    pr->ex->upstream_us = gio_now_us(pr->ex->site->loop) - pr->sent_us;
    /* a gRPC answer ends with its trailers, also those px_grpc_fail sends when the
       backend fails before the body it declared: its length is not passed on (the
       client's stream would wait for the bytes declared, and never end; 0, a trailers-only
       answer, ends it at once as it is) */
    int r = ex_head(pr->ex, status, ctype, pr->grpc && len ? EX_LEN_STREAM : len, -1);
    if (r != 0 || pr->ended) {
        if (!pr->ended) {
            pr->state = RS_DONE;
            px_release(pr, 0);
        }
        return -1;
    }
    return 0;
}

char *px_keep(px_req_t *pr, const char *p, size_t n)
{
    if (!pr->fields && !(pr->fields = malloc(PROXY_FIELDS_MAX)))
        return NULL;
    if (n >= PROXY_FIELDS_MAX - pr->fused)
        return NULL;
    char *q = pr->fields + pr->fused;
    memcpy(q, p, n), q[n] = 0;
    pr->fused += n + 1;
    return q;
}

int px_field(px_req_t *pr, const char *name, size_t nl, const char *value, size_t vl)
{
    char *n, *v;
    if (pr->ex->nfields == EX_FIELDS_MAX || !(n = px_keep(pr, name, nl)) ||
        !(v = px_keep(pr, value, vl)))
        return -1;
    ex_field(pr->ex, n, v);
    return 0;
}

/* Write what the backend is owed; on a failure, fail (or retry). */
void px_flush(px_req_t *pr)
{
    while (pr->be && pr->outoff < pr->outlen) {
        ssize_t w = send(pr->be->fd, pr->out + pr->outoff, pr->outlen - pr->outoff, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (w <= 0) {
            px_fail_errno(pr, "send() to", w < 0 ? errno : EPIPE);
            return;
        }
        pr->outoff += (size_t)w;
        px_set_deadline(pr);
    }
    if (pr->blocked && pr->outlen - pr->outoff < PROXY_OUT_MAX / 2) {
        pr->blocked = 0;
        ex_input_ready(pr->ex); /* may call input() again at once */
    }
}
