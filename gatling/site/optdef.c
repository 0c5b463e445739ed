/* The value checks the options table's rows share.  See optdef.h. */
#include "optdef.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long opt_number(const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    return v;
}

int opt_first(const char *arg, char *buf, size_t cap, const char **rest)
{
    const char *comma = strchr(arg, ',');
    size_t n = comma ? (size_t)(comma - arg) : strlen(arg);
    if (n == 0 || n >= cap)
        return -1;
    memcpy(buf, arg, n), buf[n] = 0;
    *rest = comma ? comma + 1 : NULL;
    return 0;
}

long long opt_size(const char *s, long long min, long long max)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift)
        end++;
    if (errno || end == s || *s < '0' || *s > '9' || *end || v > (max >> shift))
        return -1;
    return v << shift >= min ? v << shift : -1;
}

/* The copies {m,n} makes of its operand (glibc: n, or m + 1 for {m,}); *p past the '}'. */
static long long bound_copies(const char **p)
{
    char *end;
    long long m = strtol(*p + 1, &end, 10), n = m;
    if (*end == ',')
        n = end[1] == '}' ? m + 1 : strtol(end + 1, &end, 10);
    const char *close = strchr(*p, '}');
    *p = close ? close + 1 : *p + strlen(*p);
    n = n > m ? n : m;
    return n < 1 ? 1 : n > (1 << 20) ? 1 << 20 : n; /* RE_DUP_MAX is 32767 */
}

int opt_regex_bounded(const char *re, long long limit)
{
    long long total[32] = {0}, last[32] = {0}; /* per open group: its size, its last atom's */
    int depth = 0, repeated = 0;
    for (const char *p = re; *p;) {
        long long atom = 1, factor = 1;
        char c = *p;
        int rep = c == '+' || c == '*' || c == '?' || c == '{';
        if (rep && repeated) /* "a++", "a+?", "a{2}*": undefined in POSIX, and regcomp's
                                epsilon closures grow four-fold with each (fuzz_options) */
            return 0;
        repeated = rep;
        if (rep) { /* on the atom before it */
            factor = c == '+' ? 2 : c == '{' ? bound_copies(&p) : 1;
            if (c != '{')
                p++;
            total[depth] += last[depth] * (factor - 1) + 1;
            last[depth] = last[depth] * factor + 1;
        } else if (c == '(') {
            if (++depth == 32)
                return 0;
            total[depth] = last[depth] = 0, p++;
        } else if (c == ')' && depth > 0) {
            atom = total[depth--] + 1, p++;
            total[depth] += atom, last[depth] = atom;
        } else if (c == '|') {
            last[depth] = 0, p++; /* the alternatives add up: total goes on */
        } else {
            if (c == '\\' && p[1])
                p++;
            else if (c == '[') { /* a bracket expression is one atom */
                const char *q = p + 1 + (p[1] == '^');
                q += *q == ']';
                q = strchr(q, ']');
                p = q ? q : p + strlen(p) - 1;
            }
            p++;
            total[depth] += 1, last[depth] = 1;
        }
        if (total[depth] > limit || last[depth] > limit)
            return 0;
    }
    return 1;
}

int opt_synopsis_item(const optdef_t *o, char *buf, size_t cap)
{
    const char *h = o->help;
    if (!h || cap < 3)
        return -1;
    while (*h == ' ')
        h++;
    size_t n = 0;
    buf[n++] = '[';
    for (; *h && *h != '\n' && !(h[0] == ' ' && h[1] == ' '); h++) {
        if (n + 2 >= cap)
            return -1;
        if (!strncmp(h, " / ", 3)) /* "-d / -D": either */
            buf[n++] = '|', h += 2;
        else
            buf[n++] = *h;
    }
    buf[n++] = ']';
    buf[n] = '\0';
    return (int)n;
}

/* 1 while the pointer to the help is deferred, 2 once it is owed. */
static int hint;

int opt_usage_error(void)
{
    if (hint)
        hint = 2;
    else
        fputs("gatling: try 'gatling -h' or see gatling(8)\n", stderr);
    return 2;
}

void opt_usage_defer(int on)
{
    hint = on ? 1 : 0;
}

int opt_usage_end(int rc)
{
    if (hint == 2)
        fputs("gatling: try 'gatling -h' or see gatling(8)\n", stderr);
    hint = 0;
    return rc;
}

static char set_why[512], taken_why[512];

void opt_set_why(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(set_why, sizeof set_why, fmt, ap);
    va_end(ap);
}

const char *opt_take_why(void)
{
    if (!set_why[0])
        return NULL;
    memcpy(taken_why, set_why, sizeof taken_why);
    set_why[0] = 0;
    return taken_why;
}

static const char *where_file;
static int where_line[128];

void opt_where_file(const char *path)
{
    where_file = path;
    memset(where_line, 0, sizeof where_line);
}

void opt_where_line(int c, int line)
{
    if (c > 0 && c < 128)
        where_line[c] = line;
}

const char *opt_where_of(int c, char *buf, size_t len)
{
    int line = c > 0 && c < 128 ? where_line[c] : 0;
    if (line > 0 && where_file)
        snprintf(buf, len, "%s:%d: ", where_file, line);
    else if (len)
        buf[0] = 0;
    return buf;
}
