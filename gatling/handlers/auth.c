/*
 * .htaccess Basic authentication: see auth.h.  The check runs as a job
 * (site/jobs.h) that resumes the exchange.  A client failing again and
 * again gets 429 without a password check; the same wrong credentials
 * again get 401 without hashing.
 */
#define _GNU_SOURCE
#include "auth.h"
#include "hstate.h"
#include "htaccess.h"
#include "http/hbuf.h"
#include "site/jobs.h"
#include "site/peerlimits.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { AUTH_NONE, AUTH_GOOD, AUTH_BAD }; /* the verdict on this request's credentials */

/* The verdict a password check (or the memory of failures) gave this
   request: its slot, for the request as it is now (hstate.h). */
static unsigned verdict(const exchange_t *ex)
{
    return hslot_req(ex, HSLOT_AUTH);
}

static void set_verdict(exchange_t *ex, unsigned v)
{
    hslot_req_set(ex, HSLOT_AUTH, v);
}

/* Equal bytes, in a time that does not depend on where they differ. */
static int same_bytes(const char *a, const char *b, size_t n)
{
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* The password check of one request, on a worker thread. */
typedef struct auth_job {
    ex_job_t xj; /* first: codec/codec.c's job_back frees the whole struct */
    htaccess_pending_t p;
    int good;
} auth_job_t;

static void auth_work(job_t *j)
{
    auth_job_t *a = (auth_job_t *)j;
    a->good = htaccess_verify(&a->p);
}

static void auth_finish(ex_job_t *xj, exchange_t *ex)
{
    auth_job_t *a = (auth_job_t *)xj;
    explicit_bzero(&a->p, sizeof a->p); /* verify wiped the password, unless it never ran */
    if (ex)
        set_verdict(ex, a->good ? AUTH_GOOD : AUTH_BAD);
}

/*
 * Already let in: the credentials *granted remembers for a cached file (so
 * a page's assets, which come with the same credentials, pay for the check
 * once per file and second, the cache's lifetime), or a thread's yes.
 */
static int let_in(exchange_t *ex, const http_str_t *auth, char **granted)
{
    site_t *s = ex->site;
    if (auth && granted && *granted && strlen(*granted) == auth->n &&
        same_bytes(*granted, auth->p, auth->n))
        return 1;
    if (verdict(ex) != AUTH_GOOD)
        return 0;
    limits_auth_ok(s->limits, ex->peer, gio_now(s->loop));
    if (auth && granted) {
        free(*granted);
        *granted = strndup(auth->p, auth->n); /* NULL on ENOMEM: no harm */
    }
    return 1;
}

/* Failing again and again: 429, no password check for a while (1). */
static int throttled(exchange_t *ex)
{
    site_t *s = ex->site;
    unsigned wait = limits_auth_wait(s->limits, ex->peer, gio_now(s->loop));
    if (!wait)
        return 0;
    s->stats.auth_throttled++;
    char num[24];
    hbuf_t b = hb_init(num, sizeof num);
    hb_num(&b, wait);
    const char *v = hb_str(&b);
    return (v ? ex_error(ex, 429, "Retry-After", v) : ex_error(ex, 500, NULL, NULL)) < 0 ? -1 : 1;
}

/* The memory of failed credentials, keyed path, NUL, value: a verdict on
   credentials failed lately (AUTH_BAD, no hashing), or a failure noted. */
static void remember(exchange_t *ex, const char *path, const http_str_t *auth)
{
    site_t *s = ex->site;
    char key[EX_PATH_CAP + 1100];
    size_t pl = strlen(path), kl = 0;
    if (auth && pl + 1 + auth->n <= sizeof key) {
        memcpy(key, path, pl + 1);
        memcpy(key + pl + 1, auth->p, auth->n);
        kl = pl + 1 + auth->n;
    }
    if (verdict(ex) == AUTH_NONE && kl &&
        limits_cred_failed(s->limits, key, kl, gio_now(s->loop))) {
        s->stats.auth_remembered++; /* the same wrong password again: no hashing */
        set_verdict(ex, AUTH_BAD);
    } else if (verdict(ex) == AUTH_BAD) {
        limits_auth_failed(s->limits, ex->peer, gio_now(s->loop));
        if (kl)
            limits_cred_note_failed(s->limits, key, kl, gio_now(s->loop));
    }
}

/* Hand the check of p to a worker thread: 2, or -1 on ENOMEM. */
static int start_check(exchange_t *ex, const htaccess_pending_t *p)
{
    auth_job_t *a = malloc(sizeof *a);
    if (a) {
        memset(a, 0, sizeof a->xj);
        a->p = *p;
        a->xj.job.work = auth_work;
        a->xj.finish = auth_finish;
        ex->job = &a->xj;
    }
    return a ? 2 : -1;
}

/* 401 with the realm's challenge. */
static int challenge(exchange_t *ex, const char *realm)
{
    char v[200];
    hbuf_t b = hb_init(v, sizeof v);
    hb_puts(&b, "Basic realm=\"");
    hb_puts(&b, realm);
    hb_puts(&b, "\", charset=\"UTF-8\"");
    const char *value = hb_str(&b); /* realm[128] + 40 bytes always fit */
    return (value ? ex_error(ex, 401, "WWW-Authenticate", value)
                  : ex_error(ex, 500, NULL, NULL)) < 0 ? -1 : 1;
}

int auth_check(exchange_t *ex, const char *path, char **granted)
{
    site_t *s = ex->site;
    const http_str_t *auth = http_header(ex->req, "Authorization");
    char realm[128];
    if (let_in(ex, auth, granted))
        return 0;
    int r = throttled(ex);
    if (r)
        return r;
    htaccess_pending_t p;
    int vfd = target_dir(ex, NULL);
    int h = vfd < 0 ? 500
                    : htaccess_prepare(vfd, path, strlen(path), auth ? auth->p : NULL,
                                       auth ? auth->n : 0, realm, sizeof realm, &p);
    if (h == HTACCESS_VERIFY)
        remember(ex, path, auth);
    if (h == HTACCESS_VERIFY && verdict(ex) == AUTH_NONE) {
        r = start_check(ex, &p);
        explicit_bzero(&p, sizeof p);
        return r;
    }
    if (h == HTACCESS_VERIFY) { /* the thread (or the memory of failures) said no */
        explicit_bzero(&p, sizeof p);
        h = 401;
    }
    if (h == 0)
        return 0;
    if (h == 403) /* an Apache .htaccess denies it */
        return ex_error(ex, 403, NULL, NULL) < 0 ? -1 : 1;
    if (h != 401) {
        site_error(s, ".htaccess check", 0, ex->peer, path); /* unreadable or malformed */
        return ex_error(ex, 500, NULL, NULL) < 0 ? -1 : 1;
    }
    return challenge(ex, realm);
}
