/* Reverse proxying: rules, the producer, a backend connection's events; the
   connections themselves are proxy_be.c's, the protocols a rule's px_ops_t
   (proxy_int.h).  See proxy.h. */
#include "proxy.h"
#include "proxy_int.h"
#include "cgienv.h"
#include "hstate.h"
#include "http/hbuf.h"
#include "site/fs.h"
#include "target.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- rules and pools ---- */

const char *proxy_rule_check(const char *rule)
{
    px_rule_t r;
    px_pooldef_t pd;
    char name[40];
    const char *why;
    if (px_rule_parse(rule, &r, &pd, name, sizeof name, &why) < 0)
        return why;
    regfree(&r.re);
    return NULL;
}

const char *proxy_pool_check(const char *def)
{
    px_pooldef_t pd;
    const char *why;
    return px_pool_parse(def, &pd, &why) < 0 ? why : NULL;
}

/* -P and --pool (o->id 1): each a row (the number given, the length: the
   row's .why, then its own check, whose reason is the one line said).  0,
   or -1. */
static int proxy_set(config_t *cfg, const optdef_t *o, char *arg)
{
    int pool = o->id;
    const char *why;
    if ((pool ? cfg->npools : cfg->nproxy_rules) == o->repeat ||
        strnlen(arg, CONFIG_PATTERN_MAX + 1) > CONFIG_PATTERN_MAX)
        return -1;
    if ((why = pool ? proxy_pool_check(arg) : proxy_rule_check(arg)))
        return opt_set_why("%s", why), -1;
    if (pool)
        cfg->pool_def[cfg->npools++] = arg;
    else
        cfg->proxy_rule[cfg->nproxy_rules++] = arg;
    return 0;
}

const optdef_t proxy_opts[] = {
    OPT_ROW_FN('P', NULL, OPT_RULE, OPT_ANY, CONFIG_PROXY_RULES, proxy_set, 0,
               "not a proxy rule (at most 1024 bytes; -P at most 16 times)",
        "  -P rule   send matching paths to a backend: [F/|S/|h2c/|h2/]host/port/regex\n"
        "            or [F/|S/|h2c/|h2/]unix:/path:regex (F/: FastCGI, S/: SCGI, h2c/:\n"
        "            HTTP/2 by prior knowledge, h2/: HTTP/2 over TLS (--proxy-ca), gRPC\n"
        "            too, else HTTP/1.1;\n"
        "            the original gatling's -O; up to 16 times); several backends,\n"
        "            comma-separated, each with *weight and +backup, are a pool:\n"
        "            -P '10.0.0.1/80,10.0.0.2/80*2/^/app/'; @name/regex names a --pool;\n"
        "            front=/index.php; before an F/ or S/ rule: a front controller;\n"
        "            only for hosts whose directory holds a .proxy file (warned at start\n"
        "            when none does)\n"),
    OPT_ROW_FN(0, "pool", OPT_RULE, OPT_ANY, CONFIG_POOLS, proxy_set, 1,
               "not a pool (at most 1024 bytes; --pool at most 16 times)",
        "  --pool name=[F/|S/|h2c/|h2/]backends|file:/path[;key=value...]  a pool\n"
        "            of backends: balance=rr|least|hash[:Field], fails=, window=, down=,\n"
        "            failon=, tries=, slowstart=, check=/path|grpc, interval=, expect=,\n"
        "            fall=, rise=, timeout=, streams=, name= (gatling.8, POOLS; up to 16\n"
        "            times, 64 backends in all)\n"),
    OPT_ROW_STR(0, "proxy-ca", OPT_PATH, PATH_MAX - 1, proxy_ca, "not a usable file name",
        "  --proxy-ca file  the CAs (PEM) whose certificates h2/ backends must have\n"),
    OPT_LAST};

/* Does directory fd (or its entry name, a directory) hold a .proxy?  1 or 0. */
static int has_switch(int fd, const char *name)
{
    char path[NAME_MAX + sizeof "/.proxy"];
    struct stat st;
    snprintf(path, sizeof path, "%s/.proxy", name);
    return fstatat(fd, path, &st, 0) == 0;
}

/* The directory names of list b, "..." where they did not all fit. */
static const char *names(hbuf_t *b, char *buf, size_t cap)
{
    if (!hb_str(b)) /* more than fit: what did, then "..." */
        memcpy(buf + (hb_len(b) < cap - 4 ? hb_len(b) : cap - 4), "...", 4);
    return buf;
}

/*
 * -P proxies only where the serving directory holds a .proxy file (the
 * original gatling's switch): say at start (and in --check) when none of the
 * directories that may serve a request has one, naming the rules and the
 * directories looked at, rather than answer every request from the files in
 * silence; and when some virtual host directories have one and others not,
 * name those without: the rules proxy nothing there, and a FastCGI or SCGI
 * rule's scripts are refused there (a program is never sent as a file:
 * router_program).
 */
static void warn_without_switch(const config_t *cfg)
{
    const char *root = cfg->root ? cfg->root : ".";
    DIR *d = opendir(root);
    if (!d)
        return; /* the start says why it cannot serve it */
    char seen[256] = "", off[256] = "";
    hbuf_t b = hb_init(seen, sizeof seen), o = hb_init(off, sizeof off);
    int found = !(cfg->vhosts && cfg->vhost_only) && has_switch(dirfd(d), "."), n = 0, noff = 0;
    struct dirent *e;
    while (cfg->vhosts && (e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, 0) < 0 ||
            !S_ISDIR(st.st_mode))
            continue;
        int on = has_switch(dirfd(d), e->d_name);
        found |= on;
        hb_puts(&b, n++ ? ", " : " (its virtual host directories: ");
        hb_puts(&b, e->d_name);
        if (!on)
            hb_puts(&o, noff++ ? ", " : ""), hb_puts(&o, e->d_name);
    }
    closedir(d);
    const char *more = cfg->nproxy_rules > 1 ? " (and the other -P rules)" : "";
    if (!found)
        fprintf(stderr, "gatling: warning: -P %s%s: no .proxy file in %s%s%s: nothing is proxied "
                "until a directory that serves requests holds one (gatling.8, REVERSE PROXY)\n",
                cfg->proxy_rule[0], more, root, names(&b, seen, sizeof seen), n ? ")" : "");
    else if (noff)
        fprintf(stderr, "gatling: warning: -P %s%s: no .proxy file in the virtual host "
                "director%s %s of %s: nothing is proxied there (its files answer what the "
                "rules match; a FastCGI or SCGI rule's scripts are refused (403), never sent as "
                "source) until it holds one (gatling.8, REVERSE PROXY)\n",
                cfg->proxy_rule[0], more, noff > 1 ? "ies" : "y", names(&o, off, sizeof off),
                root);
}

int proxy_config_check(const config_t *cfg)
{
    px_pooldef_t *pd = malloc(sizeof *pd);
    int total = 0, rc = -1;
    if (!pd || px_tls_load(cfg, NULL, 0) < 0) { /* read, then let go: the start's is proc_t's */
        free(pd);
        return -1;
    }
    for (int i = 0; i < cfg->npools; i++) {
        const char *why;
        if (px_pool_parse(cfg->pool_def[i], pd, &why) < 0)
            goto out; /* checked at the option already */
        for (int j = 0; j < i; j++)
            if (!strncmp(cfg->pool_def[j], cfg->pool_def[i], strlen(pd->name) + 1)) {
                fprintf(stderr, "gatling: --pool %s: the name is given twice\n", pd->name);
                goto out;
            }
        if (pd->file[0]) {
            int64_t mt = -1;
            char refused[160] = "";
            int line, dirfd = px_pool_dir_open(pd, refused, sizeof refused), e;
            char *text = dirfd < 0 ? NULL : px_list_read(dirfd, pd->file, &mt, refused,
                                                      sizeof refused);
            e = errno;
            if (dirfd >= 0)
                close(dirfd); /* the start opens it again (proxy_open) */
            if (!text) {
                fprintf(stderr, "gatling: --pool %s: %s: %s\n", pd->name, pd->file,
                        *refused ? refused : strerror(e));
                goto out;
            }
            int r = px_file_parse(text, pd->m, &pd->n, &line, &why);
            free(text);
            if (r < 0) {
                fprintf(stderr, "gatling: --pool %s: %s line %d: %s\n", pd->name, pd->file, line, why);
                goto out;
            }
        }
        if (!pd->n) {
            fprintf(stderr, "gatling: --pool %s: no backend\n", pd->name);
            goto out;
        }
        if (px_tls_check(cfg, pd, "--pool", cfg->pool_def[i]) < 0)
            goto out;
        total += pd->n;
    }
    for (int i = 0; i < cfg->nproxy_rules; i++) {
        px_rule_t r;
        char name[40];
        const char *why;
        if (px_rule_parse(cfg->proxy_rule[i], &r, pd, name, sizeof name, &why) < 0)
            goto out;
        px_narrow_check(cfg, cfg->proxy_rule[i], &r, name, pd->kind);
        regfree(&r.re);
        total += pd->n;
        if (px_tls_check(cfg, pd, "-P", cfg->proxy_rule[i]) < 0)
            goto out;
        int found = !name[0];
        for (int j = 0; j < cfg->npools && !found; j++)
            found = !strncmp(cfg->pool_def[j], name, strlen(name)) &&
                    cfg->pool_def[j][strlen(name)] == '=';
        if (!found) {
            fprintf(stderr, "gatling: -P %s: no --pool named %s\n", cfg->proxy_rule[i], name);
            goto out;
        }
        if (px_front_config_check(cfg, cfg->proxy_rule[i], pd) < 0)
            goto out;
    }
    if (total > CONFIG_BACKENDS) {
        fprintf(stderr, "gatling: -P, --pool: %d backends; at most %d in all\n", total,
                CONFIG_BACKENDS);
        goto out;
    }
    rc = 0;
    if (cfg->nproxy_rules) /* pools alone: main says no request goes to them */
        warn_without_switch(cfg);
out:
    free(pd);
    return rc;
}

/* The unix sockets among pd's backends, for proxy_sockets. */
static void pd_sockets(const px_pooldef_t *pd, const char *opt, const char *value,
                       proxy_socket_fn fn, void *arg)
{
    for (int k = 0; k < pd->n; k++)
        if (pd->m[k].addr.ss_family == AF_UNIX)
            fn(arg, opt, value, ((const struct sockaddr_un *)&pd->m[k].addr)->sun_path);
}

void proxy_sockets(const config_t *cfg, const int *dirfd, proxy_socket_fn fn, void *arg)
{
    px_pooldef_t *pd = malloc(sizeof *pd);
    const char *why;
    for (int i = 0; pd && i < cfg->npools; i++) {
        if (px_pool_parse(cfg->pool_def[i], pd, &why) < 0)
            continue;
        int64_t mt = -1;
        int line;
        char refused[160];
        char *text = pd->file[0] && dirfd[i] >= 0
                         ? px_list_read(dirfd[i], pd->file, &mt, refused, sizeof refused) : NULL;
        if (text && px_file_parse(text, pd->m, &pd->n, &line, &why) < 0)
            pd->n = 0;
        free(text);
        pd_sockets(pd, "--pool", cfg->pool_def[i], fn, arg);
    }
    for (int i = 0; pd && i < cfg->nproxy_rules; i++) {
        px_rule_t r;
        char name[40];
        if (px_rule_parse(cfg->proxy_rule[i], &r, pd, name, sizeof name, &why) < 0)
            continue;
        regfree(&r.re);
        pd_sockets(pd, "-P", cfg->proxy_rule[i], fn, arg);
    }
    free(pd);
}

static void conn_on(watch_t *w, unsigned events);
static void tick(gio_loop_t *l, void *arg);
static void pool_reload(proxy_t *px, px_pool_t *p, int64_t now);

/* A pool from its definition: its backends, up from the start. */
static px_pool_t *pool_new(proxy_t *px, const px_pooldef_t *pd, int cfg_index)
{
    px_pool_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    px->pool[px->npools++] = p;
    snprintf(p->name, sizeof p->name, "%s", pd->name);
    p->kind = pd->kind;
    p->ops = p->kind == PX_HTTP ? &px_http_ops : PX_IS_H2(p->kind) ? &px_h2_ops : &px_fcgi_ops;
    p->o = pd->o;
    p->cfg_index = cfg_index;
    memcpy(p->file, pd->file, sizeof p->file);
    p->mtime_ns = -1;
    for (int i = 0; i < pd->n; i++)
        if (!px_member_new(px, p, &pd->m[i], 0))
            return NULL;
    return p;
}

/* The --pool definitions, then each rule's pool. */
static int pools_init(proxy_t *px, px_pooldef_t *pd)
{
    const config_t *cfg = px->site->cfg;
    const char *why;
    for (int i = 0; i < cfg->npools; i++) {
        px_pool_t *p;
        if (px_pool_parse(cfg->pool_def[i], pd, &why) < 0 || !(p = pool_new(px, pd, i)))
            return -1;
        if (p->file[0]) /* its first list, at once */
            pool_reload(px, p, gio_now(px->site->loop));
    }
    for (int i = 0; i < cfg->nproxy_rules; i++, px->nrules++) {
        px_rule_t *r = &px->rule[i];
        char name[40];
        if (px_rule_parse(cfg->proxy_rule[i], r, pd, name, sizeof name, &why) < 0)
            return -1;
        for (int j = 0; j < px->npools && name[0] && !r->pool; j++)
            if (px->pool[j]->cfg_index >= 0 && !strcmp(px->pool[j]->name, name))
                r->pool = px->pool[j];
        if (!name[0]) {
            snprintf(pd->name, sizeof pd->name, "P%d", i + 1);
            r->pool = pool_new(px, pd, -1);
        }
        if (!r->pool)
            return -1;
        r->kind = r->pool->kind;
        r->ops = r->pool->ops;
        if (px_front_pool_check(px, r, cfg->proxy_rule[i]) < 0)
            return -1;
    }
    return 0;
}

int proxy_init(site_t *site)
{
    const config_t *cfg = site->cfg;
    hstate_set(site, HSTATE_PROXY, NULL);
    if (!cfg->nproxy_rules)
        return 0;
    proxy_t *px = calloc(1, sizeof *px);
    px_pooldef_t *pd = malloc(sizeof *pd);
    hstate_set(site, HSTATE_PROXY, px);
    if (px)
        px->h2_close = px_h2_close;
    if (px)
        px->tls = site->proc->proxy_tls;
    if (!px || !pd || (px->site = site, px->on_backend = conn_on, pools_init(px, pd) < 0)) {
        fprintf(stderr, "gatling: proxy rules: out of memory\n");
        free(pd);
        proxy_free(site);
        return -1;
    }
    free(pd);
    gio_timer_set(site->loop, &px->tick, gio_now(site->loop) + 1000, tick, px);
    return 0;
}

void proxy_free(site_t *site)
{
    proxy_t *px = hstate(site, HSTATE_PROXY);
    if (!px)
        return;
    gio_timer_stop(site->loop, &px->tick);
    px_front_free(px);
    for (int i = 0; i < px->nrules; i++)
        regfree(&px->rule[i].re);
    for (int i = 0; i < px->npools; i++) {
        while (px->pool[i]->n)
            px_member_free(px, px->pool[i]->m[0]);
        free(px->pool[i]);
    }
    free(px->spare);
    free(px);
    hstate_set(site, HSTATE_PROXY, NULL);
}

/* A file: pool's list changed: backends that left drain, new ones start
   slowly, those that stay keep their state (a weight or backup mark may
   change).  A list that does not parse changes nothing (one line). */
static void pool_reload(proxy_t *px, px_pool_t *p, int64_t now)
{
    int64_t mt = p->mtime_ns;
    char refused[160] = "";
    char *text = px_list_read(px->site->proc->pool_dirfd[p->cfg_index], p->file, &mt, refused,
                           sizeof refused);
    if (!text && !errno)
        return; /* unchanged */
    px_pooldef_t *pd = text ? malloc(sizeof *pd) : NULL;
    int n, line = 0;
    const char *why = text ? "out of memory" : *refused ? refused : strerror(errno);
    char msg[1280]; /* the longest name, file and label fit: 39 + 1023 + 119 and the words */
    if (!pd || px_file_parse(text, pd->m, &n, &line, &why) < 0 || (!n && (why = "no backend"))) {
        if (text || p->mtime_ns != -2) { /* said once per version, once while unreadable */
            if (text)
                snprintf(msg, sizeof msg, "proxy: pool %s: %s line %d: %s: the list stays as it was",
                         p->name, p->file, line, why);
            else
                snprintf(msg, sizeof msg, "proxy: pool %s: %s: %s: the list stays as it was",
                         p->name, p->file, why);
            elog_note(&px->site->elog, gio_wallclock(px->site->loop), msg);
        }
        p->mtime_ns = text ? mt : -2;
        free(text), free(pd);
        return;
    }
    int first = p->mtime_ns == -1 && !p->n;
    for (int i = 0; i < p->n; i++)
        p->m[i]->draining = 1;
    for (int k = 0; k < n; k++) {
        px_member_t *m = NULL;
        for (int i = 0; i < p->n && !m; i++)
            if (!strcmp(p->m[i]->d.label, pd->m[k].label))
                m = p->m[i];
        if (m) {
            m->draining = 0;
            m->d.weight = pd->m[k].weight, m->d.backup = pd->m[k].backup;
        } else if (!px_member_new(px, p, &pd->m[k], first ? 0 : now)) {
            snprintf(msg, sizeof msg, "proxy: pool %s: %s: no room for %s (32 a pool, 64 in all)",
                     p->name, p->file, pd->m[k].label);
            elog_note(&px->site->elog, gio_wallclock(px->site->loop), msg);
        }
    }
    p->mtime_ns = mt;
    free(text), free(pd);
}

/* Once a second: the file: pools' lists, drained backends freed, checks due. */
static void tick(gio_loop_t *l, void *arg)
{
    proxy_t *px = arg;
    int64_t now = gio_now(l);
    for (int i = 0; i < px->npools; i++) {
        px_pool_t *p = px->pool[i];
        if (p->file[0])
            pool_reload(px, p, now);
        for (int k = p->n - 1; k >= 0; k--) {
            px_member_t *m = p->m[k];
            if (m->draining && !m->outstanding) {
                px_member_free(px, m);
            } else if (m->draining) {
                px_member_idle_close(px, m); /* its requests under way finish */
            } else if (p->o.check[0] && !m->draining && now >= m->check_at) {
                m->check_at = now + p->o.interval * 1000LL;
                px_check_start(px, m);
            }
        }
    }
    gio_timer_set(l, &px->tick, now + 1000, tick, px);
}

int proxy_backend(const struct site *site, int slot, const char **pool, const char **label,
                  const char **state, unsigned *outstanding)
{
    const proxy_t *px = hstate(site, HSTATE_PROXY);
    const px_member_t *m = px && slot >= 0 && slot < CONFIG_BACKENDS ? px->slot[slot] : NULL;
    if (!m)
        return 0;
    *pool = m->pool->name;
    *label = m->d.label;
    *state = px_state(m, gio_now(site->loop));
    *outstanding = m->outstanding;
    return 1 + px_up(m);
}

/* ---- which requests ---- */

/* Does the vhost serving ex hold a .proxy file, one a process without
   privileges could stat (fs_public FS_ANY: its directory, or a directory
   on the way its symlink leads, world-searchable)?  Looked at once a second
   per vhost; t->vhost and t->which get its name and directory. */
static int vhost_proxied(proxy_t *px, exchange_t *ex, px_target_t *t)
{
    site_t *s = px->site;
    if (target_vhost(s, ex, t->vhost) < 0)
        return 0;
    unsigned h = 5381;
    for (const char *c = t->vhost; *c; c++)
        h = h * 33 + (unsigned char)*c;
    __typeof__(px->vh[0]) *e = &px->vh[h % PROXY_VHOSTS];
    int64_t now = gio_wallclock(s->loop);
    if (e->second != now || strcmp(e->name, t->vhost)) {
        int fd = target_dir(ex, &e->which); /* the host's: not closed */
        struct stat st;
        fs_at_t at = site_at(s, vhost_dir(e->which, t->vhost));
        e->has = fd >= 0 && fstatat(fd, ".proxy", &st, 0) == 0 &&
                 fs_public(&at, ".proxy", -1, FS_ANY);
        memcpy(e->name, t->vhost, sizeof t->vhost);
        e->second = now;
    }
    t->which = e->which;
    return e->has;
}

/* Does rule r take path p?  A FastCGI or SCGI rule also takes a path whose
   leading part it matches as a script, the rest being PATH_INFO
   (cgienv_script): "\.php$" takes "/index.php/blog". */
static int rule_takes(const px_rule_t *r, const path_t *p)
{
    if (r->kind == PX_FCGI || r->kind == PX_SCGI)
        return cgienv_script(&r->re, 1, p->path, p->len, CGIENV_AT_END) > 0;
    return !regexec(&r->re, p->path, 0, NULL, 0);
}

/* The rule ex's request goes by, or NULL; *t gets what it is about. */
static px_rule_t *match(exchange_t *ex, px_target_t *t)
{
    proxy_t *px = hstate(ex->site, HSTATE_PROXY);
    t->script[0] = 0;
    if (!px || ex_path(ex, &t->p))
        return NULL;
    for (int i = 0; i < px->nrules; i++)
        if (rule_takes(&px->rule[i], &t->p))
            return vhost_proxied(px, ex, t) ? &px->rule[i] : NULL;
    /* a path no rule takes: a site's front controller, where it names no file */
    return px->front_on && vhost_proxied(px, ex, t) ? px_front(px, ex, t) : NULL;
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
                px_fail_errno(pr, "recv() from", errno);
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
    int tunnel = pr->state == RS_TUNNEL;
    if (tunnel) /* an idle WebSocket: closed, not an error */
        px_count(pr->px, pr->m, BACKEND_TUNNEL_IDLE);
    else
        px_timed_out(pr);
    px_release(pr, 0);
    pr->state = RS_DONE;
    if (tunnel) {
        ex_body_end(ex);
        return;
    }
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
        px_pool_remove(c->m, c);
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
                pr->conn_failed = 1; /* nothing reached the backend: any request may go elsewhere */
                px_fail_errno(pr, "connect() to", err);
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
        px_count(px, pr->rule->pool->n ? pr->rule->pool->m[0] : NULL, BACKEND_UNSIZED);
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
    px_h2_drained(pr);
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

/* A gRPC call the client ended before its status: logged and counted as
   the client's verdict, DEADLINE_EXCEEDED at its grpc-timeout (the client
   resets the stream at its deadline, which is a little before ours: the
   request's way here), CANCELLED before. */
static void p_abandoned(exchange_t *ex)
{
    px_req_t *pr = ex->pctx;
    if (pr->grpc && !ex->grpc_status && pr->state != RS_DONE)
        px_grpc_status(pr, px_h2_past_deadline(pr, 250) ? "4" : "1", 1);
}

static const ex_producer_t producer = {p_input, p_drained, p_end, p_abandoned};

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
    if (r2 == 0 && px_attempt(pr) == 0)
        return 0;
    if (r2 == 0 && pr->none_up) { /* else connect_failed said which backend, and why */
        char why[200];
        snprintf(why, sizeof why, "no backend of pool %s is up: %.120s", r->pool->name, ex->path);
        site_error(ex->site, "proxy", 0, ex->peer, why);
    }
    if (pr->grpc) {
        px_grpc_fail(pr, 14, pr->none_up ? "no backend is up" : "no backend could be reached");
        return 0;
    }
    pr->state = RS_DONE;
    pr->head_sent = 1;
    if (pr->none_up)
        return ex_error(ex, 503, "Retry-After", "1");
    return ex_error(ex, 502, NULL, NULL);
}

int proxy_dispatch(exchange_t *ex)
{
    px_target_t t;
    px_rule_t *r = match(ex, &t);
    if (!r)
        return PROXY_NOT_MINE;
    if (ex->site->cfg->log_vhost || ex->site->cfg->log_json) /* as a file's: who served */
        vhost_log_name(t.which, t.vhost, ex->local_port, ex->vhost, sizeof ex->vhost);
    int refused = px_script_check(ex, r, &t);
    if (refused)
        return ex_error(ex, refused, NULL, NULL);
    int grpc = px_is_grpc(ex);
    if (grpc && !ex_has_trailers(ex))
        return px_grpc_refused(ex);
    px_req_t *pr = calloc(1, sizeof *pr);
    if (!pr)
        return -1;
    const http_request_t *req = ex->req;
    pr->ex = ex, pr->px = hstate(ex->site, HSTATE_PROXY), pr->rule = r;
    pr->grpc = (uint8_t)grpc;
    ex->self_paced = (uint8_t)grpc; /* a quiet stream is gRPC's way: -Q times it (proxy_h2.c) */
    pr->keep_out = 1; /* until it is more than PROXY_OUT_MAX: another backend may need it */
    pr->nfields0 = ex->nfields;
    pr->has_body = ex->req_len != 0;
    pr->body_in = !pr->has_body;
    pr->head_only = ex->head_only;
    static const char *const idem[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"};
    for (size_t i = 0; i < sizeof idem / sizeof idem[0]; i++)
        pr->idempotent |= http_method_is(req, idem[i]);
    /* FastCGI and SCGI put CONTENT_LENGTH first: a body without one is read
       whole (spool()) before a backend is asked */
    pr->spooling = (r->kind == PX_FCGI || r->kind == PX_SCGI) && ex->req_len < 0;
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

static int proxy_on(const site_t *site)
{
    return hstate(site, HSTATE_PROXY) != NULL;
}

const handler_t proxy_handler = {
    .name = "-P", .phase = HANDLER_PRODUCE, .serve = proxy_dispatch, .init = proxy_init,
    .free = proxy_free, .on = proxy_on,
    .streams = proxy_streams, .claims = px_claims, .wrap = HANDLER_STORE | HANDLER_CODE,
    .backend = proxy_backend,
};
