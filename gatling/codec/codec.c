/* The start of every codec's exchange: see codec.h. */
#include "codec.h"
#include "gio.h"

#include <stddef.h>
#include <string.h>

void codec_exchange_init(exchange_t *ex, const codec_conn_t *f, const ex_codec_t *codec,
                         void *owner)
{
    memset(ex, 0, offsetof(exchange_t, path)); /* the path and vhost buffers are filled later */
    ex->vhost[0] = 0;
    ex->secure = f->secure;
    ex->local_port = f->local_port;
    ex->peer = f->peer;
    ex->site = f->site;
    ex->started_us = gio_now_us(f->site->loop);
    ex->codec = codec;
    ex->conn = owner;
}
