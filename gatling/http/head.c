/* The fields of a response's head, in order: see head.h. */
#include "head.h"

#include <string.h>

int head_has_body(int head_only, int status)
{
    return !head_only && status >= 200 && status != 204 && status != 304;
}

static void give(head_sink_t sink, void *arg, uint8_t kind, const char *name, const char *lower,
                 size_t nlen, const char *value)
{
    head_field_t f = {kind, 0, name, lower, value, nlen, strlen(value), 0};
    sink(arg, &f);
}

static void give_num(head_sink_t sink, void *arg, uint8_t kind, const char *name, const char *lower,
                     size_t nlen, const char *value, size_t vlen, uint64_t num)
{
    head_field_t f = {kind, 1, name, lower, value, nlen, vlen, num};
    sink(arg, &f);
}

/* A field of the server's own: its name as HTTP/1.1 spells it, and in lower case. */
#define GIVE(kind, name, lower, value) \
    give(sink, arg, (kind), (name), (lower), sizeof(name) - 1, (value))

void head_start(const head_t *h, head_sink_t sink, void *arg)
{
    give_num(sink, arg, HEAD_STATUS, ":status", ":status", 7, "", 0, (uint64_t)h->status);
    GIVE(HEAD_SERVER, "Server", "server", h->server);
    GIVE(HEAD_DATE, "Date", "date", h->date);
}

void head_rest(const head_t *h, head_sink_t sink, void *arg)
{
    if (h->ctype)
        GIVE(HEAD_CTYPE, "Content-Type", "content-type", h->ctype);
    if (h->len != EX_LEN_STREAM && head_has_body(0, h->status))
        give_num(sink, arg, HEAD_LENGTH, "Content-Length", "content-length", 14, "", 0, h->len);
    else if (h->framing)
        GIVE(HEAD_FRAMING, "Transfer-Encoding", "transfer-encoding", h->framing);
    if (h->modified)
        GIVE(HEAD_MODIFIED, "Last-Modified", "last-modified", h->modified);
    if (h->hsts >= 0)
        give_num(sink, arg, HEAD_HSTS, "Strict-Transport-Security", "strict-transport-security", 25,
                 "max-age=", 8, (uint64_t)h->hsts);
    if (h->connection)
        GIVE(HEAD_CONNECTION, "Connection", "connection", h->connection);
    for (unsigned i = 0; i < h->nfields; i++) {
        const ex_field_t *x = &h->fields[i];
        give(sink, arg, HEAD_HANDLER, x->name, NULL, strlen(x->name), x->value);
    }
}

void head_walk(const head_t *h, head_sink_t sink, void *arg)
{
    head_start(h, sink, arg);
    head_rest(h, sink, arg);
}
