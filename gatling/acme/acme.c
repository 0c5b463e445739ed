/* acme — the client process: see acme.h.  Start-up (fork, descriptors,
   directories, -u), the schedule per name (RFC 9773's window or a third of
   the lifetime left, back-off after a failure), and the status file. */
#define _GNU_SOURCE /* ppoll, close_range */
#include "acme.h"
#include "acme_cluster_acme.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "acme_ca.h"
#include "acme_ondemand.h"
#include "acme_proto.h"
#include "acme_sched.h"
#include "acme_store.h"
#include "http/hbuf.h"
#include "site/acme_chal.h"
#include "site/elog.h"

#define ARI_POLL_MIN 60         /* seconds between ARI polls, at least */
#define ARI_POLL_MAX (6 * 3600) /* ... and at most */
#define BACKOFF_MIN 60          /* the first retry after a failure (acme_sched_backoff) */
#define RETRY_AFTER_MAX (7 * 86400) /* a CA's Retry-After is honoured up to this */
#define CHAIN_MAX (1 << 20)
#define STATUS_MAX 196608 /* ACME_STATUS_MAX */
#define SCHEDULE_FILE "schedule" /* in the state directory */
#define LOCK_FILE "lock"         /* ... flock()ed by the one client that runs on it */

typedef struct acme_name {
    const char *name;
    acme_cert_info_t cert; /* cert.not_after 0: none yet */
    time_t renew_at;       /* the next order (0: at once) */
    time_t ari_at;         /* the next ARI poll (0: none) */
    time_t win_start, win_end; /* the last ARI window */
    time_t retry_at;       /* not before this after a failure */
    unsigned fails;        /* since the last success */
    time_t issued_at;      /* when this client installed cert (0: unknown) */
    int avoid;             /* the challenge that failed last (CONFIG_ACME_HTTP01...) */
    acme_ca_turn_t turn;   /* the CA of its next order (--acme-ca more than once) */
} acme_name_t;

typedef struct acme_run {
    const config_t *cfg;
    const proc_t *proc;
    acme_client_t cl;
    elog_t log;
    int tls_fd;
    pid_t notify;
    acme_name_t *names;
    int nnames;
    unsigned long failures;
    long backoff_min;
    int profile_said;      /* an unlisted --acme-profile logged once */
    unsigned char *waiting; /* --cluster: per name, "another node holds its lock" said */
    acme_od_t *od;         /* --acme-on-demand's asks; NULL: off */
} acme_run_t;

#define KEEPER_PAUSE_MAX 60 /* seconds at most between two starts of a dying client */

/* acme_stop: end after the order in flight (SIGTERM, SIGHUP), or at once
   (SIGINT); acme_abort: the order in flight is given up too (what the
   exchanges watch): at once when none is in flight, or ACME_STOP_GRACE
   seconds after the stop (SIGALRM).  acme_hard: the keeper got SIGINT. */
static volatile sig_atomic_t acme_stop, acme_abort, acme_hard, acme_reopen, in_order;

static void on_signal(int sig)
{
    if (sig == SIGUSR1) {
        acme_reopen = 1;
        return;
    }
    if (sig == SIGINT)
        acme_hard = 1;
    if (sig == SIGALRM || sig == SIGINT || !in_order)
        acme_abort = 1;
    else if (!acme_stop)
        alarm(ACME_STOP_GRACE); /* the order finishes, within bounds */
    acme_stop = 1;
}

static uint64_t rnd(uint64_t below)
{
    uint64_t v = 0;
    if (below <= 1 || getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        return 0;
    return v % below;
}

static void say(acme_run_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(acme_run_t *r, const char *fmt, ...)
{
    char line[ELOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    elog_text(&r->log, time(NULL), "acme", line);
}

/* What the -C directory holds for n (through its symlink): its expiry. */
static void read_current(acme_run_t *r, acme_name_t *n)
{
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "%s/fullchain.pem", n->name);
    char *pem = acme_read_file(r->tls_fd, path, CHAIN_MAX, &len);
    memset(&n->cert, 0, sizeof n->cert);
    if (pem && acme_cert_info(pem, len, &n->cert) < 0)
        memset(&n->cert, 0, sizeof n->cert);
    free(pem);
    n->renew_at = n->cert.not_after ? acme_sched_gap(acme_sched_renew(n->cert.not_before,
                                                                      n->cert.not_after),
                                                     n->issued_at, n->cert.not_before,
                                                     n->cert.not_after, time(NULL), 0)
                                    : 0;
    n->ari_at = n->cert.not_after && n->cert.certid[0] ? time(NULL) : 0;
    n->win_start = n->win_end = 0;
}

/* RFC 9773: a random time inside the window (kept while the window holds),
   at once when the window has passed, never past acme_sched_latest(); the
   next poll as the CA asks, within a share of the time left. */
static void ari_poll(acme_run_t *r, acme_name_t *n, time_t now)
{
    time_t s, e, nb = n->cert.not_before, na = n->cert.not_after;
    long ra;
    if (acme_client_dir(&r->cl) < 0) {
        n->ari_at = now + ARI_POLL_MAX / 6; /* the CA is away: its window later */
        return;
    }
    if (!r->cl.dir.renewal_info[0]) {
        n->ari_at = 0; /* no ARI: a third of the lifetime left */
        return;
    }
    if (acme_client_ari(&r->cl, n->cert.certid, &s, &e, &ra) < 0) {
        say(r, "%s: renewal information: %s", n->name, r->cl.err);
        ra = ra > ARI_POLL_MIN ? ra : 3600;
        n->ari_at = acme_sched_add(now, acme_sched_cap(ra, now, na, ARI_POLL_MIN));
        return;
    }
    if (s != n->win_start || e != n->win_end) {
        n->win_start = s;
        n->win_end = e;
        time_t t = e <= now ? now : acme_sched_ari_pick(nb, na, s, e, rnd(UINT64_MAX));
        n->renew_at = acme_sched_gap(t < now ? now : t, n->issued_at, nb, na, now, e);
    }
    if (ra < ARI_POLL_MIN)
        ra = ra < 0 ? ARI_POLL_MAX : ARI_POLL_MIN;
    ra = acme_sched_cap(ra > ARI_POLL_MAX ? ARI_POLL_MAX : ra, now, na, ARI_POLL_MIN);
    n->ari_at = acme_sched_add(now, ra);
}

/* The wait after n's fails-th failure: back off exponentially with jitter,
   or as the CA says, within a share of what the certificate has left. */
static long retry_wait(acme_run_t *r, const acme_name_t *n, unsigned fails, time_t now)
{
    long wait = acme_sched_backoff(fails, r->backoff_min, rnd(UINT64_MAX));
    long ra = r->cl.retry_after;
    if (ra > wait)
        wait = ra > RETRY_AFTER_MAX ? RETRY_AFTER_MAX : ra;
    return acme_sched_cap(wait, now, n->cert.not_after, r->backoff_min);
}

/* After a failure: the next attempt after retry_wait(). */
static void failed(acme_run_t *r, acme_name_t *n, time_t now, const char *why)
{
    n->fails++;
    r->failures++;
    long wait = retry_wait(r, n, n->fails, now);
    /* now is time(NULL), up to a second before the failure: one more second
       keeps the wait at least `wait` (a CA's Retry-After is a minimum) */
    n->retry_at = acme_sched_add(now, wait + 1);
    say(r, "%s: %s (failure %u, next attempt in %ld s)", n->name, why, n->fails, wait);
}

static void write_schedule(acme_run_t *r);

/* Before newOrder: the attempt written to the schedule as though it had
   failed, so that a client killed during the order (and started again by
   the keeper within seconds) waits its back-off instead of ordering again
   at once; the CA's limit of duplicate certificates is a few a week. */
static void record_attempt(acme_run_t *r, acme_name_t *n, time_t now)
{
    time_t retry_at = n->retry_at;
    r->cl.retry_after = -1;
    n->retry_at = acme_sched_add(now, retry_wait(r, n, n->fails + 1, now));
    n->fails++;
    write_schedule(r);
    n->fails--;
    n->retry_at = retry_at;
}

/* --acme-profile that the CA's directory does not list: said once (the
   order then goes without one, as RFC 8555's profiles extension asks). */
static void check_profile(acme_run_t *r)
{
    const char *prof = r->cfg->acme.profile;
    if (!prof || r->profile_said)
        return;
    for (int i = 0; i < r->cl.dir.nprofiles; i++)
        if (strcmp(r->cl.dir.profiles[i], prof) == 0)
            return;
    r->profile_said = 1;
    say(r, "the CA does not list the profile %s (%d listed): orders go without one", prof,
        r->cl.dir.nprofiles);
}

/* The challenge the CA refused is avoided for n next time (when the CA
   offers another): a blocked port 80 falls back to TLS-ALPN-01. */
static void note_challenge(acme_run_t *r, acme_name_t *n)
{
    int t = r->cl.chal_failed;
    if (!t || t == n->avoid)
        return;
    n->avoid = t;
    say(r, "%s: %s failed: the next attempt takes another challenge the CA offers", n->name,
        t == CONFIG_ACME_HTTP01 ? "http-01" : "tls-alpn-01");
}

static void say_line(void *r, const char *line)
{
    say(r, "%s", line);
}

/* The status file (site/acme_chal.h's format), written whole. */
static void write_status(acme_run_t *r)
{
    char *buf = malloc(STATUS_MAX), num[3][24];
    if (!buf)
        return;
    hbuf_t b = hb_init(buf, STATUS_MAX);
    hb_puts(&b, "orders ");
    hb_num(&b, r->cl.orders);
    hb_puts(&b, "\nfailures ");
    hb_num(&b, r->failures);
    hb_puts(&b, "\n");
    for (int i = 0; i < r->nnames; i++) {
        const acme_name_t *n = &r->names[i];
        time_t next = n->renew_at > n->retry_at ? n->renew_at : n->retry_at;
        snprintf(num[0], sizeof num[0], "%lld", (long long)n->cert.not_after);
        snprintf(num[1], sizeof num[1], "%lld", (long long)next);
        snprintf(num[2], sizeof num[2], "%u", n->fails);
        hb_puts(&b, "cert ");
        hb_puts(&b, n->name);
        for (int k = 0; k < 3; k++) {
            hb_puts(&b, " ");
            hb_puts(&b, num[k]);
        }
        hb_puts(&b, n->cert.issuer[0] ? " " : ""); /* the rest of the line */
        hb_puts(&b, n->cert.issuer);
        hb_puts(&b, "\n");
    }
    acme_od_status(r->od, &b);
    if (!b.over && acme_write_atomic(r->cl.state_fd, ACME_STATUS_FILE, buf, hb_len(&b), 0644) < 0)
        say(r, "writing the status file failed: %s", strerror(errno));
    free(buf);
}

/* Order a certificate for n and install it. */
static void obtain(acme_run_t *r, acme_name_t *n, time_t now)
{
    acme_issued_t out;
    acme_cert_info_t ci;
    if (!acme_replaceable(r->tls_fd, n->name)) {
        /* certbot's layout, or an admin's pair: no order for what cannot be installed */
        char why[512];
        snprintf(why, sizeof why, "%s/%s is not the ACME client's symlink (to .acme/%s.SERIAL): "
                 "left alone (remove it to let the client install its certificate)",
                 r->proc->tls_dir, n->name, n->name);
        r->cl.retry_after = -1;
        failed(r, n, now, why);
        return;
    }
    in_order = 1; /* a stop from now on lets the order finish (on_signal) */
    if (acme_stop) {
        in_order = 0;
        return;
    }
    record_attempt(r, n, now);
    const char *replaces = n->cert.not_after ? n->cert.certid : NULL;
    r->cl.avoid = n->avoid;
    int rc = acme_ca_issue(&r->cl, &n->turn, n->name, replaces, &out, say_line, r);
    in_order = 0;
    if (r->cl.have_dir)
        check_profile(r);
    if (rc < 0) {
        note_challenge(r, n);
        failed(r, n, time(NULL), r->cl.err);
        return;
    }
    if (acme_cert_info(out.chain, out.chain_len, &ci) < 0) {
        failed(r, n, time(NULL), "the certificate issued does not parse");
    } else if (acme_install(r->tls_fd, n->name, ci.serial, out.chain, out.chain_len, out.key,
                            out.key_len) < 0) {
        char why[512];
        snprintf(why, sizeof why, "installing the certificate in %s: %s", r->proc->tls_dir,
                 strerror(errno));
        r->cl.retry_after = -1;
        failed(r, n, time(NULL), why);
    } else {
        n->fails = 0, n->retry_at = 0, n->issued_at = time(NULL);
        read_current(r, n);
        say(r, "%s: certificate %s installed, valid until %s%s, issued by %s (%s)", n->name,
            ci.serial, elog_utc(ci.not_after).s, replaces ? " (renewal)" : "",
            ci.issuer[0] ? ci.issuer : "?", r->cl.url);
        write_status(r); /* before the server loads it: /metrics then agrees with it */
        if (r->notify > 0 && kill(r->notify, SIGUSR1) < 0)
            say(r, "kill(%d, SIGUSR1) failed: %s", (int)r->notify, strerror(errno));
    }
    acme_issued_free(&out);
}

static const char *const chal_names[] = {"-", "http-01", "tls-alpn-01"}; /* CONFIG_ACME_* */

/* The schedule (SCHEDULE_FILE), so that a restart keeps the back-off, the
   time picked in the ARI window and the challenge to avoid: one line per
   name, "NAME SERIAL RENEW_AT RETRY_AT FAILS WIN_START WIN_END ISSUED_AT
   AVOID" (SERIAL "-": none; AVOID "-", "http-01" or "tls-alpn-01"). */
static void write_schedule(acme_run_t *r)
{
    size_t cap = (size_t)r->nnames * 400 + 1;
    char *buf = malloc(cap);
    size_t len = 0;
    for (int i = 0; buf && i < r->nnames; i++) {
        const acme_name_t *n = &r->names[i];
        int k = snprintf(buf + len, cap - len, "%s %s %lld %lld %u %lld %lld %lld %s\n",
                         n->name, n->cert.serial[0] ? n->cert.serial : "-",
                         (long long)n->renew_at, (long long)n->retry_at, n->fails,
                         (long long)n->win_start, (long long)n->win_end,
                         (long long)n->issued_at, chal_names[n->avoid]);
        if (k < 0 || (size_t)k >= cap - len)
            break;
        len += (size_t)k;
    }
    if (buf && acme_write_atomic(r->cl.state_fd, SCHEDULE_FILE, buf, len, 0644) < 0)
        say(r, "writing the schedule failed: %s", strerror(errno));
    free(buf);
}

/* What the last run wrote for n: its back-off and the challenge to avoid
   always, its renewal time, ARI window and issuance while the certificate is
   the same (a line of 7 fields, before ISSUED_AT and AVOID, is read too). */
static void read_schedule(acme_name_t *n, const char *text)
{
    char name[256], serial[ACME_SERIAL_MAX], avoid[16] = "-";
    long long renew, retry, ws, we, issued = 0;
    unsigned fails;
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (sscanf(p, "%255s %63s %lld %lld %u %lld %lld %lld %15s", name, serial, &renew, &retry,
                   &fails, &ws, &we, &issued, avoid) < 7 ||
            strcmp(name, n->name))
            continue;
        n->retry_at = (time_t)retry;
        n->fails = fails < 64 ? fails : 64;
        for (int i = 1; i < 3; i++)
            if (strcmp(avoid, chal_names[i]) == 0)
                n->avoid = i;
        if (n->cert.serial[0] && strcmp(serial, n->cert.serial) == 0 && we >= ws) {
            n->renew_at = (time_t)renew;
            n->win_start = (time_t)ws;
            n->win_end = (time_t)we;
            n->issued_at = (time_t)issued;
        }
        return;
    }
}

/* --cluster: may this client order names[i] now?  A certificate the side
   process installed from the cluster (another node's) is taken first: it
   may make the name no longer due.  A due name is wanted (the side process
   takes its lock), one not due is not (the lock is let go); 1 while this
   node holds the lock, else 0 (always 1 without --cluster). */
static int cluster_turn(acme_run_t *r, int i, time_t now)
{
    cluster_view_t *v = r->proc->cluster;
    acme_name_t *n = &r->names[i];
    if (!v)
        return 1;
    /* held first: a certificate the side process installed before it took
       the lock is seen by the read after */
    int held = cluster_acme_held(v, i);
    acme_name_t seen = *n;
    read_current(r, &seen);
    if (strcmp(seen.cert.serial, n->cert.serial)) { /* -C changed under us */
        n->issued_at = 0;
        read_current(r, n);
        if (n->cert.not_after)
            say(r, "%s: certificate %s from the cluster, valid until %s", n->name, n->cert.serial,
                elog_utc(n->cert.not_after).s);
    }
    int due = n->renew_at <= now;
    cluster_acme_want(v, i, due);
    if (!due || held) {
        r->waiting[i] = 0;
        return due;
    }
    if (!r->waiting[i])
        say(r,
            "%s: another node of the cluster holds its ACME lock, or this node asks etcd "
            "for it: this client waits",
            n->name);
    r->waiting[i] = 1;
    return 0;
}

/* One round over the names; the earliest time something is due next. */
static time_t round_once(acme_run_t *r)
{
    time_t now = time(NULL), next = now + ARI_POLL_MAX;
    for (int i = 0; i < r->nnames && !acme_stop; i++) {
        acme_name_t *n = &r->names[i];
        if (n->cert.not_after && n->ari_at && n->ari_at <= now)
            ari_poll(r, n, now);
        int turn = cluster_turn(r, i, now);
        if (n->renew_at <= now && n->retry_at <= now && turn)
            obtain(r, n, now);
        now = time(NULL);
        time_t t = n->renew_at > n->retry_at ? n->renew_at : n->retry_at;
        if (!turn && n->renew_at <= now)
            t = now + 1; /* the lock, or another node's certificate, a second later */
        if (n->ari_at && n->ari_at < t)
            t = n->ari_at;
        if (t < next)
            next = t;
    }
    write_status(r);
    write_schedule(r);
    return next;
}

/* Sleep until t, or until SIGTERM (no wake-up lost between the check and the
   wait: the signals are blocked until ppoll takes them). */
static void sleep_until(time_t t, int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &old);
    time_t now = time(NULL);
    if (!acme_stop && !acme_reopen && t > now) {
        struct timespec ts = {t - now, 0};
        ppoll(&p, fd >= 0, &ts, &old); /* an ask wakes it (acme_ondemand.h) */
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
}

/* 1 when the state or -C directory was removed or made anew since the
   client opened it (its writes would land where nobody reads): the client
   ends, and the keeper starts one that makes and opens them again. */
static int dirs_moved(acme_run_t *r)
{
    const char *path[2] = {r->cfg->acme.state_dir, r->proc->tls_dir};
    int fd[2] = {r->cl.state_fd, r->tls_fd};
    struct stat a, b;
    for (int i = 0; i < 2; i++)
        if (fstat(fd[i], &a) == 0 && (stat(path[i], &b) < 0 ? errno == ENOENT
                                          : a.st_dev != b.st_dev || a.st_ino != b.st_ino)) {
            say(r, "%s was removed or replaced: the ACME client starts again", path[i]);
            return 1;
        }
    return 0;
}

/* --cluster: the names' locks, as the list now is (without: nothing). */
static void cluster_names(acme_run_t *r)
{
    const char *list[CONFIG_ACME_NAMES + CONFIG_ACME_OD_NAMES];
    int n = 0;
    for (; r->proc->cluster && n < r->nnames && n < (int)(sizeof list / sizeof *list); n++)
        list[n] = r->names[n].name;
    if (r->proc->cluster)
        cluster_acme_names(r->proc->cluster, list, n);
}

/* acme_od_names_fn: is name in the list, add it (due at once), drop it, or
   has it a certificate (acme_ondemand.h's ACME_OD_*). */
static int od_name(void *arg, const char *name, int op)
{
    acme_run_t *r = arg;
    for (int i = 0; i < r->nnames; i++) {
        if (strcmp(r->names[i].name, name))
            continue;
        if (op == ACME_OD_HAS_CERT)
            return r->names[i].cert.not_after != 0;
        if (op == ACME_OD_DROP) { /* between rounds: no order of it in flight */
            size_t after = (size_t)(--r->nnames - i);
            memmove(&r->names[i], &r->names[i + 1], after * sizeof *r->names);
            memmove(&r->waiting[i], &r->waiting[i + 1], after);
            cluster_names(r);
        }
        return op != ACME_OD_DROP; /* IS, and ADD of one kept already: 1 */
    }
    if (op != ACME_OD_ADD)
        return 0;
    acme_name_t *nv = r->nnames < CONFIG_ACME_NAMES + CONFIG_ACME_OD_NAMES
                          ? realloc(r->names, (size_t)(r->nnames + 1) * sizeof *nv) : NULL;
    unsigned char *wv = nv ? realloc(r->waiting, (size_t)r->nnames + 1) : NULL;
    if (nv)
        r->names = nv;
    if (!wv)
        return -1;
    r->waiting = wv;
    memset(&r->names[r->nnames], 0, sizeof *nv);
    r->names[r->nnames].name = name, r->waiting[r->nnames] = 0;
    read_current(r, &r->names[r->nnames++]);
    cluster_names(r); /* its lock, as the others' */
    return 0;
}

static void run_loop(acme_run_t *r)
{
    size_t len;
    char *sched = acme_read_file(r->cl.state_fd, SCHEDULE_FILE, STATUS_MAX, &len);
    acme_od_load(r->od, od_name, r); /* the names got on demand before: theirs read too */
    for (int i = 0; i < r->nnames; i++) {
        read_current(r, &r->names[i]);
        if (sched)
            read_schedule(&r->names[i], sched);
    }
    free(sched);
    while (!acme_stop) {
        time_t forget = acme_od_sweep(r->od, od_name, r), next = round_once(r); /* in turn */
        if (forget && forget < next)
            next = forget;
        if (acme_reopen) {
            acme_reopen = 0;
            elog_reopen(&r->log);
        }
        time_t now = time(NULL);
        sleep_until(next > now ? next : now + 1, acme_od_fd(r->od));
        acme_od_take(r->od, od_name, r);
        if (getppid() == 1 || dirs_moved(r))
            acme_stop = 1;
    }
}

/*
 * The state directory's layout and the -C directory, made and opened by
 * -u's user (the client has dropped to it already; gatling made the state
 * directory that user's at start, acme_setup.c, and never hands -C over):
 * nothing here runs as root, so nothing a user planted steers root.
 */
static int prepare_dirs(acme_run_t *r, int *state_fd, char *err, size_t n)
{
    static const struct {
        const char *path;
        mode_t mode;
    } sub[] = {{"challenges", 0755}, {ACME_CHAL_HTTP_DIR, 0755}, {ACME_CHAL_ALPN_DIR, 0755},
               {"account", 0700}};
    if (acme_make_dir(AT_FDCWD, r->cfg->acme.state_dir, 0755) < 0 ||
        (*state_fd = open(r->cfg->acme.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        snprintf(err, n, "state directory %s: %s", r->cfg->acme.state_dir, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++)
        if (acme_make_dir(*state_fd, sub[i].path, sub[i].mode) < 0) {
            snprintf(err, n, "%s/%s: %s", r->cfg->acme.state_dir, sub[i].path, strerror(errno));
            return -1;
        }
    if (acme_make_dir(AT_FDCWD, r->proc->tls_dir, 0755) < 0 ||
        (r->tls_fd = open(r->proc->tls_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        snprintf(err, n, "certificate directory %s: %s", r->proc->tls_dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* -u's ids; then PR_SET_PDEATHSIG again, which the change of ids cleared
   (prctl(2)), and the parent checked again (it may have died before). */
static int drop_privileges(const proc_t *p, pid_t parent)
{
    if (p->uid < 0 || geteuid() != 0)
        return 0;
    if (setgroups(0, NULL) < 0 || setgid((gid_t)p->gid) < 0 || setuid((uid_t)p->uid) < 0)
        return -1;
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(0);
    return 0;
}

/* LOCK_FILE, opened as -u's user (the client has dropped root): an earlier
   root run's file, which acme_setup.c hands over with the rest of STATE, or
   one left read-only, is still lockable read-only (flock needs no write
   access).  Its descriptor, or -1 with why in err. */
static int open_lock(const config_t *cfg, int state_fd, char *err, size_t n)
{
    int fd = openat(state_fd, LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == EACCES)
        fd = openat(state_fd, LOCK_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        snprintf(err, n, "%s/%s: %s", cfg->acme.state_dir, LOCK_FILE, strerror(errno));
    return fd;
}

/* One client per state directory: an flock() on LOCK_FILE, held until the
   client ends (the kernel lets go of it however it ends).  A second client
   (a second server on the directory, or the new binary of a SIGUSR2 upgrade
   while the old one serves) says so and waits until the holder ends; it
   empties no challenge and orders nothing before.  0, or -1 (stopped, or a
   fault, said). */
static int take_lock(acme_run_t *r, int fd)
{
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    if (errno != EWOULDBLOCK) {
        say(r, "flock(%s/%s) failed: %s", r->cfg->acme.state_dir, LOCK_FILE, strerror(errno));
        return -1;
    }
    say(r, "another ACME client holds %s/%s: waiting until it ends", r->cfg->acme.state_dir,
        LOCK_FILE);
    while (!acme_stop) {
        if (flock(fd, LOCK_EX) == 0) {
            say(r, "the other ACME client ended: this one takes over %s", r->cfg->acme.state_dir);
            /* it may have installed a certificate that the server has not loaded */
            if (r->notify > 0)
                kill(r->notify, SIGUSR1);
            return 0;
        }
        if (errno != EINTR)
            return -1;
    }
    return -1;
}

/* The child keeps stderr, the error log, --acme-on-demand's socket and (the
   keeper) the server's stop pipe; the listeners and the rest go.  keep: up
   to two descriptors besides the socket, -1 for none. */
static void close_others(const config_t *cfg, const proc_t *p, int keep2)
{
    int k[3] = {p->error_fd, keep2, cfg->acme.ask_url ? p->acme_od_fd : -1};
    for (int i = 0; i < 3; i++) /* in order */
        for (int j = i + 1; j < 3; j++)
            if (k[j] < k[i]) {
                int t = k[i];
                k[i] = k[j], k[j] = t;
            }
    unsigned from = 3;
    for (int i = 0; i < 3; i++) {
        if (k[i] < (int)from)
            continue;
        if (k[i] > (int)from)
            close_range(from, (unsigned)k[i] - 1, 0);
        from = (unsigned)k[i] + 1;
    }
    close_range(from, ~0U, 0);
}

static void child_signals(void)
{
    static const int dfl[] = {SIGCHLD, SIGQUIT};
    struct sigaction sa = {.sa_handler = SIG_DFL};
    for (size_t i = 0; i < sizeof dfl / sizeof dfl[0]; i++)
        sigaction(dfl[i], &sa, NULL);
    sa.sa_handler = SIG_IGN; /* SIGUSR2 is the server's binary upgrade, not ours */
    sigaction(SIGPIPE, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sa.sa_handler = on_signal; /* no SA_RESTART: a sleep or poll ends at once */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* as SIGTERM: the order in flight finishes first */
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL); /* ACME_STOP_GRACE is over */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

static void child_main(const config_t *cfg, const proc_t *p, const char *const *names,
                       int nnames, int http01, pid_t parent, pid_t notify)
{
    acme_run_t r = {.cfg = cfg, .proc = p, .notify = notify, .nnames = nnames,
                    .backoff_min = BACKOFF_MIN};
    char err[512];
    int state_fd, lock_fd = -1;
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(0);
    prctl(PR_SET_NAME, "acme-client");
    prctl(PR_SET_DUMPABLE, 0); /* its keys: no process of its uid reads them */
    child_signals();
    close_others(cfg, p, -1);
    elog_init(&r.log, p->error_fd >= 0 ? p->error_fd : 2, cfg->error_log);
    /* --cluster: etcd's TLS files are read before -u */
    etcd_t *etcd = p->cluster ? etcd_new(cfg->cluster_etcd, err, sizeof err) : NULL;
    if ((p->cluster && !etcd) ||
        (drop_privileges(p, parent) < 0 &&
         snprintf(err, sizeof err, "dropping to -u's user: %s", strerror(errno))) ||
        prepare_dirs(&r, &state_fd, err, sizeof err) < 0 ||
        (lock_fd = open_lock(cfg, state_fd, err, sizeof err)) < 0 ||
        curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
        acme_client_init(&r.cl, cfg, state_fd, http01, &acme_abort) < 0 ||
        !(r.names = calloc((size_t)nnames + 1, sizeof *r.names)) ||
        !(r.waiting = calloc((size_t)nnames + 1, 1))) {
        say(&r, "the ACME client cannot start: %s", err);
        _exit(1);
    }
    const char *env = getenv("GATLING_TEST_ACME_BACKOFF");
    if (env && atol(env) > 0) /* tests: the first retry after env seconds */
        r.backoff_min = atol(env);
    for (int i = 0; i < nnames; i++)
        r.names[i].name = names[i];
    r.cl.etcd = etcd, r.cl.cluster = p->cluster;
    r.od = acme_od_new(cfg, p->acme_od_fd, state_fd, &r.log);
    if (p->cluster) /* the side process takes their locks when the client wants them */
        cluster_acme_names(p->cluster, names, nnames);
    if (take_lock(&r, lock_fd) < 0)
        _exit(0);
    /* no challenge is outstanding yet: what a killed client left is not
       served; --cluster: the other nodes' stay (the side process drops
       each once its node removed it from etcd) */
    unsigned keep = p->cluster ? ACME_TAKEN_MODE : 0;
    acme_empty_dir(state_fd, ACME_CHAL_HTTP_DIR, keep);
    acme_empty_dir(state_fd, ACME_CHAL_ALPN_DIR, keep);
    run_loop(&r);
    acme_client_free(&r.cl);
    curl_global_cleanup();
    _exit(0);
}

static void on_chld(int sig)
{
    (void)sig; /* only that the keeper's ppoll returns */
}

/* The keeper's wait: until the client has exited, a stop came (SIGTERM,
   SIGINT, SIGHUP) or the server's stop pipe reports its end (the server closed
   it, or died however it died: the pipe is what tells a root keeper that a
   server which became -u's user has gone, since PR_SET_PDEATHSIG's signal
   is refused there, as kill(2)'s would be), or ms passed (-1: no limit).
   The signals are blocked (keeper_signals) but within the ppoll, so none
   is lost between a check and the wait.  *stop_fd is -1 once it ended. */
static void keeper_sleep(int *stop_fd, long ms, const sigset_t *open)
{
    struct pollfd p = {.fd = *stop_fd, .events = POLLIN};
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
    if (ppoll(&p, *stop_fd >= 0 ? 1 : 0, ms < 0 ? NULL : &ts, open) > 0 && p.revents) {
        close(*stop_fd); /* nothing is ever written: readable is its end */
        *stop_fd = -1;
        acme_stop = 1;
    }
}

/* Wait for the client; a stop asks it to end first (SIGTERM: after its
   order in flight; SIGINT: at once, as the keeper was asked), and one that
   has not ended ACME_STOP_GRACE s later (it gives its order up then) is
   killed a second or two after: the keeper ends within ACME_KEEPER_STOP
   however it was told.  Its wait status. */
static int keeper_wait(pid_t pid, int *stop_fd, const sigset_t *open)
{
    int st = 0, sent = 0;
    time_t asked = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return r == pid ? st : 0;
        int want = acme_hard ? SIGINT : SIGTERM;
        if (acme_stop && sent != want && sent != SIGINT) {
            kill(pid, want);
            sent = want;
            asked = asked ? asked : time(NULL);
        }
        if (asked && time(NULL) - asked > ACME_STOP_GRACE)
            kill(pid, SIGKILL);
        keeper_sleep(stop_fd, asked ? 1000 : -1, open);
    }
}

/* The keeper's signals: the client's (child_signals), and SIGCHLD caught so
   that its wait returns; all blocked but within its waits (*open). */
static void keeper_signals(sigset_t *open)
{
    child_signals();
    struct sigaction sa = {.sa_handler = on_chld};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD), sigaddset(&block, SIGTERM), sigaddset(&block, SIGINT);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, open);
}

/*
 * The keeper: the process the server sees (and ends), which runs the client
 * in a child of its own and starts it again when it dies (killed, crashed),
 * after a pause that doubles up to KEEPER_PAUSE_MAX while it keeps dying.  It
 * was forked before the chroot and -u, so every client it starts is too; it
 * does nothing else, so it has nothing to crash on.  It ends when the server
 * closes stop_fd's other end or dies (that end's holder), or on SIGTERM.
 */
static void keeper_main(const config_t *cfg, const proc_t *p, const char *const *names,
                        int nnames, int http01, pid_t parent, pid_t notify, int stop_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* where the server is root: the pipe is the rule */
    if (getppid() != parent)
        _exit(0);
    prctl(PR_SET_NAME, "acme-keeper");
    prctl(PR_SET_DUMPABLE, 0); /* its keys: no process of its uid reads them */
    sigset_t open;
    keeper_signals(&open);
    close_others(cfg, p, stop_fd);
    elog_t log;
    elog_init(&log, p->error_fd >= 0 ? p->error_fd : 2, cfg->error_log);
    pid_t self = getpid();
    long pause = 1;
    keeper_sleep(&stop_fd, 0, &open); /* a server gone before the pipe was watched */
    while (!acme_stop) {
        time_t began = time(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            if (stop_fd >= 0)
                close(stop_fd);
            child_main(cfg, p, names, nnames, http01, self, notify);
        }
        int st = pid > 0 ? keeper_wait(pid, &stop_fd, &open) : 0;
        if (acme_stop)
            break;
        if (time(NULL) - began > KEEPER_PAUSE_MAX)
            pause = 1;
        char line[160];
        if (pid < 0)
            snprintf(line, sizeof line, "fork() for the ACME client failed: %s", strerror(errno));
        else if (WIFSIGNALED(st))
            snprintf(line, sizeof line, "the ACME client was ended by signal %d", WTERMSIG(st));
        else
            snprintf(line, sizeof line, "the ACME client exited with %d", WEXITSTATUS(st));
        snprintf(line + strlen(line), sizeof line - strlen(line), "; it starts again in %ld s",
                 pause);
        elog_text(&log, time(NULL), "acme", line);
        keeper_sleep(&stop_fd, pause * 1000, &open); /* a stop ends it at once */
        pause = pause * 2 > KEEPER_PAUSE_MAX ? KEEPER_PAUSE_MAX : pause * 2;
    }
    _exit(0);
}

pid_t acme_start(const config_t *cfg, const proc_t *pr, const char *const *names, int nnames,
                 int http01, pid_t notify, int *stop, char *err, size_t errlen)
{
    if (!cfg->acme.ca || !cfg->acme.state_dir || !pr->tls_dir ||
        (nnames <= 0 && !cfg->acme.ask_url)) {
        snprintf(err, errlen, "ACME: %s", nnames <= 0 ? "no names to get certificates for"
                                                      : "no CA, state directory or -C directory");
        return -1;
    }
    for (int i = 0; i < nnames; i++)
        if (!acme_name_ok(names[i])) {
            snprintf(err, errlen, "ACME: %.200s: not a host name or IP address", names[i]);
            return -1;
        }
    const char *const *canon = acme_canonical_names(names, nnames);
    if (!canon) {
        snprintf(err, errlen, "ACME: no memory");
        return -1;
    }
    int p[2] = {-1, -1};
    if (stop && pipe2(p, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "ACME: pipe2() failed: %s", strerror(errno));
        acme_free_names(canon, names, nnames);
        return -1;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (p[1] >= 0)
            close(p[1]);
        keeper_main(cfg, pr, canon, nnames, http01, parent, notify, p[0]);
    }
    if (pid < 0)
        snprintf(err, errlen, "ACME: fork() failed: %s", strerror(errno));
    if (p[0] >= 0)
        close(p[0]);
    if (stop)
        *stop = pid < 0 ? (close(p[1]), -1) : p[1];
    acme_free_names(canon, names, nnames);
    return pid < 0 ? -1 : pid;
}
