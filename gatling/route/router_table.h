/*
 * router_table — the server's table of entries (router_table.c names every
 * one; route/router.h walks it).  Its own header, so that the router, which
 * the stages include, names none of them.
 */
#ifndef GATLING_ROUTER_TABLE_H
#define GATLING_ROUTER_TABLE_H

struct site;

/* The loop begins: router_init_table (router.h) with the server's table:
   0, or -1 after one printed why (router_free lets go of what was made). */
int router_init(struct site *site);

#endif
