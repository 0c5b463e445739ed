/* t_acme_store — the ACME client's files (gatling/acme/acme_store.c): atomic
   writes leave no temporary file; acme_install's layout (NAME -> .acme/NAME.SERIAL/,
   privkey.pem 0600), the swap, and the pruning that keeps the previous version. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

/* Each way a write, a read or an install fails, and what it leaves (issue 55:
   every branch of acme_store.c). */
static void faults(int fd, const char *dir)
{
    char big[20000], name[600], path[700];
    size_t len;
    memset(big, 'x', sizeof big);
    ok(mkdirat(fd, "sub", 0755) == 0 && acme_write_atomic(fd, "sub/f", "s", 1, 0644) == 0,
       "a write into a subdirectory");
    snprintf(path, sizeof path, "%s/sub", dir);
    is_int(count(path), 1, "no temporary file left there");
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = 0;
    errno = 0;
    ok(acme_write_atomic(fd, name, "s", 1, 0644) < 0 && errno == ENAMETOOLONG,
       "a name past the path's room: ENAMETOOLONG");
    ok(acme_write_atomic(fd, "nosuch/f", "s", 1, 0644) < 0 && errno == ENOENT,
       "a write into no directory: ENOENT");
    ok(mkdirat(fd, "busy", 0755) == 0 && acme_write_atomic(fd, "busy/f", "s", 1, 0644) == 0 &&
           acme_write_atomic(fd, "busy", "s", 1, 0644) < 0,
       "a write over a directory that holds a file: refused");
    ok(faccessat(fd, ".busy.tmp", F_OK, 0) < 0, "and its temporary file removed");
    ok(!acme_read_file(fd, "nosuch", 100, &len) && errno == ENOENT, "a read of no file: NULL");
    ok(acme_write_atomic(fd, "big", big, sizeof big, 0644) == 0, "a 20000-byte file");
    char *s = acme_read_file(fd, "big", 1 << 20, &len);
    ok(s && len == sizeof big && s[len] == 0 && !memcmp(s, big, len), "read back past 8 KiB");
    free(s);
    errno = 0;
    ok(!acme_read_file(fd, "big", 8192, &len) && errno == EFBIG, "past max: NULL, EFBIG");
    acme_empty_dir(fd, "status", 0); /* not a directory: nothing happens */
    acme_empty_dir(fd, "nosuch", 0);
    ok(acme_write_atomic(fd, "busy/own", "o", 1, 0644) == 0 &&
           acme_write_atomic(fd, "busy/taken", "t", 1, ACME_TAKEN_MODE) == 0,
       "a file of the client's and one taken from another node");
    acme_empty_dir(fd, "busy", ACME_TAKEN_MODE);
    snprintf(path, sizeof path, "%s/busy", dir);
    ok(count(path) == 1 && faccessat(fd, "busy/taken", F_OK, 0) == 0,
       "empty_dir keeping the taken mode: only the taken file left");
    acme_empty_dir(fd, "busy", 0);
    ok(count(path) == 0 && faccessat(fd, "status", F_OK, 0) == 0,
       "empty_dir: a directory emptied, a file and a missing name left alone");
    errno = 0;
    ok(acme_install(fd, name, "01", "C", 1, "K", 1) < 0 && errno == ENAMETOOLONG,
       "install of a name past the path's room: ENAMETOOLONG");
    ok(mkdirat(fd, "c.test", 0755) == 0 && acme_write_atomic(fd, "c.test/x", "s", 1, 0644) == 0 &&
           acme_install(fd, "c.test", "01", "C", 1, "K", 1) < 0,
       "install over a directory that holds a file: refused");
    ok(faccessat(fd, ".c.test.tmp", F_OK, AT_SYMLINK_NOFOLLOW) < 0, "its temporary symlink removed");
    ok(acme_write_atomic(fd, ".acme/d.test.01", "f", 1, 0644) == 0 &&
           acme_install(fd, "d.test", "01", "C", 1, "K", 1) < 0 &&
           faccessat(fd, "d.test", F_OK, AT_SYMLINK_NOFOLLOW) < 0,
       "a version's directory that is a file: refused, no link made");
    is_int(acme_install(fd, "a.test", "03", "CHAIN3b", 7, "KEY3", 4), 0, "the same serial again");
    s = acme_read_file(fd, "a.test/fullchain.pem", 100, &len);
    is_str(s, "CHAIN3b", "rewritten in place");
    free(s);
    char tmpl[] = "/tmp/t_acme_store.XXXXXX";
    char *other = mkdtemp(tmpl);
    int ofd = other ? open(other, O_RDONLY | O_DIRECTORY) : -1;
    ok(ofd >= 0 && acme_write_atomic(ofd, ".acme", "f", 1, 0644) == 0 &&
           acme_install(ofd, "e.test", "01", "C", 1, "K", 1) < 0,
       "a .acme that is a file: refused");
    if (ofd >= 0)
        close(ofd);
    snprintf(path, sizeof path, "rm -rf '%s'", other ? other : "/nonexistent");
    if (system(path) != 0)
        ok(0, "cleaning up");
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
    faults(fd, dir);
    close(fd);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        ok(0, "cleaning up");
    return tap_done();
}
