/* acme_cluster — see acme_cluster.h. */
#define _GNU_SOURCE
#include "acme_cluster.h"
#include "acme_cluster_acme.h"
#include "acme_etcd.h"
#include "site/elog.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <sys/wait.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define ROUND_MS 200
#define TICKETS_EVERY 2   /* seconds between looks at the tickets key */
#define PURGE_TTL 10      /* seconds a purge key lives in etcd */
#define PURGES_MAX 1000   /* purge keys read in one round */
#define TICKETS_MAGIC "gatling-tickets-1"

typedef struct side {
    const config_t *cfg;
    const proc_t *proc; /* -u's ids, the error log */
    cluster_view_t *view;
    etcd_t *etcd;
    elog_t log;
    int purge_fd, rotate_s;
    char prefix[300]; /* "/gatling/NAME/" */
    size_t plen;
    char node[17];    /* this process's purge keys: random hex */
    uint64_t sent;
    int64_t lease, lease_at;
    int64_t purge_rev; /* purges up to this revision were given to the loops */
    int64_t next_tickets;
    uint64_t generation;
    int down;          /* etcd did not answer last round: said once */
    char bad[512];     /* the last bad value said, not said again */
    cluster_acme_t acme; /* --acme: one order per name for the cluster */
} side_t;

static volatile sig_atomic_t side_stop;

static void on_term(int sig)
{
    (void)sig;
    side_stop = 1;
}

static void say(side_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(side_t *s, const char *fmt, ...)
{
    char line[ELOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    elog_text(&s->log, time(NULL), "cluster", line);
}

static void hex(char *out, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
}

static int unhex(unsigned char *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        for (int j = 0; j < 2; j++) {
            char c = s[2 * i + j];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0)
                return -1;
            v = v * 16 + (unsigned)d;
        }
        out[i] = (unsigned char)v;
    }
    return 0;
}

/* The tickets value: "gatling-tickets-1 GEN CREATED CURHEX PREVHEX|-".  0,
   or -1 if it is not that (hostile or foreign data: not used). */
static int parse_tickets(const char *v, size_t len, uint64_t *gen, int64_t *created,
                         unsigned char *master, int *n)
{
    char cur[65], prev[65], magic[20], end;
    unsigned long long g;
    long long c;
    if (len > 200 || strlen(v) != len ||
        sscanf(v, "%19s %llu %lld %64s %64s %c", magic, &g, &c, cur, prev, &end) != 5 ||
        strcmp(magic, TICKETS_MAGIC) || !g || c <= 0 || strlen(cur) != 64 ||
        unhex(master, cur, 32) < 0)
        return -1;
    *n = 1;
    if (strcmp(prev, "-")) {
        if (strlen(prev) != 64 || unhex(master + 32, prev, 32) < 0)
            return -1;
        *n = 2;
    }
    *gen = g, *created = c;
    return 0;
}

/* Make (mod_rev 0) or rotate the masters: cur becomes the previous. */
static int put_tickets(side_t *s, const char *key, int64_t mod_rev, uint64_t gen,
                       const unsigned char *cur, char *err, size_t errlen)
{
    unsigned char fresh[32];
    char v[200], a[65], b[65] = "-";
    if (getrandom(fresh, sizeof fresh, 0) != (ssize_t)sizeof fresh) {
        snprintf(err, errlen, "getrandom() failed: %s", strerror(errno));
        return -1;
    }
    hex(a, fresh, 32);
    if (cur)
        hex(b, cur, 32);
    int n = snprintf(v, sizeof v, "%s %" PRIu64 " %lld %s %s", TICKETS_MAGIC, gen,
                     (long long)time(NULL), a, b);
    int r = etcd_put_if(s->etcd, key, strlen(key), v, (size_t)n, mod_rev, 0, err, errlen);
    memset(fresh, 0, sizeof fresh), memset(v, 0, sizeof v), memset(a, 0, sizeof a);
    if (r > 0)
        say(s, "ticket keys: generation %" PRIu64 " made here", gen);
    return r;
}

/* The tickets key: made, rotated or read; the masters to the loops.  0, or
   -1 with why in err. */
static int sync_tickets(side_t *s, char *err, size_t errlen)
{
    char key[320];
    snprintf(key, sizeof key, "%s%s", s->prefix, CLUSTER_KEY_TICKETS);
    for (int tries = 0; tries < 3; tries++) {
        etcd_kv_t *kv;
        int n = etcd_range(s->etcd, key, strlen(key), 0, 0, 1, &kv, NULL, err, errlen);
        if (n < 0)
            return -1;
        if (!n) {
            etcd_kvs_free(kv, n);
            if (put_tickets(s, key, 0, 1, NULL, err, errlen) < 0)
                return -1;
            continue;
        }
        unsigned char m[64];
        uint64_t gen;
        int64_t created, age;
        int nm, bad = parse_tickets((char *)kv->value, kv->vlen, &gen, &created, m, &nm);
        int64_t rev = kv->mod_revision, forged = kv->forged;
        etcd_kvs_free(kv, n);
        if (forged) {
            snprintf(err, errlen, "etcd key %s: not sealed with this cluster's secret (forged, "
                     "or another secret=): not used (delete it and a node makes new ones)", key);
            return -1;
        }
        if (bad) {
            snprintf(err, errlen, "etcd key %s holds no ticket keys gatling wrote: not used "
                     "(delete it and a node makes new ones)", key);
            return -1;
        }
        age = (int64_t)time(NULL) - created;
        if (age >= s->rotate_s || age < -3600) { /* due, or from a clock far ahead */
            int r = put_tickets(s, key, rev, gen + 1, m, err, errlen);
            memset(m, 0, sizeof m);
            if (r < 0)
                return -1;
            continue;
        }
        if (gen != s->generation)
            say(s, "ticket keys: generation %" PRIu64 " from etcd", gen);
        s->generation = gen;
        cluster_set_tickets(s->view, m, nm == 2 ? m + 32 : NULL, gen);
        memset(m, 0, sizeof m);
        return 0;
    }
    snprintf(err, errlen, "the ticket keys in %s changed under us three times", key);
    return -1;
}

/* The purges the loops accepted: each a key NAME/purge/NODE/COUNT with a
   lease of PURGE_TTL seconds (one lease for a few seconds' purges). */
static int send_purges(side_t *s, char *err, size_t errlen)
{
    unsigned char msg[2 + CLUSTER_PURGE_MAX];
    ssize_t r;
    while ((r = read(s->purge_fd, msg, sizeof msg)) > 2) {
        size_t len = (size_t)msg[0] << 8 | msg[1];
        if (len != (size_t)r - 2)
            continue; /* not one of cluster_send_purge's */
        int64_t now = (int64_t)time(NULL);
        if (!s->lease || now - s->lease_at >= PURGE_TTL / 2) {
            if ((s->lease = etcd_lease(s->etcd, PURGE_TTL, err, errlen)) < 0) {
                s->lease = 0;
                return -1; /* this purge stays local */
            }
            s->lease_at = now;
        }
        char key[400];
        int kn = snprintf(key, sizeof key, "%s%s%s/%" PRIu64, s->prefix, CLUSTER_KEY_PURGE,
                          s->node, ++s->sent);
        if (etcd_put_if(s->etcd, key, (size_t)kn, msg + 2, len, 0, s->lease, err, errlen) < 0)
            return -1;
    }
    return 0;
}

/* The purge keys that appeared since the last round, to the loops.  The
   node's first round only learns where the store is: older purges were done
   (its cache is newer).  A side process started again resumes from the
   revision the shared page kept (the cache outlived it), so no purge is
   skipped. */
static int take_purges(side_t *s, char *err, size_t errlen)
{
    char key[320];
    snprintf(key, sizeof key, "%s%s", s->prefix, CLUSTER_KEY_PURGE);
    etcd_kv_t *kv;
    int64_t rev;
    int n = etcd_range(s->etcd, key, strlen(key), 1, s->purge_rev + 1, PURGES_MAX, &kv, &rev,
                       err, errlen);
    if (n < 0)
        return -1;
    int forged = -1; /* the first one not sealed, said (once a round: a flood is one line) */
    for (int i = 0; i < n && s->purge_rev; i++)
        if (kv[i].forged)
            forged = forged < 0 ? i : forged;
        else if (kv[i].mod_revision > s->purge_rev && kv[i].vlen <= CLUSTER_PURGE_MAX)
            cluster_add_purge(s->view, kv[i].value, kv[i].vlen);
    if (forged >= 0)
        say(s, "etcd key %.300s (and maybe more): not sealed with this cluster's secret: "
            "purge not done", kv[forged].key);
    if (n == PURGES_MAX && s->purge_rev) /* a flood: the rest next round */
        rev = kv[n - 1].mod_revision;
    etcd_kvs_free(kv, n);
    if (rev > s->purge_rev)
        cluster_set_purge_rev(s->view, s->purge_rev = rev);
    return 0;
}

/* One round: purges out and in, the tickets when due.  0, or -1. */
static int round_once(side_t *s, char *err, size_t errlen)
{
    int64_t now = (int64_t)time(NULL);
    if (send_purges(s, err, errlen) < 0 || take_purges(s, err, errlen) < 0 ||
        cluster_acme_round(&s->acme, s->etcd, err, errlen) < 0)
        return -1;
    if (now >= s->next_tickets) {
        s->next_tickets = now + TICKETS_EVERY;
        if (sync_tickets(s, err, errlen) < 0) {
            if (strcmp(err, s->bad))
                say(s, "%s", err);
            snprintf(s->bad, sizeof s->bad, "%s", err);
            return 0; /* etcd answered: a bad value is not etcd being down */
        }
        s->bad[0] = 0;
    }
    cluster_set_synced(s->view, now);
    return 0;
}

static void run(side_t *s)
{
    char err[512];
    while (!side_stop) {
        if (round_once(s, err, sizeof err) < 0) {
            cluster_acme_down(&s->acme);
            if (!s->down)
                say(s, "etcd: %s: the node serves what it has and tries again", err);
            s->down = 1;
        } else if (s->down) {
            say(s, "etcd: answers again (%s)", etcd_url(s->etcd));
            s->down = 0;
        }
        struct pollfd p = {.fd = s->purge_fd, .events = POLLIN};
        poll(&p, 1, ROUND_MS);
    }
}

/* The worker: rounds until SIGTERM or its keeper's end. */
static void worker(side_t *s, pid_t keeper)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    prctl(PR_SET_NAME, "gatling-cluster");
    if (getppid() != keeper)
        _exit(0);
    s->purge_rev = cluster_purge_rev(s->view); /* 0 at the node's start */
    run(s);
    etcd_free(s->etcd);
    _exit(0);
}

/* The keeper (as the ACME client's): -u's user, then the worker, started
   again a second after it dies, until SIGTERM or the server's end.  Each
   worker begins afresh from etcd (a lock it held comes back once its old
   lease ran out), but for the purges: from the revision the last one
   applied (the shared page's). */
static void keeper(side_t *s, pid_t parent)
{
    const proc_t *p = s->proc;
    struct sigaction sa = {.sa_handler = on_term}; /* no SA_RESTART: waitpid returns */
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    if (p->uid >= 0 && geteuid() == 0 &&
        (setgroups(0, NULL) < 0 || setgid((gid_t)p->gid) < 0 || setuid((uid_t)p->uid) < 0)) {
        say(s, "setuid(%d) failed: %s", p->uid, strerror(errno));
        _exit(1);
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    prctl(PR_SET_NAME, "cluster-keeper");
    if (getppid() != parent)
        _exit(0);
    pid_t self = getpid();
    while (!side_stop) {
        pid_t pid = fork();
        if (pid == 0)
            worker(s, self);
        int st = 0;
        while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
            if (side_stop)
                kill(pid, SIGTERM);
        if (side_stop)
            break;
        say(s, "the side process %s: started again in a second",
            pid < 0 ? "could not fork" : WIFSIGNALED(st) ? "was killed" : "ended");
        cluster_set_acme_held(s->view, -1, 0); /* until the new one knows */
        sleep(1);
    }
    _exit(0);
}

pid_t acme_cluster_start(const config_t *cfg, const proc_t *p, cluster_view_t *view, int purge_fd,
                         char *err, size_t errlen)
{
    static side_t s; /* the child's, set up before the fork */
    memset(&s, 0, sizeof s);
    s.cfg = cfg, s.proc = p, s.view = view, s.purge_fd = purge_fd;
    s.rotate_s = CLUSTER_ROTATE_DEFAULT;
    const char *t = getenv("GATLING_TEST_CLUSTER_ROTATE");
    if (t && atoi(t) >= 2 && atoi(t) <= CLUSTER_ROTATE_DEFAULT * 7)
        s.rotate_s = atoi(t);
    s.plen = (size_t)snprintf(s.prefix, sizeof s.prefix, "/gatling/%s/", cfg->cluster_name);
    unsigned char id[8];
    if (getrandom(id, sizeof id, 0) != (ssize_t)sizeof id) {
        snprintf(err, errlen, "getrandom() failed: %s", strerror(errno));
        return -1;
    }
    hex(s.node, id, sizeof id);
    if (!(s.etcd = etcd_new(cfg->cluster_etcd, err, errlen)))
        return -1;
    elog_init(&s.log, p->error_fd >= 0 ? p->error_fd : 2, cfg->error_log);
    s.acme = (cluster_acme_t){.cfg = cfg,       .tls_dir = p->tls_dir, .view = view,
                              .log = &s.log,    .prefix = s.prefix,    .node = s.node,
                              .notify = getpid()};
    if (cluster_acme_open(&s.acme, err, errlen) < 0) {
        etcd_free(s.etcd);
        return -1;
    }
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork() failed: %s", strerror(errno));
        etcd_free(s.etcd);
        return -1;
    }
    if (pid == 0)
        keeper(&s, parent);
    etcd_free(s.etcd);
    if (s.acme.state_fd >= 0)
        close(s.acme.state_fd), close(s.acme.tls_fd);
    return pid;
}
