/*
 * h2_frame — HTTP/2's wire format (RFC 9113) as pure functions over
 * buffers: no I/O, no session, no allocation, no callbacks into the codec
 * (h2.c calls them; tests/unit/t_h2_frame.c checks them byte by byte).
 * The frame header (4.1), SETTINGS entries (6.5.1, 6.5.2), the payloads of
 * GOAWAY, RST_STREAM, WINDOW_UPDATE and PING (big-endian words), which
 * flood a frame counts towards (stats.h's H2_FLOOD_*), RFC 9218's priority
 * field (4), and the request-field rules of RFC 9113 8.2 and 8.3: field
 * names and values, pseudo-headers first and each once, no
 * connection-specific fields, TE only "trailers", content-length digits.
 */
#ifndef GATLING_H2_FRAME_H
#define GATLING_H2_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define H2_FRAME_HD 9                  /* a frame header's bytes */
#define H2_WINDOW_MAX 0x7fffffff       /* 2^31-1: no window may pass it (6.9.1) */

enum { /* frame types (RFC 9113 6, RFC 9218 7.1) */
    FR_DATA, FR_HEADERS, FR_PRIORITY, FR_RST_STREAM, FR_SETTINGS, FR_PUSH_PROMISE, FR_PING,
    FR_GOAWAY, FR_WINDOW_UPDATE, FR_CONTINUATION, FR_PRIORITY_UPDATE = 0x10
};
enum { FL_END_STREAM = 1, FL_ACK = 1, FL_END_HEADERS = 4, FL_PADDED = 8, FL_PRIORITY = 0x20 };
enum { /* error codes (RFC 9113 7) */
    E_NO_ERROR, E_PROTOCOL, E_INTERNAL, E_FLOW_CONTROL, E_SETTINGS_TIMEOUT, E_STREAM_CLOSED,
    E_FRAME_SIZE, E_REFUSED_STREAM, E_CANCEL, E_COMPRESSION, E_CONNECT, E_ENHANCE_YOUR_CALM
};
enum { /* SETTINGS identifiers (RFC 9113 6.5.2, RFC 9218 2.1) */
    SET_HEADER_TABLE_SIZE = 1, SET_ENABLE_PUSH, SET_MAX_CONCURRENT_STREAMS,
    SET_INITIAL_WINDOW_SIZE, SET_MAX_FRAME_SIZE, SET_MAX_HEADER_LIST_SIZE,
    SET_NO_RFC7540_PRIORITIES = 9
};
enum { PS_METHOD = 1, PS_SCHEME = 2, PS_PATH = 4, PS_AUTHORITY = 8 }; /* pseudo-headers */

/* A frame header, parsed (the stream identifier's reserved bit dropped). */
typedef struct h2_frame_hd {
    uint32_t len; /* payload bytes: 24 bits */
    uint8_t type, flags;
    int32_t id;
} h2_frame_hd_t;

/* A 31-bit big-endian word at p[0..4) (the top bit, reserved, dropped). */
uint32_t h2f_be31(const uint8_t *p);

/* v big-endian into p[0..4). */
void h2f_put32(uint8_t *p, uint32_t v);

/* The frame header in p[0..9). */
h2_frame_hd_t h2f_hd(const uint8_t *p);

/* A frame header into p[0..9) (len below 2^24). */
void h2f_put_hd(uint8_t *p, size_t len, uint8_t type, uint8_t flags, uint32_t id);

/* The SETTINGS entry at p[0..6): its identifier in *k, its value in *v. */
void h2f_setting(const uint8_t *p, uint16_t *k, uint32_t *v);

/* A SETTINGS entry into p[0..6). */
void h2f_put_setting(uint8_t *p, uint16_t k, uint32_t v);

/* Is the SETTINGS entry's value allowed (6.5.2, RFC 9218 2.1)?  0, or the
   connection error it is: E_PROTOCOL or E_FLOW_CONTROL.  Identifiers we do
   not know are allowed (ignored). */
uint32_t h2f_setting_check(uint16_t k, uint32_t v);

/* A whole GOAWAY frame (header and 8-byte payload: last stream, code) into
   buf, if cap allows its 17 bytes: their count, else 0. */
size_t h2f_goaway(uint8_t *buf, size_t cap, int32_t last, uint32_t code);

/* The flood (stats.h's H2_FLOOD_*) a frame of type and flags with payload
   p[0..len) counts towards, -1: none (and for WINDOW_UPDATE, which counts
   by what it buys: the session knows). */
int h2f_flood_kind(const uint8_t *p, uint32_t len, uint8_t type, uint8_t flags);

/* RFC 9218 4: the priority field v[0..n)'s u (0..7) into *urgency and its
   i into *incremental, each left as it was if the field does not say;
   what else it says, or cannot say, is ignored. */
void h2f_priority(const uint8_t *v, size_t n, uint8_t *urgency, uint8_t *incremental);


/* A pseudo-header (RFC 9113 8.3.1): its PS_ bit, 0 for one a request may
   not carry. */
uint8_t h2f_pseudo_bit(const uint8_t *name, size_t n);

/* What a header block's fields have shown so far (zeroed at its HEADERS;
   trailer set by the caller for a trailer section). */
typedef struct h2f_fields {
    uint8_t trailer; /* it is a trailer section: no pseudo-header at all */
    uint8_t regular; /* a regular field came: no pseudo-header may follow (8.3) */
    uint8_t pseudo;  /* the pseudo-headers seen, a PS_ bit each */
    uint8_t connect; /* :method CONNECT */
    uint8_t web;     /* :scheme http or https, whose authority is mandatory */
    uint8_t host;    /* a Host field came */
} h2f_fields_t;

/* Is name[0..nlen) a field name HTTP/2 allows (RFC 9113 8.2.1): tchars in
   lower case, after one colon for a pseudo-header?  1 yes, 0 no (empty too). */
int h2f_name_ok(const uint8_t *name, size_t nlen);

/* Is value[0..vlen) a field value we take over HTTP/2: field-vchars, SP
   and HTAB (no control byte, no DEL: RFC 9110 5.5, as nghttp2 and our
   HTTP/1.1 parser), no SP or HTAB first or last (RFC 9113 8.2.1)?  1 yes,
   0 no. */
int h2f_value_ok(const uint8_t *value, size_t vlen);

/* Is the field well-formed where it stands (RFC 9113 8.2, 8.3)?  1 yes
   (fs updated), 0 the request is malformed. */
int h2f_field_ok(h2f_fields_t *fs, const uint8_t *name, size_t nlen, const uint8_t *value,
                 size_t vlen);

/* The header block has ended: does a request's have the pseudo-headers it
   must (8.3.1)?  1 yes (always, for a trailer section). */
int h2f_fields_complete(const h2f_fields_t *fs);

/* A content-length value v[0..n): 1 to 18 digits into *out (0), or -1. */
int h2f_content_length(const uint8_t *v, size_t n, uint64_t *out);

#endif
