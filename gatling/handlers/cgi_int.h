/*
 * cgi_int.h: what cgi.c and cgi_find.c share (the loop's CGI state); not
 * for other handlers.  The arrow: cgi.c -> cgi_find.c, none back (make layers).
 */
#ifndef GATLING_CGI_INT_H
#define GATLING_CGI_INT_H

#include "site/config.h"
#include "site/site.h"
#include "site/watch.h"

#include <regex.h>
#include <stdint.h>

/* The loop's CGI state: the patterns, the spawner's socket, the count. */
typedef struct cgi_loop {
    watch_t w; /* the spawner's socket: first */
    site_t *site;
    int fd;  /* -1: the spawner is gone */
    int pid; /* the spawner's, until it is reaped (0) */
    regex_t re[CONFIG_CGI_MAX];
    int nre;
    char ext[128]; /* the extensions the patterns name (cgienv_exts): "cgi|pl|" */
    unsigned running;  /* processes of this loop not ended (-J) */
    uint64_t next_id;
    uint64_t *ends;    /* SPAWN_END not sent yet: the socket was full */
    size_t nends, ends_cap;
} cgi_loop_t;

#endif
