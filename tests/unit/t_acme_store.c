/* t_acme_store — the ACME client's files (gatling/acme/acme_store.c): atomic
   writes leave no temporary file; acme_install's layout (NAME -> .acme/NAME.SERIAL/,
   privkey.pem 0600), the swap, and the pruning that keeps the previous version. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acme_store.h"
#include "tap.h"

static int count(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.' || (e->d_name[1] && e->d_name[1] != '.');
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    char tmpl[] = "/tmp/t_acme_store.XXXXXX", path[512], link[256];
    char *dir = mkdtemp(tmpl);
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY) : -1;
    struct stat st;
    size_t len;
    ok(fd >= 0, "a scratch directory");
    is_int(acme_write_atomic(fd, "status", "orders 1\n", 9, 0644), 0, "an atomic write");
    char *s = acme_read_file(fd, "status", 100, &len);
    is_str(s, "orders 1\n", "reads back");
    free(s);
    is_int(count(dir), 1, "no temporary file left");
    is_int(acme_install(fd, "a.test", "01", "CHAIN1", 6, "KEY1", 4), 0, "install version 01");
    is_int(acme_install(fd, "a.test", "02", "CHAIN2", 6, "KEY2", 4), 0, "install version 02");
    is_int(acme_install(fd, "b.a.test", "0f", "CHAINB", 6, "KEYB", 4), 0, "another name");
    is_int(acme_install(fd, "a.test", "03", "CHAIN3", 6, "KEY3", 4), 0, "install version 03");
    ssize_t n = readlinkat(fd, "a.test", link, sizeof link - 1);
    link[n > 0 ? n : 0] = 0;
    is_str(link, ".acme/a.test.03", "a.test is a relative symlink to the newest");
    s = acme_read_file(fd, "a.test/fullchain.pem", 100, &len);
    is_str(s, "CHAIN3", "its chain");
    free(s);
    snprintf(path, sizeof path, "%s/a.test/privkey.pem", dir);
    ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "its key is 0600");
    snprintf(path, sizeof path, "%s/.acme", dir);
    is_int(count(path), 3, "a.test.02 (the previous) and .03 kept, .01 pruned, b.a.test's kept");
    snprintf(path, sizeof path, "%s/.acme/a.test.01", dir);
    ok(access(path, F_OK) < 0, "a.test.01 is gone");
    is_int(count(dir), 4, "status, .acme, a.test, b.a.test: no temporary symlink left");
    is_int(acme_install(fd, "../x", "01", "C", 1, "K", 1), -1, "a name with a slash fails");
    close(fd);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        ok(0, "cleaning up");
    return tap_done();
}
