/*
 * h2_hpack — the HPACK encoder of HTTP/2 responses (RFC 7541), pure: no
 * I/O, no session, no allocation (the caller holds the h2e_t), written
 * for what a server sends again and again on one connection.  A field whose
 * name and value are in the dynamic table goes out as one index byte; a
 * field that is not is written once as a literal with incremental indexing
 * and remembered in the table mirrored here (the client's decoder holds the
 * same entries, evicted in the same order: RFC 7541 4.4).  :status is the
 * static table's where it has one, content-length a literal never indexed
 * (its value changes with every file), set-cookie and the fields too large
 * for the table literals without indexing.  Literals are never Huffman
 * coded: once a field is in the table it costs a byte either way, and the
 * raw bytes cost no work.  The table's size is H2E_TABLE (RFC 9113's
 * default, so nothing is announced) or the client's
 * SETTINGS_HEADER_TABLE_SIZE if smaller, announced by a dynamic table size
 * update at the start of the next block after every change (4.2, 6.3).
 * The request side stays libnghttp2's decoder (h2.c).
 * tests/unit/t_h2_hpack.c decodes what this writes with libnghttp2's.
 */
#ifndef GATLING_H2_HPACK_H
#define GATLING_H2_HPACK_H

#include "http/response.h"

#include <stddef.h>
#include <stdint.h>

#define H2E_TABLE 4096                  /* our dynamic table's size at most, bytes (4.1) */
#define H2E_SLOTS (H2E_TABLE / 32)      /* entries it can hold: each counts 32 + its bytes */
#define H2E_ENTRY_MAX (H2E_TABLE / 4)   /* a larger field is never inserted */
#define H2E_DEFAULT 4096                /* the decoder's size before any update (RFC 9113 6.5.2) */
#define H2E_HINTS 64                    /* hash of a field -> 2 entries, newest first: a power of 2 */

/* A field to encode: the name in lower case (RFC 9113 8.2.1). */
typedef http_field_t h2_field_t;

/* An entry of the mirrored table: its bytes (name, then value) at off in buf. */
typedef struct h2e_slot {
    uint16_t off, vlen;
    uint8_t nlen;
} h2e_slot_t;

/* The encoder of one connection: the dynamic table as the client's decoder
   holds it.  Entries seq first .. ins-1 are live, the newest at index 62. */
typedef struct h2e {
    uint32_t max;      /* the table's size now (what the decoder was told) */
    uint32_t want;     /* ... what it is to be: announced at the next block */
    uint32_t low;      /* ... the least it was meant to be since the last block */
    uint32_t size;     /* bytes the live entries count (4.1) */
    uint32_t first, ins;
    uint32_t tail;     /* where the next entry's bytes go in buf */
    uint32_t hint[H2E_HINTS]; /* a field's hash to the last 2 entries seen with it (seq + 1) */
    uint8_t live[256];        /* live entries per 8-bit hash: 0, the field is not in the table */
    h2e_slot_t slot[H2E_SLOTS];
    char buf[H2E_TABLE];
} h2e_t;

/* A fresh encoder for a client whose SETTINGS_HEADER_TABLE_SIZE is peer:
   the decoder's table is H2E_DEFAULT bytes (our first block says
   min(peer, H2E_TABLE) if that is less). */
void h2e_init(h2e_t *e, uint32_t peer);

/* The client's SETTINGS_HEADER_TABLE_SIZE changed to peer: the next block
   begins with the size update(s) 4.2 asks for. */
void h2e_peer_table(h2e_t *e, uint32_t peer);

/* Bytes that encoding f[0..n) may take at most (size updates included). */
size_t h2e_bound(const h2_field_t *f, size_t n);

/* Encode the header block of f[0..n) into out[0..cap): its length, or -1
   if cap is below h2e_bound (nothing is remembered then). */
long h2e_encode(h2e_t *e, uint8_t *out, size_t cap, const h2_field_t *f, size_t n);

#endif
