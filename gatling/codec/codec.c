/* The start of every codec's exchange: see codec.h. */
#include "codec.h"
#include "gio.h"

#include <openssl/ssl.h>
#include <stddef.h>
#include <string.h>

void codec_exchange_init(exchange_t *ex, const codec_conn_t *f, const ex_codec_t *codec,
                         void *owner)
{
    memset(ex, 0, offsetof(exchange_t, path)); /* the path and vhost buffers are filled later */
    ex->vhost[0] = ex->log_cache[0] = ex->log_upstream[0] = 0;
    ex->secure = f->secure;
    ex->local_port = f->local_port;
    ex->peer = f->peer;
    ex->client = f->client;
    ex->site = f->site;
    ex->started_us = gio_now_us(f->site->loop);
    ex->codec = codec;
    ex->conn = owner;
}

void codec_head_facts(head_t *h, const exchange_t *ex, int status, const char *ctype, uint64_t len,
                      time_t mtime)
{
    site_t *s = ex->site;
    *h = (head_t){
        .status = status,
        .server = "gatling/" GATLING_VERSION,
        .date = ex->date ? ex->date : site_date(s),
        .ctype = ctype,
        .len = len,
        .modified = mtime >= 0 ? site_httpdate(s, mtime) : NULL,
        .hsts = ex->secure && site_hsts(s, ex->req) ? s->cfg->hsts : -1,
        .fields = ex->fields,
        .nfields = ex->nfields,
    };
}

void codec_log_facts(alog_facts_t *out, const exchange_t *ex, const struct ssl_st *ssl,
                     const char *proto)
{
    *out = (alog_facts_t){.proto = proto, .ex = ex};
    if (ssl) {
        out->tls_version = SSL_get_version(ssl);
        out->tls_cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(ssl));
    }
    out->duration_us = gio_now_us(ex->site->loop) - ex->started_us;
}
