/*
 * quic_mem — the allocator ngtcp2 and nghttp3 are given (quic.c, h3.c).
 *
 * Both libraries allocate blocks far larger than an idle connection fills: an
 * idle HTTP/3 connection asked them for about 150 KiB (heaptrack), among it
 * nghttp3 0.8's stream block (44 KiB: room for 64 streams, used by 7),
 * ngtcp2 0.12's reorder buffers (8 KiB each, seven of them), its stream and
 * frame blocks (11-12 KiB), sorted-list blocks (4 KiB).  Their untouched
 * pages would cost nothing, but a block the heap hands out again was touched
 * by whoever had it before, and stays resident.  So an allocation of
 * QUIC_MEM_LAZY bytes or more comes from malloc as any other, and the whole
 * pages inside it go back to the kernel at once (madvise MADV_DONTNEED: they
 * read as zeros, and cost memory again only when written); the partial pages
 * at its edges, which the heap's bookkeeping shares, are left alone, and free
 * is free.  One system call per such block, a few per connection.  Resident
 * memory per idle connection (bench/h3idle, 200 held): 104 KB before, 81 KB
 * with this (and the TLS session released after the handshake, quic.c).
 *
 * What is left is page granularity: of an idle connection's ~80 KB, the
 * libraries' blocks are 72 KB resident (ngtcp2 54, nghttp3 18) but hold under
 * 6 KB of nonzero bytes; a dozen blocks of 4-44 KiB each write their first
 * bytes and so keep a page.  Placing big blocks in pages of their own, or
 * ending them on a page boundary, measured worse (87 and 85 KB): a head then
 * has its page alone instead of sharing it with its neighbours.  The split,
 * block by block: a build with -DQUIC_MEM_STATS and bench/h3idle --memstats
 * (bench/doc/compare-h3.md).
 */
#ifndef GATLING_QUIC_MEM_H
#define GATLING_QUIC_MEM_H

#ifdef HAVE_H3
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>

#define QUIC_MEM_LAZY (4 * 1024) /* blocks this large are paged in as they are used */

/* The allocators, for ngtcp2_conn_server_new and nghttp3_conn_server_new. */
const ngtcp2_mem *quic_mem_ngtcp2(void);
const nghttp3_mem *quic_mem_nghttp3(void);
#endif

#endif
