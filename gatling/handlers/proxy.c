/* Reverse proxying: rules, the producer, a backend connection's events; the
   connections themselves are proxy_be.c's, the protocols a rule's px_ops_t
   (proxy_int.h).  See proxy.h. */
#include "proxy.h"
#include "proxy_int.h"
#include "hstate.h"
#include "http/hbuf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- rules ---- */

/* "1.2.3.4/port/" or "[::1]/port/": the address into r; *rest after the last '/'. */
static int parse_inet(const char *s, px_rule_t *r, const char **rest, const char **why)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *e;
    int v6 = *s == '[';
    *why = "the backend is not an IPv4 or [IPv6] address followed by /port/";
    if (v6 ? !(e = strchr(s, ']')) || e[1] != '/' : !(e = strchr(s, '/')))
        return -1;
    size_t n = (size_t)(e - s) - (size_t)v6;
    if (n == 0 || n >= sizeof host)
        return -1;
    memcpy(host, s + v6, n), host[n] = 0;
    const char *ps = e + 1 + v6;
    char *pe;
    errno = 0;
    long port = strtol(ps, &pe, 10);
    if (pe == ps || *ps < '0' || *ps > '9' || *pe != '/' || port < 1 || port > 65535 || errno) {
        *why = "not a port number (1-65535) between the address and the pattern";
        return -1;
    }
    memset(&r->addr, 0, sizeof r->addr);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&r->addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&r->addr;
    if (!v6 && inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)port);
        r->alen = sizeof *a4;
    } else if (v6 && inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6, a6->sin6_port = htons((uint16_t)port);
        r->alen = sizeof *a6;
    } else {
        return -1;
    }
    *rest = pe + 1;
    return 0;
}

/* "unix:/path:": the socket into r; *rest after the colon ending the path. */
static int parse_unix(const char *s, px_rule_t *r, const char **rest, const char **why)
{
    struct sockaddr_un *u = (struct sockaddr_un *)&r->addr;
    const char *path = s + 5, *e = strchr(path, ':');
    *why = "unix: needs an absolute socket path (no colon, at most 107 bytes), then :pattern";
    if (!e || *path != '/' || (size_t)(e - path) >= sizeof u->sun_path)
        return -1;
    memset(&r->addr, 0, sizeof r->addr);
    u->sun_family = AF_UNIX;
    memcpy(u->sun_path, path, (size_t)(e - path));
    r->alen = (socklen_t)sizeof *u;
    *rest = e + 1;
    return 0;
}

/* Parse and compile one rule.  0, or -1 with *why set. */
static int rule_parse(const char *s, px_rule_t *r, const char **why)
{
    const char *re;
    memset(r, 0, sizeof *r);
    r->kind = PX_HTTP;
    if ((s[0] == 'F' || s[0] == 'S') && s[1] == '/') {
        r->kind = s[0] == 'F' ? PX_FCGI : PX_SCGI;
        s += 2;
    }
    r->ops = r->kind == PX_HTTP ? &px_http_ops : &px_fcgi_ops;
    if (!strncmp(s, "unix:", 5) ? parse_unix(s, r, &re, why) : parse_inet(s, r, &re, why))
        return -1;
    *why = "the pattern is empty or not a POSIX extended regular expression";
    if (!*re || regcomp(&r->re, re, REG_EXTENDED | REG_NOSUB))
        return -1;
    return 0;
}

size_t proxy_rule_backend(const char *rule)
{
    px_rule_t r;
    const char *s = rule, *re, *why;
    if ((s[0] == 'F' || s[0] == 'S') && s[1] == '/')
        s += 2;
    if (!strncmp(s, "unix:", 5) ? parse_unix(s, &r, &re, &why) : parse_inet(s, &r, &re, &why))
        return strlen(rule);
    return (size_t)(re - rule) - 1; /* without the separator before the pattern */
}

int proxy_rule_check(const char *rule)
{
    px_rule_t r;
    const char *why;
    if (rule_parse(rule, &r, &why) < 0) {
        fprintf(stderr, "gatling: -P %s: %s\n", rule, why);
        return -1;
    }
    regfree(&r.re);
    return 0;
}

static void conn_on(watch_t *w, unsigned events);

int proxy_init(site_t *site)
{
    const config_t *cfg = site->cfg;
    hsite_t *hs = hsite_of(site);
    hs->proxy = NULL;
    if (!cfg->nproxy_rules)
        return 0;
    proxy_t *px = calloc(1, sizeof *px);
    if (!px) {
        fprintf(stderr, "gatling: proxy rules: out of memory\n");
        return -1;
    }
    px->site = site;
    px->on_backend = conn_on;
    for (int i = 0; i < cfg->nproxy_rules; i++, px->nrules++) {
        const char *why;
        if (rule_parse(cfg->proxy_rule[i], &px->rule[i], &why) < 0) {
            fprintf(stderr, "gatling: -P %s: %s\n", cfg->proxy_rule[i], why);
            hs->proxy = px;
            proxy_free(site);
            return -1;
        }
    }
    hs->proxy = px;
    return 0;
}

void proxy_free(site_t *site)
{
    proxy_t *px = hsite_of(site)->proxy;
    if (!px)
        return;
    for (int i = 0; i < px->nrules; i++) {
        for (int k = 0; k < px->rule[i].nidle; k++)
            px_conn_close(px, px->rule[i].idle[k]);
        regfree(&px->rule[i].re);
    }
    free(px->spare);
    free(px);
    hsite_of(site)->proxy = NULL;
}

/* ---- which requests ---- */

/* Does the vhost serving ex hold a .proxy file, one a process without
   privileges could stat (fs_public FS_ANY: its directory, or a directory
   on the way its symlink leads, world-searchable)?  Looked at once a second
   per vhost; t->vhost and t->which get its name and directory. */
static int vhost_proxied(proxy_t *px, exchange_t *ex, px_target_t *t)
{
    site_t *s = px->site;
    const config_t *cfg = s->cfg;
    const http_str_t *host = t->p.authority.p ? &t->p.authority : http_header(ex->req, "Host");
    t->vhost[0] = 0;
    if (cfg->vhosts && vhost_name(host, ex->local_port, cfg->keep_host_port, t->vhost) < 0)
        return 0;
    unsigned h = 5381;
    for (const char *c = t->vhost; *c; c++)
        h = h * 33 + (unsigned char)*c;
    __typeof__(px->vh[0]) *e = &px->vh[h % PROXY_VHOSTS];
    int64_t now = gio_wallclock(s->loop);
    if (e->second != now || strcmp(e->name, t->vhost)) {
        int fd = vhost_open(s->rootfd, cfg->vhosts ? t->vhost : NULL, cfg->vhost_only,
                            site_root_check(s), &e->which);
        struct stat st;
        fs_at_t at = site_at(s, vhost_dir(e->which, t->vhost));
        e->has = fd >= 0 && fstatat(fd, ".proxy", &st, 0) == 0 &&
                 fs_public(&at, ".proxy", -1, FS_ANY);
        if (fd >= 0)
            close(fd);
        memcpy(e->name, t->vhost, sizeof t->vhost);
        e->second = now;
    }
    t->which = e->which;
    return e->has;
}

/* The rule ex's request goes by, or NULL; *t gets what it is about. */
static px_rule_t *match(exchange_t *ex, px_target_t *t)
{
    proxy_t *px = hsite_of(ex->site)->proxy;
    const http_request_t *req = ex->req;
    if (!px || path_from_target(req->target.p, req->target.n, ex->path, EX_PATH_CAP, &t->p))
        return NULL;
    for (int i = 0; i < px->nrules; i++)
        if (!regexec(&px->rule[i].re, t->p.path, 0, NULL, 0))
            return vhost_proxied(px, ex, t) ? &px->rule[i] : NULL;
    return NULL;
}

int proxy_streams(exchange_t *ex)
{
    px_target_t t;
    return match(ex, &t) != NULL;
}

/* Bytes from the backend to the protocol's reader, and EOF. */
static void backend_reads(px_req_t *pr)
{
    proxy_t *px = pr->px;
    for (int round = 0; round < 4 && pr->be && !pr->paused && !pr->ended; round++) {
        if (!pr->rbuf) { /* the loop's spare, else a new one (the last was given away) */
            pr->rbuf = px->spare ? px->spare : malloc(PROXY_READ);
            px->spare = NULL;
        }
        if (!pr->rbuf) {
            px_fail(pr, "out of memory");
            return;
        }
        char *buf = pr->rbuf;
        long n = gio_read(pr->be->fd, buf, PROXY_READ);
        if (n == GIO_AGAIN)
            return;
        if (n < 0 || n == GIO_EOF) {
            if (pr->state == RS_TUNNEL) {
                pr->state = RS_DONE;
                px_release(pr, 0);
                ex_body_end(pr->ex);
            } else if (n == GIO_EOF) {
                pr->rule->ops->eof(pr);
            } else {
                px_fail(pr, "recv() from the backend failed");
            }
            return;
        }
        pr->got_byte = 1;
        px_unfresh(pr);
        if (pr->state == RS_TUNNEL)
            px_body_last(pr, buf, (size_t)n);
        else
            pr->rule->ops->read(pr, buf, (size_t)n);
        px_set_deadline(pr); /* for the state the read left: after a 101, the tunnel's */
    }
}

/* The reads, each into a buffer that is given to the client when it holds
   body only (px_body_last); one that was not is kept for the loop's next
   read, so a waiting request holds none (an idle SSE stream, a slow head). */
static void backend_read(px_req_t *pr)
{
    backend_reads(pr);
    if (pr->rbuf && !pr->px->spare)
        pr->px->spare = pr->rbuf;
    else
        free(pr->rbuf);
    pr->rbuf = NULL;
}

/* The backend stayed silent for -Q seconds. */
static void timed_out(px_req_t *pr)
{
    site_t *s = pr->px->site;
    exchange_t *ex = pr->ex;
    px_release(pr, 0);
    int tunnel = pr->state == RS_TUNNEL;
    pr->state = RS_DONE;
    if (tunnel) { /* an idle WebSocket: closed, not an error */
        px_count(pr->px, pr->rule, BACKEND_TUNNEL_IDLE);
        ex_body_end(ex);
        return;
    }
    px_count(pr->px, pr->rule, BACKEND_504);
    site_error(s, "proxy", ETIMEDOUT, ex->peer, "the backend did not answer in time (-Q)");
    if (pr->head_sent) {
        ex_body_abort(ex);
    } else {
        pr->head_sent = 1;
        ex_error(ex, 504, NULL, NULL);
    }
}

static void conn_on(watch_t *w, unsigned events)
{
    px_conn_t *c = (px_conn_t *)w;
    px_req_t *pr = c->req;
    if (!pr) { /* idle: the backend closed it, sent what no request asked for, or it aged */
        px_pool_remove(c->rule, c);
        px_conn_close(c->px, c);
        return;
    }
    pr->depth++;
    if (!events) {
        timed_out(pr);
    } else {
        if (c->connecting && (events & (GIO_WRITE | GIO_ERROR | GIO_HANGUP))) {
            int err = 0;
            socklen_t len = sizeof err;
            if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
            c->connecting = 0;
            if (err) {
                px_fail(pr, "connect() to the backend failed");
                events = 0;
            }
        }
        if (events & GIO_WRITE && pr->be == c && !pr->ended)
            px_flush(pr);
        if (events & (GIO_READ | GIO_HANGUP | GIO_ERROR) && pr->be == c && !pr->ended)
            backend_read(pr);
    }
    px_interest(pr);
    if (!--pr->depth && pr->ended)
        px_req_free(pr);
}

/* ---- the producer ---- */

static int send_request(px_req_t *pr, const px_target_t *t);

/* A body without a length for FastCGI or SCGI: read whole, then the request
   goes with its CONTENT_LENGTH; over PROXY_SPOOL_MAX it is answered 413,
   past the loop's PROXY_SPOOL_TOTAL 503. */
static size_t spool(px_req_t *pr, const char *p, size_t n, int last)
{
    exchange_t *ex = pr->ex;
    proxy_t *px = pr->px;
    size_t cap = pr->spoolcap ? pr->spoolcap : 16384;
    while (cap < pr->spooled + n && cap <= PROXY_SPOOL_MAX)
        cap *= 2;
    pr->depth++;
    if (n > PROXY_SPOOL_MAX - pr->spooled ||
        cap - pr->spoolcap > PROXY_SPOOL_TOTAL - px->spooled) {
        int full = n <= PROXY_SPOOL_MAX - pr->spooled;
        px_count(px, pr->rule, BACKEND_UNSIZED);
        pr->spooling = 0;
        pr->state = RS_DONE;
        pr->head_sent = 1;
        px_spool_free(pr);
        if (full)
            site_error(px->site, "proxy", 0, ex->peer,
                       "bodies without a length held for backends reach 64 MiB: 503");
        ex_error(ex, full ? 503 : 413, full ? "Retry-After" : NULL, full ? "1" : NULL);
    } else {
        if (cap > pr->spoolcap) {
            char *q = realloc(pr->spool, cap);
            if (!q) {
                px_fail(pr, "out of memory");
                goto out;
            }
            px->spooled += cap - pr->spoolcap;
            pr->spool = q, pr->spoolcap = cap;
        }
        if (n)
            memcpy(pr->spool + pr->spooled, p, n);
        pr->spooled += n;
        if (last) {
            px_target_t t;
            pr->spooling = 0;
            if (!match(ex, &t)) { /* its .proxy went meanwhile */
                pr->state = RS_DONE;
                pr->head_sent = 1;
                ex_error(ex, 502, NULL, NULL);
            } else if (send_request(pr, &t) < 0) {
                px_fail(pr, "out of memory");
            } else if (pr->be && !pr->be->connecting) {
                px_flush(pr); /* until EAGAIN, as p_input does (sigio's unix sockets) */
            }
        }
    }
out:
    if (!--pr->depth && pr->ended)
        px_req_free(pr);
    return n;
}

static size_t p_input(exchange_t *ex, const char *p, size_t n, int last)
{
    px_req_t *pr = ex->pctx;
    if (pr->ended || pr->state == RS_DONE || (pr->body_in && pr->state != RS_TUNNEL))
        return n; /* answered already: the rest of the body is not wanted */
    if (pr->spooling)
        return spool(pr, p, n, last);
    size_t held = pr->outlen - pr->outoff, take = n;
    if (held + n > PROXY_OUT_MAX)
        take = held >= PROXY_OUT_MAX ? 0 : PROXY_OUT_MAX - held;
    int end = last && take == n;
    if (take || end) {
        int r = pr->state == RS_TUNNEL ? px_out(pr, p, take)
                                       : pr->rule->ops->body(pr, p, take, end);
        if (r < 0) {
            pr->depth++;
            px_fail(pr, "out of memory");
            if (!--pr->depth && pr->ended)
                px_req_free(pr);
            return n;
        }
    }
    if (end && pr->state != RS_TUNNEL)
        pr->body_in = 1;
    if (take < n)
        pr->blocked = 1;
    /* written at once, until EAGAIN: fewer rounds, and a unix socket has the
       kernel announce space later (sigio's POLL_OUT) only after an EAGAIN */
    if (!pr->be || !pr->be->connecting)
        px_flush(pr);
    px_set_deadline(pr);
    px_interest(pr);
    return take;
}

static void p_drained(exchange_t *ex)
{
    px_req_t *pr = ex->pctx;
    if (!pr->paused)
        return;
    pr->paused = 0;
    px_set_deadline(pr);
    px_interest(pr);
}

static void p_end(exchange_t *ex)
{
    px_req_t *pr = ex->pctx;
    pr->ended = 1;
    if (!pr->depth)
        px_req_free(pr);
}

static const ex_producer_t producer = {p_input, p_drained, p_end};

/* pr's request to a connection of its rule: the head (or CGI environment)
   for t, the body spooled, if any.  0 (gone, or answered 502 with
   pr->state RS_DONE), or -1 (ENOMEM). */
static int send_request(px_req_t *pr, const px_target_t *t)
{
    exchange_t *ex = pr->ex;
    px_rule_t *r = pr->rule;
    int r2 = r->ops->request(pr, t);
    if (r2 == 0 && pr->spool) {
        r2 = r->ops->body(pr, pr->spool, pr->spooled, 1);
        pr->body_in = 1;
        px_spool_free(pr);
    }
    if (r2 == -1)
        return -1;
    if (r2 == 0 && px_attach(pr, r->kind != PX_SCGI) == 0)
        return 0;
    if (r2 == 0) {
        px_count(pr->px, r, BACKEND_502);
        site_error(ex->site, "connect() to the backend", errno, ex->peer, ex->path);
    }
    pr->state = RS_DONE;
    pr->head_sent = 1;
    return ex_error(ex, 502, NULL, NULL);
}

int proxy_dispatch(exchange_t *ex)
{
    px_target_t t;
    px_rule_t *r = match(ex, &t);
    if (!r)
        return PROXY_NOT_MINE;
    px_req_t *pr = calloc(1, sizeof *pr);
    if (!pr)
        return -1;
    const http_request_t *req = ex->req;
    pr->ex = ex, pr->px = hsite_of(ex->site)->proxy, pr->rule = r;
    pr->has_body = ex->req_len != 0;
    pr->body_in = !pr->has_body;
    pr->head_only = ex->head_only;
    static const char *const idem[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"};
    for (size_t i = 0; i < sizeof idem / sizeof idem[0]; i++)
        pr->idempotent |= http_method_is(req, idem[i]);
    /* FastCGI and SCGI put CONTENT_LENGTH first: a body without one is read
       whole (spool()) before a backend is asked */
    pr->spooling = r->kind != PX_HTTP && ex->req_len < 0;
    if (!pr->spooling) {
        int r2 = send_request(pr, &t);
        if (r2 < 0 || pr->state == RS_DONE) {
            px_req_free(pr);
            return r2;
        }
    }
    ex->producer = &producer;
    ex->pctx = pr;
    return 0;
}
