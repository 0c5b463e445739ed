/*
 * response — what every protocol says the same way: the reason phrase of a
 * status and the small HTML page of an error response.  Which fields a
 * head carries is head.h's; each codec writes them its way.
 */
#ifndef GATLING_RESPONSE_H
#define GATLING_RESPONSE_H

#include "hbuf.h"

#include <stddef.h>

/* The reason phrase for status ("Unknown" if we never send it). */
const char *resp_reason(int status);

/* gRPC's name of status code (0 "OK" .. 16 "UNAUTHENTICATED"), or "?". */
const char *resp_grpc_code(int code);

#define RESP_PAGE_MAX 256 /* resp_page's longest page is ~130 bytes */

/* Append the small HTML page of an error response with this status. */
void resp_page(hbuf_t *b, int status);

/* A field of a head for a binary codec's encoder (HPACK, QPACK): the name in
   lower case; the lengths are the strings' (no NUL is needed). */
typedef struct http_field {
    const char *name, *value;
    size_t nlen, vlen;
} http_field_t;

/* A field of a string constant n and a string v (NUL-terminated). */
#define HTTP_FIELD(n, v) ((http_field_t){(n), (v), sizeof(n) - 1, strlen(v)})

/* Is n[0..len) a connection-specific field, lower case: one that HTTP/2 and
   HTTP/3 do not carry (RFC 9113 8.2.2, RFC 9114 4.2)? */
int resp_conn_specific(const char *n, size_t len);

#endif
