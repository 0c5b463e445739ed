/*
 * cgi_find — which requests are CGI's and which file (cgi_find.c), for
 * cgi.c; not for other handlers.
 */
#ifndef GATLING_CGI_FIND_H
#define GATLING_CGI_FIND_H

#include "cgi_int.h"
#include "target.h"
#include "http/exchange.h"

/* What locate found: the script is ex->path[0..slen), its file open on fd
   below the vhost directory vfd. */
typedef struct cgi_find {
    target_t t;
    size_t slen;
    int which, vfd, fd;
} cgi_find_t;

/* Is ex's request for a CGI program?  1 with f->fd open and f->vfd the host's
   directory (handlers/host.h: never closed), or 0. */
int cgi_locate(exchange_t *ex, const cgi_loop_t *L, cgi_find_t *f);

/* Close what cgi_locate opened. */
void cgi_found_close(cgi_find_t *f);

#endif
