/* 103 Early Hints from .early-hints files: see hints.h. */
#include "hints.h"
#include "site/fs.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Can line[0..n) be (part of) a field value: VCHAR, SP, HTAB (RFC 9110 5.5)? */
static int field_chars(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if ((c < 0x20 && c != '\t') || c > 0x7e)
            return 0;
    }
    return 1;
}

static const char *trim(const char *p, const char *end, size_t *n)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    *n = (size_t)(end - p);
    return p;
}

size_t hints_parse(const char *text, size_t n, char *out, size_t cap)
{
    const char *p = text, *end = text + n;
    size_t len = 0;
    out[0] = '\0';
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        size_t k;
        const char *v = trim(p, eol, &k);
        p = nl ? nl + 1 : end;
        if (k >= 5 && !strncasecmp(v, "Link:", 5))
            v = trim(v + 5, v + k, &k);
        if (!k || v[0] == '#' || !field_chars(v, k))
            continue;
        size_t sep = len ? 2 : 0;
        if (len + sep + k >= cap)
            break; /* does not fit: neither it nor the ones after it */
        memcpy(out + len, ", ", sep);
        memcpy(out + len + sep, v, k);
        len += sep + k;
        out[len] = '\0';
    }
    return len;
}

int hints_line(const char *line, size_t n, size_t *len, const char **why)
{
    size_t k;
    const char *v = trim(line, line + n, &k);
    if (k >= 5 && !strncasecmp(v, "Link:", 5))
        v = trim(v + 5, v + k, &k);
    if (!k || v[0] == '#' || *len >= HINTS_MAX) /* after one that did not fit: said */
        return 0;
    *why = "a byte a field value cannot carry (a control, or one over 0x7e): left out";
    if (!field_chars(v, k))
        return -1;
    *why = "not a link-value (<URI>; rel=preload; as=...): the client would ignore it";
    if (v[0] != '<' || !memchr(v, '>', k))
        return -1;
    size_t sep = *len ? 2 : 0;
    *why = "the Link value passes 1023 bytes here: this line and the ones after it are left out";
    if (*len + sep + k >= HINTS_MAX)
        return *len = HINTS_MAX, -1;
    *len += sep + k;
    return 0;
}

char *hints_for(int vfd, const fs_at_t *at, const char *rel, const char *root_check)
{
    char path[4096];
    const char *slash = strrchr(rel, '/');
    size_t dir = slash ? (size_t)(slash - rel) + 1 : 0;
    if (dir + sizeof HINTS_FILE > sizeof path)
        return NULL;
    memcpy(path, rel, dir);
    memcpy(path + dir, HINTS_FILE, sizeof HINTS_FILE);
    int fd = fs_open_beneath(vfd, path, root_check);
    if (fd < 0)
        return NULL;
    char text[HINTS_READ_MAX], value[HINTS_MAX];
    struct stat st;
    ssize_t got = -1; /* a regular file anyone may read, as for what is served */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fs_public(at, path, fd, 0))
        got = read(fd, text, sizeof text);
    close(fd);
    if (got <= 0 || !hints_parse(text, (size_t)got, value, sizeof value))
        return NULL;
    return strdup(value);
}
