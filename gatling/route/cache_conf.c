/* A virtual host's .cache file: see cache_conf.h. */
#include "cache_conf.h"
#include "handlers/host.h"
#include "handlers/target.h"
#include "site/nets.h"
#include "site/optdef.h"
#include "site/vhost.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static void conf_clear(cache_conf_t *k)
{
    for (int i = 0; i < k->nttl; i++)
        if (k->ttl[i].has_re)
            regfree(&k->ttl[i].re);
    memset(k, 0, sizeof *k);
}

/* "secs": 0..31536000, else -1. */
static int64_t secs(const char *s)
{
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (e == s || *e || errno || v < 0 || v > 31536000)
        return -1;
    return v;
}

/* "ttl SECS [REGEX]": NULL, or why not. */
static const char *ttl_line(cache_conf_t *k, char *w[3], int nw, int64_t v)
{
    if (v < 0)
        return "ttl: not a number of seconds (0-31536000)";
    if (k->nttl >= CACHE_CONF_TTLS)
        return "ttl: too many ttl lines";
    k->ttl[k->nttl].secs = v;
    if (nw == 3) {
        if (!opt_regex_bounded(w[2], OPT_REGEX_NODES) || /* regcomp's blow-up */
            regcomp(&k->ttl[k->nttl].re, w[2], REG_EXTENDED | REG_NOSUB))
            return "ttl: not a POSIX extended regular expression (or too large)";
        k->ttl[k->nttl].has_re = 1;
    }
    k->nttl++;
    return NULL;
}

/* One line's words: "ttl 1 [regex]", "grace 10", "errors 5", "lock 5",
   "cookie NAME", "purge NET".  NULL, or why not (the file is refused as a
   whole). */
static const char *conf_line(cache_conf_t *k, char *w[3], int nw)
{
    int64_t v = nw >= 2 ? secs(w[1]) : -1;
    static const char *const known[] = {"ttl", "grace", "errors", "lock", "cookie", "purge"};
    size_t i = 0;
    while (i < sizeof known / sizeof *known && strcmp(w[0], known[i]))
        i++;
    if (i == sizeof known / sizeof *known)
        return "not a setting (ttl, grace, errors, lock, cookie, purge: gatling.8, "
               "RESPONSE CACHE)";
    if (i == 0 && nw >= 2)
        return ttl_line(k, w, nw, v);
    if (nw != 2)
        return "one value after the setting's name";
    if (i == 1 || i == 2) /* grace, errors */
        return v < 0 ? "not a number of seconds (0-31536000)"
                     : (*(i == 1 ? &k->grace : &k->errors) = v, NULL);
    if (i == 3)
        return v < 1 || v > 60 ? "lock: not a number of seconds (1-60)" : (k->lock = v, NULL);
    if (i == 4) {
        if (k->ncookies >= CACHE_CONF_COOKIES || strlen(w[1]) >= sizeof k->cookie[0])
            return "cookie: too many cookies, or the name is too long";
        strcpy(k->cookie[k->ncookies++], w[1]);
        return NULL;
    }
    if (k->nnets >= CACHE_CONF_NETS || net_parse(w[1], &k->net[k->nnets]) < 0)
        return "purge: not an address or addr/bits (or too many)";
    k->nnets++;
    return NULL;
}

int cache_conf_parse(cache_conf_t *k, char *text, size_t n, int *bad_line, const char **why)
{
    memset(k, 0, sizeof *k);
    k->grace = CACHE_GRACE_DEFAULT;
    k->lock = CACHE_LOCK_DEFAULT;
    int line = 0;
    for (char *p = text, *end = text + n; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        *le = 0;
        line++;
        char *hash = strchr(p, '#');
        if (hash)
            *hash = 0;
        char *w[4];
        int nw = 0;
        for (char *t = strtok(p, " \t\r"); t && nw < 4; t = strtok(NULL, " \t\r"))
            w[nw++] = t;
        const char *no = nw > 3 ? "more than three words" : nw ? conf_line(k, w, nw) : NULL;
        if (no) {
            *bad_line = line;
            if (why)
                *why = no;
            conf_clear(k);
            return -1;
        }
        p = le + 1;
    }
    return 0;
}

void cache_conf_free(cache_conf_t *k)
{
    conf_clear(k);
}

int64_t cache_conf_ttl(const cache_conf_t *k, const char *path)
{
    for (int i = 0; i < k->nttl; i++)
        if (!k->ttl[i].has_re || !regexec(&k->ttl[i].re, path, 0, NULL, 0))
            return k->ttl[i].secs;
    return 0;
}

int cache_conf_purger(const cache_conf_t *k, const struct sockaddr *sa)
{
    return net_is_loopback(sa) || net_contains(k->net, k->nnets, sa);
}

int cache_conf_cookie_ok(const cache_conf_t *k, const char *v, size_t n)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == ';'))
            i++;
        size_t s = i;
        while (i < n && v[i] != '=' && v[i] != ';')
            i++;
        size_t e = i;
        while (e > s && v[e - 1] == ' ')
            e--;
        while (i < n && v[i] != ';')
            i++;
        if (e == s)
            continue;
        int ok = 0;
        for (int j = 0; j < k->ncookies && !ok; j++)
            ok = strlen(k->cookie[j]) == e - s && !memcmp(k->cookie[j], v + s, e - s);
        if (!ok)
            return 0;
    }
    return 1;
}

/* ---- the verdicts per vhost ---- */

/* Read and parse the .cache in dirfd (dir: its name from the root) if it
   changed since v last read it. */
static void conf_read(cache_vh_t *v, int dirfd, const char *dir, site_t *s)
{
    struct stat st;
    int fd = openat(dirfd, ".cache", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        if (v->on)
            cache_conf_free(&v->conf);
        v->on = v->bad = 0;
        return;
    }
    if ((v->on || v->bad) && st.st_ino == v->ino && st.st_dev == v->dev &&
        st.st_size == v->size && st.st_mtim.tv_sec == v->mtime.tv_sec &&
        st.st_mtim.tv_nsec == v->mtime.tv_nsec) {
        close(fd); /* read already: good, or bad and said so once */
        return;
    }
    char buf[CACHE_CONF_FILE_MAX + 1];
    ssize_t n = st.st_size <= CACHE_CONF_FILE_MAX ? read(fd, buf, CACHE_CONF_FILE_MAX) : -1;
    close(fd);
    if (v->on)
        cache_conf_free(&v->conf);
    v->on = 0;
    v->bad = 0;
    v->ino = st.st_ino, v->dev = st.st_dev, v->size = st.st_size, v->mtime = st.st_mtim;
    int line = 0;
    const char *no = "over 8 KiB or unreadable";
    if (n < 0 || cache_conf_parse(&v->conf, buf, (size_t)n, &line, &no) < 0) {
        char why[PATH_MAX + VHOST_NAME_MAX + 256], at[16] = "";
        if (n >= 0)
            snprintf(at, sizeof at, ":%d", line);
        /* the root as the admin knows it: -c's name after a chroot */
        const char *root = s->root_real && strcmp(s->root_real, "/") ? s->root_real
                           : s->cfg->root                             ? s->cfg->root
                                                                      : "";
        snprintf(why, sizeof why, "%s/%s%s.cache%s: %s: the cache is off for this site until "
                 "the file is mended", root, dir, *dir ? "/" : "", at, no);
        elog_text(&s->elog, gio_wallclock(s->loop), "cache", why);
        v->bad = 1;
        return;
    }
    v->on = 1;
}

const cache_conf_t *cache_conf_of(cache_vh_t *tab, site_t *s, exchange_t *ex,
                                  const cache_vh_t **vh)
{
    char name[VHOST_NAME_MAX];
    if (target_vhost(s, ex, name) < 0)
        return NULL;
    unsigned h = 5381;
    for (const char *c = name; *c; c++)
        h = h * 33 + (unsigned char)*c;
    cache_vh_t *v = &tab[h % CACHE_CONF_VHOSTS];
    int64_t now = gio_wallclock(s->loop);
    if (v->second != now || strcmp(v->name, name)) {
        if (strcmp(v->name, name)) { /* another vhost had the slot */
            if (v->on)
                cache_conf_free(&v->conf);
            v->on = v->bad = 0;
            memcpy(v->name, name, sizeof name);
        }
        const host_t *hp = host_of(ex); /* the route's site (handlers/host.h) */
        int which = host_which(hp), fd = hp ? hp->dirfd : -1; /* the host's: not closed */
        if (fd >= 0) {
            v->which = which;
            conf_read(v, fd, vhost_dir(which, name), s);
        } else if (v->on) {
            cache_conf_free(&v->conf);
            v->on = 0;
        }
        v->second = now;
    }
    *vh = v;
    return v->on ? &v->conf : NULL;
}

void cache_conf_table_free(cache_vh_t *tab)
{
    for (int i = 0; i < CACHE_CONF_VHOSTS; i++)
        if (tab[i].on)
            cache_conf_free(&tab[i].conf), tab[i].on = 0;
}
