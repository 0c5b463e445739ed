/*
 * Pools of backends (proxy_int.h): what a -P rule's backend list and a
 * --pool definition say (parsed here, for main.c's check and each loop),
 * which backend takes a request (smooth weighted round robin, least
 * outstanding per weight, a rendezvous hash), and each backend's health:
 * passive (so many failures within a window take it out for a while, then
 * one request tries it) and active (proxy_check.c's results).  No sockets
 * here: proxy_be.c and proxy_check.c call this, and this calls neither.
 */
#include "proxy_int.h"
#include "http/hbuf.h"
#include "site/privfs.h"
#include "site/siphash.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- what is written ---- */

/* "host/port" or "[v6]/port" at s into d; *end after the port. */
static int inet_parse(const char *s, px_mdef_t *d, const char **end, const char **why)
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
    const char *ps = e + 1 + v6, *pe = ps;
    long port = 0;
    while (*pe >= '0' && *pe <= '9' && port <= 65535)
        port = port * 10 + (*pe++ - '0');
    if (pe == ps || port < 1 || port > 65535 || (*pe >= '0' && *pe <= '9')) {
        *why = "not a port number (1-65535) after the address";
        return -1;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)&d->addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&d->addr;
    if (!v6 && inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)port);
        d->alen = sizeof *a4;
    } else if (v6 && inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6, a6->sin6_port = htons((uint16_t)port);
        d->alen = sizeof *a6;
    } else {
        return -1;
    }
    *end = pe;
    return 0;
}

/* "unix:/path" at s into d; the path ends at , : * + ; or the end. */
static int unix_parse(const char *s, px_mdef_t *d, const char **end, const char **why)
{
    struct sockaddr_un *u = (struct sockaddr_un *)&d->addr;
    const char *path = s + 5, *e = path + strcspn(path, ",:*+;\n\r\t ");
    *why = "unix: needs an absolute socket path (at most 107 bytes, none of , : * + ;)";
    if (*path != '/' || (size_t)(e - path) >= sizeof u->sun_path)
        return -1;
    u->sun_family = AF_UNIX;
    memcpy(u->sun_path, path, (size_t)(e - path));
    d->alen = (socklen_t)sizeof *u;
    *end = e;
    return 0;
}

/* A number lo..hi at s (digits only); *end after it.  -1 if none or out of range. */
static long number(const char *s, long lo, long hi, const char **end)
{
    long v = 0;
    const char *p = s;
    while (*p >= '0' && *p <= '9' && v <= hi)
        v = v * 10 + (*p++ - '0');
    *end = p;
    return p == s || v < lo || v > hi || (*p >= '0' && *p <= '9') ? -1 : v;
}

/* One backend at s: its address, then *WEIGHT and +backup; *end after it. */
static int member_parse(const char *s, px_mdef_t *d, const char **end, const char **why)
{
    const char *e;
    memset(d, 0, sizeof *d);
    d->weight = 1;
    if (!strncmp(s, "unix:", 5) ? unix_parse(s, d, &e, why) : inet_parse(s, d, &e, why))
        return -1;
    size_t n = (size_t)(e - s); /* at most 5 + 107, or an address and a port */
    memcpy(d->label, s, n < PX_LABEL_MAX ? n : PX_LABEL_MAX - 1);
    if (*e == '*' && (d->weight = (int)number(e + 1, 1, 100, &e)) < 0) {
        *why = "a weight is *1 to *100";
        return -1;
    }
    if (!strncmp(e, "+backup", 7))
        d->backup = 1, e += 7;
    *end = e;
    return 0;
}

int px_list_parse(const char *s, int in_rule, px_mdef_t *d, int *n, const char **rest,
                  const char **why)
{
    for (*n = 0;; s++) {
        const char *e;
        if (*n == POOL_MEMBERS) {
            *why = "more than 32 backends in one pool";
            return -1;
        }
        if (member_parse(s, &d[*n], &e, why) < 0)
            return -1;
        for (int i = 0; i < *n; i++)
            if (!strcmp(d[i].label, d[*n].label)) {
                *why = "a backend is named twice in one pool";
                return -1;
            }
        int sep = !strncmp(s, "unix:", 5) ? ':' : '/';
        (*n)++;
        s = e;
        if (*s == ',')
            continue;
        if (in_rule ? *s != sep : *s && *s != ';') {
            *why = in_rule && sep == ':' ? "unix:/path[*W][+backup] is followed by , or :pattern"
                   : in_rule ? "host/port[*W][+backup] is followed by , or /pattern"
                             : "a backend is followed by , or ;option";
            return -1;
        }
        *rest = in_rule ? s + 1 : s;
        return 0;
    }
}

int px_file_parse(const char *text, px_mdef_t *d, int *n, int *line, const char **why)
{
    *n = 0;
    *line = 0;
    for (const char *s = text; *s;) {
        const char *eol = s + strcspn(s, "\n");
        ++*line;
        s += strspn(s, " \t");
        if (*s != '#' && s < eol && *s != '\r') {
            const char *e;
            if (*n == POOL_MEMBERS) {
                *why = "more than 32 backends";
                return -1;
            }
            if (member_parse(s, &d[*n], &e, why) < 0)
                return -1;
            e += strspn(e, " \t\r");
            if (e != eol) {
                *why = "a line holds one backend: host/port or unix:/path, then *W, +backup";
                return -1;
            }
            for (int i = 0; i < *n; i++)
                if (!strcmp(d[i].label, d[*n].label)) {
                    *why = "a backend is named twice";
                    return -1;
                }
            ++*n;
        }
        s = *eol ? eol + 1 : eol;
    }
    return 0;
}

void px_popts_default(px_popts_t *o)
{
    memset(o, 0, sizeof *o);
    *o = (px_popts_t){.balance = BAL_RR, .fails = 3, .window = 10, .down = 10,
                      .failon = {502, 503, 504}, .nfailon = 3, .tries = 3, .slowstart = 10,
                      .interval = 5, .expect_lo = 200, .expect_hi = 399, .fall = 2,
                      .rise = 2, .check_timeout = 2, .streams = 100,
                      .idle = PROXY_IDLE_MAX};
}

/* The options whose value is a number. */
static const struct {
    const char *key;
    size_t off;
    long lo, hi;
} numeric[] = {
    {"fails", offsetof(px_popts_t, fails), 1, 1000},
    {"window", offsetof(px_popts_t, window), 1, 3600},
    {"down", offsetof(px_popts_t, down), 1, 3600},
    {"tries", offsetof(px_popts_t, tries), 1, 10},
    {"slowstart", offsetof(px_popts_t, slowstart), 0, 3600},
    {"interval", offsetof(px_popts_t, interval), 1, 3600},
    {"fall", offsetof(px_popts_t, fall), 1, 100},
    {"rise", offsetof(px_popts_t, rise), 1, 100},
    {"timeout", offsetof(px_popts_t, check_timeout), 1, 300},
    {"streams", offsetof(px_popts_t, streams), 1, 1000},
    {"idle", offsetof(px_popts_t, idle), 0, PROXY_IDLE_MAX},
};

/* failon=502,503 or failon=none. */
static int failon_parse(px_popts_t *o, const char *v, const char *ve)
{
    o->nfailon = 0;
    if (ve - v == 4 && !memcmp(v, "none", 4))
        return 0;
    for (const char *e;; v = e + 1) {
        long st = number(v, 400, 599, &e);
        if (st < 0 || o->nfailon == PX_FAILON_MAX || (e != ve && *e != ','))
            return -1;
        o->failon[o->nfailon++] = (int)st;
        if (e == ve)
            return 0;
    }
}

/* balance=rr|least|hash|hash:Field */
static int balance_parse(px_popts_t *o, const char *v, const char *ve)
{
    size_t n = (size_t)(ve - v);
    if (n == 2 && !memcmp(v, "rr", 2))
        return o->balance = BAL_RR, 0;
    if (n == 5 && !memcmp(v, "least", 5))
        return o->balance = BAL_LEAST, 0;
    if (n < 4 || memcmp(v, "hash", 4) || (n > 4 && v[4] != ':'))
        return -1;
    o->balance = BAL_HASH;
    if (n == 4)
        return 0;
    if (n - 5 == 0 || n - 5 >= sizeof o->hash_field)
        return -1;
    for (const char *c = v + 5; c < ve; c++)
        if (!strchr("!#$%&'*+-.^_`|~", *c) && !(*c >= '0' && *c <= '9') &&
            !((*c | 32) >= 'a' && (*c | 32) <= 'z'))
            return -1; /* a field name is a token (RFC 9110 5.1) */
    memcpy(o->hash_field, v + 5, n - 5);
    o->hash_field[n - 5] = 0;
    return 0;
}

/* check=/path, expect=200 or 200-399. */
static int check_parse(px_popts_t *o, const char *k, size_t kl, const char *v, const char *ve)
{
    size_t n = (size_t)(ve - v);
    if (kl == 5 && !memcmp(k, "check", 5)) {
        if (!n || (*v != '/' && (n != 4 || memcmp(v, "grpc", 4))) || n >= sizeof o->check)
            return -1;
        for (const char *c = v; c < ve; c++)
            if ((unsigned char)*c <= ' ' || *c == 127)
                return -1;
        memcpy(o->check, v, n);
        o->check[n] = 0;
        return 0;
    }
    const char *e;
    long lo = number(v, 100, 599, &e), hi = lo;
    if (lo >= 0 && *e == '-')
        hi = number(e + 1, lo, 599, &e);
    if (lo < 0 || hi < 0 || e != ve)
        return -1;
    o->expect_lo = (int)lo, o->expect_hi = (int)hi;
    return 0;
}

/* name=api.internal: a DNS name (letters, digits, - and ., a * label first). */
static int name_parse(px_popts_t *o, const char *v, const char *ve)
{
    size_t n = (size_t)(ve - v);
    if (!n || n >= sizeof o->name || *v == '.' || *v == '-')
        return -1;
    for (const char *c = v; c < ve; c++)
        if (!(*c >= '0' && *c <= '9') && !((*c | 32) >= 'a' && (*c | 32) <= 'z') &&
            *c != '-' && *c != '.' && (*c != '*' || c != v))
            return -1;
    memcpy(o->name, v, n);
    o->name[n] = 0;
    return 0;
}

/* One key=value at s..se into o.  0, or -1 with *why. */
static int option_parse(px_popts_t *o, const char *s, const char *se, const char **why)
{
    const char *eq = memchr(s, '=', (size_t)(se - s)), *v = eq ? eq + 1 : se, *e;
    size_t kl = eq ? (size_t)(eq - s) : 0;
    *why = "an unknown pool option (balance, fails, window, down, failon, tries, slowstart, "
           "check, interval, expect, fall, rise, timeout, streams, name)";
    if (!eq)
        return -1;
    for (size_t i = 0; i < sizeof numeric / sizeof numeric[0]; i++) {
        if (strlen(numeric[i].key) != kl || memcmp(numeric[i].key, s, kl))
            continue;
        long x = number(v, numeric[i].lo, numeric[i].hi, &e);
        *why = "a pool option's number is out of its range (gatling.8, POOLS)";
        if (x < 0 || e != se)
            return -1;
        *(int *)((char *)o + numeric[i].off) = (int)x;
        return 0;
    }
    if (kl == 7 && !memcmp(s, "balance", 7)) {
        *why = "balance= is rr, least, hash or hash:Field-Name";
        return balance_parse(o, v, se);
    }
    if (kl == 6 && !memcmp(s, "failon", 6)) {
        *why = "failon= is none or statuses 400-599, comma-separated (at most 8)";
        return failon_parse(o, v, se);
    }
    if (kl == 4 && !memcmp(s, "name", 4)) {
        *why = "name= is a DNS name (at most 253 bytes of letters, digits, - and .)";
        return name_parse(o, v, se);
    }
    if ((kl == 5 && !memcmp(s, "check", 5)) || (kl == 6 && !memcmp(s, "expect", 6))) {
        *why = "check= is an absolute path (printable, at most 255 bytes) or grpc; expect= a "
               "status or a range, 100-599";
        return check_parse(o, s, kl, v, se);
    }
    return -1;
}

/* [F/|S/|h2c/|h2/] at *s: the protocol. */
static int kind_of(const char **s)
{
    int k = PX_HTTP;
    if (((*s)[0] == 'F' || (*s)[0] == 'S') && (*s)[1] == '/') {
        k = (*s)[0] == 'F' ? PX_FCGI : PX_SCGI;
        *s += 2;
    } else if (!strncmp(*s, "h2c/", 4)) {
        k = PX_H2C;
        *s += 4;
    } else if (!strncmp(*s, "h2/", 3)) {
        k = PX_H2;
        *s += 3;
    }
    return k;
}

int px_kind_parse(const char **s)
{
    return kind_of(s);
}

int px_pool_parse(const char *def, px_pooldef_t *pd, const char **why)
{
    const char *s = def, *e;
    memset(pd, 0, sizeof *pd);
    px_popts_default(&pd->o);
    size_t nl = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-");
    *why = "not NAME=backends: a name of a-z 0-9 _ - (at most 32), then =";
    if (!nl || nl > 32 || s[nl] != '=')
        return -1;
    memcpy(pd->name, s, nl);
    s += nl + 1;
    pd->kind = kind_of(&s);
    if (!strncmp(s, "file:", 5)) {
        e = s + 5 + strcspn(s + 5, ";");
        *why = "file: needs an absolute path (at most 1023 bytes, no ;)";
        if (s[5] != '/' || e - (s + 5) >= (long)sizeof pd->file || e[-1] == '/')
            return -1;
        memcpy(pd->file, s + 5, (size_t)(e - (s + 5)));
    } else if (px_list_parse(s, 0, pd->m, &pd->n, &e, why) < 0) {
        return -1;
    }
    for (s = e; *s == ';'; s = e) {
        e = s + 1 + strcspn(s + 1, ";");
        if (option_parse(&pd->o, s + 1, e, why) < 0)
            return -1;
    }
    *why = "check=grpc (grpc.health.v1.Health/Check) is for h2c/ and h2/ pools";
    if (!strcmp(pd->o.check, "grpc") && !PX_IS_H2(pd->kind))
        return -1;
    *why = "name= (the name a backend's certificate is verified for) is for h2/ pools";
    if (pd->o.name[0] && pd->kind != PX_H2)
        return -1;
    *why = "an option is ;key=value";
    return *s ? -1 : 0;
}

int px_pool_dir_open(const px_pooldef_t *pd, char *why, size_t n)
{
    char dir[sizeof pd->file];
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(pd->file, '/') - pd->file + 1), pd->file);
    /* root walks to it by privfs's rules: a user's symbolic link on the way is not followed */
    return pfs_walk_dir(dir, 0, -1, -1, NULL, why, n);
}

/* (proxy_int.h) */
char *px_list_read(int dirfd, const char *path, int64_t *mtime, char *why, size_t wn)
{
    const char *base = strrchr(path, '/') + 1;
    struct stat st;
    char *text = NULL;
    int fd = pfs_open_file_at(dirfd, base, PFS_READ, &st, why, wn), err = 0;
    if (fd < 0)
        return NULL;
    if (st.st_size >= 65536)
        err = EFBIG;
    else if ((int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == *mtime)
        err = 0; /* unchanged: not read again */
    else if (!(text = malloc((size_t)st.st_size + 1)))
        err = ENOMEM;
    if (text) {
        ssize_t n = pread(fd, text, (size_t)st.st_size, 0);
        err = n < 0 ? errno : 0;
        if (n < 0) {
            free(text);
            text = NULL;
        } else {
            text[n] = 0;
            *mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
    }
    close(fd);
    errno = err;
    return text;
}


int proxy_open(const config_t *cfg, proc_t *p, int quiet)
{
    px_pooldef_t *pd = malloc(sizeof *pd);
    const char *why;
    int rc = pd ? 0 : -1;
    for (int i = 0; pd && i < cfg->npools && !rc; i++) {
        if (px_pool_parse(cfg->pool_def[i], pd, &why) < 0 || !pd->file[0])
            continue;
        char why_dir[160] = "";
        if ((p->pool_dirfd[i] = px_pool_dir_open(pd, why_dir, sizeof why_dir)) < 0) {
            if (!quiet)
                fprintf(stderr, "gatling: --pool %s: %s: %s\n", pd->name, pd->file,
                        *why_dir ? why_dir : strerror(errno));
            rc = -1;
        }
    }
    free(pd);
    return rc < 0 ? rc : px_tls_load(cfg, &p->proxy_tls, quiet);
}

/* ---- which backend ---- */

/* m's weight now, in hundredths: slow start grows it from a tenth. */
static int64_t weight_now(const px_member_t *m, int64_t now)
{
    int64_t w = (int64_t)m->d.weight * 100, ss = (int64_t)m->pool->o.slowstart * 1000;
    if (ss && m->up_since && now - m->up_since < ss) {
        int64_t r = w * (now - m->up_since) / ss;
        w = r > w / 10 ? r : w / 10;
    }
    return w;
}

static int usable(const px_member_t *m, int64_t now)
{
    return !m->draining && !m->check_down &&
           (!m->down || (now >= m->down_until && !m->probing));
}

/* Smooth weighted round robin (as nginx's): each candidate gains its
   weight, the largest wins and pays the sum. */
static px_member_t *round_robin(px_member_t **c, int n, int64_t now)
{
    int64_t total = 0;
    px_member_t *best = NULL;
    for (int i = 0; i < n; i++) {
        int64_t w = weight_now(c[i], now);
        c[i]->cw += w;
        total += w;
        if (!best || c[i]->cw > best->cw)
            best = c[i];
    }
    best->cw -= total;
    return best;
}

/* The fewest requests outstanding per weight; ties in round robin order. */
static px_member_t *least(px_member_t **c, int n, int64_t now)
{
    px_member_t *tie[POOL_MEMBERS];
    int nt = 0;
    for (int i = 0; i < n; i++) {
        int64_t a = (int64_t)c[i]->outstanding * (nt ? weight_now(tie[0], now) : 1),
                b = nt ? (int64_t)tie[0]->outstanding * weight_now(c[i], now) : 0;
        if (nt && a > b)
            continue;
        if (nt && a < b)
            nt = 0;
        tie[nt++] = c[i];
    }
    return round_robin(tie, nt, now);
}

/* splitmix64's finalizer: every bit of x moves every bit of the result. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27, x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Rendezvous (highest random weight) hashing: each backend scores the key,
   the highest wins; weighted as weight / -ln(u).  A backend that comes or
   goes moves only the keys it wins. The key is fixed (not random): every
   loop and every restart must agree. */
static px_member_t *by_hash(px_member_t **c, int n, const char *key, size_t kl)
{
    static const uint8_t k[16] = "gatling-pool-hrw";
    uint64_t hk = siphash24(k, key, kl);
    px_member_t *best = NULL;
    double top = -1;
    for (int i = 0; i < n; i++) {
        uint64_t h = mix(hk ^ siphash24(k, c[i]->d.label, strlen(c[i]->d.label)));
        double u = ((double)(h >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
        double score = c[i]->d.weight / -log(u);
        if (score > top)
            top = score, best = c[i];
    }
    return best;
}

int px_any(const px_pool_t *p, uint64_t tried, int64_t now)
{
    for (int i = 0; i < p->n; i++)
        if (!(tried >> p->m[i]->slot & 1) && usable(p->m[i], now))
            return 1;
    return 0;
}

px_member_t *px_pick(px_pool_t *p, uint64_t tried, const char *key, size_t kl, int64_t now)
{
    for (int backup = 0; backup < 2; backup++) {
        px_member_t *c[POOL_MEMBERS];
        int n = 0;
        for (int i = 0; i < p->n; i++) {
            px_member_t *m = p->m[i];
            if (m->d.backup == backup && !(tried >> m->slot & 1) && usable(m, now))
                c[n++] = m;
        }
        if (n)
            return p->o.balance == BAL_LEAST  ? least(c, n, now)
                   : p->o.balance == BAL_HASH ? by_hash(c, n, key, kl)
                                              : round_robin(c, n, now);
    }
    return NULL;
}

/* ---- health ---- */

/* One line in the error log about m. */
static void say(proxy_t *px, const px_member_t *m, const char *what, const char *why)
{
    char line[512];
    snprintf(line, sizeof line, "proxy: backend %s of pool %s: %s%s%s", m->d.label, m->pool->name,
             what, why ? ": " : "", why ? why : "");
    elog_note(&px->site->elog, gio_wallclock(px->site->loop), line);
}

/* Members that count: a lone backend is never taken out (nginx does the
   same): with nothing to fail over to, its own errors say more. */
static int alone(const px_pool_t *p)
{
    int n = 0;
    for (int i = 0; i < p->n; i++)
        n += !p->m[i]->draining;
    return n <= 1;
}

void px_failed(proxy_t *px, px_member_t *m, int probe, int64_t now, const char *why)
{
    const px_popts_t *o = &m->pool->o;
    if (probe && m->down) { /* the one request that tried it failed: out again */
        m->probing = 0;
        m->down_until = now + o->down * 1000LL;
        say(px, m, "still down", why);
        return;
    }
    if (m->down || alone(m->pool))
        return;
    if (!m->fails || now - m->fail_since >= o->window * 1000LL)
        m->fails = 0, m->fail_since = now;
    if (++m->fails < (unsigned)o->fails)
        return;
    m->down = 1;
    m->probing = 0;
    m->down_until = now + o->down * 1000LL;
    px->site->stats.backend[m->slot][BACKEND_DOWNS]++;
    char n[160];
    snprintf(n, sizeof n, "down for %d s after %u failures in %d s", o->down, m->fails, o->window);
    say(px, m, n, why);
}

void px_ok(proxy_t *px, px_member_t *m, int probe, int64_t now)
{
    if (!probe || !m->down)
        return;
    m->down = m->probing = 0;
    m->fails = 0;
    m->up_since = now;
    say(px, m, m->pool->o.slowstart ? "up again (slow start)" : "up again", NULL);
}

void px_check_result(proxy_t *px, px_member_t *m, int ok, int64_t now, const char *why)
{
    const px_popts_t *o = &m->pool->o;
    if (ok) {
        m->check_bad = 0;
        if (m->check_down && ++m->check_good >= (unsigned)o->rise) {
            m->check_down = 0;
            m->up_since = now;
            say(px, m, "checks pass: up", NULL);
        }
        return;
    }
    px->site->stats.backend[m->slot][BACKEND_CHECKS_FAILED]++;
    m->check_good = 0;
    if (!m->check_down && ++m->check_bad >= (unsigned)o->fall) {
        m->check_down = 1;
        px->site->stats.backend[m->slot][BACKEND_DOWNS]++;
        say(px, m, "checks fail: down", why);
    }
}

int px_failon(const px_pool_t *p, int status)
{
    for (int i = 0; i < p->o.nfailon; i++)
        if (p->o.failon[i] == status)
            return 1;
    return 0;
}

const char *px_state(const px_member_t *m, int64_t now)
{
    return m->draining                                  ? "draining"
           : m->check_down                              ? "down"
           : m->down                                    ? (m->probing ? "probing" : "down")
           : m->pool->o.slowstart && m->up_since &&
                   now - m->up_since < m->pool->o.slowstart * 1000LL
               ? "slowstart"
               : "up";
}

int px_up(const px_member_t *m)
{
    return !m->draining && !m->check_down && !m->down;
}

/* ---- members ---- */

px_member_t *px_member_new(proxy_t *px, px_pool_t *p, const px_mdef_t *d, int64_t up_since)
{
    int slot = 0;
    while (slot < CONFIG_BACKENDS && px->slot[slot])
        slot++;
    if (slot == CONFIG_BACKENDS || p->n == POOL_MEMBERS)
        return NULL;
    px_member_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->d = *d;
    m->pool = p;
    m->slot = slot;
    m->up_since = up_since;
    px->slot[slot] = m;
    memset(px->site->stats.backend[slot], 0, sizeof px->site->stats.backend[slot]);
    memset(px->site->stats.be_duration[slot], 0, sizeof px->site->stats.be_duration[slot]);
    px->site->stats.be_duration_us[slot] = 0;
    p->m[p->n++] = m;
    return m;
}

void px_member_drop(proxy_t *px, px_member_t *m)
{
    px_pool_t *p = m->pool;
    for (int i = 0; i < p->n; i++)
        if (p->m[i] == m) {
            memmove(p->m + i, p->m + i + 1, sizeof p->m[0] * (size_t)(p->n - i - 1));
            p->n--;
            break;
        }
    px->slot[m->slot] = NULL;
    free(m);
}
