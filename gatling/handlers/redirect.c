/* Redirects: see redirect.h. */
#include "redirect.h"
#include "http/hbuf.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * A Location that would not fit the response head (a long -r URL and a long
 * path whose bytes all need escaping) is refused as 414: the URI is what is
 * too long.  The value gets what a "Location: ...\r\n" line had.
 */
int redirect_path(exchange_t *ex, int status, const char *prefix, const path_t *p,
                  const char *suffix)
{
    size_t plen = strlen(prefix), cap = EX_FIELD_MAX - 12;
    char *loc = malloc(cap);
    if (!loc)
        return -1;
    hbuf_t b = hb_init(loc, cap);
    hb_puts(&b, prefix);
    if (p->len) { /* a prefix URL ending in '/' gets no second slash */
        size_t skip = plen && prefix[plen - 1] == '/';
        hb_encode(&b, p->path + skip, p->len - skip, PATH_KEEP);
    }
    hb_puts(&b, suffix);
    if (p->query) {
        hb_puts(&b, "?");
        hb_put(&b, p->query, p->query_len);
    }
    const char *value = hb_str(&b);
    int r = value ? ex_error(ex, status, "Location", value) : ex_error(ex, 414, NULL, NULL);
    free(loc);
    return r;
}

int redirect_symlink(exchange_t *ex, int dirfd, const char *rel)
{
    char target[2048];
    ssize_t n = readlinkat(dirfd, *rel ? rel : ".", target, sizeof target - 1);
    if (n <= 0)
        return 0;
    target[n] = 0;
    if (strncmp(target, "http://", 7) && strncmp(target, "https://", 8))
        return 0;
    for (ssize_t i = 0; i < n; i++)
        if ((unsigned char)target[i] <= ' ' || target[i] == 0x7f)
            return 0; /* never put a control character into a header */
    return ex_error(ex, 301, "Location", target) < 0 ? -1 : 1;
}
