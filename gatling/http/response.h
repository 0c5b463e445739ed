/*
 * response — what every protocol says the same way: the reason phrase of a
 * status and the small HTML page of an error response.  The codecs
 * (conn/h1.c) write the rest.
 */
#ifndef GATLING_RESPONSE_H
#define GATLING_RESPONSE_H

#include "hbuf.h"

/* The reason phrase for status ("Unknown" if we never send it). */
const char *resp_reason(int status);

#define RESP_PAGE_MAX 256 /* resp_page's longest page is ~130 bytes */

/* Append the small HTML page of an error response with this status. */
void resp_page(hbuf_t *b, int status);

#endif
