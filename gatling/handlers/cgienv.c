/* CGI meta-variables: see cgienv.h. */
#define _GNU_SOURCE /* memrchr */
#include "cgienv.h"
#include "fields.h"
#include "http/hbuf.h"
#include "http/owfat.h"
#include "site/config.h"

#include <netinet/in.h>
#include <string.h>
#include <strings.h>

/* One "name=value\0" (value[0..n)). */
static void put_var(hbuf_t *b, const char *name, const char *value, size_t n, int *count)
{
    hb_puts(b, name);
    hb_put(b, "=", 1);
    hb_put(b, value, n);
    hb_put(b, "", 1);
    (*count)++;
}

static void put_str(hbuf_t *b, const char *name, const char *value, int *count)
{
    put_var(b, name, value, strlen(value), count);
}

static void put_num(hbuf_t *b, const char *name, uint64_t v, int *count)
{
    hb_puts(b, name);
    hb_put(b, "=", 1);
    hb_num(b, v);
    hb_put(b, "", 1);
    (*count)++;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int same_name(const http_str_t *a, const http_str_t *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (lower((unsigned char)a->p[i]) != lower((unsigned char)b->p[i]))
            return 0;
    return 1;
}

static int name_is(const http_str_t *s, const char *name)
{
    http_str_t n = {name, strlen(name)};
    return same_name(s, &n);
}

/* A field passed as HTTP_*: a name of letters, digits and '-', not one of
   those cgienv.h keeps back, nor one fields.h's policy keeps from every
   backend (hop-by-hop, named by Connection, forwarding, a certificate's). */
static int passed(const http_request_t *req, const http_str_t *name)
{
    static const char *const kept[] = {"Proxy",         "Content-Type",        "Content-Length",
                                       "Authorization", "Proxy-Authorization", "Client-Cert",
                                       "Client-Cert-Chain"};
    for (size_t i = 0; i < name->n; i++) {
        char c = name->p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-'))
            return 0;
    }
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        if (name_is(name, kept[i]))
            return 0;
    return name->n > 0 && !fields_hop_by_hop(req->headers, req->nheaders, *name, 0);
}

/* fields_ours's encoder: HTTP_NAME=value. */
typedef struct env_out {
    hbuf_t *b;
    int *count;
} env_out_t;

static int put_ours(void *arg, const char *name, const char *value)
{
    env_out_t *o = arg;
    hb_puts(o->b, "HTTP_");
    for (const char *p = name; *p; p++) {
        char c = *p == '-' ? '_' : (*p >= 'a' && *p <= 'z') ? (char)(*p - 32) : *p;
        hb_put(o->b, &c, 1);
    }
    put_var(o->b, "", value, strlen(value), o->count);
    return o->b->over ? -1 : 0;
}

/* HTTP_* for every request field passed, repeated ones joined. */
static void put_fields(hbuf_t *b, const http_request_t *req, int *count)
{
    for (size_t i = 0; i < req->nheaders; i++) {
        const http_header_t *h = &req->headers[i];
        size_t j = 0;
        while (j < i && !same_name(&req->headers[j].name, &h->name))
            j++;
        if (j < i || !passed(req, &h->name))
            continue; /* joined to the first of its name already, or not passed */
        hb_puts(b, "HTTP_");
        for (size_t k = 0; k < h->name.n; k++) {
            char c = h->name.p[k];
            c = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
            hb_put(b, &c, 1);
        }
        hb_put(b, "=", 1);
        hb_put(b, h->value.p, h->value.n);
        const char *sep = name_is(&h->name, "Cookie") ? "; " : ", ";
        for (size_t k = i + 1; k < req->nheaders; k++) {
            if (same_name(&req->headers[k].name, &h->name)) {
                hb_puts(b, sep);
                hb_put(b, req->headers[k].value.p, req->headers[k].value.n);
            }
        }
        hb_put(b, "", 1);
        (*count)++;
    }
}

/* SERVER_NAME: the Host's name without its port, if it is a plain name or address. */
static void put_server_name(hbuf_t *b, const http_request_t *req, int *count)
{
    const http_str_t *host = http_header(req, "Host");
    size_t n = 0;
    if (host && host->n && host->p[0] == '[') {
        const char *e = memchr(host->p, ']', host->n);
        n = e ? (size_t)(e - host->p) + 1 : 0;
    } else if (host) {
        const char *colon = memchr(host->p, ':', host->n);
        n = colon ? (size_t)(colon - host->p) : host->n;
    }
    for (size_t i = 0; i < n; i++) {
        char c = host->p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '[' || c == ']' || c == ':'))
            n = 0;
    }
    if (n && n <= 255)
        put_var(b, "SERVER_NAME", host->p, n, count);
    else
        put_str(b, "SERVER_NAME", "localhost", count);
}

/* REMOTE_ADDR and REMOTE_PORT (IPv4-mapped addresses as IPv4). */
static void put_peer(hbuf_t *b, const struct sockaddr *sa, int *count)
{
    char a[FMT_IP6];
    size_t n;
    unsigned port;
    if (!sa)
        return;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        n = fmt_ip4(a, (const char *)&in->sin_addr);
        port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        n = fmt_ip6c(a, (const char *)&in6->sin6_addr);
        port = ntohs(in6->sin6_port);
    } else {
        return;
    }
    put_var(b, "REMOTE_ADDR", a, n, count);
    put_num(b, "REMOTE_PORT", port, count);
}

/* Mutual TLS: the client's certificate as Apache's mod_ssl names it (and
   SSL_CLIENT_FINGERPRINT, its SHA-256), where the site asks for one. */
static void put_client(hbuf_t *b, const ex_client_t *cl, int *count)
{
    if (!cl)
        return;
    put_str(b, "SSL_CLIENT_VERIFY", cl->verify, count);
    if (!cl->cert)
        return;
    put_str(b, "SSL_CLIENT_S_DN", cl->s_dn, count);
    put_str(b, "SSL_CLIENT_I_DN", cl->i_dn, count);
    put_str(b, "SSL_CLIENT_M_SERIAL", cl->serial, count);
    put_str(b, "SSL_CLIENT_FINGERPRINT", cl->fingerprint, count);
}

/* The request line's and the body's variables. */
static void put_request(hbuf_t *b, const exchange_t *ex, uint64_t body_len, int *count)
{
    const http_request_t *req = ex->req;
    const char *proto = req->version == 30 ? "HTTP/3.0"
                        : req->version == 20 ? "HTTP/2.0"
                        : req->version == 10 ? "HTTP/1.0" : "HTTP/1.1";
    put_str(b, "SERVER_PROTOCOL", proto, count);
    put_var(b, "REQUEST_METHOD", req->method.p, req->method.n, count);
    http_str_t asked = ex_asked_target(ex); /* -I's rewrite keeps the client's */
    put_var(b, "REQUEST_URI", asked.p, asked.n, count);
    const char *q = memchr(req->target.p, '?', req->target.n);
    size_t qn = q ? req->target.n - (size_t)(q + 1 - req->target.p) : 0;
    put_var(b, "QUERY_STRING", q ? q + 1 : "", qn, count);
    const http_str_t *ct = http_header(req, "Content-Type");
    if (ct)
        put_var(b, "CONTENT_TYPE", ct->p, ct->n, count);
    if (body_len || ex->req_len > 0)
        put_num(b, "CONTENT_LENGTH", body_len ? body_len : (uint64_t)ex->req_len, count);
}

int cgienv_build(const exchange_t *ex, const cgi_script_t *sc, char *buf, size_t cap,
                 size_t *used)
{
    hbuf_t b = hb_init(buf, cap);
    int count = 0;
    put_str(&b, "GATEWAY_INTERFACE", "CGI/1.1", &count);
    put_str(&b, "SERVER_SOFTWARE", "gatling/" GATLING_VERSION, &count);
    put_server_name(&b, ex->req, &count);
    put_num(&b, "SERVER_PORT", ex->local_port, &count);
    put_request(&b, ex, sc->body_len, &count);
    put_str(&b, "SCRIPT_NAME", sc->script_name, &count);
    put_str(&b, "SCRIPT_FILENAME", sc->filename, &count);
    if (sc->path_info[0]) {
        put_str(&b, "PATH_INFO", sc->path_info, &count);
        hb_puts(&b, "PATH_TRANSLATED=");
        hb_puts(&b, strcmp(sc->docroot, "/") ? sc->docroot : "");
        hb_puts(&b, sc->path_info);
        hb_put(&b, "", 1);
        count++;
    }
    put_str(&b, "DOCUMENT_ROOT", sc->docroot, &count);
    put_peer(&b, ex->peer, &count);
    if (ex->secure)
        put_str(&b, "HTTPS", "on", &count);
    put_client(&b, ex->client, &count);
    if (sc->remote_user) {
        put_str(&b, "REMOTE_USER", sc->remote_user, &count);
        put_str(&b, "AUTH_TYPE", "Basic", &count);
    }
    put_str(&b, "REDIRECT_STATUS", "200", &count);
    if (sc->path)
        put_str(&b, "PATH", sc->path, &count);
    put_fields(&b, ex->req, &count);
    env_out_t o = {&b, &count};
    fields_ours(ex, 0, put_ours, &o); /* the forwarding fields, as every backend gets them */
    if (b.over)
        return -1;
    *used = hb_len(&b);
    return count;
}

/* Does one of re[0..nre) match p[0..n)?  p[n] is NUL for the call, then
   what it was. */
static int part_matches(const regex_t *re, int nre, char *p, size_t n)
{
    char c = p[n];
    int hit = 0;
    p[n] = 0;
    for (int i = 0; i < nre && !hit; i++)
        hit = !regexec(&re[i], p, 0, NULL, 0);
    p[n] = c;
    return hit;
}

size_t cgienv_script(const regex_t *re, int nre, const char *path, size_t len, int flags)
{
    char p[EX_PATH_CAP];
    if (len >= sizeof p)
        return 0;
    memcpy(p, path, len);
    p[len] = 0;
    int depth = 0;
    for (size_t i = 1; i < len && depth < CGIENV_SCRIPT_DEPTH; i++) {
        if (p[i] != '/')
            continue;
        depth++;
        if (part_matches(re, nre, p, i) &&
            (!(flags & CGIENV_AT_END) || !part_matches(re, nre, p, i - 1)))
            return i;
    }
    return part_matches(re, nre, p, len) ? len : 0;
}

/* A character of a plain extension word in a pattern: php, cgi, py3. */
static int ext_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

/* One word of re at *s into out (as "word|"); *s past it. */
static void ext_word(const char **s, hbuf_t *out)
{
    const char *w = *s;
    while (ext_char((unsigned char)**s))
        (*s)++;
    if (*s > w)
        hb_put(out, w, (size_t)(*s - w)), hb_put(out, "|", 1);
}

int cgienv_exts(const char *re, char *out, size_t cap)
{
    hbuf_t b = hb_init(out, cap);
    for (const char *s = re; *s; s++) {
        if (!strncmp(s, "\\.", 2) || !strncmp(s, "[.]", 3))
            s += *s == '\\' ? 2 : 3;
        else
            continue;
        if (*s != '(') { /* \.php */
            ext_word(&s, &b);
        } else { /* \.(php|phtml): its plain words */
            for (s++; *s && *s != ')';) {
                ext_word(&s, &b);
                if (*s && *s != ')')
                    s++;
            }
        }
        if (!*s)
            break;
    }
    if (!hb_str(&b)) {
        out[0] = 0;
        return -1;
    }
    return 0;
}

int cgienv_ext_in(const char *exts, const char *path, size_t n)
{
    const char *slash = memrchr(path, '/', n), *last = slash ? slash + 1 : path;
    const char *dot = memrchr(last, '.', (size_t)(path + n - last));
    size_t k = dot ? (size_t)(path + n - dot - 1) : 0;
    for (const char *e = exts; k && *e;) {
        size_t w = strcspn(e, "|");
        if (w == k && !strncasecmp(e, dot + 1, k))
            return 1;
        e += w + (e[w] == '|');
    }
    return 0;
}
