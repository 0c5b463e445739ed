/* Proxying to FastCGI and SCGI backends: the CGI environment out, a CGI
   response back.  See proxy.h. */
#include "cgienv.h"
#include "http/hbuf.h"
#include "proxy_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FCGI_ID 1 /* one request at a time on a connection */

/* DOCUMENT_ROOT: the directory serving t, as the backend sees it (gatling.8). */
static int docroot(const px_req_t *pr, const px_target_t *t, char *out, size_t cap)
{
    const site_t *s = pr->px->site;
    hbuf_t b = hb_init(out, cap);
    hb_puts(&b, s->root_real && strcmp(s->root_real, "/") ? s->root_real : "");
    if (t->which != VHOST_ROOT)
        hb_puts(&b, "/"), hb_puts(&b, vhost_dir(t->which, t->vhost));
    if (!hb_len(&b))
        hb_puts(&b, "/");
    return hb_str(&b) ? 0 : -1;
}

/* The CGI environment of pr's request into env (CGIENV_MAX): the count, or -1. */
static int environment(px_req_t *pr, const px_target_t *t, char *env, size_t *used)
{
    char root[4096 + VHOST_NAME_MAX], script[EX_PATH_CAP], file[sizeof root + EX_PATH_CAP];
    if (docroot(pr, t, root, sizeof root) < 0)
        return -1;
    /* SCRIPT_NAME: the leading part of the path the rule matched up to its
       end (cgienv_script, gatling.8), "/index.php" of "/index.php/blog";
       no file is looked at, the backend's may be elsewhere.  The path came
       decoded and without dot segments (path_from_target), so neither part
       climbs above the document root. */
    size_t n = cgienv_script(&pr->rule->re, 1, t->p.path, t->p.len, CGIENV_AT_END);
    if (!n || n > t->p.len) /* not matched (the rule took it, so never): no PATH_INFO */
        n = t->p.len;
    /* a front controller (proxy_front.c): its script, no PATH_INFO, the
       path the client asked for in REQUEST_URI alone (nginx's try_files) */
    const char *from = t->script[0] ? t->script : t->p.path;
    if (t->script[0])
        n = strlen(t->script);
    if (n >= sizeof script)
        return -1;
    memcpy(script, from, n);
    script[n] = 0;
    hbuf_t fb = hb_init(file, sizeof file); /* root and script fit theirs: both fit */
    hb_puts(&fb, strcmp(root, "/") ? root : ""), hb_puts(&fb, script);
    if (!hb_str(&fb))
        return -1;
    cgi_script_t sc = {.script_name = script,
                       .path_info = t->script[0] ? "" : t->p.path + n,
                       .filename = file,
                       .docroot = root,
                       .body_len = pr->spooled};
    return cgienv_build(pr->ex, &sc, env, CGIENV_MAX, used);
}

/* FastCGI: BEGIN_REQUEST, PARAMS records of env's n strings (written in
   place, each header filled in when its record is full), an empty PARAMS. */
static int fcgi_params(px_req_t *pr, const char *env, int n)
{
    unsigned char rec[16];
    size_t hdr = 0, fill = 0; /* the open record's header (offset in out), its content */
    fcgi_begin(rec, FCGI_ID, 1);
    if (px_out(pr, rec, 16) < 0)
        return -1;
    for (int i = 0; i <= n; i++, env += i < n ? strlen(env) + 1 : 0) {
        const char *eq = i < n ? strchr(env, '=') : NULL;
        size_t nl = eq ? (size_t)(eq - env) : 0, vl = eq ? strlen(eq + 1) : 0;
        size_t need = eq ? fcgi_pair_size(nl, vl) : 0;
        if (need > FCGI_CONTENT_MAX) /* one variable longer than a record: left out */
            continue;
        if (fill && (i == n || fill + need > FCGI_CONTENT_MAX)) {
            fcgi_header((unsigned char *)pr->out + hdr, FCGI_PARAMS, FCGI_ID, (unsigned)fill, 0);
            fill = 0;
        }
        if (!eq)
            break;
        if (!fill) {
            hdr = pr->outlen;
            if (px_out(pr, rec, FCGI_HEADER_LEN) < 0) /* its header, filled in later */
                return -1;
        }
        char *at = px_room(pr, need);
        if (!at)
            return -1;
        fill += fcgi_pair((unsigned char *)at, env, nl, eq + 1, vl);
    }
    fcgi_header(rec, FCGI_PARAMS, FCGI_ID, 0, 0);
    return px_out(pr, rec, FCGI_HEADER_LEN);
}

/* SCGI: the netstring of CONTENT_LENGTH, SCGI=1 and the rest of env. */
static int scgi_headers(px_req_t *pr, char *env, size_t used, int n)
{
    /* the environment's CONTENT_LENGTH (cgienv's, a number), or 0, first */
    const char *cl = "0";
    size_t total = 0;
    char *p = env;
    for (int i = 0; i < n; i++, p += strlen(p) + 1)
        if (!strncmp(p, "CONTENT_LENGTH=", 15))
            cl = p + 15;
        else if (strchr(p, '=')) /* what the loop below sends */
            total += strlen(p) + 1;
    char len[64];
    int k = snprintf(len, sizeof len, "CONTENT_LENGTH%c%.20s%cSCGI%c1%c", 0, cl, 0, 0, 0);
    total += (size_t)k;
    char pre[24];
    snprintf(pre, sizeof pre, "%zu:", total);
    int r = px_out(pr, pre, strlen(pre)) | px_out(pr, len, (size_t)k);
    for (p = env; p < env + used; p += strlen(p) + 1) {
        if (!strncmp(p, "CONTENT_LENGTH=", 15))
            continue;
        char *eq = strchr(p, '=');
        if (!eq)
            continue; /* not NAME=value (cgienv writes none such): nothing to send */
        *eq = 0; /* NAME\0value\0 */
        r |= px_out(pr, p, strlen(p) + 1);
        r |= px_out(pr, p + strlen(p) + 1, strlen(p + strlen(p) + 1) + 1);
        p += strlen(p) + 1; /* the value: the loop steps over it */
    }
    return r | px_out(pr, ",", 1) ? -1 : 0;
}

static int px_fcgi_body(px_req_t *pr, const char *p, size_t n, int last);

static int px_fcgi_request(px_req_t *pr, const px_target_t *t)
{
    size_t used;
    char env[CGIENV_MAX]; /* on the loop's stack: the request's variables, then copied */
    int n = environment(pr, t, env, &used), r;
    if (n < 0)
        return -2; /* too large for the environment: 502 */
    if (pr->rule->kind == PX_FCGI) {
        r = fcgi_params(pr, env, n);
        if (!pr->has_body && !r) /* the empty STDIN now: no body comes */
            r = px_fcgi_body(pr, NULL, 0, 1);
        pr->keepalive = 1;
    } else {
        r = scgi_headers(pr, env, used, n);
    }
    return r;
}

static int px_fcgi_body(px_req_t *pr, const char *p, size_t n, int last)
{
    if (pr->rule->kind == PX_SCGI)
        return px_out(pr, p, n);
    unsigned char h[FCGI_HEADER_LEN];
    int r = 0;
    while (n) {
        size_t k = n < FCGI_CONTENT_MAX ? n : FCGI_CONTENT_MAX;
        fcgi_header(h, FCGI_STDIN, FCGI_ID, (unsigned)k, 0);
        r |= px_out(pr, h, sizeof h) | px_out(pr, p, k);
        p += k, n -= k;
    }
    if (last) {
        fcgi_header(h, FCGI_STDIN, FCGI_ID, 0, 0);
        r |= px_out(pr, h, sizeof h);
    }
    return r;
}

/* The CGI head is complete: the response's head.  0, or -1 (over). */
static int cgi_response(px_req_t *pr, const cgi_head_t *h)
{
    int status = h->status ? h->status : h->location.p ? 302 : 200;
    const char *ctype = NULL;
    int bad = 0;
    if (h->content_type.p)
        bad |= !(ctype = px_keep(pr, h->content_type.p, h->content_type.n));
    if (h->location.p)
        bad |= px_field(pr, "Location", 8, h->location.p, h->location.n);
    for (size_t i = 0; i < h->nfields && !bad; i++)
        if (h->fields[i].name.n < 48)
            bad |= px_field(pr, h->fields[i].name.p, h->fields[i].name.n, h->fields[i].value.p,
                            h->fields[i].value.n);
    if (bad || status < 200) {
        px_fail(pr, bad ? "too many or too large header fields from the backend"
                        : "a 1xx status from a CGI backend");
        return -1;
    }
    if (px_head(pr, status, ctype, EX_LEN_STREAM) < 0)
        return -1;
    pr->state = RS_BODY;
    return 0;
}

/* CGI response bytes (FastCGI STDOUT, SCGI): the head, then the body. */
static int cgi_bytes(px_req_t *pr, const char *p, size_t n)
{
    if (pr->state != RS_HEAD)
        return pr->head_only ? 0 : px_body(pr, p, n);
    if (!pr->in && !(pr->in = malloc(CGI_HEAD_MAX))) {
        px_fail(pr, "out of memory");
        return -1;
    }
    size_t k = n < CGI_HEAD_MAX - pr->inlen ? n : CGI_HEAD_MAX - pr->inlen;
    memcpy(pr->in + pr->inlen, p, k);
    pr->inlen += k;
    long used = cgi_head_parse(pr->in, pr->inlen, &pr->ch_head);
    if (used == CGI_INCOMPLETE && k == n)
        return 0;
    if (used < 0) {
        px_fail(pr, "malformed CGI response head from the backend");
        return -1;
    }
    if (cgi_response(pr, &pr->ch_head) < 0)
        return -1;
    if (pr->head_only)
        return 0;
    if (px_body(pr, pr->in + used, pr->inlen - (size_t)used) < 0)
        return -1;
    return px_body(pr, p + k, n - k);
}

/* A line the backend wrote to its stderr: to the error log. */
static void fcgi_stderr(px_req_t *pr, const char *p, size_t n)
{
    char line[512];
    while (n && (p[n - 1] == '\n' || p[n - 1] == '\r'))
        n--;
    if (!n)
        return;
    size_t k = n < sizeof line - 1 ? n : sizeof line - 1;
    memcpy(line, p, k), line[k] = 0;
    /* which backend, and for which path: a pool's members log to one place */
    char who[PX_LABEL_MAX + EX_PATH_CAP + 64];
    snprintf(who, sizeof who, "the FastCGI backend %s (its stderr), for %s:",
             pr->m ? pr->m->d.label : "?", pr->ex->path);
    site_event(pr->px->site, who, pr->ex->peer, line);
}

static void px_fcgi_read(px_req_t *pr, char *buf, size_t n)
{
    if (pr->rule->kind == PX_SCGI) {
        cgi_bytes(pr, buf, n);
        return;
    }
    size_t off = 0;
    while (off < n && pr->state != RS_DONE && !pr->ended) {
        fcgi_piece_t pc;
        long k = fcgi_next(&pr->fp, buf + off, n - off, &pc);
        if (k < 0) {
            px_fail(pr, "malformed FastCGI record from the backend");
            return;
        }
        off += (size_t)k;
        if (pc.type && pc.id != FCGI_ID)
            continue; /* a record of no request of ours */
        if (pc.type == FCGI_STDOUT && cgi_bytes(pr, pc.p, pc.n) < 0)
            return;
        if (pc.type == FCGI_STDERR)
            fcgi_stderr(pr, pc.p, pc.n);
        if (pc.type == FCGI_END_REQUEST) {
            if (pr->state == RS_HEAD)
                px_fail(pr, "FastCGI request ended before a complete head");
            else
                px_done(pr, off == n);
            return;
        }
    }
}

static void px_fcgi_eof(px_req_t *pr)
{
    if (pr->rule->kind == PX_SCGI && pr->state == RS_BODY)
        px_done(pr, 0);
    else
        px_fail(pr, pr->state == RS_HEAD ? "the backend closed before its response head"
                                         : "the backend closed in the middle of the body");
}

const px_ops_t px_fcgi_ops = {px_fcgi_request, px_fcgi_body, px_fcgi_read, px_fcgi_eof, NULL, NULL};
