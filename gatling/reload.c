/* `gatling --reload PID` and the server's answer to it: see reload.h. */
#define _GNU_SOURCE /* accept4, struct ucred */
#include "reload.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define RELOAD_WAIT_MS 70000 /* the server waits 60 s for its new process, then answers */
#define RELOAD_READ_MS 5000  /* the answer, once connected: one short write */
#define RELOAD_ANSWER_MAX 2048

/* "@gatling-reload.<pid>" into sa; its length. */
static socklen_t reload_addr(struct sockaddr_un *sa, pid_t pid)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "gatling-reload.%ld", (long)pid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* The process at the other end of a connected socket, as the kernel knows it. */
static pid_t peer_pid(int fd)
{
    struct ucred uc;
    socklen_t l = sizeof uc;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0 ? -1 : uc.pid;
}

void reload_tell(pid_t asker, int ok, const char *text)
{
    if (asker <= 0)
        return;
    struct sockaddr_un sa;
    socklen_t l = reload_addr(&sa, asker);
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

/* The text pid, if it names a running gatling; else 0 after saying why. */
static pid_t reload_target(const char *arg)
{
    char *end, path[64], comm[64] = "";
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < 2 || v > INT_MAX) {
        fprintf(stderr, "gatling: --reload %s: not a process id\n", arg);
        return 0;
    }
    snprintf(path, sizeof path, "/proc/%ld/comm", v); /* readable by all, dumpable or not */
    FILE *f = fopen(path, "re");
    if (!f || !fgets(comm, sizeof comm, f)) {
        fprintf(stderr, "gatling: --reload %ld: no such process\n", v);
        if (f)
            fclose(f);
        return 0;
    }
    fclose(f);
    comm[strcspn(comm, "\n")] = 0;
    if (strncmp(comm, "gatling", 7)) {
        fprintf(stderr, "gatling: --reload %ld: that process is %s, not gatling\n", v, comm);
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

/* Wait on the listening socket ls for pid's answer: its length in text, -1 if
   none came in time, -2 if pid is gone. */
static ssize_t reload_wait(int ls, pid_t pid, char *text, size_t len)
{
    long long end = now_ms() + RELOAD_WAIT_MS;
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

int reload_run(const char *arg)
{
    pid_t pid = arg ? reload_target(arg) : 0;
    if (!arg)
        fprintf(stderr, "gatling: --reload needs the server's pid\n");
    if (pid <= 0)
        return 2;
    struct sockaddr_un sa;
    socklen_t l = reload_addr(&sa, getpid());
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, l) < 0 || listen(ls, 4) < 0) {
        fprintf(stderr, "gatling: --reload: the answer's socket @%s: %s\n", sa.sun_path + 1,
                strerror(errno));
        return 2;
    }
    if (kill(pid, SIGUSR2) < 0) {
        fprintf(stderr, "gatling: --reload %ld: kill(SIGUSR2) failed: %s\n", (long)pid,
                strerror(errno));
        close(ls);
        return 2;
    }
    char text[RELOAD_ANSWER_MAX];
    ssize_t n = reload_wait(ls, pid, text, sizeof text);
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
