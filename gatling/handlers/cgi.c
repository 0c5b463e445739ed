/*
 * CGI programs as streaming producers: see cgi.h.  The parts: which
 * requests and which file (cgi_find.c), .htaccess (guard), the
 * start (start, open_pipes), and the life of one process's three pipes on
 * the loop (on_out, on_in, on_err, and the producer's input, drained, end).
 *
 * A cgi_t may be ended by the codec (end()) while one of its own watch
 * callbacks runs (ex_body_end or ex_error can finish the exchange at once):
 * the callbacks hold it (busy) and look at c->ended after every call into
 * the exchange; the memory goes when the last one lets go.
 */
#define _GNU_SOURCE
#include "cgi.h"
#include "cgi_find.h"
#include "cgi_int.h"
#include "auth.h"
#include "cgienv.h"
#include "hstate.h"
#include "htaccess.h"
#include "target.h"
#include "http/cgi_head.h"
#include "http/hbuf.h"
#include "http/head.h"
#include "http/owfat.h"
#include "site/fs.h"
#include "site/site.h"
#include "site/spawn.h"
#include "site/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CGI_READ (64 * 1024) /* a piece of body read from stdout */
#define CGI_READS 8          /* pieces read per event, then the loop's other work */
#define CGI_ERR_LINE 400     /* a stderr line logged, at most this long */
#define CGI_ERR_LINES 32     /* stderr lines logged per request, then counted */
#define CGI_PATH "/usr/local/bin:/usr/bin:/bin"
#define CGI_FILE_MAX (PATH_MAX + VHOST_NAME_MAX + EX_PATH_CAP)

struct cgi;

typedef struct cgi_pipe {
    watch_t w; /* first */
    struct cgi *c;
    int fd; /* -1: closed */
} cgi_pipe_t;

enum { CGI_HEAD, CGI_BODY, CGI_DONE };

typedef struct cgi {
    exchange_t *ex;
    cgi_loop_t *L;
    uint64_t id;
    cgi_pipe_t in, out, err;
    int state;
    int busy;          /* callbacks under way */
    uint8_t ended;     /* the exchange ended: only the memory is left */
    uint8_t stalled;   /* stdout not read: the client has enough queued */
    uint8_t killed;    /* SPAWN_END sent (or queued) */
    uint8_t err_skip;  /* the stderr line is over-long: skip to its end */
    uint8_t input_done; /* the request body was all offered (or there was none) */
    uint64_t left;     /* body bytes the script's Content-Length still allows */
    cgi_head_t head;
    size_t hlen;
    char *hbuf; /* CGI_HEAD_MAX: stdout until the head is complete */
    unsigned errlines;
    size_t errlen;
    char errline[CGI_ERR_LINE + 1];
    char what[EX_PATH_CAP + 8]; /* "CGI /x.sh": the error log's prefix */
} cgi_t;

/* ---- the spawner's socket ---- */

/* A spawner that went away is reaped (it may still be exiting when its
   socket closes: tried again at each CGI request refused for it). */
static void reap_spawner(cgi_loop_t *L)
{
    if (L->pid > 0 && waitpid(L->pid, NULL, WNOHANG) != 0)
        L->pid = 0;
}

/* The spawner went away: say so once, and answer 503 from now on. */
static void spawner_gone(cgi_loop_t *L, int err)
{
    if (L->fd < 0) {
        reap_spawner(L);
        return;
    }
    site_t *s = L->site;
    char text[160];
    hbuf_t b = hb_init(text, sizeof text);
    hb_puts(&b, "the spawner is gone (");
    hb_puts(&b, err ? strerror(err) : "its socket closed");
    hb_puts(&b, "): CGI requests get 503 from now on");
    elog_text(&s->elog, gio_wallclock(s->loop), "CGI", hb_str(&b) ? text : "the spawner is gone");
    gio_close(L->site->loop, L->fd);
    L->fd = -1;
    L->nends = 0;
    reap_spawner(L);
}

/* Send the SPAWN_ENDs that waited for room. */
static void flush_ends(cgi_loop_t *L)
{
    size_t i = 0;
    while (L->fd >= 0 && i < L->nends && spawn_end(L->fd, L->ends[i]) == 0)
        i++;
    if (L->fd >= 0 && i < L->nends && errno != EAGAIN)
        spawner_gone(L, errno);
    if (L->fd < 0)
        return;
    memmove(L->ends, L->ends + i, (L->nends - i) * sizeof *L->ends);
    L->nends -= i;
    gio_want(L->site->loop, L->fd, GIO_READ | (L->nends ? GIO_WRITE : 0));
}

static void on_spawner(watch_t *w, unsigned ev)
{
    cgi_loop_t *L = (cgi_loop_t *)w;
    char b[64];
    if (ev & GIO_WRITE)
        flush_ends(L);
    if (L->fd >= 0 && (ev & ~(unsigned)GIO_WRITE)) {
        ssize_t n = recv(L->fd, b, sizeof b, MSG_DONTWAIT); /* it says nothing: EOF */
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            spawner_gone(L, n < 0 ? errno : 0);
    }
}

/* The process group of c is to go: tell the spawner (now, or when it has room). */
static void kill_group(cgi_t *c)
{
    cgi_loop_t *L = c->L;
    if (c->killed)
        return;
    c->killed = 1;
    if (L->fd < 0)
        return;
    if (!L->nends && spawn_end(L->fd, c->id) == 0)
        return;
    if (L->nends == 0 && errno != EAGAIN) {
        spawner_gone(L, errno);
        return;
    }
    uint64_t *e = hb_grow(L->ends, &L->ends_cap, L->nends + 1, sizeof *e, 64);
    if (!e) {
        site_error(L->site, "realloc()", ENOMEM, NULL, "a CGI process group left running");
        return;
    }
    L->ends = e;
    L->ends[L->nends++] = c->id;
    gio_want(L->site->loop, L->fd, GIO_READ | GIO_WRITE);
}

/* ---- one process's pipes ---- */

static void close_pipe(cgi_t *c, cgi_pipe_t *p)
{
    if (p->fd >= 0)
        gio_close(c->L->site->loop, p->fd);
    p->fd = -1;
}

/* A callback is done with c: free it if the exchange ended meanwhile. */
static void let_go(cgi_t *c)
{
    if (--c->busy == 0 && c->ended) {
        free(c->hbuf);
        free(c);
    }
}

/* Log a line about c's script (rate-limited with the other errors). */
static void cgi_log(cgi_t *c, const char *text)
{
    site_t *s = c->L->site;
    elog_text(&s->elog, gio_wallclock(s->loop), c->what, text);
}

/* No usable head: 502 (or status), and why in the error log. */
static void fail(cgi_t *c, const char *why, int status)
{
    c->L->site->stats.cgi_failed++;
    cgi_log(c, why);
    c->state = CGI_DONE;
    close_pipe(c, &c->out);
    if (ex_error(c->ex, status, NULL, NULL) < 0 && !c->ended)
        ex_body_abort(c->ex);
}

/* Hand body bytes buf[0..n) (malloc'd, taken) to the exchange. */
static void deliver(cgi_t *c, char *buf, size_t n)
{
    if (c->left != UINT64_MAX) { /* a Content-Length was given: no more than that */
        if (n > c->left) {
            cgi_log(c, "wrote more than its Content-Length: the rest dropped");
            n = (size_t)c->left;
        }
        c->left -= n;
    }
    if (!n) {
        free(buf);
        return;
    }
    if (ex_body_buf(c->ex, buf, n, EX_FREE) < 0 && !c->ended) {
        c->state = CGI_DONE;
        ex_body_abort(c->ex);
    }
}

/* Copy name and value into b NUL-terminated and add them as a field. */
static void copy_field(exchange_t *ex, hbuf_t *b, http_str_t name, http_str_t value)
{
    const char *n = b->p;
    hb_put(b, name.p, name.n);
    hb_put(b, "", 1);
    const char *v = b->p;
    hb_put(b, value.p, value.n);
    hb_put(b, "", 1);
    if (!b->over)
        ex_field(ex, n, v);
}

/*
 * A Location that is a path, without a Status (RFC 3875 6.2.2): the server
 * answers the request as if it had been for that path; the script's other
 * fields and its body are dropped, and it is killed (ex_redirect ends it).
 * 1 when it took the exchange, 0 to answer the client a 302.
 */
static int local_redirect(cgi_t *c)
{
    const cgi_head_t *h = &c->head;
    const http_str_t *loc = &h->location;
    if (h->status || !loc->p || !ex_local_path(loc->p, loc->n))
        return 0; /* a status, no Location, or an absolute URL: the client's */
    if (!c->input_done)
        return 0; /* the body is still coming: nowhere to put it, the client asks again */
    c->state = CGI_DONE; /* not counted as killed: it answered */
    if (ex_redirect(c->ex, loc->p, loc->n) == 0) {
        c->L->site->stats.cgi_redirects++;
        return 1;
    }
    if (errno == EINVAL)
        fail(c, "answered a local redirect that is no valid path", 502);
    else if (errno == ELOOP)
        fail(c, "local redirects: too many in a row", 500);
    else
        fail(c, "local redirect: out of memory", 500);
    return 1;
}

/* The bytes the fields passed on take as HTTP/1.1 lines ("Name: value\r\n"):
   at most EX_FIELD_MAX fit beside the server's own in every codec's head. */
static size_t fields_size(const cgi_head_t *h)
{
    size_t n = h->location.p ? 12 + h->location.n : 0;
    if (h->content_type.p)
        n += 16 + h->content_type.n;
    for (size_t i = 0; i < h->nfields; i++)
        n += h->fields[i].name.n + h->fields[i].value.n + 4;
    return n;
}

/* The head is complete (hl bytes): the response's head, then what followed it. */
static void send_head(cgi_t *c, size_t hl)
{
    const cgi_head_t *h = &c->head;
    char store[CGI_HEAD_MAX + 2 * CGI_FIELDS_MAX + 16], ctype[CGI_LINE_MAX + 1];
    hbuf_t b = hb_init(store, sizeof store);
    if (local_redirect(c))
        return;
    /* RFC 3875 6.2.3: a Location without a Status is a redirect (a local path
       too, while the request body is still coming) */
    int status = h->status ? h->status : h->location.p ? 302 : 200;
    if (status < 200 || status > 599)
        return fail(c, "answered a status outside 200-599", 502);
    /* a head HTTP/1.1 could not carry would become a bare 500 there (and
       pass over HTTP/2): the same 502 in every protocol instead */
    if (h->nfields + (h->location.p != NULL) > EX_FIELDS_MAX || fields_size(h) > EX_FIELD_MAX)
        return fail(c, "answered too many or too large header fields", 502);
    for (size_t i = 0; i < h->nfields; i++)
        copy_field(c->ex, &b, h->fields[i].name, h->fields[i].value);
    if (h->location.p)
        copy_field(c->ex, &b, (http_str_t){"Location", 8}, h->location);
    if (h->content_type.p) {
        memcpy(ctype, h->content_type.p, h->content_type.n);
        ctype[h->content_type.n] = 0;
    }
    uint64_t len = h->content_length >= 0 ? (uint64_t)h->content_length : EX_LEN_STREAM;
    if (!head_has_body(0, status)) /* a length here is not a body's */
        len = 0;
    /* a HEAD's is the GET's length: the script leaves the body out (RFC 3875
       4.3.2) or writes it to be dropped, and either is a whole answer */
    c->left = len == EX_LEN_STREAM || c->ex->head_only ? UINT64_MAX : len;
    c->state = CGI_BODY;
    int r = ex_head(c->ex, status, h->content_type.p ? ctype : NULL, len, -1);
    if (c->ended)
        return;
    if (r != 0) { /* a 500 went out instead (EX_REPLACED), or ENOMEM */
        c->state = CGI_DONE;
        if (r < 0)
            ex_body_abort(c->ex);
        return;
    }
    char *rest = c->hlen > hl ? malloc(c->hlen - hl) : NULL;
    if (rest)
        memcpy(rest, c->hbuf + hl, c->hlen - hl);
    free(c->hbuf); /* the head is done with: a long response keeps only its pieces */
    c->hbuf = NULL;
    if (rest)
        deliver(c, rest, c->hlen - hl);
}

/* stdout ended: the body is complete, or there never was a head. */
static void out_eof(cgi_t *c)
{
    close_pipe(c, &c->out);
    if (c->state == CGI_HEAD) {
        fail(c, c->hlen ? "exited before the end of its head" : "exited with no output", 502);
        return;
    }
    if (c->state != CGI_BODY)
        return;
    c->state = CGI_DONE;
    if (c->left != UINT64_MAX && c->left) {
        cgi_log(c, "exited before the end of its Content-Length");
        ex_body_abort(c->ex);
    } else if (ex_body_end(c->ex) < 0 && !c->ended) {
        ex_body_abort(c->ex);
    }
}

/* One read from stdout: 1 to read again, 0 to wait. */
static int read_out(cgi_t *c)
{
    long n;
    if (c->state == CGI_HEAD) {
        n = gio_read(c->out.fd, c->hbuf + c->hlen, CGI_HEAD_MAX - c->hlen);
        if (n > 0) {
            c->hlen += (size_t)n;
            long hl = cgi_head_parse(c->hbuf, c->hlen, &c->head);
            if (hl == CGI_MALFORMED || (hl == CGI_INCOMPLETE && c->hlen == CGI_HEAD_MAX))
                fail(c, "answered a malformed or over-long head", 502);
            else if (hl > 0)
                send_head(c, (size_t)hl);
            return 1;
        }
    } else {
        char *buf = malloc(CGI_READ);
        if (!buf)
            return 0; /* try again at the next event */
        n = gio_read(c->out.fd, buf, CGI_READ);
        if (n > 0) {
            deliver(c, buf, (size_t)n);
            return 1;
        }
        free(buf);
    }
    if (n == GIO_AGAIN)
        return 0;
    out_eof(c); /* EOF, or an error that is as good as one */
    return 0;
}

/* -Q passed: kill the group; 504 before a head, else a cut-off response. */
static void deadline(cgi_t *c)
{
    c->L->site->stats.cgi_killed++;
    cgi_log(c, "still running at the deadline (-Q): killed");
    kill_group(c);
    int state = c->state;
    c->state = CGI_DONE;
    close_pipe(c, &c->out);
    if (state == CGI_HEAD)
        ex_error(c->ex, 504, NULL, NULL);
    else if (state == CGI_BODY)
        ex_body_abort(c->ex);
}

static void on_out(watch_t *w, unsigned ev)
{
    cgi_t *c = ((cgi_pipe_t *)w)->c;
    c->busy++;
    if (!ev) {
        deadline(c);
    } else {
        /* a hang-up is reported whatever the interest: the writers are gone and
           what is left is at most a pipe's capacity, so it is read at once */
        int gone = (ev & (GIO_HANGUP | GIO_ERROR)) != 0;
        for (int i = 0; (i < CGI_READS || gone) && !c->ended && c->out.fd >= 0; i++) {
            if (!gone && c->state == CGI_BODY && ex_queued(c->ex) > EX_STREAM_HIGH) {
                c->stalled = 1; /* drained() resumes */
                gio_want(c->L->site->loop, c->out.fd, 0);
                break;
            }
            if (!read_out(c))
                break;
        }
    }
    let_go(c);
}

/* stdin can take more: the codec offers the rest of the body again. */
static void on_in(watch_t *w, unsigned ev)
{
    cgi_t *c = ((cgi_pipe_t *)w)->c;
    if (!ev)
        return;
    c->busy++;
    gio_want(c->L->site->loop, c->in.fd, 0);
    if (ev & (GIO_ERROR | GIO_HANGUP))
        close_pipe(c, &c->in); /* the script closed it: input() drops the rest */
    ex_input_ready(c->ex);
    let_go(c);
}

/* The stderr line so far (cut at CGI_ERR_LINE) to the error log. */
static void err_flush(cgi_t *c)
{
    if (c->errlen && c->errlines++ < CGI_ERR_LINES) {
        c->errline[c->errlen] = 0;
        cgi_log(c, c->errline);
    }
    c->errlen = 0;
}

/* Bytes p[0..n) from stderr, cut into lines. */
static void err_bytes(cgi_t *c, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            if (!c->err_skip)
                err_flush(c);
            c->err_skip = 0;
        } else if (!c->err_skip) {
            c->errline[c->errlen++] = p[i];
            if (c->errlen == CGI_ERR_LINE) { /* log what fits, skip the rest */
                err_flush(c);
                c->err_skip = 1;
            }
        }
    }
}

/* The script's stderr is at its end (EOF, or the request ends): the last
   line and the count of the lines past CGI_ERR_LINES to the error log, once. */
static void err_end(cgi_t *c)
{
    err_flush(c);
    if (c->errlines > CGI_ERR_LINES) {
        char t[64];
        hbuf_t hb = hb_init(t, sizeof t);
        hb_num(&hb, c->errlines - CGI_ERR_LINES);
        hb_puts(&hb, " more stderr lines not logged");
        if (hb_str(&hb))
            cgi_log(c, t);
    }
    close_pipe(c, &c->err);
}

/* Up to CGI_READS reads of stderr; 1 when it reached its end (EOF or an
   error), 0 when it would block. */
static int err_read(cgi_t *c)
{
    char b[4096];
    for (int i = 0; i < CGI_READS; i++) {
        long n = gio_read(c->err.fd, b, sizeof b);
        if (n > 0)
            err_bytes(c, b, (size_t)n);
        else
            return n != GIO_AGAIN;
    }
    return 0;
}

static void on_err(watch_t *w, unsigned ev)
{
    cgi_t *c = ((cgi_pipe_t *)w)->c;
    if (ev && err_read(c))
        err_end(c);
}

/* ---- the producer ---- */

static size_t cgi_input(exchange_t *ex, const char *p, size_t n, int last)
{
    cgi_t *c = ex->pctx;
    size_t done = 0;
    while (c->in.fd >= 0 && done < n) {
        ssize_t w = write(c->in.fd, p + done, n - done);
        if (w > 0) {
            done += (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            gio_want(c->L->site->loop, c->in.fd, GIO_WRITE); /* on_in: input_ready */
            return done;
        } else if (!(w < 0 && errno == EINTR)) {
            close_pipe(c, &c->in); /* EPIPE: the script does not read it; drop the rest */
        }
    }
    if (last) {
        close_pipe(c, &c->in);
        c->input_done = 1;
    }
    return n;
}

static void cgi_drained(exchange_t *ex)
{
    cgi_t *c = ex->pctx;
    if (c->stalled && c->out.fd >= 0)
        gio_want(c->L->site->loop, c->out.fd, GIO_READ);
    c->stalled = 0;
}

static void cgi_end(exchange_t *ex)
{
    cgi_t *c = ex->pctx;
    /* the client went first (after a HEAD's head, it has all it asked for) */
    if (c->state == CGI_HEAD || (c->state == CGI_BODY && !ex->head_only))
        c->L->site->stats.cgi_killed++;
    c->state = CGI_DONE;
    kill_group(c);
    /* what the script wrote to stderr before it ended is in the pipe: its end
       was often reported in the same wait as stdout's, which ended the
       request first, and the count of lines past the cap was lost */
    if (c->err.fd >= 0) {
        err_read(c);
        err_end(c);
    }
    close_pipe(c, &c->in), close_pipe(c, &c->out);
    c->L->running--;
    c->ended = 1;
    ex->producer = NULL, ex->pctx = NULL;
    c->busy++;
    let_go(c);
}

static const ex_producer_t cgi_producer = {cgi_input, cgi_drained, cgi_end, NULL};

int cgi_match(exchange_t *ex)
{
    const cgi_loop_t *L = hstate(ex->site, HSTATE_CGI);
    cgi_find_t f;
    if (!L || !cgi_locate(ex, L, &f))
        return 0;
    cgi_found_close(&f);
    return 1;
}

/* ---- .htaccess ---- */

/* The user of a Basic Authorization gatling has checked, into user[0..usz). */
static void basic_user(const exchange_t *ex, char *user, size_t usz)
{
    const http_str_t *a = http_header(ex->req, "Authorization");
    char b64[1100], dec[1100];
    size_t i = 6, n, dl = 0;
    user[0] = 0;
    if (!a || a->n < 7 || strncasecmp(a->p, "basic ", 6))
        return;
    while (i < a->n && (a->p[i] == ' ' || a->p[i] == '\t')) /* as htaccess.c's parse_basic */
        i++;
    if ((n = a->n - i) >= sizeof b64)
        return;
    memcpy(b64, a->p + i, n);
    b64[n] = 0;
    if (scan_base64(b64, dec, &dl) == 0 || dl >= sizeof dec)
        return;
    char *colon = memchr(dec, ':', dl);
    size_t ul = colon ? (size_t)(colon - dec) : 0;
    for (size_t k = 0; k < ul; k++)
        if ((unsigned char)dec[k] < 0x20 || dec[k] == 0x7f)
            return;
    if (ul && ul < usz) {
        memcpy(user, dec, ul);
        user[ul] = 0;
    }
}

/*
 * .htaccess governs a script as a file (static.c): the one on its URL path
 * and the one on the path symlinks led to.  0 to go on (*user set if a
 * password was checked), 1 when answered, 2 when a password check went to
 * a worker thread (the request comes back), -1 on ENOMEM.
 */
static int guard(exchange_t *ex, const cgi_find_t *f, const char *script, char *user,
                 size_t usz)
{
    char real[EX_PATH_CAP + 16], realm[2];
    const char *paths[2] = {script, NULL};
    if (fs_path_below(f->vfd, f->fd, script + 1, real, sizeof real) == 0 && strcmp(real, script))
        paths[1] = real;
    user[0] = 0;
    for (int i = 0; i < 2 && paths[i]; i++) {
        int h = htaccess_check(f->vfd, paths[i], strlen(paths[i]), NULL, 0, realm, sizeof realm);
        if (h == 500 || h == 403) {
            if (h == 500)
                site_error(ex->site, ".htaccess check", 0, ex->peer, paths[i]);
            return ex_error(ex, h, NULL, NULL) < 0 ? -1 : 1;
        }
        if (h == 401) {
            int r = auth_check(ex, paths[i], NULL);
            if (r == 0)
                basic_user(ex, user, usz);
            return r;
        }
    }
    return 0;
}

/* ---- the start ---- */

/* Three pipes: the loop's ends (non-blocking) in c, the child's in child[]. */
static int open_pipes(cgi_t *c, int child[3])
{
    int p[3][2];
    int n = 0;
    for (; n < 3; n++)
        if (pipe2(p[n], O_CLOEXEC) < 0)
            break;
    if (n < 3) {
        int err = errno;
        while (n--)
            close(p[n][0]), close(p[n][1]);
        errno = err;
        return -1;
    }
    c->in.fd = p[0][1], child[0] = p[0][0];
    c->out.fd = p[1][0], child[1] = p[1][1];
    c->err.fd = p[2][0], child[2] = p[2][1];
    cgi_pipe_t *mine[3] = {&c->in, &c->out, &c->err};
    void (*on[3])(watch_t *, unsigned) = {on_in, on_out, on_err};
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        mine[i]->c = c;
        watch_init(&mine[i]->w, on[i]);
        fcntl(mine[i]->fd, F_SETFL, O_NONBLOCK);
        if (!bad && gio_add(c->L->site->loop, mine[i]->fd, &mine[i]->w) < 0)
            bad = i + 1;
    }
    if (!bad)
        return 0;
    int err = errno;
    for (int i = 0; i < 3; i++) {
        if (i < bad - 1)
            gio_del(c->L->site->loop, mine[i]->fd);
        close(mine[i]->fd), close(child[i]);
        mine[i]->fd = -1;
    }
    errno = err;
    return -1;
}

/* The paths as the spawner (and the process) sees them: the vhost
   directory, the file, its directory.  0, or -1 if too long. */
static int paths(const site_t *s, const cgi_find_t *f, const char *script, char *docroot,
                 char *file, char *cwd, size_t cap)
{
    const char *vdir = f->which == VHOST_ROOT ? NULL : vhost_dir(f->which, f->t.vhost);
    hbuf_t d = hb_init(docroot, cap);
    hb_puts(&d, strcmp(s->root_real, "/") ? s->root_real : ""); /* "" in a chroot */
    if (vdir) {
        hb_puts(&d, "/");
        hb_puts(&d, vdir);
    }
    if (!hb_str(&d) || cap < 2)
        return -1;
    size_t dl = hb_len(&d);
    const char *slash = strrchr(script, '/'); /* script starts with '/' */
    hbuf_t p = hb_init(file, cap), w = hb_init(cwd, cap);
    hb_put(&p, docroot, dl);
    hb_puts(&p, script);
    hb_put(&w, docroot, dl);
    hb_put(&w, script, (size_t)(slash - script));
    if (!hb_len(&w))
        hb_puts(&w, "/");
    if (!dl)
        memcpy(docroot, "/", 2);
    return hb_str(&p) && hb_str(&w) ? 0 : -1;
}

/* 503: over the cap, the spawner's socket full, or no spawner. */
static int refuse(exchange_t *ex)
{
    ex->site->stats.cgi_refused++;
    return ex_error(ex, 503, "Retry-After", "1") < 0 ? -1 : 0;
}

/* Ask the spawner for the process; c's pipes are open.  0, or -1 with errno. */
static int ask(cgi_t *c, const cgi_find_t *f, const char *script, const char *user, int child[3])
{
    site_t *s = c->L->site;
    char docroot[CGI_FILE_MAX], file[CGI_FILE_MAX], cwd[CGI_FILE_MAX];
    if (paths(s, f, script, docroot, file, cwd, CGI_FILE_MAX) < 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    cgi_script_t sc = {script, c->ex->path + f->slen, file, docroot, user[0] ? user : NULL,
                       CGI_PATH, 0};
    char *env = malloc(CGIENV_MAX);
    size_t used = 0;
    int n = env ? cgienv_build(c->ex, &sc, env, CGIENV_MAX, &used) : -1;
    int r = -1;
    if (n < 0)
        errno = env ? E2BIG : ENOMEM;
    else
        r = spawn_run(c->L->fd, c->id, file, cwd, env, used, n, child);
    free(env);
    return r;
}

static int start(exchange_t *ex, cgi_loop_t *L, const cgi_find_t *f, const char *user)
{
    char script[EX_PATH_CAP];
    memcpy(script, ex->path, f->slen);
    script[f->slen] = 0;
    cgi_t *c = calloc(1, sizeof *c);
    char *hbuf = malloc(CGI_HEAD_MAX);
    int child[3];
    if (!c || !hbuf) {
        free(c), free(hbuf);
        return -1;
    }
    *c = (cgi_t){.ex = ex, .L = L, .id = ++L->next_id, .hbuf = hbuf};
    hbuf_t w = hb_init(c->what, sizeof c->what);
    hb_puts(&w, "CGI ");
    hb_puts(&w, script);
    hb_str(&w); /* fits: EX_PATH_CAP + 8 */
    if (open_pipes(c, child) < 0) {
        site_error(ex->site, "pipe2()", errno, ex->peer, c->what);
        free(c->hbuf), free(c);
        return ex_error(ex, 503, NULL, NULL) < 0 ? -1 : 0;
    }
    int r = ask(c, f, script, user, child), err = errno;
    for (int i = 0; i < 3; i++)
        close(child[i]);
    if (r < 0) {
        close_pipe(c, &c->in), close_pipe(c, &c->out), close_pipe(c, &c->err);
        free(c->hbuf), free(c);
        if (err == EPIPE || err == ECONNRESET)
            spawner_gone(L, err);
        else if (err != EAGAIN)
            site_error(ex->site, "CGI spawn request", err, ex->peer, script);
        if (err == EAGAIN || L->fd < 0)
            return refuse(ex);
        return ex_error(ex, err == ENAMETOOLONG || err == E2BIG ? 414 : 500, NULL, NULL) < 0
                   ? -1 : 0;
    }
    ex->site->stats.cgi_spawned++;
    L->running++;
    ex->producer = &cgi_producer, ex->pctx = c;
    gio_loop_t *loop = ex->site->loop;
    if (ex->req_len == 0) {
        close_pipe(c, &c->in); /* no body: the script reads EOF */
        c->input_done = 1;
    }
    gio_want(loop, c->out.fd, GIO_READ);
    gio_want(loop, c->err.fd, GIO_READ);
    gio_set_deadline(loop, c->out.fd, gio_now(loop) + 1000 * (int64_t)ex->site->cfg->dyn_timeout);
    return 0;
}

int cgi_serve(exchange_t *ex)
{
    cgi_loop_t *L = hstate(ex->site, HSTATE_CGI);
    cgi_find_t f;
    char user[256];
    if (!L || !cgi_locate(ex, L, &f))
        return CGI_NOT_MINE;
    char script[EX_PATH_CAP];
    memcpy(script, ex->path, f.slen);
    script[f.slen] = 0;
    int r = guard(ex, &f, script, user, sizeof user);
    cgi_found_close(&f);
    if (r)
        return r < 0 ? -1 : 0;
    if (L->fd < 0)
        reap_spawner(L);
    if (L->fd < 0 || L->running >= (unsigned)ex->site->cfg->cgi_max)
        return refuse(ex);
    return start(ex, L, &f, user);
}

/* ---- the loop's set-up ---- */

int cgi_init(site_t *s, int spawn_fd)
{
    const config_t *cfg = s->cfg;
    hstate_set(s, HSTATE_CGI, NULL);
    if (!cfg->ncgi_regex && !cfg->cgi_exec)
        return 0;
    cgi_loop_t *L = calloc(1, sizeof *L);
    if (!L) {
        fprintf(stderr, "gatling: out of memory\n");
        return -1;
    }
    L->site = s, L->fd = spawn_fd, L->pid = s->proc->spawn_pid;
    for (; L->nre < cfg->ncgi_regex; L->nre++) {
        if (regcomp(&L->re[L->nre], cfg->cgi_regex[L->nre], REG_EXTENDED | REG_NOSUB)) {
            fprintf(stderr, "gatling: -w %s: not a regular expression\n",
                    cfg->cgi_regex[L->nre]);
            hstate_set(s, HSTATE_CGI, L);
            cgi_free(s);
            return -1;
        }
        size_t used = strlen(L->ext); /* (too many: those that fit) */
        cgienv_exts(cfg->cgi_regex[L->nre], L->ext + used, sizeof L->ext - used);
    }
    hstate_set(s, HSTATE_CGI, L);
    watch_init(&L->w, on_spawner);
    if (L->fd >= 0 && gio_add(s->loop, L->fd, &L->w) < 0) {
        fprintf(stderr, "gatling: cannot watch the CGI spawner: %s\n", strerror(errno));
        return -1;
    }
    if (L->fd >= 0)
        gio_want(s->loop, L->fd, GIO_READ);
    return 0;
}

void cgi_free(site_t *s)
{
    cgi_loop_t *L = hstate(s, HSTATE_CGI);
    if (!L)
        return;
    for (int i = 0; i < L->nre; i++)
        regfree(&L->re[i]);
    if (L->fd >= 0)
        gio_close(s->loop, L->fd); /* the spawner sees EOF and kills what is left */
    free(L->ends);
    free(L);
    hstate_set(s, HSTATE_CGI, NULL);
}

static int cgi_route(exchange_t *ex)
{
    int r = cgi_serve(ex);
    return r == CGI_NOT_MINE ? HANDLER_NOT_MINE : r < 0 ? -1 : 0;
}

static int cgi_route_init(site_t *s)
{
    return cgi_init(s, s->proc->spawn_fd);
}

static int cgi_on(const site_t *s)
{
    return hstate(s, HSTATE_CGI) != NULL;
}

/* A -w pattern's script, the whole path (a file below a directory whose
   name a pattern matches is a file: /cgi/dir.sh/index.html), or a file
   with an extension a pattern names (\.cgi$: every .cgi, wherever). */
static int cgi_claims(const site_t *s, const char *path, size_t n)
{
    const cgi_loop_t *L = hstate(s, HSTATE_CGI);
    return L && (cgienv_ext_in(L->ext, path, n) ||
                 cgienv_script(L->re, L->nre, path, n, CGIENV_AT_END) == n);
}

const handler_t cgi_handler = {
    .name = "CGI", .phase = HANDLER_PRODUCE, .serve = cgi_route, .init = cgi_route_init,
    .free = cgi_free, .on = cgi_on,
    .streams = cgi_match, .claims = cgi_claims, .wrap = HANDLER_STORE | HANDLER_CODE,
};
