/*
 * siphash — SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed hash that
 * nobody who does not know the key can aim at one bucket, for the tables
 * clients fill (peerlimits' addresses, the workers' peerboard, QUIC's
 * connection IDs).  Each table draws its own random key.
 */
#ifndef GATLING_SIPHASH_H
#define GATLING_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of p[0..n) under the 16-byte key (read little-endian). */
uint64_t siphash24(const uint8_t key[16], const void *p, size_t n);

/*
 * A fresh random key for a table: getrandom(), or, where the kernel has no
 * entropy yet to give, one made of the clock and an address: still a key
 * nobody outside knows.
 */
void siphash_key(uint8_t key[16]);

#endif
