/* route/router.c's contract with a producer (issue 76, "stages over any
   producer"): a producer the router has never heard of is its functions and
   one table entry.  The stages (the response cache, --compress) find it
   through router_produced and router_produce, the files handler never sends
   a path it claims (site->program), the pages list its backends
   (router_backend); its init runs before the stages' and its free at the
   end.  Nothing here names it but the table. */
#include "router.h"
#include "site.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static int inits, frees, serves, stage_saw_it;

static int probe_init(site_t *s)
{
    (void)s;
    inits++;
    return 0;
}

static void probe_free(site_t *s)
{
    (void)s;
    frees++;
}

static int probe_match(exchange_t *ex)
{
    return ex->path[0] == '/' && !strncmp(ex->path, "/probe/", 7);
}

static int probe_serve(exchange_t *ex)
{
    (void)ex;
    serves++;
    return 0;
}

static int probe_streams(exchange_t *ex)
{
    return probe_match(ex);
}

static int probe_claims(const site_t *s, const char *path, size_t n)
{
    (void)s;
    return n > 6 && !memcmp(path + n - 6, ".probe", 6);
}

static int probe_backend(const site_t *s, int slot, const char **pool, const char **label,
                         const char **state, unsigned *outstanding)
{
    (void)s;
    if (slot != 3)
        return 0;
    *pool = "probes", *label = "127.0.0.1/9", *state = "up", *outstanding = 2;
    return 2;
}

/* the new producer: its functions and this entry */
static const handler_t probe_handler = {
    .name = "probe", .phase = HANDLER_PRODUCE, .match = probe_match, .serve = probe_serve,
    .init = probe_init, .free = probe_free, .streams = probe_streams, .claims = probe_claims,
    .wrap = HANDLER_STORE | HANDLER_CODE, .backend = probe_backend,
};

/* a stage, as the cache is: made after the producers, it asks whether any
   producer's answers may be stored, never which */
static int stage_init(site_t *s)
{
    stage_saw_it = inits == 1 && router_produced(s, NULL, HANDLER_STORE);
    return 0;
}

static const handler_t stage = {
    .name = "stage", .phase = HANDLER_STAGE, .serve = NULL, .init = stage_init,
};

static int rest_serve(exchange_t *ex)
{
    (void)ex;
    return 0;
}

static const handler_t rest = {.name = "the rest", .phase = HANDLER_LAST, .serve = rest_serve};
static const handler_t phaseless = {.name = "no phase", .serve = rest_serve};

int main(void)
{
    config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    site_t *s = calloc(1, sizeof *s);
    s->cfg = &cfg;
    /* the phases are types: a table out of their order is refused, before
       any init runs (a producer before a stage, an entry with no phase) */
    const handler_t *const backwards[] = {&probe_handler, &stage, &rest};
    const handler_t *const unphased[] = {&stage, &phaseless, &rest};
    ok(router_init_table(s, backwards, 3) == -1 && inits == 0,
       "a producer before a stage: the table is refused, nothing made");
    ok(router_init_table(s, unphased, 3) == -1 && inits == 0,
       "an entry with no phase: refused");
    const handler_t *const table[] = {&stage, &probe_handler, &rest};
    ok(router_init_table(s, table, 3) == 0, "a table with a producer of the test's own");
    ok(inits == 1 && stage_saw_it, "its init ran first, and the stage saw a producer to store");
    ok(router_produced(s, NULL, HANDLER_STORE | HANDLER_CODE),
       "stored and coded, as its wrap says");
    ok(s->program(s, "/a/b.probe", 10) && !s->program(s, "/a/b.html", 9),
       "its claims are programs the files handler never sends");

    const char *pool = NULL, *label = NULL, *state = NULL;
    unsigned out = 0;
    ok(router_backend(s, 3, &pool, &label, &state, &out) == 2 && !strcmp(pool, "probes") &&
           !strcmp(label, "127.0.0.1/9") && out == 2,
       "the pages list its backend in slot 3");
    ok(router_backend(s, 4, &pool, &label, &state, &out) == 0, "and no other slot");

    exchange_t *ex = calloc(1, sizeof *ex);
    ex->site = s;
    strcpy(ex->path, "/probe/x");
    ok(router_produced(s, ex, HANDLER_CODE) == 1, "its request: a producer the stages wrap");
    ok(router_produce(ex) == 0 && serves == 1, "the stages' produce reaches its serve");
    ok(ex->route.state == EX_ROUTE_OK && ex->route.name[0] == 0,
       "the route was decided first (no -v: no name)");
    strcpy(ex->path, "/other");
    ok(router_produced(s, ex, HANDLER_STORE) == 0 && router_produce(ex) == HANDLER_NOT_MINE &&
           serves == 1,
       "another request is not its");

    router_free(s);
    ok(frees == 1, "its free at the end");
    free(ex);
    free(s);
    return tap_done();
}
