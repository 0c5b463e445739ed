/* The fields of a response's head, in order: see head.h. */
#include "head.h"

#include <string.h>

int head_has_body(int head_only, int status)
{
    return !head_only && status >= 200 && status != 204 && status != 304;
}

/* v in decimal at d, NUL-terminated (d holds 21 bytes): its length. */
static size_t digits(char *d, uint64_t v)
{
    char r[20], *p = r + sizeof r;
    do
        *--p = (char)('0' + v % 10);
    while (v /= 10);
    size_t n = (size_t)(r + sizeof r - p);
    memcpy(d, p, n);
    d[n] = 0;
    return n;
}

/* The room is checked beside the write, though 8 of the server's and
   EX_FIELDS_MAX of the handler's always fit. */
static void add(head_fields_t *t, const char *name, const char *lower, size_t nlen,
                const char *value, size_t vlen)
{
    if (t->n < HEAD_FIELDS_MAX) {
        t->name[t->n] = name;
        t->low[t->n++] = (http_field_t){lower, value, nlen, vlen};
    }
}

/* A field of the server's own: its name as HTTP/1.1 spells it, and in lower case. */
#define ADD(name, lower, value) add(t, (name), (lower), sizeof(name) - 1, (value), strlen(value))

void head_start(const head_t *h, head_fields_t *t)
{
    t->n = 0;
    add(t, ":status", ":status", 7, t->status, digits(t->status, (uint64_t)(unsigned)h->status));
    ADD("Server", "server", h->server);
    ADD("Date", "date", h->date);
}

void head_rest(const head_t *h, head_fields_t *t)
{
    if (h->ctype)
        ADD("Content-Type", "content-type", h->ctype);
    if (h->len != EX_LEN_STREAM && head_has_body(0, h->status))
        add(t, "Content-Length", "content-length", 14, t->length, digits(t->length, h->len));
    else if (h->framing)
        ADD("Transfer-Encoding", "transfer-encoding", h->framing);
    if (h->modified)
        ADD("Last-Modified", "last-modified", h->modified);
    if (h->hsts >= 0) {
        memcpy(t->hsts, "max-age=", 8);
        add(t, "Strict-Transport-Security", "strict-transport-security", 25, t->hsts,
            8 + digits(t->hsts + 8, (uint64_t)h->hsts));
    }
    if (h->connection)
        ADD("Connection", "connection", h->connection);
    t->handler = t->n;
    unsigned k = h->nfields < EX_FIELDS_MAX ? h->nfields : EX_FIELDS_MAX;
    for (unsigned i = 0; i < k; i++) {
        const ex_field_t *x = &h->fields[i];
        add(t, x->name, NULL, strlen(x->name), x->value, strlen(x->value));
    }
}

void head_build(const head_t *h, head_fields_t *t)
{
    head_start(h, t);
    head_rest(h, t);
}
