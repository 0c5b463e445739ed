/*
 * static — GET and HEAD of files and directories below a vhost's document
 * root: path -> vhost -> open-file cache -> coding -> preconditions, with
 * indexes and listings (static.c, and the files its comment names).
 * router.c calls it; it calls nothing of the router.
 */
#ifndef GATLING_STATIC_H
#define GATLING_STATIC_H

#include "handler.h"
#include "http/exchange.h"

/* Answer ex's GET/HEAD of a file or directory below the document root (or
   hand work to a thread: ex->job).  0, or -1 if nothing could be answered
   (ENOMEM). */
int static_serve(exchange_t *ex);

/* The router's entry (router.c's table): GET and HEAD, static_serve. */
extern const handler_t static_handler;

#endif
