/*
 * status — /server-status (gatling -S): open connections, requests and bytes
 * in total and per second, as HTML or (with ?json) JSON.  Only loopback
 * clients get it; with -W each worker reports its own numbers.
 */
#ifndef GATLING_STATUS_H
#define GATLING_STATUS_H

#include <stdint.h>

#include "conn.h"

typedef struct status_counters {
    uint64_t requests, bytes;           /* since start */
    uint64_t last_requests, last_bytes; /* at the start of the last full second */
    uint64_t rps, bps;                  /* over the last full second */
    int64_t second;                     /* wall-clock second being counted */
    int64_t started;
} status_counters_t;

/* Count a finished request of `bytes` bytes at wall-clock second now. */
void status_count(status_counters_t *st, int64_t now, uint64_t bytes);

/* Is the peer a loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104)? */
int status_is_loopback(const struct sockaddr *sa);

/* Queue the status page (json: the JSON form).  0, or -1 on ENOMEM. */
int status_serve(conn_t *c, int json);

#endif
