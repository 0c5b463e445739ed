/* What any backend sees of a request's fields: see fields.h. */
#include "fields.h"
#include "http/hbuf.h"
#include "http/owfat.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

int fields_named_by_connection(const http_header_t *h, size_t nh, http_str_t name)
{
    for (size_t i = 0; i < nh; i++) {
        if (!fields_name_is(h[i].name, "Connection"))
            continue;
        const char *p = h[i].value.p, *e = p + h[i].value.n;
        while (p < e) {
            while (p < e && (*p == ' ' || *p == '\t' || *p == ','))
                p++;
            const char *t = p;
            while (p < e && *p != ',' && *p != ' ' && *p != '\t')
                p++;
            if (p > t && (size_t)(p - t) == name.n && !strncasecmp(t, name.p, name.n))
                return 1;
        }
    }
    return 0;
}

/* A field that says what a client certificate was, which only the proxy may
   write: X-SSL-Client-* ('_' for '-' too: some backends read either as the
   same) and RFC 9440's Client-Cert and Client-Cert-Chain. */
static int client_cert_field(http_str_t name)
{
    static const char pre[] = "x-ssl-client-";
    if (fields_name_is(name, "Client-Cert") || fields_name_is(name, "Client-Cert-Chain"))
        return 1;
    if (name.n < sizeof pre - 1)
        return 0;
    for (size_t i = 0; i < sizeof pre - 1; i++) {
        char c = name.p[i];
        c = c == '_' ? '-' : (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
        if (c != pre[i])
            return 0;
    }
    return 1;
}

int fields_hop_by_hop(const http_header_t *h, size_t nh, http_str_t name, int response)
{
    typedef struct {
        const char *s;
        size_t n;
    } nm_t;
#define NM(s) \
    { \
        s, sizeof s - 1 \
    }
    static const nm_t both[] = {
        NM("Connection"),        NM("Keep-Alive"),    NM("TE"),
        NM("Trailer"),           NM("Upgrade"),       NM("Proxy-Connection"),
        NM("Transfer-Encoding"), NM("Content-Length")};
    static const nm_t req[] = {
        NM("Proxy-Authorization"), NM("Expect"),    NM("X-Forwarded-For"), NM("X-Forwarded-Proto"),
        NM("Forwarded"),           NM("X-Forwarded-Host"), NM("HTTP2-Settings")};
    static const nm_t resp[] = {NM("Date"), NM("Server"), NM("Content-Type"),
                                NM("Proxy-Authenticate")};
#undef NM
    if (!response && client_cert_field(name))
        return 1;
    const nm_t *l = response ? resp : req;
    size_t n = response ? sizeof resp / sizeof resp[0] : sizeof req / sizeof req[0];
    for (size_t i = 0; i < sizeof both / sizeof both[0]; i++)
        if (name.n == both[i].n && !strncasecmp(name.p, both[i].s, name.n))
            return 1;
    for (size_t i = 0; i < n; i++)
        if (name.n == l[i].n && !strncasecmp(name.p, l[i].s, name.n))
            return 1;
    /* "Connection: Host" must not take the backend's Host away */
    return !fields_name_is(name, "Host") && fields_named_by_connection(h, nh, name);
}

/* Every value of the client's fields named name joined by sep, then add,
   into b; a list that does not fit goes (add alone): never a cut one. */
static void joined(hbuf_t *b, const http_request_t *req, const char *name, const char *sep,
                   const char *add)
{
    for (size_t i = 0; i < req->nheaders; i++)
        if (fields_name_is(req->headers[i].name, name))
            hb_put(b, req->headers[i].value.p, req->headers[i].value.n), hb_puts(b, sep);
    if (b->over || strlen(add) + 1 > (size_t)(b->end - b->p))
        b->p = b->start, b->over = 0;
    hb_puts(b, add);
}

/* Mutual TLS: what the client's certificate was. */
static int identity(const ex_client_t *cl, fields_emit_t emit, void *arg)
{
    int r = emit(arg, "X-SSL-Client-Verify", cl->verify);
    if (!cl->cert)
        return r;
    r |= emit(arg, "X-SSL-Client-S-DN", cl->s_dn) | emit(arg, "X-SSL-Client-I-DN", cl->i_dn);
    return r | emit(arg, "X-SSL-Client-Serial", cl->serial) |
           emit(arg, "X-SSL-Client-Fingerprint", cl->fingerprint);
}

void fields_peer(const exchange_t *ex, char *a, int *port)
{
    const struct sockaddr *sa = ex->peer;
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
    const struct sockaddr_in *a4 = (const struct sockaddr_in *)sa;
    /* an IPv4 address by fmt_ip4, as inet_ntop writes it: glibc's inet_ntop
       is a sprintf, most of a FastCGI request's forwarding fields */
    _Static_assert(FMT_IP4 < INET6_ADDRSTRLEN, "an IPv4 address and its NUL fit in a");
    strcpy(a, "0.0.0.0");
    *port = 0;
    if (sa && sa->sa_family == AF_INET) {
        a[fmt_ip4(a, (const char *)&a4->sin_addr)] = 0;
        *port = ntohs(a4->sin_port);
    } else if (sa && sa->sa_family == AF_INET6) {
        if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr))
            a[fmt_ip4(a, (const char *)a6->sin6_addr.s6_addr + 12)] = 0;
        else
            inet_ntop(AF_INET6, &a6->sin6_addr, a, INET6_ADDRSTRLEN);
        *port = ntohs(a6->sin6_port);
    }
}

int fields_ours(const exchange_t *ex, unsigned what, fields_emit_t emit, void *arg)
{
    char a[INET6_ADDRSTRLEN], fwd[INET6_ADDRSTRLEN + 300], list[FIELDS_FORWARDED_MAX];
    int port;
    fields_peer(ex, a, &port);
    const http_str_t *host = http_header(ex->req, "Host");
    int safe =
        host && host->n < 256 && !memchr(host->p, '"', host->n) && !memchr(host->p, '\\', host->n);
    const char *proto = ex->secure ? "https" : "http";
    int v6 = strchr(a, ':') != NULL;
    hbuf_t b = hb_init(fwd, sizeof fwd); /* an address and a host of < 256: fits */
    hb_puts(&b, v6 ? "for=\"[" : "for="), hb_puts(&b, a), hb_puts(&b, v6 ? "]\"" : "");
    hb_puts(&b, ";proto="), hb_puts(&b, proto);
    if (safe)
        hb_puts(&b, ";host=\""), hb_put(&b, host->p, host->n), hb_puts(&b, "\"");
    if (!hb_str(&b))
        return -1;
    hbuf_t l = hb_init(list, sizeof list);
    joined(&l, ex->req, "X-Forwarded-For", ", ", a);
    int r = emit(arg, "X-Forwarded-For", hb_str(&l)) | emit(arg, "X-Forwarded-Proto", proto);
    if (safe) {
        char h[256];
        memcpy(h, host->p, host->n), h[host->n] = 0;
        r |= emit(arg, "X-Forwarded-Host", h);
    }
    l = hb_init(list, sizeof list);
    joined(&l, ex->req, "Forwarded", ", ", fwd);
    r |= emit(arg, "Forwarded", hb_str(&l));
    /* RFC 8470 5.1: a request that came in early data says so, once (a client's
       own Early-Data, from a proxy in front, is passed on as it came) */
    if (ex->early_data && !http_header(ex->req, "Early-Data"))
        r |= emit(arg, "Early-Data", "1");
    return ex->client && (what & FIELDS_IDENTITY) ? r | identity(ex->client, emit, arg) : r;
}
