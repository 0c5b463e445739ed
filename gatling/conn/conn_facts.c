/*
 * What the codecs and the producers are told of the connection: its facts
 * (codec/codec.h's codec_conn_t, which every exchange starts from) and its
 * wake: the
 * list of connections producers woke, which conn.c runs after the loop's
 * events.
 */
#include "conn_int.h"
#include "tls/tls.h"
#include "tls/tls_client.h"

/* A producer woke the connection: it runs after the loop's events
   (conn_set_run_poked), not inside the producer's call. */
void conn_poke(void *conn)
{
    conn_t *c = conn;
    if (c->poked)
        return;
    c->poked = 1;
    c->poke_next = c->set->poked;
    c->set->poked = c;
}

void conn_unpoke(conn_t *c)
{
    for (conn_t **p = &c->set->poked; c->poked && *p; p = &(*p)->poke_next)
        if (*p == c) {
            *p = c->poke_next;
            c->poked = 0;
            return;
        }
}

/* What a codec is told of its connection. */
codec_conn_t conn_facts(conn_t *c)
{
    return (codec_conn_t){.out = &c->out,
                          .ssl = c->ssl,
                          .site = c->site,
                          .peer = &c->peer.sa,
                          .client = c->ssl ? tls_client(c->ssl) : NULL,
                          .local_port = c->local_port,
                          .secure = c->tls,
                          .conn = c,
                          .wake = conn_poke,
                          .early = &c->early};
}
