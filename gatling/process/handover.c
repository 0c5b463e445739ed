/* Listeners from outside and the binary upgrade: see handover.h. */
#define _GNU_SOURCE /* pipe2 */
#include "handover.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define FIRST_FD 3 /* SD_LISTEN_FDS_START */

static char exe[PATH_MAX];  /* the binary, as a path: a new file there is the upgrade */
static char **args;         /* main's argv */
static int start_dir = -1;  /* where relative paths in args were meant */
static int chrooted;
static int dgram_first = -1; /* where HTTP/3's sockets begin, after the listeners passed to us */
static pid_t dgram_from;     /* the old binary that passed them (our parent while it runs) */
static unsigned char passed_role[HANDOVER_MAX_FDS]; /* HANDOVER_*, by descriptor - FIRST_FD */
static int npassed;

static int captured = -1;    /* an upgrade's start: stderr goes to this file until it serves */
static int real_stderr = -1; /* ... and this was stderr */
static int capture_to = -1;  /* ... and this is the old process's pipe, which hears of a failure */

static const char *const role_name[] = {"unknown", "http", "https", "ftp"}; /* by HANDOVER_* */

extern char **environ;

int handover_init(char **argv)
{
    args = argv;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0 && (size_t)n < sizeof exe - 1) {
        exe[n] = 0;
        /* replaced while we ran (rename, dpkg): the path is what counts */
        static const char deleted[] = " (deleted)";
        size_t d = sizeof deleted - 1;
        if ((size_t)n > d && !strcmp(exe + n - d, deleted))
            exe[n - d] = 0;
    } else if (!argv[0] || !strchr(argv[0], '/') || !realpath(argv[0], exe)) {
        exe[0] = 0; /* found on PATH and no /proc: no upgrade */
    }
    start_dir = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return exe[0] && start_dir >= 0 ? 0 : -1;
}

void handover_chrooted(void)
{
    chrooted = 1;
    /* no upgrade from a chroot, and a directory outside it is a way out of it
       (fchdir, openat ".."): not kept */
    if (start_dir >= 0)
        close(start_dir);
    start_dir = -1;
}

/* A whole decimal number in [1, max] from the environment, 0 if unset, -1 if bad. */
static long env_number(const char *name, long max)
{
    const char *s = getenv(name);
    if (!s)
        return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || end == s || *end || v < 1 || v > max ? -1 : v;
}

/* LISTEN_FDNAMES: n names, colon-separated, into passed_role; a name that
   is not ours (or none) leaves the listener unnamed. */
static void read_names(const char *names, long n)
{
    memset(passed_role, 0, sizeof passed_role);
    for (long i = 0; names && i < n && i < HANDOVER_MAX_FDS; i++) {
        size_t len = strcspn(names, ":");
        for (unsigned r = HANDOVER_HTTP; r <= HANDOVER_FTP; r++)
            if (strlen(role_name[r]) == len && !strncmp(names, role_name[r], len))
                passed_role[i] = (unsigned char)r;
        names += len;
        if (*names == ':')
            names++;
    }
}

int handover_role(int fd)
{
    int i = fd - FIRST_FD;
    return i >= 0 && i < npassed ? passed_role[i] : HANDOVER_UNNAMED;
}

int handover_listeners(int *fds, int max, int *groups)
{
    long pid = env_number("LISTEN_PID", LONG_MAX);
    long n = env_number("LISTEN_FDS", INT_MAX);
    long g = env_number("GATLING_LISTEN_GROUPS", HANDOVER_MAX_FDS);
    read_names(getenv("LISTEN_FDNAMES"), n);
    unsetenv("LISTEN_PID"), unsetenv("LISTEN_FDS"), unsetenv("LISTEN_FDNAMES");
    unsetenv("GATLING_LISTEN_GROUPS");
    *groups = 1;
    if (pid <= 0 || pid != (long)getpid() || n == 0) /* not for us (sd_listen_fds(3)) */
        return 0;
    if (n < 0 || n > max) {
        fprintf(stderr, "gatling: LISTEN_FDS=%s: between 1 and %d listeners, please\n",
                n < 0 ? "?" : "too many", max);
        return -1;
    }
    if (g < 0 || (g > 0 && n % g)) {
        fprintf(stderr, "gatling: GATLING_LISTEN_GROUPS does not divide LISTEN_FDS=%ld\n", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int fd = FIRST_FD + i, type = 0, acc = 0;
        socklen_t tl = sizeof type, al = sizeof acc;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || type != SOCK_STREAM ||
            !acc) {
            fprintf(stderr, "gatling: descriptor %d (of LISTEN_FDS=%ld) is not a listening "
                    "stream socket\n", fd, n);
            return -1;
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
            return -1;
        fds[i] = fd;
    }
    *groups = g > 0 ? (int)g : 1;
    dgram_first = FIRST_FD + (int)n;
    npassed = n < HANDOVER_MAX_FDS ? (int)n : HANDOVER_MAX_FDS;
    return (int)n;
}

int handover_datagrams(int *fds, int max, int *bank)
{
    long n = env_number("GATLING_QUIC_FDS", HANDOVER_MAX_DGRAMS);
    long b = env_number("GATLING_QUIC_BANK", 2); /* 1 or 2: bank 0 or 1 */
    unsetenv("GATLING_QUIC_FDS"), unsetenv("GATLING_QUIC_BANK");
    *bank = 0;
    if (dgram_first < 0 || n == 0) /* no upgrade of ours, or none passed */
        return 0;
    if (n < 0 || n > max || b <= 0) {
        fprintf(stderr, "gatling: GATLING_QUIC_FDS or GATLING_QUIC_BANK out of range\n");
        return -1;
    }
    for (int i = 0; i < n; i++)
        fds[i] = dgram_first + i;
    *bank = (int)b - 1;
    dgram_from = getppid();
    return (int)n;
}

void handover_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = path ? strlen(path) : 0;
    if (n < 2 || n >= sizeof sa.sun_path || (path[0] != '/' && path[0] != '@'))
        return;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@') /* an abstract socket */
        sa.sun_path[0] = 0;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    (void)!sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
                  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n));
    close(fd);
}

/* The captured start-up's text to the real stderr; to the old process too
   (after an 'e') unless it serves (ok). */
static void capture_end(int ok)
{
    char text[HANDOVER_WHY_MAX];
    if (captured < 0)
        return;
    text[0] = 'e';
    size_t have = 1;
    for (off_t at = 0;;) {
        char buf[4096];
        ssize_t n = pread(captured, buf, sizeof buf, at);
        if (n <= 0)
            break;
        (void)!write(real_stderr, buf, (size_t)n);
        size_t k = (size_t)n < sizeof text - have ? (size_t)n : sizeof text - have;
        memcpy(text + have, buf, k), have += k;
        at += n;
    }
    dup2(real_stderr, STDERR_FILENO);
    close(real_stderr), close(captured);
    captured = real_stderr = -1;
    if (!ok && capture_to >= 0) /* one write of at most PIPE_BUF: whole or not at all */
        (void)!write(capture_to, text, have);
}

static void capture_exit(void)
{
    capture_end(0);
}

void handover_capture(void)
{
    long fd = env_number("GATLING_UPGRADE_FD", INT_MAX);
    const char *why = getenv("GATLING_UPGRADE_WHY");
    int ask = why && !strcmp(why, "1");
    unsetenv("GATLING_UPGRADE_WHY");
    if (fd <= 0 || !ask)
        return;
    FILE *t = tmpfile();
    int tfd = t ? fcntl(fileno(t), F_DUPFD_CLOEXEC, 0) : -1;
    if (t)
        fclose(t);
    if (tfd < 0 || (real_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0)) < 0 ||
        dup2(tfd, STDERR_FILENO) < 0) {
        if (tfd >= 0)
            close(tfd);
        if (real_stderr >= 0)
            close(real_stderr);
        real_stderr = -1;
        return; /* the old process then says "see its messages" */
    }
    captured = tfd, capture_to = (int)fd;
    atexit(capture_exit);
}

void handover_capture_end(void)
{
    capture_end(1);
}

int handover_stderr(void)
{
    return real_stderr >= 0 ? real_stderr : STDERR_FILENO;
}

int handover_outcome(int fd, char *why, size_t len)
{
    char b[HANDOVER_WHY_MAX];
    ssize_t n = read(fd, b, sizeof b);
    if (len)
        why[0] = 0;
    if (n >= 1 && b[0] == 'r')
        return 1;
    size_t k = 0;
    for (ssize_t i = 1; i < n && k + 3 < len; i++) /* lines joined by "; " */
        if (b[i] == '\n')
            k += (size_t)snprintf(why + k, len - k, "%s", i + 1 < n ? "; " : "");
        else
            why[k++] = (unsigned char)b[i] < ' ' ? '?' : b[i], why[k] = 0;
    return 0;
}

int handover_is_upgrade(void)
{
    return env_number("GATLING_UPGRADE_FD", INT_MAX) > 0;
}

void handover_ready(void)
{
    capture_end(1);
    char state[64];
    /* MAINPID: after an upgrade the main process is a new one (NotifyAccess=all) */
    snprintf(state, sizeof state, "READY=1\nMAINPID=%ld", (long)getpid());
    handover_notify(state);
    long fd = env_number("GATLING_UPGRADE_FD", INT_MAX);
    unsetenv("GATLING_UPGRADE_FD");
    if (fd > 0) {
        (void)!write((int)fd, "r", 1);
        close((int)fd);
    }
}

static int is_ours(const char *var)
{
    static const char *const ours[] = {"LISTEN_PID=", "LISTEN_FDS=", "LISTEN_FDNAMES=",
                                       "GATLING_LISTEN_GROUPS=", "GATLING_UPGRADE_FD=",
                                       "GATLING_QUIC_FDS=", "GATLING_QUIC_BANK=",
                                       "GATLING_UPGRADE_WHY="};
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++)
        if (!strncmp(var, ours[i], strlen(ours[i])))
            return 1;
    return 0;
}

/* Digits of v into p (room for 20), NUL-terminated: async-signal-safe. */
static void put_number(char *p, long v)
{
    char d[24];
    int k = 0;
    do
        d[k++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (k > 0)
        *p++ = d[--k];
    *p = 0;
}

static char v_pid[48]; /* "LISTEN_PID=": the child puts its pid after it */

/* The new binary's environment: ours without our variables, then its own
   (n listeners in groups, all descriptors with dg's).  NULL: out of memory. */
static char **upgrade_env(int n, const unsigned char *roles, int groups, int all,
                          const handover_dgrams_t *dg)
{
    static char v_fds[32], v_groups[48], v_ready[48], v_dg[48], v_bank[48];
    static char v_names[sizeof "LISTEN_FDNAMES=" + HANDOVER_MAX_FDS * sizeof "unknown:"];
    size_t nenv = 0, k = 0;
    while (environ[nenv])
        nenv++;
    char **env = malloc((nenv + 9) * sizeof *env);
    if (!env)
        return NULL;
    for (size_t i = 0; i < nenv; i++)
        if (!is_ours(environ[i]))
            env[k++] = environ[i];
    snprintf(v_fds, sizeof v_fds, "LISTEN_FDS=%d", n);
    snprintf(v_groups, sizeof v_groups, "GATLING_LISTEN_GROUPS=%d", groups);
    snprintf(v_ready, sizeof v_ready, "GATLING_UPGRADE_FD=%d", FIRST_FD + all);
    strcpy(v_pid, "LISTEN_PID=");
    env[k++] = v_fds, env[k++] = v_groups, env[k++] = v_ready, env[k++] = v_pid;
    env[k++] = "GATLING_UPGRADE_WHY=1"; /* a failed start sends its messages (handover_capture) */
    if (roles) { /* n <= HANDOVER_MAX_FDS names of at most "unknown:" each */
        size_t at = (size_t)snprintf(v_names, sizeof v_names, "LISTEN_FDNAMES=");
        for (int i = 0; i < n && at < sizeof v_names; i++)
            at += (size_t)snprintf(v_names + at, sizeof v_names - at, "%s%s", i ? ":" : "",
                                   role_name[roles[i] <= HANDOVER_FTP ? roles[i] : 0]);
        env[k++] = v_names;
    }
    if (dg && dg->n > 0) { /* HTTP/3's sockets after the listeners, and the new one's bank */
        snprintf(v_dg, sizeof v_dg, "GATLING_QUIC_FDS=%d", dg->n);
        snprintf(v_bank, sizeof v_bank, "GATLING_QUIC_BANK=%d", dg->bank + 1);
        env[k++] = v_dg, env[k++] = v_bank;
    }
    env[k] = NULL;
    return env;
}

int handover_upgrade(const int *fds, const unsigned char *roles, int n, int groups,
                     const handover_dgrams_t *dg, pid_t *pid, char *why, size_t why_len)
{
    if (chrooted || !exe[0] || start_dir < 0) {
        snprintf(why, why_len, "impossible: %s",
                 chrooted ? "chrooted (-c as root), the binary is out of sight"
                          : "the binary's path or the start directory is unknown");
        return -1;
    }
    int nd = dg ? dg->n : 0, all = n + nd;
    if (n < 1 || n > HANDOVER_MAX_FDS || groups < 1 || n % groups || nd < 0 ||
        nd > HANDOVER_MAX_DGRAMS) {
        snprintf(why, why_len, "%d listeners in %d groups cannot be handed over", n, groups);
        return -1;
    }
    if (nd > 0 && dgram_from > 1 && getppid() == dgram_from) {
        /* it still drains its HTTP/3 connections on the bank a new one would take */
        snprintf(why, why_len, "the previous process (pid %d) still runs; HTTP/3 has room "
                 "for two at a time, try again once it has exited", (int)dgram_from);
        return -1;
    }
    if (access(exe, X_OK) < 0) {
        snprintf(why, why_len, "%s: %s", exe, strerror(errno));
        return -1;
    }
    /* everything the child needs is made here: after fork() in a process with
       threads only async-signal-safe calls are allowed */
    char **env = upgrade_env(n, roles, groups, all, dg);
    int ready[2];
    if (!env || pipe2(ready, O_CLOEXEC) < 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        free(env);
        return -1;
    }

    pid_t p = fork();
    if (p == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL); /* the -W supervisor blocks some */
        put_number(v_pid + 11, (long)getpid());
        static const char failed[] = "gatling: binary upgrade: cannot start the new binary\n";
        if (fchdir(start_dir) < 0) /* first: its descriptor may sit on a target below */
            goto fail;
        /* out of the way first, then into 3, 4, ...: a source may sit on a target */
        int tmp[HANDOVER_MAX_FDS + HANDOVER_MAX_DGRAMS + 1], low = FIRST_FD + all + 1;
        for (int i = 0; i <= all; i++)
            if ((tmp[i] = fcntl(i < n    ? fds[i]
                                : i < all ? dg->fds[i - n]
                                          : ready[1],
                                F_DUPFD_CLOEXEC, low)) < 0)
                goto fail;
        for (int i = 0; i <= all; i++)
            if (dup2(tmp[i], FIRST_FD + i) < 0) /* dup2 clears close-on-exec */
                goto fail;
        execve(exe, args, env);
    fail:
        (void)!write(STDERR_FILENO, failed, sizeof failed - 1);
        _exit(127);
    }
    int e = errno;
    free(env);
    close(ready[1]);
    if (p < 0) {
        snprintf(why, why_len, "fork() failed: %s", strerror(e));
        close(ready[0]);
        return -1;
    }
    *pid = p;
    return ready[0];
}
