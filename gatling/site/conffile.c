/* The options file (--config FILE): see conffile.h. */
#define _GNU_SOURCE /* asprintf */
#include "conffile.h"
#include "privfs.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *conf_named(int argc, char **argv, int *bad)
{
    const char *path = NULL;
    *bad = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strncmp(argv[i], "--config=", 9))
            path = argv[i] + 9;
        else if (!strcmp(argv[i], "--config"))
            path = i + 1 < argc ? argv[++i] : NULL;
        else
            continue;
        if (!path || !*path)
            *bad = -1;
    }
    return *bad ? NULL : path;
}

/* The file's bytes, NUL-terminated, in *text (*n of them): 0, or -1 after
   saying why. */
static int slurp(const char *path, char **text, size_t *n)
{
    struct stat st;
    char why[256];
    /* root's or the caller's, written by no one else, reached by no link
       of another's (site/privfs.h): else not read, so no line of it shown */
    int fd = pfs_open_file(path, PFS_READ, &st, why, sizeof why), err = 0;
    *text = NULL;
    if (fd < 0)
        err = errno;
    else if (st.st_size > CONF_FILE_MAX)
        err = EFBIG;
    else if (!(*text = malloc((size_t)st.st_size + 1)))
        err = ENOMEM;
    ssize_t got = *text ? read(fd, *text, (size_t)st.st_size) : -1;
    if (*text && got < 0)
        err = errno;
    if (fd >= 0)
        close(fd);
    if (err) {
        fprintf(stderr, "gatling: --config %s: %s\n", path, fd < 0 ? why : strerror(err));
        free(*text);
        *text = NULL;
        return -1;
    }
    (*text)[got] = 0;
    *n = (size_t)got;
    return 0;
}

/* The word list being made: words and their lines. */
typedef struct words {
    char **w;
    int *line;
    int n;
    const char *path;
} words_t;

static int fail_at(const words_t *ws, int line, const char *why)
{
    fprintf(stderr, "gatling: %s:%d: %s\n", ws->path, line, why);
    return -1;
}

static int push(words_t *ws, const char *s, size_t len, int line)
{
    if (ws->n == CONF_WORDS_MAX)
        return fail_at(ws, line, "more than 4096 words in the file");
    if (!(ws->w[ws->n] = strndup(s, len)))
        return fail_at(ws, line, strerror(errno));
    ws->line[ws->n++] = line;
    return 0;
}

/*
 * One word from t[*i] on into out (the caller's room for it: the word is
 * never longer than what is left of t), its length in *len; *line moves over
 * joined lines.  0, or -1 after saying why.
 */
static int word(const words_t *ws, const char *t, size_t *i, int *line, char *out, size_t *len)
{
    size_t k = 0, at = *i;
    while (t[at] && !strchr(" \t\r\n", t[at])) {
        char c = t[at++];
        if (c == '\'') {
            const char *end = strpbrk(t + at, "'\n");
            if (!end || *end != '\'')
                return fail_at(ws, *line, "a ' is not closed on its line");
            memcpy(out + k, t + at, (size_t)(end - (t + at)));
            k += (size_t)(end - (t + at));
            at = (size_t)(end - t) + 1;
        } else if (c == '"') {
            for (;; at++) {
                if (!t[at] || t[at] == '\n')
                    return fail_at(ws, *line, "a \" is not closed on its line");
                if (t[at] == '"')
                    break;
                if (t[at] == '\\' && (t[at + 1] == '"' || t[at + 1] == '\\'))
                    at++;
                out[k++] = t[at];
            }
            at++;
        } else if (c == '\\' && t[at] == '\n') { /* joins the next line */
            (*line)++, at++;
        } else if (c == '\\') {
            if (!t[at])
                return fail_at(ws, *line, "a \\ at the end of the file");
            out[k++] = t[at++];
        } else {
            out[k++] = c;
        }
    }
    *i = at, *len = k;
    return 0;
}

/* A word of line from that word() refused (said): the line's words pushed
   so far dropped (an option whose value it was would take the next line's
   word), and *i moved to the line's end. */
static void bad_line(words_t *ws, const char *t, size_t n, size_t *i, int from)
{
    while (ws->n && ws->line[ws->n - 1] == from)
        free(ws->w[--ws->n]);
    while (*i < n && t[*i] != '\n')
        (*i)++;
}

/* Split text (n bytes) into ws's words.  0; 1 when a line was refused
   (said, and the others split); -1 after saying why nothing can be. */
static int split(words_t *ws, const char *t, size_t n)
{
    char *out = malloc(n + 1);
    int line = 1, failed = 0;
    if (!out)
        return fail_at(ws, 0, strerror(errno));
    const char *nul = memchr(t, 0, n);
    if (nul) { /* a binary, not an options file */
        for (const char *p = t; p < nul; p++)
            line += *p == '\n';
        free(out);
        return fail_at(ws, line, "a NUL byte in the file");
    }
    for (size_t i = 0; i < n;) {
        if (t[i] == '\n') {
            line++, i++;
        } else if (strchr(" \t\r", t[i])) {
            i++;
        } else if (t[i] == '#') {
            while (i < n && t[i] != '\n')
                i++;
        } else {
            size_t len;
            int from = line, quoted = t[i] == '\'' || t[i] == '"';
            if (word(ws, t, &i, &line, out, &len) < 0) {
                bad_line(ws, t, n, &i, from);
                failed = 1; /* said: go on to the next line */
            } else if ((len || quoted) && push(ws, out, len, from) < 0) {
                return free(out), -1;
            }
        }
    }
    free(out);
    return failed;
}

/* The directory of path, absolute where it can be made so, into dir. */
static void file_dir(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    char given[PATH_MAX];
    if (!slash)
        snprintf(given, sizeof given, ".");
    else
        snprintf(given, sizeof given, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (!realpath(given, dir) || strlen(dir) >= len)
        snprintf(dir, len, "%s", given);
}

/* ws->w[i], whose value starts at byte off, made relative to dir if it is a
   relative path.  0, or -1 after saying why. */
static int relocate(words_t *ws, int i, size_t off, const char *dir)
{
    char *v = ws->w[i] + off, *nw;
    if (!*v || *v == '/')
        return 0;
    if (asprintf(&nw, "%.*s%s/%s", (int)off, ws->w[i], dir, v) < 0)
        return fail_at(ws, ws->line[i], strerror(errno));
    free(ws->w[i]);
    ws->w[i] = nw;
    return 0;
}

/* A long option, ws->w[*i]: its value relocated if it is a path; the word
   after it skipped if it is its value. */
static int long_option(words_t *ws, int *i, const char *const *pathlong,
                       const struct option *longopts, const char *dir)
{
    const char *name = ws->w[*i] + 2, *eq = strchr(name, '=');
    size_t nl = eq ? (size_t)(eq - name) : strlen(name);
    if (nl == 6 && !strncmp(name, "config", 6))
        return fail_at(ws, ws->line[*i], "--config in an options file (one file, named "
                                         "on the command line)");
    if (nl == 5 && !strncmp(name, "check", 5))
        return 0;
    int path = 0;
    for (const char *const *p = pathlong; p && *p; p++)
        path |= strlen(*p) == nl && !strncmp(*p, name, nl);
    if (eq)
        return path ? relocate(ws, *i, (size_t)(eq + 1 - ws->w[*i]), dir) : 0;
    const struct option *o = longopts;
    while (o && o->name && (strlen(o->name) != nl || strncmp(o->name, name, nl)))
        o++;
    if (o && o->name && o->has_arg == no_argument)
        return 0; /* a flag */
    if (!o || !o->name) { /* unknown: getopt says so, with a did-you-mean, and takes
                             the next word of its line as its value */
        *i += *i + 1 < ws->n && ws->w[*i + 1][0] != '-' && ws->line[*i + 1] == ws->line[*i];
        return 0;
    }
    if (*i + 1 >= ws->n) { /* else the command line's first word would be its value */
        char why[128];
        snprintf(why, sizeof why, "--%.64s at the file's end without its value", name);
        return fail_at(ws, ws->line[*i], why);
    }
    if (ws->w[*i + 1][0] == '-')
        return 0; /* getopt says what is missing, or that it is unknown */
    (*i)++;
    return path ? relocate(ws, *i, 0, dir) : 0;
}

/* A group of short options, ws->w[*i] ("-dc www", "-cwww"): as long_option. */
static int short_options(words_t *ws, int *i, const char *shortopts, const char *pathopts,
                         const char *dir)
{
    const char *w = ws->w[*i];
    for (size_t j = 1; w[j]; j++) {
        const char *p = w[j] == ':' ? NULL : strchr(shortopts, w[j]);
        if (!p)
            return 0; /* getopt says it is unknown */
        if (p[1] != ':')
            continue;
        int path = strchr(pathopts, w[j]) != NULL;
        if (w[j + 1])
            return path ? relocate(ws, *i, j + 1, dir) : 0;
        if (*i + 1 >= ws->n) {
            char why[64];
            snprintf(why, sizeof why, "-%c at the file's end without its value", w[j]);
            return fail_at(ws, ws->line[*i], why);
        }
        (*i)++;
        return path ? relocate(ws, *i, 0, dir) : 0;
    }
    return 0;
}

/* ws->w[i], said to be no option: dropped, so that getopt does not say it
   again and parses the words after it. */
static void drop(words_t *ws, int i)
{
    free(ws->w[i]);
    memmove(ws->w + i, ws->w + i + 1, (size_t)(ws->n - i - 1) * sizeof *ws->w);
    memmove(ws->line + i, ws->line + i + 1, (size_t)(ws->n - i - 1) * sizeof *ws->line);
    ws->n--;
}

/* Every word is an option or an option's value; paths relocated.  0, or 1
   after saying each word that is not (they are dropped). */
static int walk(words_t *ws, const char *shortopts, const char *pathopts,
                const char *const *pathlong, const struct option *longopts)
{
    char dir[PATH_MAX];
    int failed = 0;
    file_dir(ws->path, dir, sizeof dir);
    for (int i = 0; i < ws->n; i++) {
        const char *w = ws->w[i];
        int rc = 0;
        if (w[0] == '-' && w[1] == '-' && w[2])
            rc = long_option(ws, &i, pathlong, longopts, dir);
        else if (w[0] == '-' && w[1] && w[1] != '-')
            rc = short_options(ws, &i, shortopts, pathopts, dir);
        else {
            char why[96];
            snprintf(why, sizeof why, "'%.40s%s' is not an option (a value goes after its "
                     "option)", w, strlen(w) > 40 ? "..." : "");
            failed = 1;
            fail_at(ws, ws->line[i], why);
            drop(ws, i--);
            continue;
        }
        if (rc < 0 && i == ws->n - 1) /* an option at the end without its value */
            drop(ws, i--);
        failed |= rc < 0; /* go on: every stray word is said */
    }
    return failed;
}

int conf_load(conf_args_t *a, const char *path, int argc, char **argv, const char *shortopts,
              const char *pathopts, const char *const *pathlong, const struct option *longopts)
{
    words_t ws = {.path = path};
    char *text = NULL;
    size_t n = 0;
    *a = (conf_args_t){.path = path};
    if (path && slurp(path, &text, &n) < 0)
        return -1;
    ws.w = calloc(CONF_WORDS_MAX + (size_t)argc + 1, sizeof *ws.w);
    ws.line = calloc(CONF_WORDS_MAX + (size_t)argc + 1, sizeof *ws.line);
    a->argv = ws.w, a->line = ws.line;
    if (!ws.w || !ws.line) {
        free(text);
        fprintf(stderr, "gatling: --config: %s\n", strerror(errno));
        return -1;
    }
    int rc = path ? split(&ws, text, n) : 0, said = rc > 0;
    free(text);
    a->nfile = ws.n;
    if (rc >= 0 && path)
        said |= (rc = walk(&ws, shortopts, pathopts, pathlong, longopts)) != 0;
    a->nfile = ws.n;
    if (rc < 0) {
        a->argc = ws.n;
        conf_free(a);
        return -1;
    }
    if (ws.n && !(a->own = malloc((size_t)ws.n * sizeof *a->own))) {
        fprintf(stderr, "gatling: --config: %s\n", strerror(errno));
        a->argc = ws.n;
        conf_free(a);
        return -1;
    }
    if (ws.n)
        memcpy(a->own, ws.w, (size_t)ws.n * sizeof *ws.w);
    /* argv[0] first: the file's words move up by one */
    memmove(ws.w + 1, ws.w, (size_t)ws.n * sizeof *ws.w);
    memmove(ws.line + 1, ws.line, (size_t)ws.n * sizeof *ws.line);
    ws.w[0] = argv[0], ws.line[0] = 0;
    for (int i = 1; i < argc; i++)
        ws.w[ws.n + i] = argv[i], ws.line[ws.n + i] = 0;
    a->argc = ws.n + argc;
    a->argv[a->argc] = NULL;
    return said;
}

const char *conf_where(const conf_args_t *a, int i, char *buf, size_t len)
{
    if (a->path && i >= 1 && i <= a->nfile)
        snprintf(buf, len, "%s:%d: ", a->path, a->line[i]);
    else if (len)
        buf[0] = 0;
    return buf;
}

void conf_free(conf_args_t *a)
{
    /* the file's words as read: before argv is made (a->own not yet), argv[0..nfile)
       are they; after, a->own keeps them wherever getopt has moved them in argv */
    char **words = a->own ? a->own : a->argv;
    for (int i = 0; words && i < a->nfile; i++)
        free(words[i]);
    free(a->own);
    free(a->argv);
    free(a->line);
    a->argv = NULL, a->line = NULL, a->own = NULL;
}
