/* One request and its response: see exchange.h. */
#include "exchange.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A request a local redirect made: the target is its own, the header
   fields point into the original request, which lives as long. */
struct ex_rewrite {
    http_request_t req;
    char target[HTTP_MAX_TARGET];
    char asked[HTTP_MAX_TARGET]; /* the client's own target (ex_asked_target) */
    size_t asked_n;
};

/* Fields that describe a request body: the rewritten request has none. */
static int body_field(const http_str_t *name)
{
    static const char *const drop[] = {"content-length", "transfer-encoding", "content-type",
                                       "expect"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) {
        size_t k = strlen(drop[i]);
        if (name->n == k && !strncasecmp(name->p, drop[i], k))
            return 1;
    }
    return 0;
}

/* ex's request again with target[0..n) (checked as ex_redirect says),
   without its body's fields when get: a new one, or NULL (errno). */
static struct ex_rewrite *rewritten(exchange_t *ex, const char *target, size_t n, int get)
{
    if (!ex_local_path(target, n) || n > HTTP_MAX_TARGET) {
        errno = EINVAL;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!http_target_byte((unsigned char)target[i])) { /* as the request parser */
            errno = EINVAL;
            return NULL;
        }
    }
    if (ex->redirects >= EX_REDIRECTS_MAX) {
        errno = ELOOP;
        return NULL;
    }
    struct ex_rewrite *rw = malloc(sizeof *rw);
    if (!rw)
        return NULL;
    memcpy(rw->target, target, n); /* first: target may be the producer's */
    const http_request_t *old = ex->req;
    const http_str_t asked = ex_asked_target(ex); /* the first request's, kept across */
    rw->asked_n = asked.n < sizeof rw->asked ? asked.n : sizeof rw->asked;
    memcpy(rw->asked, asked.p, rw->asked_n);
    rw->req.method = !get ? old->method : ex->head_only ? (http_str_t){"HEAD", 4}
                                                        : (http_str_t){"GET", 3};
    rw->req.target = (http_str_t){rw->target, n};
    rw->req.line = old->line;
    rw->req.version = old->version;
    rw->req.nheaders = 0;
    for (size_t i = 0; i < old->nheaders; i++)
        if (!get || !body_field(&old->headers[i].name))
            rw->req.headers[rw->req.nheaders++] = old->headers[i];
    return rw;
}

/* rw is ex's request from now on. */
static void retargeted(exchange_t *ex, struct ex_rewrite *rw)
{
    free(ex->rewrite); /* old was it, if set: nothing of it is kept */
    ex->rewrite = rw;
    ex->req = &rw->req;
    ex->redirects++;
    ex->path_st = 0; /* ex_path decodes the new target */
}

int ex_path(exchange_t *ex, path_t *p)
{
    if (!ex->path_st) {
        const http_str_t *t = &ex->req->target;
        int st = path_from_target(t->p, t->n, ex->path, EX_PATH_CAP, &ex->path_res);
        ex->path_st = (uint16_t)(st + 1);
    }
    *p = ex->path_res;
    return ex->path_st - 1;
}

int ex_retarget(exchange_t *ex, const char *target, size_t n)
{
    struct ex_rewrite *rw = rewritten(ex, target, n, 0);
    if (!rw)
        return -1;
    retargeted(ex, rw);
    return 0;
}

int ex_redirect(exchange_t *ex, const char *target, size_t n)
{
    struct ex_rewrite *rw = rewritten(ex, target, n, 1);
    if (!rw)
        return -1;
    const ex_producer_t *p = ex->producer;
    if (p) { /* the one that redirects: it ends here, as ex_end would end it */
        ex->producer = NULL;
        p->end(ex);
    }
    retargeted(ex, rw);
    ex->req_len = 0;
    ex->upgradable = 0;
    ex->nfields = 0; /* the answer starts afresh */
    ex->fields_over = 0;
    ex->log_notes = 0;
    ex->codec->redispatch(ex);
    return 0;
}

int ex_error(exchange_t *ex, int status, const char *name, const char *value)
{
    ex->nfields = 0;
    ex->fields_over = 0;
    if (name)
        ex_field(ex, name, value);
    return ex->codec->error(ex, status);
}

int ex_page(exchange_t *ex, const char *ctype, char *page, size_t len)
{
    int r = ex_head(ex, 200, ctype, len, -1);
    if (r != 0) {
        free(page);
        return r < 0 ? -1 : 0;
    }
    return ex_body_buf(ex, page, len, EX_FREE);
}

int ex_own(exchange_t *ex, void *p)
{
    if (ex->owned)
        return -1;
    ex->owned = p;
    return 0;
}

void ex_end(exchange_t *ex)
{
    const ex_producer_t *p = ex->producer;
    if (p) { /* first: the producer may still hold the exchange's buffers */
        ex->producer = NULL;
        p->end(ex);
    }
    for (int i = 0; i < EX_SLOTS; i++) { /* after the producer, which may have sent from them */
        ex_slot_t *s = &ex->slot[i];
        void (*end)(exchange_t *, ex_slot_t *) = s->end;
        if (end) {
            s->end = NULL;
            end(ex, s);
        }
    }
    free(ex->owned);
    ex->owned = NULL;
    free(ex->rewrite);
    ex->rewrite = NULL;
}

http_str_t ex_asked_target(const exchange_t *ex)
{
    return ex->rewrite ? (http_str_t){ex->rewrite->asked, ex->rewrite->asked_n} : ex->req->target;
}
