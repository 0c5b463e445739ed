/* Front controllers: "the file if it exists, else this script" for FastCGI
   and SCGI rules (nginx's try_files $uri $uri/ /index.php, Caddy's
   php_fastcgi).  The script comes from a rule's front= (-P) or from the
   site's .proxy ("front /index.php", "front off"), read again when it
   changes, looked at once a second per vhost.  See proxy_int.h. */
#include "proxy_int.h"
#include "proxy_front.h"
#include "target.h"
#include "cgienv.h"
#include "hstate.h"
#include "site/fs.h"
#include "site/optdef.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a site's .proxy says of its front controller. */
enum { FRONT_UNSAID, FRONT_SCRIPT, FRONT_OFF };

/* One vhost's verdict: what its .proxy says. */
typedef struct px_front_vh {
    char name[VHOST_NAME_MAX];
    int which;      /* VHOST_*: the directory that serves it (the switch's) */
    int64_t second; /* wall clock of the verdict; 0: none */
    int said;       /* FRONT_*: its .proxy's word */
    char front[PX_FRONT_MAX];
    struct stat st; /* the .proxy last read (ino, size, mtime): read again when it changes */
} px_front_vh_t;

/* Is s[0..n) a script path a front controller may name: "/index.php",
   "/app/front.php" (letters, digits, - _ . ~ +; no empty or dot-first
   segment, not ending in '/', shorter than PX_FRONT_MAX)? */
static int script_ok(const char *s, size_t n)
{
    if (n < 2 || n >= PX_FRONT_MAX || s[0] != '/' || s[n - 1] == '/')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '/' && (s[i + 1] == '/' || s[i + 1] == '.'))
            return 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '/' || c == '-' || c == '_' || c == '.' || c == '~' || c == '+'))
            return 0;
    }
    return 1;
}

const char *px_front_prefix(const char *s, char *front, size_t cap, const char **why)
{
    front[0] = 0;
    if (strncmp(s, "front=", 6))
        return s;
    const char *semi = strchr(s + 6, ';');
    size_t n = semi ? (size_t)(semi - s - 6) : 0;
    *why = "front=SCRIPT; names the front controller's script, a path such as /index.php "
           "(letters, digits, - _ . ~ +; at most 255 bytes), before the rule";
    if (!semi || !script_ok(s + 6, n) || n >= cap)
        return NULL;
    memcpy(front, s + 6, n);
    front[n] = 0;
    return semi + 1;
}

int px_rule_parse(const char *s, px_rule_t *r, px_pooldef_t *pd, char *name, size_t cap,
                  const char **why)
{
    const char *re;
    memset(r, 0, sizeof *r);
    memset(pd, 0, sizeof *pd);
    px_popts_default(&pd->o);
    if (!(s = px_front_prefix(s, r->front, sizeof r->front, why)))
        return -1;
    if (*s == '@') {
        size_t n = strcspn(s + 1, "/");
        *why = "@NAME/pattern names a --pool (a-z 0-9 _ -, at most 32)";
        if (!n || n >= cap || n > 32 || !s[1 + n])
            return -1;
        memcpy(name, s + 1, n), name[n] = 0;
        re = s + 2 + n;
    } else {
        name[0] = 0;
        pd->kind = px_kind_parse(&s);
        if (px_list_parse(s, 1, pd->m, &pd->n, &re, why) < 0)
            return -1;
    }
    *why = "the pattern is empty, not a POSIX extended regular expression, or one whose "
           "repetitions (stacked or nested + and {m,n}) would take regcomp too long";
    if (!*re || !opt_regex_bounded(re, OPT_REGEX_NODES) ||
        regcomp(&r->re, re, REG_EXTENDED | REG_NOSUB))
        return -1;
    cgienv_exts(re, r->ext, sizeof r->ext); /* (too many: those that fit, px_claims) */
    return px_front_check(r, name[0] ? PX_FCGI : pd->kind, why); /* a pool's: pools_init's */
}

int px_rule_runs(const char *rule, const char *script)
{
    px_rule_t r;
    px_pooldef_t pd;
    char name[40];
    const char *why;
    if (px_rule_parse(rule, &r, &pd, name, sizeof name, &why) < 0)
        return 0;
    int runs = px_front_takes(&r, script);
    regfree(&r.re);
    return runs;
}

int px_front_takes(const px_rule_t *r, const char *script)
{
    size_t n = strlen(script);
    return (r->kind == PX_FCGI || r->kind == PX_SCGI) &&
           cgienv_script(&r->re, 1, script, n, CGIENV_AT_END) == n;
}

int px_front_check(px_rule_t *r, int kind, const char **why)
{
    r->kind = kind;
    *why = "front= needs a FastCGI or SCGI rule (F/, S/) whose expression runs the script "
           "(front=/index.php;F/unix:/run/php/php-fpm.sock:\\.php$)";
    if (r->front[0] && !px_front_takes(r, r->front)) {
        regfree(&r->re);
        return -1;
    }
    return 0;
}

int px_front_pool_check(proxy_t *px, const px_rule_t *r, const char *rule)
{
    if (r->front[0] && !px_front_takes(r, r->front)) {
        fprintf(stderr, "gatling: -P %s: front= needs a FastCGI or SCGI pool\n", rule);
        return -1;
    }
    px->front_on |= r->kind == PX_FCGI || r->kind == PX_SCGI;
    return 0;
}

int px_front_config_check(const config_t *cfg, const char *rule, px_pooldef_t *pd)
{
    char front[PX_FRONT_MAX];
    const char *why, *s = px_front_prefix(rule, front, sizeof front, &why);
    if (!s || !front[0] || *s != '@')
        return 0; /* no front=, or the rule's own kind was checked (px_rule_parse) */
    size_t n = strcspn(s + 1, "/");
    for (int i = 0; i < cfg->npools; i++)
        if (!strncmp(cfg->pool_def[i], s + 1, n) && cfg->pool_def[i][n] == '=' &&
            px_pool_parse(cfg->pool_def[i], pd, &why) == 0 && pd->kind != PX_FCGI &&
            pd->kind != PX_SCGI) {
            fprintf(stderr, "gatling: -P %s: front= needs a FastCGI or SCGI pool\n", rule);
            return -1;
        }
    return 0;
}

/* One line's words of a .proxy: "front SCRIPT" or "front off".  NULL, or why not. */
static const char *conf_line(char *w[2], int nw, int *said, char *front)
{
    if (strcmp(w[0], "front"))
        return "not a setting (front SCRIPT, front off: gatling.8, REVERSE PROXY)";
    if (nw != 2)
        return "front: one value, a script (/index.php) or off";
    if (!strcmp(w[1], "off")) {
        *said = FRONT_OFF;
        return NULL;
    }
    if (!script_ok(w[1], strlen(w[1])))
        return "front: not a script's path (/index.php: letters, digits, - _ . ~ +, "
               "at most 255 bytes)";
    *said = FRONT_SCRIPT;
    memcpy(front, w[1], strlen(w[1]) + 1); /* script_ok: shorter than PX_FRONT_MAX */
    return NULL;
}

int px_front_conf_parse(char *text, size_t n, char *front, int *line, const char **why)
{
    int said = FRONT_UNSAID;
    *line = 0;
    front[0] = 0;
    for (char *p = text, *end = text + n; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        *le = 0;
        ++*line;
        char *hash = strchr(p, '#');
        if (hash)
            *hash = 0;
        char *w[3], *save = NULL;
        int nw = 0;
        for (char *t = strtok_r(p, " \t\r", &save); t && nw < 3;
             t = strtok_r(NULL, " \t\r", &save))
            w[nw++] = t;
        const char *no = nw > 2 ? "more than two words"
                         : nw   ? conf_line(w, nw, &said, front)
                                : NULL;
        if (no) {
            *why = no;
            front[0] = 0;
            return -1;
        }
        p = le + 1;
    }
    return said;
}

int proxy_front_check_file(const config_t *cfg, int dirfd, const char *path)
{
    char text[PX_FRONT_FILE_MAX + 1], front[PX_FRONT_MAX];
    ssize_t n = fs_read_small(dirfd, ".proxy", text, PX_FRONT_FILE_MAX, 0);
    if (n == -2)
        return 0; /* none, or the switch alone where it cannot be read: said at start */
    if (n < 0) {
        fprintf(stderr, "gatling: %s/.proxy: over %d bytes, not a file or unreadable\n", path,
                PX_FRONT_FILE_MAX);
        return -1;
    }
    int line, runs = 0;
    const char *why = "";
    int said = px_front_conf_parse(text, (size_t)n, front, &line, &why);
    if (said < 0) {
        fprintf(stderr, "gatling: %s/.proxy:%d: %s (the site would have no front "
                "controller)\n", path, line, why);
        return -1;
    }
    for (int i = 0; said == 1 && i < cfg->nproxy_rules; i++)
        runs |= px_rule_runs(cfg->proxy_rule[i], front);
    if (said == 1 && !runs) {
        fprintf(stderr, "gatling: %s/.proxy:%d: front %s: no FastCGI or SCGI rule (-P) runs "
                "it as a script (the site would have no front controller)\n", path, line,
                front);
        return -1;
    }
    return 0;
}

/* The root as the admin knows it, for the error log: -c's name after a chroot. */
static const char *root_name(const site_t *s)
{
    return s->root_real && strcmp(s->root_real, "/") ? s->root_real
           : s->cfg->root                             ? s->cfg->root
                                                      : "";
}

/* rel (no leading '/'; "" for the directory itself) below t's vhost
   directory, as a path from the document root into out[cap] ("." for the
   root itself).  0, or -1 when it does not fit. */
static int below(const px_target_t *t, const char *rel, char *out, size_t cap)
{
    const char *dir = vhost_dir(t->which, t->vhost);
    int k = snprintf(out, cap, "%s%s%s", dir, *dir && *rel ? "/" : "", *dir || *rel ? rel : ".");
    return k > 0 && (size_t)k < cap ? 0 : -1;
}

/* Is the .proxy v last read (v->st) the one st says? */
static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Read t's vhost's .proxy again if it changed: its word on the front
   controller, into v. */
static void conf_read(proxy_t *px, px_front_vh_t *v, const px_target_t *t)
{
    site_t *s = px->site;
    struct stat st;
    char path[VHOST_NAME_MAX + 16];
    int fd = below(t, ".proxy", path, sizeof path) < 0 ? -1
             : openat(s->rootfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        if (fd >= 0)
            close(fd);
        v->said = FRONT_UNSAID; /* none, empty, or not for us to read: the switch alone */
        memset(&v->st, 0, sizeof v->st);
        return;
    }
    if (same_file(&st, &v->st)) {
        close(fd); /* read already: good, or bad and said so once */
        return;
    }
    char buf[PX_FRONT_FILE_MAX + 1];
    ssize_t n = st.st_size <= PX_FRONT_FILE_MAX ? read(fd, buf, PX_FRONT_FILE_MAX) : -1;
    close(fd);
    v->st = st;
    int line = 0;
    const char *no = "over 4 KiB or unreadable";
    int said = n < 0 ? -1 : px_front_conf_parse(buf, (size_t)n, v->front, &line, &no);
    v->said = said < 0 ? FRONT_OFF : said;
    if (said < 0) {
        char why[PATH_MAX + VHOST_NAME_MAX + 256], at[16] = "";
        if (n >= 0)
            snprintf(at, sizeof at, ":%d", line);
        snprintf(why, sizeof why, "%s/%s%s: %s: no front controller for this site until the "
                 "file is mended", root_name(s), path, at, no);
        elog_text(&s->elog, gio_wallclock(s->loop), "proxy", why);
    }
}

/* t's vhost's verdict (t->which from the .proxy switch's), made again once
   a second. */
static px_front_vh_t *verdict(proxy_t *px, const px_target_t *t)
{
    site_t *s = px->site;
    if (!px->front_vh && !(px->front_vh = calloc(PROXY_VHOSTS, sizeof(px_front_vh_t))))
        return NULL;
    unsigned h = 5381;
    for (const char *c = t->vhost; *c; c++)
        h = h * 33 + (unsigned char)*c;
    px_front_vh_t *v = &px->front_vh[h % PROXY_VHOSTS];
    int64_t now = gio_wallclock(s->loop);
    if (v->second == now && !strcmp(v->name, t->vhost) && v->which == t->which)
        return v;
    if (strcmp(v->name, t->vhost) || v->which != t->which) { /* another vhost had the slot */
        memset(v, 0, sizeof *v);
        memcpy(v->name, t->vhost, sizeof v->name);
        v->which = t->which;
    }
    v->second = now;
    conf_read(px, v, t);
    return v;
}

/* The first FastCGI or SCGI rule that runs script as a whole, or NULL. */
static px_rule_t *runner(proxy_t *px, const char *script)
{
    for (int i = 0; i < px->nrules; i++)
        if (px_front_takes(&px->rule[i], script))
            return &px->rule[i];
    return NULL;
}

/* Does rel (below t's vhost directory) name something?  1 with *st, 0
   (nothing: ENOENT, ENOTDIR), -1 (not for us to say: EACCES, too long). */
static int there(proxy_t *px, const px_target_t *t, const char *rel, struct stat *st)
{
    char path[VHOST_NAME_MAX + EX_PATH_CAP + PX_FRONT_MAX + 16];
    if (below(t, rel, path, sizeof path) < 0)
        return -1;
    if (fstatat(px->site->rootfd, path, st, 0) == 0)
        return 1;
    return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
}

/* The script of a directory's request (p ends in '/'), into out[cap]: 0
   with none (index.html is there: the files serve it), 1 with the
   directory's own copy of the front's name ("/wp-admin/index.php"), 2 with
   the front itself. */
static int dir_script(proxy_t *px, const px_target_t *t, const char *front, char *out,
                      size_t cap)
{
    const path_t *p = &t->p;
    const char *base = strrchr(front, '/') + 1; /* script_ok: it begins with '/' */
    struct stat st;
    int k = snprintf(out, cap, "%s%s", p->path + 1, "index.html");
    if (k > 0 && (size_t)k < cap && there(px, t, out, &st) == 1)
        return 0;
    k = snprintf(out, cap, "%s%s", p->path, base);
    if (k > 0 && (size_t)k < cap && there(px, t, out + 1, &st) == 1 && S_ISREG(st.st_mode))
        return 1;
    return 2;
}

/* Does t's path pass a closed directory (not world-searchable), itself
   included when it ends in '/'?  The files' 403 is the answer there. */
static int closed_way(proxy_t *px, const px_target_t *t)
{
    char rel[EX_PATH_CAP + 16];
    fs_at_t at = site_at(px->site, vhost_dir(t->which, t->vhost));
    int k = snprintf(rel, sizeof rel, "%s%s", t->p.path + 1,
                     t->p.path[t->p.len - 1] == '/' ? "index.html" : "");
    return k > 0 && (size_t)k < sizeof rel && !fs_public(&at, rel, -1, FS_LINK) &&
           errno == EACCES;
}

px_rule_t *px_front(proxy_t *px, exchange_t *ex, px_target_t *t)
{
    (void)ex;
    const px_front_vh_t *v = verdict(px, t);
    const char *front = NULL;
    if (!v || v->said == FRONT_OFF)
        return NULL;
    if (v->said == FRONT_SCRIPT)
        front = v->front;
    for (int i = 0; i < px->nrules && !front; i++)
        if (px->rule[i].front[0])
            front = px->rule[i].front;
    const path_t *p = &t->p;
    if (!front || path_hidden(p->path, p->len))
        return NULL; /* (a dotfile: the files' 404, there or not) */
    if (px->site->cfg->status_page &&
        (!strcmp(p->path, "/server-status") || !strcmp(p->path, "/metrics")))
        return NULL; /* -S's pages stay gatling's (route/status.c, after the producers) */
    struct stat st;
    const char *script = front;
    int is = there(px, t, p->path + 1, &st);
    if (is < 0 || closed_way(px, t))
        return NULL; /* not ours to say what is there (a closed directory: the files' 403) */
    if (is) {
        if (!S_ISDIR(st.st_mode) || p->path[p->len - 1] != '/')
            return NULL; /* a file, or a directory's 301: the files answer */
        int d = dir_script(px, t, front, t->script, sizeof t->script);
        if (!d)
            return NULL;
        if (d == 1 && runner(px, t->script))
            script = t->script;
    }
    px_rule_t *r = runner(px, script);
    if (r && script != t->script)
        memcpy(t->script, script, strlen(script) + 1); /* script_ok: < PX_FRONT_MAX */
    else if (!r)
        t->script[0] = 0;
    return r;
}

void px_front_free(proxy_t *px)
{
    free(px->front_vh);
    px->front_vh = NULL;
}

int px_claims(const site_t *site, const char *path, size_t n)
{
    const proxy_t *px = hstate(site, HSTATE_PROXY);
    for (int i = 0; px && i < px->nrules; i++) {
        const px_rule_t *r = &px->rule[i];
        if ((r->kind == PX_FCGI || r->kind == PX_SCGI) &&
            (cgienv_ext_in(r->ext, path, n) ||
             cgienv_script(&r->re, 1, path, n, CGIENV_AT_END) == n))
            return 1;
    }
    return 0;
}

int px_script_check(exchange_t *ex, const px_rule_t *r, const px_target_t *t)
{
    site_t *s = ex->site;
    if (r->kind != PX_FCGI && r->kind != PX_SCGI)
        return 0; /* an HTTP backend's paths are its URLs */
    size_t n = t->script[0] ? strlen(t->script) : cgienv_script(&r->re, 1, t->p.path,
                                                                  t->p.len, CGIENV_AT_END);
    const char *script = t->script[0] ? t->script : t->p.path;
    char rel[EX_PATH_CAP + PX_FRONT_MAX];
    if (!n || n > t->p.len + PX_FRONT_MAX) /* (not the rule's: never) */
        n = t->p.len, script = t->p.path;
    if (n >= sizeof rel)
        return 414;
    if (n <= 1)
        return 0; /* the site's directory itself */
    memcpy(rel, script + 1, n - 1), rel[n - 1] = 0;
    fs_at_t at = site_at(s, vhost_dir(t->which, t->vhost));
    int vfd = target_dir(ex, NULL); /* the host's (handlers/host.h): not closed */
    int fd = vfd < 0 ? -1 : fs_open_beneath(vfd, rel, site_root_check(s));
    int err = errno, st = 0;
    if (fd >= 0)
        st = fs_public(&at, rel, fd, FS_ANY) ? 0 : 403;
    else if (vfd < 0 || err == EMFILE || err == ENFILE || err == ENOMEM)
        st = 503;
    else if (err == ENOTDIR || err == ENAMETOOLONG)
        st = err == ENOTDIR ? 404 : 414;
    else if (err != ENOENT || (!fs_public(&at, rel, -1, FS_LINK) && errno == EACCES))
        st = 403; /* EACCES, EXDEV, ELOOP; a missing script behind a closed directory */
    if (fd >= 0)
        close(fd);
    if (st == 404 || st == 403) { /* (the line made only when it is logged) */
        char why[EX_PATH_CAP + PX_FRONT_MAX + 96];
        snprintf(why, sizeof why, "/%s: %s", rel, st == 404 ? "a script below a file "
                 "(PATH_INFO splits only at a script that is there): 404, not run"
                 : "a script behind a closed directory: 403, not run");
        site_error(s, "-P", 0, ex->peer, why);
    }
    return st;
}

void px_narrow_check(const config_t *cfg, const char *rule, const px_rule_t *r,
                     const char *pool, int kind)
{
    for (int i = 0; pool[0] && i < cfg->npools; i++) {
        size_t k = strlen(pool);
        px_pooldef_t *pd = strncmp(cfg->pool_def[i], pool, k) || cfg->pool_def[i][k] != '=' ?
                               NULL : malloc(sizeof *pd);
        const char *why;
        if (pd && px_pool_parse(cfg->pool_def[i], pd, &why) == 0)
            kind = pd->kind;
        free(pd);
    }
    if (kind != PX_FCGI && kind != PX_SCGI)
        return;
    for (const char *e = r->ext; *e;) {
        int w = (int)strcspn(e, "|");
        char p[PX_EXT_MAX + 32];
        int k = snprintf(p, sizeof p, "/any/where/x.%.*s", w, e);
        if (k > 0 && (size_t)k < sizeof p &&
            cgienv_script(&r->re, 1, p, (size_t)k, CGIENV_AT_END) != (size_t)k) {
            fprintf(stderr, "gatling: warning: -P %s: runs only some .%.*s files: the others "
                    "are programs all the same, refused (403), never sent as files "
                    "(gatling.8, REVERSE PROXY)\n", rule, w, e);
            return;
        }
        e += w + (e[w] == '|');
    }
}
