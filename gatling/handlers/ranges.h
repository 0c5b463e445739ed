/*
 * ranges — the body of a file response: whole (200), one range (206 with
 * Content-Range), several (206 multipart/byteranges, RFC 9110 14.6), or
 * none the file has (416).
 */
#ifndef GATLING_RANGES_H
#define GATLING_RANGES_H

#include "http/exchange.h"

#include <stdint.h>
#include <time.h>

/* A body: the whole of it, from a file or a buffer. */
typedef struct body {
    int fd; /* -1: buf */
    const char *buf;
    uint64_t size;
} body_t;

/*
 * 200, 206 or 416 for body b of type `type`, honouring Range and If-Range,
 * with the fields already added to ex.  0, or -1 on ENOMEM.
 */
int ranges_serve(exchange_t *ex, const body_t *b, const char *type, time_t mtime,
                 const char *etag);

#endif
