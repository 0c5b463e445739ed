/*
 * kb-mmap: a sparse file of 2N pages (in -d, removed at once: only the open
 * descriptor keeps it), read once so that its pages are in the page cache;
 * then every other page is mapped on its own (the mappings cannot merge):
 * the latency of each mmap() and of the first touch of the page it maps, as
 * the mappings grow.  vm.max_map_count is the usual limit.
 */
#include "kb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    kb_opts_t o;
    kb_start(argc, argv, "kb-mmap",
             "latency of mmap() of one page of a cached file, and of its first touch, as "
             "mappings grow", "mmap\ttouch", 10000, 0, 1, &o);
    long page = sysconf(_SC_PAGESIZE);
    char path[600];
    snprintf(path, sizeof path, "%s/kb-mmap.XXXXXX", o.dir);
    int fd = mkstemp(path);
    if (fd < 0)
        return kb_end(0, kb_fail("mkstemp() in -d", errno, 0));
    unlink(path);
    off_t size = (off_t)o.n * 2 * page;
    if (ftruncate(fd, size) < 0)
        return kb_end(0, kb_fail("ftruncate()", errno, 0));
    static char buf[1 << 16];
    for (off_t at = 0; at < size && !kb_stop;) { /* into the page cache */
        ssize_t r = pread(fd, buf, sizeof buf, at);
        if (r <= 0)
            break;
        at += r;
    }
    printf("# file: %lld bytes, sparse, read once\n", (long long)size);
    int rc = KB_OK;
    long n;
    for (n = 1; n <= o.n && !kb_stop; n++) {
        uint64_t t0 = kb_now();
        volatile char *m = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd,
                                (off_t)(n - 1) * 2 * page);
        uint64_t t1 = kb_now();
        if (m == MAP_FAILED) {
            rc = kb_fail("mmap()", errno, n - 1);
            break;
        }
        (void)m[0];
        uint64_t t2 = kb_now();
        uint64_t d[2] = {t1 - t0, t2 - t1};
        if (kb_due(n))
            kb_sample(n, 2, d);
    }
    close(fd); /* the mappings and the file go with the process */
    return kb_end(n - 1, rc);
}
