/* acme_ondemand — the client's names, given at start or got on demand: see
   acme_ondemand.h. */
#define _GNU_SOURCE
#include "acme_ondemand.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <curl/curl.h>

#include "acme_store.h"
#include "site/acme_chal.h"

#define OD_REFUSE_TTL 600   /* seconds a name the ask URL refused is not asked again */
#define OD_FAULT_TTL 60     /* ... one whose ask failed (timeout, 5xx), or over a limit */
#define OD_REFUSED_MAX 1000 /* refusals remembered (the oldest go first) */
#define OD_ADDRS 1024       /* client addresses counted (the oldest window goes first) */
#define OD_ASK_TIMEOUT 5    /* seconds an ask may take */
#define OD_TAKE_MAX 64      /* asks taken at once (the orders in between are not held up) */
#define OD_NAMES_FILE "ondemand" /* in the state directory: the names got on demand */
#define OD_NAMES_MAX (CONFIG_ACME_OD_NAMES * 280) /* its bytes: "NAME TIME\n" each */
#define OD_LOG_BURST 5      /* lines a minute of one kind of refusal (the rest counted) */
#define OD_LOG_WINDOW 60
#define OD_SAVE_EVERY 3600  /* the ondemand file's times written again at most so often */
#define HOUR 3600

int acme_name_ok(const char *s)
{
    if (s[0] == '*' && s[1] == '.') /* a wildcard (DNS-01): -C's entry is named so too */
        s += 2;
    size_t n = strlen(s);
    return n > 0 && n < 254 && s[0] != '.' && s[0] != '-' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") == n;
}

const char *const *acme_canonical_names(const char *const *names, int nnames)
{
    const char **out = calloc((size_t)(nnames > 0 ? nnames : 1), sizeof *out);
    for (int i = 0; out && i < nnames; i++) {
        unsigned char a[16];
        char text[INET6_ADDRSTRLEN], *d;
        out[i] = names[i];
        if (strchr(names[i], ':') && inet_pton(AF_INET6, names[i], a) == 1 &&
            inet_ntop(AF_INET6, a, text, sizeof text) && strcmp(text, names[i]))
            out[i] = (d = strdup(text)) ? d : names[i];
    }
    return out;
}

void acme_free_names(const char *const *canon, const char *const *names, int nnames)
{
    for (int i = 0; i < nnames; i++)
        if (canon[i] != names[i])
            free((char *)canon[i]);
    free((void *)canon);
}

/* ---- on demand ---- */

/* The kinds of refusal, each logged at most OD_LOG_BURST times a minute. */
enum { OD_LOG_INVALID, OD_LOG_ADDR, OD_LOG_NO, OD_LOG_FAULT, OD_LOG_KINDS };

typedef struct od_refusal {
    char name[254];
    time_t until;
} od_refusal_t;

typedef struct od_addr {
    char addr[INET6_ADDRSTRLEN + 4]; /* IPv6: its /64 */
    time_t since; /* its hour began */
    int n;        /* asks since */
} od_addr_t;

struct acme_od {
    const config_t *cfg;
    elog_t *log;
    int fd, state_fd;
    od_refusal_t refused[OD_REFUSED_MAX];
    int nrefused;
    od_addr_t addrs[OD_ADDRS];
    int naddrs;
    time_t *ring; /* the last od_per_hour asks' times */
    int ring_at;
    int dirty; /* refusals not yet in challenges/ondemand */
    unsigned long long asks, allowed, refusals, limited, invalid;
    struct {
        char *name;
        time_t good; /* it was allowed, or a handshake last named it */
    } names[CONFIG_ACME_OD_NAMES]; /* got on demand: cfg->acme.od_max at most */
    int nnames;
    time_t saved; /* the ondemand file last written */
    int touched;  /* a name's good moved since */
    struct {
        time_t since; /* this window began */
        int n;        /* lines in it */
        unsigned long dropped;
    } kinds[OD_LOG_KINDS];
};

static const char *const kind_names[OD_LOG_KINDS] = {"not a host name", "over an address's asks",
                                                     "the ask URL said no",
                                                     "the ask URL failed"};

/* One line of the log: "acme: " and fmt's text, rate-limited with the
   others (elog_text), or always written (elog_note). */
static void vsay(acme_od_t *od, int always, const char *fmt, va_list ap)
{
    char line[ELOG_LINE_MAX];
    int k = always ? snprintf(line, sizeof line, "acme: ") : 0;
    vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
    if (always)
        elog_note(od->log, time(NULL), line);
    else
        elog_text(od->log, time(NULL), "acme", line);
}

static void say(acme_od_t *od, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(acme_od_t *od, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(od, 0, fmt, ap);
    va_end(ap);
}

/* A line never rate-limited (an allowed name refused, a name forgotten). */
static void note(acme_od_t *od, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(acme_od_t *od, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(od, 1, fmt, ap);
    va_end(ap);
}

/* Kind's windows that ended with lines left out: how many, in one line each. */
static void kinds_flush(acme_od_t *od, time_t now)
{
    for (int k = 0; k < OD_LOG_KINDS; k++)
        if (now - od->kinds[k].since >= OD_LOG_WINDOW) {
            if (od->kinds[k].dropped)
                say(od, "on demand: %lu more refusals (%s) not logged in %d s",
                    od->kinds[k].dropped, kind_names[k], OD_LOG_WINDOW);
            od->kinds[k].since = now, od->kinds[k].n = 0, od->kinds[k].dropped = 0;
        }
}

/* A refusal's line, within its kind's OD_LOG_BURST a minute. */
static void refusal_say(acme_od_t *od, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refusal_say(acme_od_t *od, int kind, const char *fmt, ...)
{
    kinds_flush(od, time(NULL));
    if (od->kinds[kind].n >= OD_LOG_BURST) {
        od->kinds[kind].dropped++;
        return;
    }
    od->kinds[kind].n++;
    va_list ap;
    va_start(ap, fmt);
    vsay(od, 0, fmt, ap);
    va_end(ap);
}

acme_od_t *acme_od_new(const config_t *cfg, int fd, int state_fd, elog_t *log)
{
    if (!cfg->acme.ask_url || fd < 0)
        return NULL;
    acme_od_t *od = calloc(1, sizeof *od);
    if (od && !(od->ring = calloc((size_t)cfg->acme.od_per_hour, sizeof *od->ring))) {
        free(od);
        od = NULL;
    }
    if (!od)
        return NULL;
    od->cfg = cfg, od->log = log, od->fd = fd, od->state_fd = state_fd;
    return od;
}

void acme_od_free(acme_od_t *od)
{
    if (!od)
        return;
    for (int i = 0; i < od->nnames; i++)
        free(od->names[i].name);
    free(od->ring);
    free(od);
}

int acme_od_fd(const acme_od_t *od)
{
    return od ? od->fd : -1;
}

/* challenges/ondemand, whole: the refusals still running. */
static void write_refused(acme_od_t *od, time_t now)
{
    static char buf[OD_REFUSED_MAX * 280];
    hbuf_t b = hb_init(buf, sizeof buf);
    int k = 0;
    for (int i = 0; i < od->nrefused; i++) {
        if (od->refused[i].until <= now)
            continue;
        od->refused[k++] = od->refused[i];
        hb_puts(&b, od->refused[i].name);
        hb_puts(&b, " ");
        hb_num(&b, (uint64_t)od->refused[i].until);
        hb_puts(&b, "\n");
    }
    od->nrefused = k;
    if (!b.over && acme_write_atomic(od->state_fd, ACME_CHAL_DIR "/" ACME_CHAL_REFUSED, buf,
                                     hb_len(&b), 0644) < 0)
        say(od, "writing %s/%s failed: %s", ACME_CHAL_DIR, ACME_CHAL_REFUSED, strerror(errno));
}

static od_refusal_t *refusal(acme_od_t *od, const char *name, time_t now)
{
    for (int i = 0; i < od->nrefused; i++)
        if (od->refused[i].until > now && !strcmp(od->refused[i].name, name))
            return &od->refused[i];
    return NULL;
}

/* name refused for ttl seconds (the oldest refusal dropped when full). */
static void refuse(acme_od_t *od, const char *name, time_t now, long ttl)
{
    if (od->nrefused == OD_REFUSED_MAX)
        memmove(od->refused, od->refused + 1, sizeof od->refused[0] * (OD_REFUSED_MAX - 1)),
            od->nrefused--;
    od_refusal_t *r = &od->refused[od->nrefused++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->until = now + ttl;
    od->dirty = 1; /* written once the asks at hand are taken (acme_od_take) */
}

/* The client address's count for this hour: 1 while it may ask once more
   (counted), 0 over --acme-on-demand-rate's ADDR. */
static int addr_turn(acme_od_t *od, const char *text, time_t now)
{
    od_addr_t *a = NULL, *oldest = NULL;
    unsigned char in6[16];
    char addr[sizeof a->addr];
    snprintf(addr, sizeof addr, "%.*s", INET6_ADDRSTRLEN, text);
    if (inet_pton(AF_INET6, text, in6) == 1) { /* one host's many addresses: its /64 */
        memset(in6 + 8, 0, 8);
        if (inet_ntop(AF_INET6, in6, addr, INET6_ADDRSTRLEN))
            strcat(addr, "/64"); /* INET6_ADDRSTRLEN + 4 bytes hold it */
    }
    for (int i = 0; i < od->naddrs && !a; i++) {
        if (!strcmp(od->addrs[i].addr, addr))
            a = &od->addrs[i];
        else if (!oldest || od->addrs[i].since < oldest->since)
            oldest = &od->addrs[i];
    }
    if (!a) {
        a = od->naddrs < OD_ADDRS ? &od->addrs[od->naddrs++] : oldest;
        if (!a) /* a full table has an oldest: never */
            return 0;
        snprintf(a->addr, sizeof a->addr, "%s", addr);
        a->since = now, a->n = 0;
    }
    if (now - a->since >= HOUR)
        a->since = now, a->n = 0;
    if (a->n >= od->cfg->acme.od_per_addr)
        return 0;
    a->n++;
    return 1;
}

/* The hour's names allowed in all: 1 while one more may be (counted), else 0. */
static int hour_turn(acme_od_t *od, time_t now)
{
    time_t *t = &od->ring[od->ring_at];
    if (*t && now - *t < HOUR) /* the od_per_hour-th name back is within the hour */
        return 0;
    *t = now;
    od->ring_at = (od->ring_at + 1) % od->cfg->acme.od_per_hour;
    return 1;
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
    (void)p, (void)arg;
    return size * n;
}

/* GET URL?domain=NAME: its status (0: no answer, why in err). */
static long ask(acme_od_t *od, const char *name, char *err, size_t errlen)
{
    const char *base = od->cfg->acme.ask_url;
    char url[1400];
    snprintf(url, sizeof url, "%s%cdomain=%s", base, strchr(base, '?') ? '&' : '?', name);
    CURL *c = curl_easy_init();
    long status = 0;
    if (!c) {
        snprintf(err, errlen, "curl_easy_init() failed");
        return 0;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)OD_ASK_TIMEOUT);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gatling-acme/1 (on-demand ask)");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else
        snprintf(err, errlen, "%s", curl_easy_strerror(rc));
    curl_easy_cleanup(c);
    return status;
}

/* The state directory's list of names got on demand, whole: "NAME GOOD"
   each (GOOD: od->names[].good, so that a restart keeps the clock). */
static void write_names(acme_od_t *od, time_t now)
{
    static char buf[OD_NAMES_MAX];
    hbuf_t b = hb_init(buf, sizeof buf);
    for (int i = 0; i < od->nnames; i++) {
        hb_puts(&b, od->names[i].name);
        hb_puts(&b, " ");
        hb_num(&b, (uint64_t)od->names[i].good);
        hb_puts(&b, "\n");
    }
    od->saved = now;
    if (!b.over && acme_write_atomic(od->state_fd, OD_NAMES_FILE, buf, hb_len(&b), 0644) < 0)
        say(od, "writing %s failed: %s", OD_NAMES_FILE, strerror(errno));
}

/* name (checked) to the client's list and ours, its clock at good: 0, or
   -1 (the list full, or no memory). */
static int keep(acme_od_t *od, const char *name, time_t good, acme_od_names_fn fn, void *arg)
{
    char *copy = od->nnames < od->cfg->acme.od_max ? strdup(name) : NULL;
    if (!copy || fn(arg, copy, ACME_OD_ADD) < 0) {
        free(copy);
        return -1;
    }
    od->names[od->nnames].name = copy;
    od->names[od->nnames++].good = good;
    return 0;
}

void acme_od_load(acme_od_t *od, acme_od_names_fn fn, void *arg)
{
    size_t len;
    time_t now = time(NULL);
    char *text = od ? acme_read_file(od->state_fd, OD_NAMES_FILE, OD_NAMES_MAX, &len) : NULL;
    for (char *p = text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        if ((nl = strchr(p, '\n')))
            *nl = 0;
        char *sp = strchr(p, ' '), *e = NULL;
        long long good = sp ? strtoll(sp + 1, &e, 10) : 0;
        if (sp)
            *sp = 0;
        if (!sp || *e || good <= 0 || good > now) /* an older run's "NAME": from now */
            good = now;
        if (!acme_chal_ondemand_ok(p, strlen(p)) || fn(arg, p, ACME_OD_IS))
            continue;
        if (keep(od, p, (time_t)good, fn, arg) < 0)
            note(od, "on demand: %s: got before, but the list of names got on demand is full "
                 "(%d, --acme-on-demand-names): not kept", p, od->cfg->acme.od_max);
    }
    free(text);
}

/* The ask said yes: the name kept (1), or refused for the hour's names or
   the list's room (0), always said: no allowed name is refused unseen. */
static int allowed(acme_od_t *od, const char *name, const char *addr, acme_od_names_fn fn,
                   void *arg, time_t now)
{
    const char *why = NULL;
    if (od->nnames >= od->cfg->acme.od_max)
        why = "the list of names got on demand is full (--acme-on-demand-names)";
    else if (!hour_turn(od, now))
        why = "over --acme-on-demand-rate's names an hour";
    else if (keep(od, name, now, fn, arg) < 0)
        why = "out of memory";
    if (why) {
        od->limited++;
        note(od, "on demand: %s (from %s): the ask URL allows it, but %s (%d names kept): "
             "refused for %d s", name, addr, why, od->nnames, OD_FAULT_TTL);
        refuse(od, name, now, OD_FAULT_TTL);
        return 0;
    }
    od->allowed++;
    note(od, "on demand: %s (from %s): the ask URL allows it: ordered", name, addr);
    write_names(od, now);
    return 1;
}

/* An ask of a name kept: a handshake named it (its certificate's, told now
   and then, tls/tls_ctx.c's tls_ondemand_seen; or one waiting for its
   order): it is in use, and not forgotten for --acme-on-demand-forget. */
static void in_use(acme_od_t *od, const char *name, time_t now)
{
    for (int i = 0; i < od->nnames; i++)
        if (!strcmp(od->names[i].name, name)) {
            od->names[i].good = now;
            od->touched = 1;
            return;
        }
}

/* One ask: 1 when its name was added. */
static int take_one(acme_od_t *od, char *name, const char *addr, acme_od_names_fn fn, void *arg)
{
    time_t now = time(NULL);
    char err[CURL_ERROR_SIZE + 64];
    if (fn(arg, name, ACME_OD_IS)) { /* kept: in use */
        in_use(od, name, now);
        return 0;
    }
    if (refusal(od, name, now)) /* refused lately */
        return 0;
    od->asks++;
    if (!acme_chal_ondemand_ok(name, strlen(name))) {
        od->invalid++;
        refusal_say(od, OD_LOG_INVALID, "on demand: %s (from %s): not a host name: refused",
                    name, addr);
        refuse(od, name, now, OD_REFUSE_TTL);
        return 0;
    }
    if (!addr_turn(od, addr, now)) { /* the address first: it pays for its own asks */
        od->limited++;
        refusal_say(od, OD_LOG_ADDR, "on demand: %s (from %s): over --acme-on-demand-rate's "
                    "asks an hour from one address: refused", name, addr);
        refuse(od, name, now, OD_FAULT_TTL);
        return 0;
    }
    long status = ask(od, name, err, sizeof err);
    int added = status == 200 && allowed(od, name, addr, fn, arg, now);
    if (status != 200) {
        int no = status >= 400 && status < 500;
        od->refusals++;
        if (status)
            snprintf(err, sizeof err, "the ask URL answered %ld", status);
        refusal_say(od, no ? OD_LOG_NO : OD_LOG_FAULT, "on demand: %s (from %s): %s: refused "
                    "for %d s", name, addr, err, no ? OD_REFUSE_TTL : OD_FAULT_TTL);
        refuse(od, name, now, no ? OD_REFUSE_TTL : OD_FAULT_TTL);
    }
    if (!added) {
        od->dirty = 0; /* at once: an ask took its time, and its handshakes wait */
        write_refused(od, now);
    }
    return added;
}

time_t acme_od_sweep(acme_od_t *od, acme_od_names_fn fn, void *arg)
{
    if (!od)
        return 0;
    time_t now = time(NULL), next = 0, forget = od->cfg->acme.od_forget;
    int k = 0, gone = 0;
    for (int i = 0; i < od->nnames; i++) {
        if (now - od->names[i].good < forget) {
            od->names[k++] = od->names[i];
            if (!next || od->names[i].good + forget < next)
                next = od->names[i].good + forget;
            continue;
        }
        note(od, "on demand: %s forgotten: no handshake named it in %ld s "
             "(--acme-on-demand-forget): not renewed; %s", od->names[i].name,
             (long)(now - od->names[i].good),
             fn(arg, od->names[i].name, ACME_OD_HAS_CERT)
                 ? "its certificate serves until it expires, and a handshake that names it "
                   "asks for it again"
                 : "asked for again at its next handshake");
        fn(arg, od->names[i].name, ACME_OD_DROP);
        free(od->names[i].name);
        gone++;
    }
    od->nnames = k;
    if (gone || (od->touched && now - od->saved >= OD_SAVE_EVERY)) { /* the clocks kept */
        od->touched = 0;                                            /* across a restart */
        write_names(od, now);
    }
    kinds_flush(od, now);
    return next;
}

int acme_od_take(acme_od_t *od, acme_od_names_fn fn, void *arg)
{
    int added = 0;
    for (int i = 0; od && i < OD_TAKE_MAX; i++) {
        char msg[ACME_OD_MSG_MAX + 1], addr[64] = "-";
        ssize_t n = recv(od->fd, msg, ACME_OD_MSG_MAX, MSG_DONTWAIT);
        if (n <= 0)
            break;
        msg[n] = 0;
        char *sp = strchr(msg, ' ');
        if (sp) {
            *sp = 0;
            snprintf(addr, sizeof addr, "%.63s", sp + 1);
            addr[strcspn(addr, " \n")] = 0;
        }
        for (char *p = msg; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p += 'a' - 'A';
        if (!*msg || strlen(msg) > 253)
            continue;
        added += take_one(od, msg, addr, fn, arg);
    }
    if (od && od->dirty) {
        od->dirty = 0;
        write_refused(od, time(NULL));
    }
    return added;
}

void acme_od_status(const acme_od_t *od, hbuf_t *b)
{
    if (!od)
        return;
    const char *keys[] = {"od_names ", "od_asks ", "od_allowed ",
                          "od_refused ", "od_limited ", "od_invalid "};
    unsigned long long v[] = {(unsigned long long)od->nnames, od->asks, od->allowed,
                              od->refusals, od->limited, od->invalid};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        hb_puts(b, keys[i]);
        hb_num(b, v[i]);
        hb_puts(b, "\n");
    }
    for (int i = 0; i < od->nnames; i++) {
        hb_puts(b, "ondemand_name ");
        hb_puts(b, od->names[i].name);
        hb_puts(b, "\n");
    }
}
