/*
 * The connection state machine: see conn.h.  conn_event() runs the state
 * functions until the state stops changing (the lighttpd pattern); each
 * state function does one step and sets the next state.
 */
#include "conn.h"
#include "encoding.h"
#include "fcache.h"
#include "handler.h"
#include "owfat.h"
#include "response.h"
#include "server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes one connection may send per event: fairness between clients. */
#define CONN_SEND_BUDGET (1 << 20)
/* How long a closing connection may take to drain what the client sent. */
#define CONN_LINGER_MS 2000

static void set_deadline(conn_t *c, int64_t ms)
{
    gio_set_deadline(c->srv->loop, c->fd, gio_now(c->srv->loop) + ms);
}

static int64_t idle_ms(const conn_t *c)
{
    return (int64_t)c->srv->cfg->timeout * 1000;
}

/* Request blocks come from a small per-server pool: no malloc per request. */
static conn_block_t *block_get(server_t *s)
{
    return s->nspare > 0 ? s->spare[--s->nspare] : malloc(sizeof(conn_block_t));
}

static void block_put(server_t *s, conn_block_t *b)
{
    if (b && s->nspare < SERVER_SPARE_BLOCKS)
        s->spare[s->nspare++] = b;
    else
        free(b);
}

conn_t *conn_new(server_t *srv, int fd, const struct sockaddr *peer, socklen_t plen)
{
    conn_t *c = calloc(1, sizeof *c);
    if (!c || gio_add(srv->loop, fd, c) < 0) {
        free(c);
        close(fd);
        return NULL;
    }
    c->kind = COOKIE_CONN;
    c->fd = fd;
    c->srv = srv;
    c->state = CONN_READ;
    if (plen <= sizeof c->peer)
        memcpy(&c->peer, peer, plen);
    gio_batch_init(&c->out);
    gio_want(srv->loop, fd, GIO_READ);
    set_deadline(c, idle_ms(c));
    c->next = srv->conns;
    if (c->next)
        c->next->prev = c;
    srv->conns = c;
    srv->nconns++;
    return c;
}

static void conn_free(conn_t *c)
{
    gio_close(c->srv->loop, c->fd);
    gio_batch_free(&c->out);
    block_put(c->srv, c->blk);
    if (c->file)
        fcache_release(c->file);
    enc_gzip_release(c->gz);
    if (c->prev)
        c->prev->next = c->next;
    else
        c->srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->srv->nconns--;
    free(c);
}

/* Log the request that just ended (also one cut short). */
static void log_request(conn_t *c)
{
    uint64_t sent = c->out.bytes_sent > c->head_len ? c->out.bytes_sent - c->head_len : 0;
    if (sent > c->body_len)
        sent = c->body_len;
    const char *vhost = NULL;
    if (c->srv->cfg->log_vhost)
        vhost = c->blk && c->reqlen ? c->blk->vhost : "";
    alog_request(&c->srv->log, gio_wallclock(c->srv->loop), vhost, &c->peer.sa,
                 c->reqlen ? &c->blk->req : NULL, c->status, c->head_only ? 0 : sent);
}

/* READ: parse what is buffered; read more when the head is incomplete. */
static void st_read(conn_t *c)
{
    if (c->idle_wait) { /* the last read emptied the socket: let the loop say when */
        gio_want(c->srv->loop, c->fd, GIO_READ);
        return;
    }
    if (!c->blk && !(c->blk = block_get(c->srv))) {
        c->state = CONN_CLOSE; /* out of memory: shed this client */
        return;
    }
    for (;;) {
        int status = 0;
        long n = c->inlen ? http_parse_request(c->blk->in, c->inlen, &c->blk->req, &status)
                          : HTTP_INCOMPLETE;
        if (n > 0) {
            c->reqlen = (uint32_t)n;
            c->state = CONN_HANDLE;
            return;
        }
        if (n == HTTP_MALFORMED) {
            c->reqlen = 0; /* nothing trustworthy to log from it */
            c->blk->req.line.p = NULL;
            c->blk->vhost[0] = 0;
            c->keepalive = 0;
            c->head_only = 0;
            c->unread_input = 1;
            c->state = resp_error(c, status, NULL) < 0 ? CONN_CLOSE : CONN_WRITE;
            return;
        }
        long r = gio_read(c->fd, c->blk->in + c->inlen, CONN_IN_CAP - c->inlen);
        if (r == GIO_AGAIN) {
            if (!c->inlen) { /* idle: an idle connection holds no block */
                block_put(c->srv, c->blk);
                c->blk = NULL;
            }
            gio_want(c->srv->loop, c->fd, GIO_READ);
            return;
        }
        if (r <= 0) { /* EOF or error; a half-sent request is simply dropped */
            c->state = CONN_CLOSE;
            return;
        }
        if (c->inlen == 0) /* a new request starts: it gets the full time */
            set_deadline(c, idle_ms(c));
        c->inlen += (uint32_t)r;
    }
}

/* Answer "100 Continue" if the client waits for it before sending the body. */
static void send_continue(conn_t *c, const http_request_t *req)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    const http_str_t *ex = http_header(req, "Expect");
    if (!ex || req->version < 11 || c->inlen > c->reqlen) /* the body is already coming */
        return;
    if (ex->n == 12 && case_equalb(ex->p, 12, "100-continue"))
        (void)!send(c->fd, cont, sizeof cont - 1, MSG_NOSIGNAL); /* tiny, on an idle socket */
}

/* HANDLE: decide keep-alive, check the body, then let the handler respond. */
static void st_handle(conn_t *c)
{
    http_request_t *req = &c->blk->req;
    const http_str_t *conn = http_header(req, "Connection");
    c->http10 = req->version == 10;
    c->keepalive = c->http10 ? conn && http_list_has(*conn, "keep-alive")
                             : !(conn && http_list_has(*conn, "close"));
    if (c->srv->draining)
        c->keepalive = 0;
    c->head_only = req->method.n == 4 && !memcmp(req->method.p, "HEAD", 4);
    c->unread_input = 0;
    c->status = 0;
    c->body_len = c->head_len = 0;
    c->out.bytes_sent = 0;
    c->blk->vhost[0] = 0;
    if (c->body == BODY_DONE) { /* back from BODY */
        c->body = BODY_NONE;
    } else {
        int st = handler_framing(c, req);
        if (st) {
            c->unread_input = 1;
            c->state = resp_error(c, st, NULL) < 0 ? CONN_CLOSE : CONN_WRITE;
            return;
        }
        if (c->body != BODY_NONE) {
            send_continue(c, req);
            c->state = CONN_BODY;
            return;
        }
    }
    int r = handler_dispatch(c, req);
    c->state = r < 0 ? CONN_CLOSE : CONN_WRITE;
}

/* Drop the body bytes at in[reqlen..inlen); BODY_DONE when the body ended. */
static int drop_body(conn_t *c)
{
    char *p = c->blk->in + c->reqlen;
    size_t have = c->inlen - c->reqlen, used;
    if (c->body == BODY_LENGTH) {
        used = have < c->body_left ? have : (size_t)c->body_left;
        c->body_left -= used;
        if (!c->body_left)
            c->body = BODY_DONE;
    } else {
        int r = http_chunked_skip(&c->chunked, p, have, &used);
        if (r == HTTP_MALFORMED)
            return -400;
        if (c->chunked.total > CONN_BODY_MAX)
            return -413;
        if (r == HTTP_CHUNKED_DONE)
            c->body = BODY_DONE;
    }
    memmove(p, p + used, have - used); /* what follows is the next request */
    c->inlen -= (uint32_t)used;
    return 0;
}

/* BODY: read and drop the request body; then answer the request. */
static void st_body(conn_t *c)
{
    for (;;) {
        int r = drop_body(c);
        if (r < 0) {
            c->unread_input = 1;
            c->keepalive = 0;
            c->state = resp_error(c, -r, NULL) < 0 ? CONN_CLOSE : CONN_WRITE;
            return;
        }
        if (c->body == BODY_DONE) {
            c->state = CONN_HANDLE;
            return;
        }
        long n = gio_read(c->fd, c->blk->in + c->inlen, CONN_IN_CAP - c->inlen);
        if (n == GIO_AGAIN) {
            gio_want(c->srv->loop, c->fd, GIO_READ);
            return;
        }
        if (n <= 0) {
            c->state = CONN_CLOSE;
            return;
        }
        c->inlen += (uint32_t)n;
        set_deadline(c, idle_ms(c)); /* a body that keeps coming is not stalled */
    }
}

/* The response is out: log it, forget the request, go on or close. */
static void finish_request(conn_t *c)
{
    log_request(c);
    status_count(&c->srv->stats, gio_wallclock(c->srv->loop), c->out.bytes_sent);
    if (c->file) {
        fcache_release(c->file);
        c->file = NULL;
    }
    enc_gzip_release(c->gz);
    c->gz = NULL;
    memmove(c->blk->in, c->blk->in + c->reqlen, c->inlen - c->reqlen);
    c->inlen -= c->reqlen;
    c->reqlen = 0;
    if (c->srv->draining) /* shutting down: this was the last response */
        c->keepalive = 0;
    if (!c->keepalive) {
        c->state = c->unread_input || c->inlen ? CONN_LINGER : CONN_CLOSE;
        if (c->state == CONN_LINGER) {
            shutdown(c->fd, SHUT_WR);
            set_deadline(c, CONN_LINGER_MS);
        }
        return;
    }
    c->state = CONN_READ;
    set_deadline(c, idle_ms(c));
    if (!c->inlen) { /* idle: give the request block back, wait for the loop */
        block_put(c->srv, c->blk);
        c->blk = NULL;
        gio_batch_free(&c->out);
        c->idle_wait = 1;
    }
}

/* WRITE: push the batch; the deadline moves with progress only. */
static void st_write(conn_t *c)
{
    long r = gio_batch_send(&c->out, c->fd, CONN_SEND_BUDGET);
    if (r == GIO_ERR) {
        log_request(c); /* the client went away: log what it got */
        c->state = CONN_CLOSE;
        return;
    }
    if (gio_batch_done(&c->out)) {
        finish_request(c);
        return;
    }
    if (r > 0)
        set_deadline(c, idle_ms(c));
    gio_want(c->srv->loop, c->fd, GIO_WRITE);
}

/* LINGER: read and drop until the client closes or the deadline passes, so
   that closing with unread data does not turn into a RST that destroys the
   response still in flight. */
static void st_linger(conn_t *c)
{
    char junk[4096];
    long r;
    while ((r = gio_read(c->fd, junk, sizeof junk)) > 0)
        ;
    if (r == GIO_AGAIN)
        gio_want(c->srv->loop, c->fd, GIO_READ);
    else
        c->state = CONN_CLOSE;
}

void conn_event(conn_t *c, unsigned events)
{
    if (!events) { /* deadline: idle too long, stalled, or done lingering */
        if (c->state == CONN_WRITE)
            log_request(c);
        conn_free(c);
        return;
    }
    if (events & (GIO_READ | GIO_ERROR | GIO_HANGUP))
        c->idle_wait = 0;
    conn_state_t prev;
    do {
        prev = c->state;
        switch (c->state) {
        case CONN_READ: st_read(c); break;
        case CONN_HANDLE: st_handle(c); break;
        case CONN_BODY: st_body(c); break;
        case CONN_WRITE: st_write(c); break;
        case CONN_LINGER: st_linger(c); break;
        case CONN_CLOSE: break;
        }
    } while (c->state != prev && c->state != CONN_CLOSE);
    if (c->state == CONN_CLOSE)
        conn_free(c);
}

void conn_drain(conn_t *c)
{
    if (c->state == CONN_READ && c->inlen == 0)
        conn_free(c);
}
