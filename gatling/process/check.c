/* --check's walk for the per-directory files: see check.h. */
#include "check.h"
#include "route/cache_conf.h"
#include "route/sitefiles.h"
#include "handlers/dictionary.h"
#include "handlers/hints.h"
#include "handlers/htaccess.h"
#include "handlers/proxy_front.h"
#include "http/dcz.h"
#include "site/config.h"
#include "site/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One .dictionary in dirfd (path names the directory): its bad lines said. */
static int check_file(int dirfd, const char *path)
{
    char text[DICTIONARY_READ_MAX + 1];
    int fd = openat(dirfd, DICTIONARY_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0; /* none */
    ssize_t n = read(fd, text, DICTIONARY_READ_MAX);
    close(fd);
    if (n < 0) {
        fprintf(stderr, "gatling: %s/%s: cannot be read\n", path, DICTIONARY_FILE);
        return -1;
    }
    int bad = 0, line = 1;
    for (const char *l = text, *end = text + n; l < end; line++) {
        const char *nl = memchr(l, '\n', (size_t)(end - l));
        size_t len = nl ? (size_t)(nl - l) : (size_t)(end - l);
        dcz_rule_t r;
        if (dcz_rule_parse(l, len, &r) < 0) {
            fprintf(stderr, "gatling: %s/%s:%d: not a rule (NAME [match=PATTERN] "
                    "[match-dest=DEST] [id=ID], gatling(8) COMPRESSION DICTIONARIES)\n",
                    path, DICTIONARY_FILE, line);
            bad = -1;
        }
        l += len + 1;
    }
    return bad;
}

/* One .cache in dirfd (path names the directory): a bad line said, as the
   first request to its site would find it (the cache off for the site). */
static int check_cache(int dirfd, const char *path)
{
    char text[CACHE_CONF_FILE_MAX + 1];
    ssize_t n = fs_read_small(dirfd, ".cache", text, CACHE_CONF_FILE_MAX, 1);
    if (n == -2)
        return 0; /* none */
    if (n < 0) {
        fprintf(stderr, "gatling: %s/.cache: over %d bytes, not a file or unreadable\n", path,
                CACHE_CONF_FILE_MAX);
        return -1;
    }
    cache_conf_t k;
    int line = 0;
    const char *why = "";
    if (cache_conf_parse(&k, text, (size_t)n, &line, &why) < 0) {
        fprintf(stderr, "gatling: %s/.cache:%d: %s (the site would have no cache)\n", path,
                line, why);
        return -1;
    }
    cache_conf_free(&k);
    return 0;
}

/* One line's check: 0, or -1 with why; st is the file's own state. */
typedef int (*line_fn)(const char *l, size_t n, void *st, const char **why);

/* name in dirfd (path names the directory), as the server opens it (no
   symlink, a regular file), its first max bytes into text (max + 1 bytes),
   each line to fn; every bad one said as PATH/NAME:LINE.  0 (none there
   too), 1 with *mode its mode when read, or -1 after saying. */
static int check_lines(int dirfd, const char *path, const char *name, size_t max, line_fn fn,
                       void *st, char *text, mode_t *mode)
{
    struct stat sb;
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), bad = 0;
    if (fd < 0 && errno == ENOENT)
        return 0; /* none */
    ssize_t n = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? read(fd, text, max) : -1;
    if (fd >= 0)
        close(fd);
    if (n < 0) {
        fprintf(stderr, "gatling: %s/%s: a symlink, not a regular file, or unreadable\n", path,
                name);
        return -1;
    }
    const char *why;
    int line = 1;
    for (const char *l = text, *end = text + n; l < end; line++) {
        const char *nl = memchr(l, '\n', (size_t)(end - l));
        size_t len = nl ? (size_t)(nl - l) : (size_t)(end - l);
        if (fn(l, len, st, &why) < 0) {
            fprintf(stderr, "gatling: %s/%s:%d: %s\n", path, name, line, why);
            bad = 1;
        }
        l += len + 1;
    }
    *mode = sb.st_mode;
    return bad ? -1 : sb.st_size > (off_t)max ? 2 : 1;
}

static int htaccess_fn(const char *l, size_t n, void *st, const char **why)
{
    return htaccess_line(l, n, st, why);
}

/* One .htaccess: as the server reads it for every file below (answered
   500 when malformed, handlers/htaccess.h). */
static int check_htaccess(int dirfd, const char *path)
{
    static char text[HTACCESS_MAX + 1];
    int realm = 0;
    mode_t mode;
    int r = check_lines(dirfd, path, ".htaccess", HTACCESS_MAX, htaccess_fn, &realm, text, &mode);
    if (r == 2)
        fprintf(stderr, "gatling: %s/.htaccess: over %d bytes: malformed, every request below "
                "is answered 500\n", path, HTACCESS_MAX);
    else if (r == 1 && !realm)
        fprintf(stderr, "gatling: %s/.htaccess: no realm line (the first that is neither "
                "blank nor a comment): malformed, every request below is answered 500\n", path);
    else if (r == 1 && realm == 2)
        fprintf(stderr, "gatling: note: %s/.htaccess: Apache's: 403 where it denies (Require "
                "all denied, Deny from all, Apache's own authentication; <Files> sections as "
                "Apache reads them), its other directives ignored (handlers/htaccess.h)\n", path);
    return r < 0 || r == 2 || (r == 1 && !realm) ? -1 : 0;
}

static int hints_fn(const char *l, size_t n, void *st, const char **why)
{
    return hints_line(l, n, st, why);
}

/* One .early-hints: as the static handler reads it (handlers/hints.h). */
static int check_hints(int dirfd, const char *path)
{
    char text[HINTS_READ_MAX + 1];
    size_t len = 0;
    mode_t mode;
    int r = check_lines(dirfd, path, HINTS_FILE, HINTS_READ_MAX, hints_fn, &len, text, &mode);
    if (r == 2)
        fprintf(stderr, "gatling: %s/%s: over %d bytes: the rest is not read\n", path,
                HINTS_FILE, HINTS_READ_MAX);
    if (r > 0 && !(mode & S_IROTH))
        fprintf(stderr, "gatling: %s/%s: not readable by everyone: not used (a page's hints "
                "are read only from a file any user may read)\n", path, HINTS_FILE);
    return r < 0 || r == 2 || (r > 0 && !(mode & S_IROTH)) ? -1 : 0;
}

/* dirfd (path) and the directories below it; *left counts down. */
static int walk(const config_t *cfg, int dirfd, const char *path, int depth, int *left)
{
    int bad = check_file(dirfd, path) | check_cache(dirfd, path) |
              check_htaccess(dirfd, path) | check_hints(dirfd, path) |
              proxy_front_check_file(cfg, dirfd, path);
    if (depth <= 1) /* a site's top: the root, or a virtual host's directory */
        bad |= sitefiles_check(dirfd, path);
    DIR *d = depth < CHECK_DEPTH_MAX ? fdopendir(dup(dirfd)) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) && *left > 0) {
        struct stat st;
        if (e->d_name[0] == '.' || fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISDIR(st.st_mode))
            continue;
        char sub[4096];
        int fd = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= (int)sizeof sub) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        (*left)--;
        bad |= walk(cfg, fd, sub, depth + 1, left);
        close(fd);
    }
    if (d)
        closedir(d);
    return bad ? -1 : 0;
}

int check_dictionaries(const config_t *cfg)
{
    int left = CHECK_DIRS_MAX;
    int fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* check_root said why */
    char here[4096];
    int rc = walk(cfg, fd, getcwd(here, sizeof here) ? here : ".", 0, &left);
    close(fd);
    return rc;
}
