/* The start's and --check's warnings: see advise.h. */
#include "advise.h"
#include "check.h"
#include "cluster_setup.h"
#include "handlers/proxy.h"
#include "tls/tls.h"

#include <dirent.h>
#include <fcntl.h>
#include <regex.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Is name a directory in dirfd (symlinks followed, as vhost_open does)? */
static int is_dir(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

/* Does HTTPS answer for host: a certificate names it, or --acme will get
   one for it (its --acme-names, else every host directory's name)? */
static int https_names(const config_t *cfg, const proc_t *p, const char *host)
{
    if (tls_store_covers(p->tls, host, strlen(host)))
        return 1;
    if (!cfg->acme.email)
        return 0;
    for (int i = 0; i < p->acme_nnames; i++)
        if (!strcasecmp(p->acme_names[i], host))
            return 1;
    return !p->acme_nnames;
}

/* The directory e of the root (fd) is "host:port" for another port than
   HTTPS's, HTTPS answers for host, and neither "host:HTTPSPORT" nor "host"
   exists: vhost_open would serve its HTTPS requests from default/ or the
   root.  Say so: 1, else 0. */
static int port_only(const config_t *cfg, const proc_t *p, int fd, const char *e)
{
    const char *colon = strrchr(e, ':');
    char host[256], other[300];
    size_t n = colon ? (size_t)(colon - e) : 0;
    if (!n || n >= sizeof host || !colon[1] ||
        strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
        atoi(colon + 1) == p->tls_port || !is_dir(fd, e))
        return 0;
    memcpy(host, e, n);
    host[n] = 0;
    if (p->tls_port)
        snprintf(other, sizeof other, "%s:%d", host, p->tls_port);
    else /* -e 0: the port is the kernel's choice, bound after this */
        snprintf(other, sizeof other, "%s:PORT", host);
    if (!https_names(cfg, p, host) || is_dir(fd, host) || is_dir(fd, other))
        return 0;
    char url[300];
    snprintf(url, sizeof url, "https://%s%s%s/", host, p->tls_port == 443 ? "" : ":",
             p->tls_port == 443 ? "" : other + n + 1);
    fprintf(stderr,
            "gatling: warning: HTTPS: %s has a certificate, but its site directory %s serves "
            "port %s only: %s would be served from %s; name the directory %s (every port), or "
            "link %s to it (gatling.8, VIRTUAL HOSTS)\n",
            host, e, colon + 1, url,
            is_dir(fd, "default") ? "default/"
            : cfg->vhost_only     ? "nowhere (404, -v)"
                                  : "the document root",
            host, other);
    return 1;
}

/* Every host directory that serves another port than HTTPS's. */
static int https_ports(const config_t *cfg, const proc_t *p)
{
    if (!p->tls || !cfg->vhosts)
        return 0;
    DIR *d = opendir(cfg->root ? cfg->root : ".");
    if (!d)
        return 0; /* the start says why it cannot serve it */
    struct dirent *e;
    int said = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            said += port_only(cfg, p, dirfd(d), e->d_name);
    closedir(d);
    return said;
}

/* Has the root (fd) a site directory for host: host itself, or host:PORT
   for any port (port_only() speaks of those that serve another port)? */
static int has_site(int fd, const char *host)
{
    if (is_dir(fd, host))
        return 1;
    DIR *d = fdopendir(dup(fd));
    struct dirent *e;
    size_t n = strlen(host);
    int found = 0;
    if (d)
        rewinddir(d); /* the duplicate shares fd's offset, where the last walk ended */
    while (d && !found && (e = readdir(d))) /* "host:" and "host:8x" serve no port */
        found = !strncasecmp(e->d_name, host, n) && e->d_name[n] == ':' && e->d_name[n + 1] &&
                strspn(e->d_name + n + 1, "0123456789") == strlen(e->d_name + n + 1) &&
                is_dir(fd, e->d_name);
    if (d)
        closedir(d);
    return found;
}

#define ADVISE_NAMES_MAX 8 /* names said at most; the rest are counted */

/* Did a certificate before (i, k) give name already? */
static int named_before(const tls_store_t *st, int i, int k, const char *name)
{
    const char *o;
    for (int a = 0; a <= i; a++)
        for (int b = 0; (a < i || b < k) && tls_store_name(st, a, b, &o); b++)
            if (!strcmp(o, name))
                return 1;
    return 0;
}

/*
 * Under virtual hosting (the root has a site directory for some name a
 * certificate gives, or default/), the names a certificate gives that have
 * none: vhost_open serves their requests from default/ or the document root
 * (with -v: nowhere), which the admin likely did not mean.  Say which, and
 * where they go: 1, else 0.  A wildcard names no one directory: not said.
 */
static int names_without_site(const config_t *cfg, const proc_t *p)
{
    int fd = p->tls && cfg->vhosts ? open(cfg->root ? cfg->root : ".",
                                          O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd < 0)
        return 0; /* the start says why it cannot serve it */
    char list[ADVISE_NAMES_MAX * 258] = "", more[48] = "";
    size_t len = 0;
    int in_use = is_dir(fd, "default"), missing = 0;
    const char *name;
    for (int i = 0; i < tls_store_count(p->tls); i++)
        for (int k = 0; tls_store_name(p->tls, i, k, &name); k++) {
            if (name[0] == '*' || named_before(p->tls, i, k, name))
                continue;
            if (has_site(fd, name))
                in_use = 1;
            else if (missing++ < ADVISE_NAMES_MAX)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%.255s",
                                        len ? ", " : "", name);
        }
    if (missing > ADVISE_NAMES_MAX)
        snprintf(more, sizeof more, " and %d more", missing - ADVISE_NAMES_MAX);
    if (in_use && missing)
        fprintf(stderr, "gatling: warning: HTTPS: no site directory in %s for %s%s, which a "
                "certificate names: %s served from %s; make a directory of that name, or "
                "link it to one (gatling.8, VIRTUAL HOSTS)\n",
                cfg->root ? cfg->root : "the document root", list, more,
                missing > 1 ? "their requests are" : "its requests are",
                is_dir(fd, "default") ? "default/"
                : cfg->vhost_only     ? "nowhere (404, -v)"
                                      : "the document root");
    close(fd);
    return in_use && missing;
}

/* The root's (fd) entry e, if it is a name of none of the certificate i's
   and serves the directory sb is (a symbolic link, a bind mount): say so. */
static int alias_of(const tls_store_t *st, int i, int fd, const char *e, const struct stat *sb,
                    const char *site)
{
    struct stat o;
    const char *name;
    char bare[256];
    size_t n = strcspn(e, ":");
    if (e[0] == '.' || n >= sizeof bare || fstatat(fd, e, &o, 0) < 0 ||
        o.st_dev != sb->st_dev || o.st_ino != sb->st_ino)
        return 0;
    memcpy(bare, e, n);
    bare[n] = 0;
    for (int k = 0; tls_store_name(st, i, k, &name); k++)
        if (!strcasecmp(name, bare))
            return 0;
    fprintf(stderr, "gatling: warning: HTTPS: %s is another name of %s's site directory, "
            "whose certificate asks for client certificates: its requests get 421 unless made "
            "on a connection set up with %s's certificate (the directory served decides); "
            "name %s in that certificate for it to be served (gatling.8, VIRTUAL HOSTS)\n",
            e, site, site, bare);
    return 1;
}

/* Every other name (a symbolic link) of a site directory whose certificate
   asks its clients for certificates (handlers/host.h answers their requests). */
static int mtls_aliases(const config_t *cfg, const proc_t *p)
{
    int fd = p->tls && cfg->vhosts ? open(cfg->root ? cfg->root : ".",
                                          O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    int said = 0;
    const char *name;
    struct stat sb;
    for (int i = 0; fd >= 0 && i < tls_store_count(p->tls); i++)
        for (int k = 0; tls_store_asks_client(p->tls, i) && tls_store_name(p->tls, i, k, &name);
             k++) {
            DIR *d = name[0] != '*' && !named_before(p->tls, i, k, name) &&
                             fstatat(fd, name, &sb, 0) == 0 && S_ISDIR(sb.st_mode)
                         ? fdopendir(dup(fd))
                         : NULL;
            struct dirent *e;
            if (d)
                rewinddir(d);
            while (d && (e = readdir(d)))
                said += alias_of(p->tls, i, fd, e->d_name, &sb, name);
            if (d)
                closedir(d);
        }
    if (fd >= 0)
        close(fd);
    return said;
}

#define ADVISE_CGI_MAX 10 /* scripts named at most; the rest are counted */

typedef struct {
    const char *root; /* the chroot's directory as given */
    const char *real; /* ... its canonical path */
    int said;
} jail_t;

/* A backend's unix socket, looked up inside the chroot after it. */
static void socket_inside(void *arg, const char *opt, const char *value, const char *path)
{
    jail_t *j = arg;
    char inside[PATH_MAX * 2];
    struct stat st;
    snprintf(inside, sizeof inside, "%s%s", strcmp(j->real, "/") ? j->real : "", path);
    if (stat(inside, &st) == 0)
        return; /* there (a bind mount, or the backend's socket made inside) */
    fprintf(stderr,
            "gatling: warning: %s %s: after the chroot into %s, unix:%s is %s, which does not "
            "exist: its requests will fail (502) unless the backend's socket is made there; "
            "to reach %s, add --no-chroot (gatling.8, SECURITY)\n",
            opt, value, j->root, path, inside, path);
    j->said++;
}

/* A CGI script that runs by its #! line: the interpreter's path into out.
   0, or -1 (not a script, or its path is not absolute). */
static int interpreter(int dirfd, const char *name, char *out, size_t cap)
{
    char buf[256];
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 3 || buf[0] != '#' || buf[1] != '!')
        return -1;
    buf[n] = 0;
    const char *p = buf + 2 + strspn(buf + 2, " \t");
    size_t k = strcspn(p, " \t\r\n");
    if (*p != '/' || k >= cap)
        return -1;
    memcpy(out, p, k);
    out[k] = 0;
    return 0;
}

typedef struct {
    const config_t *cfg;
    jail_t *j;
    regex_t re[CONFIG_CGI_MAX];
    int nre;
    int left; /* directories still to walk (check.h's bound) */
    int found; /* scripts whose interpreter is hidden */
} cgi_walk_t;

/* Would the file at rel (from the root; mode st) run as CGI: the option that
   makes it ("-z", or -w's pattern, matched as from the root or from a
   virtual host's directory), or NULL. */
static const char *cgi_option(const cgi_walk_t *w, const char *rel, const struct stat *st)
{
    if (w->cfg->cgi_exec && (st->st_mode & S_IXOTH))
        return "-z";
    const char *in_vhost = strchr(rel + 1, '/');
    for (int i = 0; i < w->nre; i++)
        if (!regexec(&w->re[i], rel, 0, NULL, 0) ||
            (in_vhost && !regexec(&w->re[i], in_vhost, 0, NULL, 0)))
            return w->cfg->cgi_regex[i];
    return NULL;
}

/* One file of the root: a CGI script whose interpreter the chroot hides. */
static void cgi_file(cgi_walk_t *w, int dirfd, const char *name, const char *rel)
{
    struct stat st;
    char interp[256], inside[PATH_MAX * 2];
    const char *opt;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        !(st.st_mode & 0111) || !(opt = cgi_option(w, rel, &st)) ||
        interpreter(dirfd, name, interp, sizeof interp) < 0)
        return;
    snprintf(inside, sizeof inside, "%s%s", strcmp(w->j->real, "/") ? w->j->real : "", interp);
    if (stat(inside, &st) == 0 || w->found++ >= ADVISE_CGI_MAX)
        return;
    fprintf(stderr,
            "gatling: warning: %s%s: %s%s runs %s (its #! line), which after the chroot into "
            "%s is %s and does not exist: the script will fail (502) unless its interpreter "
            "is there too (gatling.8, CGI)\n",
            *opt == '-' ? "" : "-w ", opt, w->j->root, rel, interp, w->j->root, inside);
}

/* dirfd (rel from the root) and the directories below it, as check.c walks. */
static void cgi_walk(cgi_walk_t *w, int dirfd, const char *rel, int depth)
{
    DIR *d = depth < CHECK_DEPTH_MAX ? fdopendir(dup(dirfd)) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) && w->left > 0) {
        char sub[4096];
        struct stat st;
        if (e->d_name[0] == '.' ||
            snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name) >= (int)sizeof sub ||
            fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (!S_ISDIR(st.st_mode)) {
            cgi_file(w, dirfd, e->d_name, sub);
            continue;
        }
        int fd = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        w->left--;
        cgi_walk(w, fd, sub, depth + 1);
        close(fd);
    }
    if (d)
        closedir(d);
}

/* -w, -z in the chroot: each script whose interpreter is not inside it. */
static void cgi_interpreters(const config_t *cfg, jail_t *j)
{
    if (!cfg->ncgi_regex && !cfg->cgi_exec)
        return;
    cgi_walk_t w = {.cfg = cfg, .j = j, .left = CHECK_DIRS_MAX};
    for (; w.nre < cfg->ncgi_regex; w.nre++)
        if (regcomp(&w.re[w.nre], cfg->cgi_regex[w.nre], REG_EXTENDED | REG_NOSUB))
            break; /* checked at the option: cannot happen */
    int fd = open(j->real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        cgi_walk(&w, fd, "", 0);
        close(fd);
    }
    for (int i = 0; i < w.nre; i++)
        regfree(&w.re[i]);
    j->said += w.found < ADVISE_CGI_MAX ? w.found : ADVISE_CGI_MAX;
    if (w.found > ADVISE_CGI_MAX)
        fprintf(stderr, "gatling: warning: -w, -z: and %d more scripts whose interpreter the "
                "chroot hides\n", w.found - ADVISE_CGI_MAX);
}

/* -c as root: the chroot said, then what will not be found inside it. */
static int chroot_paths(const config_t *cfg, const proc_t *p)
{
    if (!cfg->root || geteuid() != 0 || cfg->no_chroot)
        return 0;
    char real[PATH_MAX];
    jail_t j = {cfg->root, realpath(cfg->root, real), 0};
    if (!j.real)
        return 0; /* the start says why it cannot enter it */
    fprintf(stderr,
            "gatling: note: -c %s: started as root, gatling chroots into it: after the start "
            "only paths inside it can be opened, and the binary upgrade (SIGUSR2, --reload, "
            "systemctl reload) is refused; to serve it without a chroot, add --no-chroot "
            "(gatling.8, SECURITY)\n",
            cfg->root);
    proxy_sockets(cfg, p->pool_dirfd, socket_inside, &j);
    cgi_interpreters(cfg, &j);
    return j.said;
}

/* A backend's unix socket where no chroot hides it: missing is said. */
static void socket_there(void *arg, const char *opt, const char *value, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return;
    fprintf(stderr,
            "gatling: warning: %s %s: unix:%s does not exist (yet): its requests will fail "
            "(502) until the backend makes it\n",
            opt, value, path);
    (*(int *)arg)++;
}

/* Unix sockets of -P and --pool when nothing chroots: each missing one. */
static int sockets_missing(const config_t *cfg, const proc_t *p)
{
    int said = 0;
    if (cfg->root && geteuid() == 0 && !cfg->no_chroot)
        return 0; /* chroot_paths looks inside the chroot */
    proxy_sockets(cfg, p->pool_dirfd, socket_there, &said);
    return said;
}

/* Serving as root: every request's work (CGI aside) runs as root. */
static int as_root(const config_t *cfg, const proc_t *p)
{
    if (geteuid() != 0 || p->uid >= 0 || cfg->user)
        return 0;
    fprintf(stderr,
            "gatling: warning: started as root without -u: gatling serves as root; give -u "
            "USER (e.g. -u gatling, or www-data) to serve as that user after the listeners "
            "are open (gatling.8, SECURITY)\n");
    return 1;
}

int advise(const config_t *cfg, const proc_t *p)
{
    return as_root(cfg, p) + https_ports(cfg, p) + names_without_site(cfg, p) +
           mtls_aliases(cfg, p) + cluster_advise(cfg, p) + chroot_paths(cfg, p) +
           sockets_missing(cfg, p);
}
