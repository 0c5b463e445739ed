/* Extension -> Content-Type: see mime.h. */
#include "mime.h"
#include "privfs.h"
#include "http/hbuf.h"
#include "http/owfat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIME_SLOTS 4096 /* power of two; Debian's file has ~1,900 extensions */
#define MIME_EXT_MAX 16

typedef struct mime_entry {
    char ext[MIME_EXT_MAX]; /* lower case, NUL-terminated; "" = free slot */
    const char *type;
} mime_entry_t;

struct mime_table {
    mime_entry_t slot[MIME_SLOTS];
    char **types; /* owned strings */
    size_t ntypes, captypes;
};

static const char *const builtin[][2] = {
    {"html", "text/html"},        {"htm", "text/html"},
    {"txt", "text/plain"},        {"css", "text/css"},
    {"js", "text/javascript"},    {"mjs", "text/javascript"},
    {"json", "application/json"}, {"xml", "application/xml"},
    {"svg", "image/svg+xml"},     {"png", "image/png"},
    {"jpg", "image/jpeg"},        {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},         {"webp", "image/webp"},
    {"avif", "image/avif"},       {"ico", "image/vnd.microsoft.icon"},
    {"pdf", "application/pdf"},   {"wasm", "application/wasm"},
    {"woff", "font/woff"},        {"woff2", "font/woff2"},
    {"mp4", "video/mp4"},         {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},        {"ogg", "audio/ogg"},
    {"zip", "application/zip"},   {"gz", "application/gzip"},
    {"tar", "application/x-tar"}, {"md", "text/markdown"},
    {"csv", "text/csv"},
};

static uint32_t hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a over the lower-cased extension */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)(s[i] | 0x20)) * 16777619u;
    return h;
}

/* Intern "type" (plus a charset for text types); NULL on ENOMEM. */
static const char *intern(mime_table_t *t, const char *type, size_t n)
{
    int text = n > 5 && !memcmp(type, "text/", 5);
    char *s = malloc(n + (text ? 16 : 1));
    if (!s)
        return NULL;
    memcpy(s, type, n);
    strcpy(s + n, text ? "; charset=utf-8" : "");
    char **v = hb_grow(t->types, &t->captypes, t->ntypes + 1, sizeof *v, 256);
    if (!v) {
        free(s);
        return NULL;
    }
    t->types = v;
    return t->types[t->ntypes++] = s;
}

/* First mention of an extension wins, as in Apache and nginx. */
static void insert(mime_table_t *t, const char *ext, size_t n, const char *type)
{
    if (n == 0 || n >= MIME_EXT_MAX)
        return;
    for (uint32_t i = hash(ext, n), k = 0; k < MIME_SLOTS; i++, k++) {
        mime_entry_t *e = &t->slot[i & (MIME_SLOTS - 1)];
        if (!e->ext[0]) {
            for (size_t j = 0; j < n; j++)
                e->ext[j] = (char)(ext[j] >= 'A' && ext[j] <= 'Z' ? ext[j] | 0x20 : ext[j]);
            e->type = type;
            return;
        }
        if (strlen(e->ext) == n && case_equalb(e->ext, n, ext))
            return;
    }
}

static int load_file(mime_table_t *t, FILE *f)
{
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *p = line, *type, *end;
        p += strspn(p, " \t");
        if (*p == '#' || *p == '\n' || !*p)
            continue;
        type = p;
        p += strcspn(p, " \t\n");
        if (*p != ' ' && *p != '\t')
            continue; /* a type without extensions */
        const char *it = intern(t, type, p - type);
        if (!it)
            return -1;
        for (;;) {
            p += strspn(p, " \t");
            end = p + strcspn(p, " \t\n");
            if (end == p)
                break;
            insert(t, p, end - p, it);
            p = end;
        }
    }
    return 0;
}

/* file, a regular file, or NULL with errno; as root by site/privfs.h's rule
   for a file root reads (-m: a link of another user's on the way is not
   followed, ELOOP). */
static FILE *open_types(const char *file)
{
    struct stat st;
    FILE *f;
    char why[512]; /* errno says it to mime_load's caller */
    int fd = pfs_open_file(file, PFS_READ, &st, why, sizeof why), e;
    if (fd < 0)
        return NULL;
    if ((f = fdopen(fd, "r")))
        return f;
    e = errno;
    close(fd);
    errno = e;
    return NULL;
}

mime_table_t *mime_load(const char *file)
{
    mime_table_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    FILE *f = open_types(file ? file : "/etc/mime.types");
    if (!f && file) {
        int e = errno;
        free(t);
        errno = e;
        return NULL;
    }
    int r = f ? load_file(t, f) : 0;
    if (f)
        fclose(f);
    /* the built-in list fills what the file lacks (and is all there is without one) */
    for (size_t i = 0; r == 0 && i < sizeof builtin / sizeof builtin[0]; i++) {
        const char *it = intern(t, builtin[i][1], strlen(builtin[i][1]));
        if (!it)
            r = -1;
        else
            insert(t, builtin[i][0], strlen(builtin[i][0]), it);
    }
    if (r < 0) {
        mime_free(t);
        errno = ENOMEM;
        return NULL;
    }
    return t;
}

void mime_free(mime_table_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ntypes; i++)
        free(t->types[i]);
    free(t->types);
    free(t);
}

const char *mime_lookup(const mime_table_t *t, const char *name, size_t n)
{
    size_t i = n;
    while (i > 0 && name[i - 1] != '.' && name[i - 1] != '/')
        i--;
    if (i == 0 || name[i - 1] != '.' || n - i >= MIME_EXT_MAX || n == i)
        return "application/octet-stream";
    const char *ext = name + i;
    size_t len = n - i;
    for (uint32_t h = hash(ext, len), k = 0; k < MIME_SLOTS; h++, k++) {
        const mime_entry_t *e = &t->slot[h & (MIME_SLOTS - 1)];
        if (!e->ext[0])
            break;
        if (strlen(e->ext) == len && case_equalb(e->ext, len, ext))
            return e->type;
    }
    return "application/octet-stream";
}
