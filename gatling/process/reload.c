/* `gatling --reload PID` and the server's answer to it: see reload.h. */
#define _GNU_SOURCE /* accept4, struct ucred */
#include "reload.h"
#include "pidfile.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define RELOAD_WAIT_MS 70000 /* the server waits 60 s for its new process, then answers */
#define RELOAD_READ_MS 5000  /* the answer, once connected: one short write */
#define RELOAD_ANSWER_MAX 2048
#define RELOAD_ASK_MS 5000   /* the answer to "which executable?" (SIGWINCH): the loop's next turn */

/* "@gatling-reload.<pid>.<nonce>" (nonce 0: "@gatling-reload.<pid>") into sa; its length. */
static socklen_t reload_addr(struct sockaddr_un *sa, pid_t pid, unsigned long nonce)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    int n = nonce ? snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "gatling-reload.%ld.%lx",
                             (long)pid, nonce)
                  : snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "gatling-reload.%ld",
                             (long)pid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* The process at the other end of a connected socket, as the kernel knows it. */
static pid_t peer_pid(int fd)
{
    struct ucred uc;
    socklen_t l = sizeof uc;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0 ? -1 : uc.pid;
}

pid_t reload_sender(const siginfo_t *si, volatile unsigned long *nonce)
{
    *nonce = 0;
    if (!si || (si->si_code != SI_USER && si->si_code != SI_QUEUE))
        return 0;
    if (si->si_code == SI_QUEUE)
        *nonce = (unsigned long)(uintptr_t)si->si_value.sival_ptr;
    return si->si_pid;
}

void reload_tell(pid_t asker, unsigned long nonce, int ok, const char *text)
{
    if (asker <= 0)
        return;
    struct sockaddr_un sa;
    socklen_t l = reload_addr(&sa, asker, nonce);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return;
    /* the name's holder must be the process that signalled us: anyone may
       bind an abstract name, so a squatter hears nothing */
    if (connect(fd, (struct sockaddr *)&sa, l) == 0 && peer_pid(fd) == asker) {
        char buf[RELOAD_ANSWER_MAX];
        int n = snprintf(buf, sizeof buf, "%c%s", ok ? '1' : '0', text);
        size_t len = n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
        (void)!send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    close(fd);
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The pid's /proc/PID/status: its name, parent and real uid; 0, or -1. */
static int proc_status(long pid, char *name, size_t len, long *ppid, long *uid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid); /* readable by all */
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "Name:\t", 6)) {
            size_t k = strnlen(line + 6, len - 1);
            memcpy(name, line + 6, k), name[k] = 0, got |= 1;
        }
        else if (sscanf(line, "PPid: %ld", ppid) == 1)
            got |= 2;
        else if (sscanf(line, "Uid: %ld", uid) == 1)
            got |= 4;
    }
    fclose(f);
    return got == 7 ? 0 : -1;
}

/* What a process of ours that is not the server is, by the name it gave itself. */
static const char *side_role(const char *name)
{
    static const char *const role[][2] = {
        {"gatling-worker", "one of -W's workers"}, {"gatling-cgi", "its CGI spawner"},
        {"acme-keeper", "--acme's keeper"},        {"acme-client", "--acme's client"},
        {"gatling-cluster", "--cluster's side process"},
        {"cluster-keeper", "--cluster's keeper"},
    };
    for (size_t i = 0; i < sizeof role / sizeof role[0]; i++)
        if (!strcmp(name, role[i][0]))
            return role[i][1];
    return NULL;
}

/* A uid as its user's name, into buf. */
static const char *user_name(long uid, char *buf, size_t len)
{
    struct passwd *pw = getpwuid((uid_t)uid);
    if (pw)
        snprintf(buf, len, "%s", pw->pw_name);
    else
        snprintf(buf, len, "uid %ld", uid);
    return buf;
}

/* Is the executable whose file was (dev, ino) at path ours: the same inode,
   or the same path, the file replaced since it started?  1, or 0. */
static int same_file(unsigned long long dev, unsigned long long ino, const char *path)
{
    char mine[PATH_MAX];
    struct stat b;
    if (stat("/proc/self/exe", &b) == 0 && (unsigned long long)b.st_dev == dev &&
        (unsigned long long)b.st_ino == ino)
        return 1;
    ssize_t m = readlink("/proc/self/exe", mine, sizeof mine - 1);
    mine[m < 0 ? 0 : m] = 0;
    size_t d = strlen(" (deleted)"), k = strlen(path);
    if (k > d && !strcmp(path + k - d, " (deleted)")) /* /proc/PID/exe's word for it */
        k -= d;
    return m > 0 && (size_t)m == k && !strncmp(path, mine, k);
}

/* Is pid's executable ours?  1; 0 after naming what it runs; -1 when it is
   not ours to look at (EACCES: not dumpable, as the server never is, and we
   are not root). */
static int same_exe(long pid, char *what, size_t len)
{
    char path[64], its[PATH_MAX];
    struct stat a;
    snprintf(path, sizeof path, "/proc/%ld/exe", pid);
    if (stat(path, &a) < 0)
        return errno == EACCES || errno == EPERM ? -1 : (snprintf(what, len, "?"), 0);
    ssize_t n = readlink(path, its, sizeof its - 1);
    its[n < 0 ? 0 : n] = 0;
    if (same_file((unsigned long long)a.st_dev, (unsigned long long)a.st_ino, its))
        return 1;
    snprintf(what, len, "%s", n > 0 ? its : "?");
    return 0;
}

void reload_identify(pid_t asker, unsigned long nonce, const char *exe_id)
{
    if (nonce) /* only a sigqueue's question: a plain kill is nobody's */
        reload_tell(asker, nonce, 1, exe_id);
}

void reload_identity(char *buf, size_t len)
{
    char path[PATH_MAX];
    struct stat a;
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    path[n < 0 ? 0 : n] = 0;
    if (n <= 0 || stat("/proc/self/exe", &a) < 0)
        snprintf(buf, len, "gatling ?");
    else if ((size_t)snprintf(buf, len, "gatling %llu:%llu %s%s", (unsigned long long)a.st_dev,
                              (unsigned long long)a.st_ino, getuid() ? "" : "root ",
                              path) >= len)
        snprintf(buf, len, "gatling ?"); /* a cut path would compare as another file */
}

static int reload_channel(unsigned long *nonce);
static ssize_t reload_wait(int ls, pid_t pid, char *text, size_t len, long long ms);

/* The server's executable where /proc/PID/exe is closed to us (the server is
   never dumpable, so for all but root): ask it (SIGWINCH, whose default is to
   be ignored, so that a process that is not gatling is not harmed) and
   compare its answer, reload_identity()'s.  1, ours; 0 after naming what it
   runs; -1, no answer.  *rooted: it says root started it (and -u made it
   another user). */
static int asked_exe(long pid, char *what, size_t len, int *rooted)
{
    unsigned long nonce;
    char text[RELOAD_ANSWER_MAX];
    unsigned long long dev, ino;
    int at = 0;
    int ls = reload_channel(&nonce);
    if (ls < 0)
        return -1;
    union sigval val = {.sival_ptr = (void *)(uintptr_t)nonce};
    ssize_t n = sigqueue((pid_t)pid, SIGWINCH, val) < 0 ? -1
                : reload_wait(ls, (pid_t)pid, text, sizeof text, RELOAD_ASK_MS);
    close(ls);
    if (n <= 0 || text[0] != '1')
        return -1;
    if (sscanf(text + 1, "gatling %llu:%llu %n", &dev, &ino, &at) != 2 || !at) {
        snprintf(what, len, "?");
        return 0;
    }
    *rooted = !strncmp(text + 1 + at, "root /", 6); /* a path is absolute: never "root " */
    at += *rooted ? 5 : 0;
    if (same_file(dev, ino, text + 1 + at))
        return 1;
    snprintf(what, len, "%s", text + 1 + at);
    return 0;
}

/* The text pid, if it names a gatling server we may reload; else 0 after
   saying why. */
static pid_t reload_target(const char *arg)
{
    char *end, name[64] = "", who[64], me[64], exe[PATH_MAX];
    long ppid, uid, v;
    errno = 0;
    if (strchr(arg, '/')) { /* a --pid-file: its pid */
        if ((v = pidfile_read(arg)) < 0)
            return 0;
    } else {
        v = strtol(arg, &end, 10);
        if (errno || end == arg || *end || v < 2 || v > INT_MAX) {
            fprintf(stderr, "gatling: --reload %s: not a process id (or a pid file's path, "
                    "with a /)\n", arg);
            return 0;
        }
    }
    if (proc_status(v, name, sizeof name, &ppid, &uid) < 0) {
        fprintf(stderr, "gatling: --reload %ld: no such process\n", v);
        return 0;
    }
    const char *role = side_role(name);
    if (role) {
        fprintf(stderr, "gatling: --reload %ld: that process is %s (%s), not the server: "
                "reload its server (its parent is pid %ld)\n", v, role, name, ppid);
        return 0;
    }
    if (strncmp(name, "gatling", 7)) {
        fprintf(stderr, "gatling: --reload %ld: that process is %s, not gatling\n", v, name);
        return 0;
    }
    /* root may reload a server of -u's user that it started: named by its
       pid file, or by a bare pid if the server says root started it (a bare
       pid may be one that user started, pidof's) */
    int rooted = 0, bare = (uid_t)uid != getuid() && getuid() == 0 && !strchr(arg, '/');
    int same = bare ? asked_exe(v, exe, sizeof exe, &rooted) : 0;
    if ((uid_t)uid != getuid() && (getuid() != 0 || (bare && (same < 0 || !rooted)))) {
        user_name(uid, who, sizeof who);
        fprintf(stderr, "gatling: --reload %ld: that %s runs as %s, you as %s: only its user "
                "reloads it (runuser -u %s -- gatling --reload %ld; a unit's: systemctl "
                "reload; one root started with -u and --pid-file: gatling --reload "
                "PIDFILE)\n", v, name, who, user_name((long)getuid(), me, sizeof me), who, v);
        return 0;
    }
    if (!bare)
        same = same_exe(v, exe, sizeof exe);
    if (same < 0)
        same = asked_exe(v, exe, sizeof exe, &rooted);
    if (same < 0) { /* never "all is well" from a process we could not tell from gatling */
        fprintf(stderr, "gatling: --reload %ld: that %s's executable cannot be compared with "
                "this one (/proc/%ld/exe is closed to you, and it did not say which it runs "
                "within %d s: not gatling, or a gatling from before it was asked): reload it "
                "as root (gatling --reload PIDFILE), or restart it\n", v, name, v,
                RELOAD_ASK_MS / 1000);
        return 0;
    }
    if (!same) {
        fprintf(stderr, "gatling: --reload %ld: that process runs %s, not this gatling\n", v,
                exe);
        return 0;
    }
    return (pid_t)v;
}

/* The answer on c (from pid, checked), into text: its length, or -1. */
static ssize_t reload_read(int c, char *text, size_t len)
{
    size_t have = 0;
    long long end = now_ms() + RELOAD_READ_MS;
    while (have < len - 1) {
        struct pollfd p = {.fd = c, .events = POLLIN};
        long long left = end - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return -1;
        ssize_t n = read(c, text + have, len - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    text[have] = 0;
    return have ? (ssize_t)have : -1;
}

/* Wait on the listening socket ls for pid's answer: its length in text, -1
   if none came within ms, -2 if pid is gone. */
static ssize_t reload_wait(int ls, pid_t pid, char *text, size_t len, long long ms)
{
    long long end = now_ms() + ms;
    for (long long left; (left = end - now_ms()) > 0;) {
        struct pollfd p = {.fd = ls, .events = POLLIN};
        int r = poll(&p, 1, left < 1000 ? (int)left : 1000);
        if (r == 0 && kill(pid, 0) < 0 && errno == ESRCH)
            return -2;
        int c = r > 0 ? accept4(ls, NULL, NULL, SOCK_CLOEXEC) : -1;
        if (c < 0)
            continue;
        ssize_t n = peer_pid(c) == pid ? reload_read(c, text, len) : -1; /* no one else's word */
        close(c);
        if (n > 0)
            return n;
    }
    return -1;
}

/* The answer's socket, on a name no one can guess (its nonce into *nonce):
   its descriptor, or -1 after saying why. */
static int reload_channel(unsigned long *nonce)
{
    struct sockaddr_un sa;
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), bound = 0;
    for (int tries = 0; ls >= 0 && !bound && tries < 3; tries++) { /* taken: only by chance */
        if (getrandom(nonce, sizeof *nonce, 0) != sizeof *nonce) {
            fprintf(stderr, "gatling: --reload: getrandom() failed: %s\n", strerror(errno));
            close(ls);
            return -1;
        }
        *nonce |= 1; /* never 0, which names the plain "@gatling-reload.<pid>" */
        socklen_t l = reload_addr(&sa, getpid(), *nonce);
        bound = bind(ls, (struct sockaddr *)&sa, l) == 0;
    }
    if (!bound || listen(ls, 4) < 0) {
        fprintf(stderr, "gatling: --reload: the answer's socket: %s\n", strerror(errno));
        if (ls >= 0)
            close(ls);
        return -1;
    }
    return ls;
}

int reload_run(const char *arg)
{
    pid_t pid = arg ? reload_target(arg) : 0;
    if (!arg)
        fprintf(stderr, "gatling: --reload needs the server's pid\n");
    if (pid <= 0)
        return 2;
    unsigned long nonce;
    int ls = reload_channel(&nonce);
    if (ls < 0)
        return 2;
    union sigval val = {.sival_ptr = (void *)(uintptr_t)nonce};
    if (sigqueue(pid, SIGUSR2, val) < 0) {
        fprintf(stderr, "gatling: --reload %ld: sigqueue(SIGUSR2) failed: %s\n", (long)pid,
                strerror(errno));
        close(ls);
        return 2;
    }
    char text[RELOAD_ANSWER_MAX];
    ssize_t n = reload_wait(ls, pid, text, sizeof text, RELOAD_WAIT_MS);
    close(ls);
    if (n > 0 && text[0] == '1') {
        printf("gatling: --reload %ld: %s\n", (long)pid, text + 1);
        return 0;
    }
    if (n > 0)
        fprintf(stderr, "gatling: --reload %ld: %s\n", (long)pid, text + 1);
    else
        fprintf(stderr, "gatling: --reload %ld: %s (see its error log)\n", (long)pid,
                n == -2 ? "it exited before it answered" : "no answer within 70 s");
    return 1;
}
