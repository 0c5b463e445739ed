/*
 * The exchange's handler slots (http/exchange.h, handlers/hstate.h): ex_end
 * calls each slot's end once, after the producer's, and a local redirect
 * keeps the slots while the request-scoped values read 0 again.
 */
#include "hstate.h"
#include "tap.h"

#include <string.h>

static char order[16];
static size_t norder;
static int redispatched;

static void note(char c)
{
    if (norder + 1 < sizeof order)
        order[norder++] = c, order[norder] = 0;
}

static void producer_end(exchange_t *ex)
{
    (void)ex;
    note('p');
}

static void slot_end(exchange_t *ex, ex_slot_t *s)
{
    is_int(s->end == NULL, 1, "a slot's end is cleared before it runs");
    note(s == &ex->slot[0] ? '0' : '2');
}

static void redispatch(exchange_t *ex)
{
    (void)ex;
    redispatched++;
}

static const ex_producer_t producer = {.end = producer_end};
static const ex_codec_t codec = {.redispatch = redispatch};

int main(void)
{
    http_request_t req;
    memset(&req, 0, sizeof req);
    req.method = (http_str_t){"GET", 3};
    req.target = (http_str_t){"/a", 2};
    exchange_t ex;
    memset(&ex, 0, sizeof ex);
    ex.req = &req;
    ex.codec = &codec;

    /* a request's values, and a redirect's new request */
    is_int(hslot_req(&ex, HSLOT_AUTH), 0, "a fresh exchange: nothing known");
    hslot_req_set(&ex, HSLOT_AUTH, 2);
    hslot_req_set(&ex, HSLOT_GZIP, 1);
    is_int(hslot_req(&ex, HSLOT_AUTH), 2, "a value set for the request reads back");
    ex_slot_t *c = hslot(&ex, HSLOT_CACHE);
    c->n = 3;
    is_int(ex_redirect(&ex, "/b", 2), 0, "a local redirect");
    is_int(redispatched, 1, "... routes again");
    is_int(hslot_req(&ex, HSLOT_AUTH), 0, "the redirect's request: the verdict reads 0");
    is_int(hslot_req(&ex, HSLOT_GZIP), 0, "... and the gzip wait");
    is_int(c->n, 3, "a slot's own value is kept across it");
    hslot_req_set(&ex, HSLOT_AUTH, 1);
    is_int(hslot_req(&ex, HSLOT_AUTH), 1, "a value set for the new request reads back");

    /* the end hooks: after the producer, once each */
    ex.slot[0].end = slot_end;
    ex.slot[2].end = slot_end;
    ex.producer = &producer;
    ex_end(&ex);
    is_str(order, "p02", "ex_end: the producer, then each slot's end");
    ex_end(&ex);
    is_str(order, "p02", "... once");
    return tap_done();
}
