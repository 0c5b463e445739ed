/*
 * kb-manymap: N small files (4 KiB each, made first, untimed) in a temporary
 * directory under -d; then each is opened, mapped and its first page
 * touched, the descriptor closed and the mapping kept: the latency of
 * open(), mmap() and the touch as the mappings grow.  The directory is
 * removed at the end, also when interrupted.
 */
#include "kb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char dir[600];

static void name(char *out, size_t len, long i)
{
    snprintf(out, len, "%s/%ld", dir, i);
}

static void clean(long made)
{
    char p[700];
    for (long i = 0; i < made; i++) {
        name(p, sizeof p, i);
        unlink(p);
    }
    rmdir(dir);
}

int main(int argc, char **argv)
{
    kb_opts_t o;
    kb_start(argc, argv, "kb-manymap",
             "latency of open() + mmap() + first touch of one more small file, as mappings grow",
             "open\tmmap\ttouch", 10000, 0, 1, &o);
    snprintf(dir, sizeof dir, "%s/kb-manymap.XXXXXX", o.dir);
    if (!mkdtemp(dir))
        return kb_end(0, kb_fail("mkdtemp() in -d", errno, 0));
    static char page[4096];
    memset(page, 'k', sizeof page);
    char p[700];
    long made;
    for (made = 0; made < o.n && !kb_stop; made++) {
        name(p, sizeof p, made);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0 || write(fd, page, sizeof page) != (ssize_t)sizeof page) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            clean(made + (fd >= 0));
            return kb_end(0, kb_fail("creating the files", e, 0));
        }
        close(fd);
    }
    printf("# %ld files of 4 KiB in %s\n", made, dir);
    int rc = KB_OK;
    long n;
    for (n = 1; n <= made && !kb_stop; n++) {
        name(p, sizeof p, n - 1);
        uint64_t t0 = kb_now();
        int fd = open(p, O_RDONLY);
        uint64_t t1 = kb_now();
        if (fd < 0) {
            rc = kb_fail("open()", errno, n - 1);
            break;
        }
        volatile char *m = mmap(NULL, sizeof page, PROT_READ, MAP_SHARED, fd, 0);
        uint64_t t2 = kb_now();
        if (m == MAP_FAILED) {
            rc = kb_fail("mmap()", errno, n - 1);
            close(fd);
            break;
        }
        (void)m[0];
        uint64_t t3 = kb_now();
        close(fd);
        uint64_t d[3] = {t1 - t0, t2 - t1, t3 - t2};
        if (kb_due(n))
            kb_sample(n, 3, d);
    }
    clean(made);
    return kb_end(n - 1, rc);
}
