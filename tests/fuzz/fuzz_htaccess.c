/*
 * .htaccess files: the input is written as the .htaccess of a directory in
 * a private temp dir (on /dev/shm), then checked with no credentials and
 * with one Basic credential, through the real htaccess_check.
 */
#define _GNU_SOURCE
#include "fuzz.h"
#include "htaccess.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static int rootfd = -1;
static char dir[64] = "/dev/shm/fuzz_htaccess.XXXXXX";

static void cleanup(void)
{
    unlinkat(rootfd, "d/.htaccess", 0);
    unlinkat(rootfd, "d", AT_REMOVEDIR);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (rootfd < 0) {
        if (!mkdtemp(dir) || (rootfd = open(dir, O_RDONLY | O_DIRECTORY)) < 0 ||
            mkdirat(rootfd, "d", 0755) < 0)
            abort();
        atexit(cleanup);
    }
    int fd = openat(rootfd, "d/.htaccess", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);
    char realm[128];
    int r = htaccess_check(rootfd, "/d/x.txt", 8, NULL, 0, realm, sizeof realm);
    CHECK(r == 0 || r == 401 || r == 500);
    CHECK(strlen(realm) < sizeof realm && !strchr(realm, '"') && !strchr(realm, '\n'));
    static const char auth[] = "Basic YWxpY2U6d29uZGVybGFuZA=="; /* alice:wonderland */
    r = htaccess_check(rootfd, "/d/x.txt", 8, auth, sizeof auth - 1, realm, sizeof realm);
    CHECK(r == 0 || r == 401 || r == 500);
    return 0;
}
