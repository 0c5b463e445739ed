/*
 * Shared bits of the libFuzzer harnesses: each harness is one file with
 * LLVMFuzzerTestOneInput, built by tests/fuzz/fuzz.mk with clang
 * -fsanitize=fuzzer,address,undefined against the real gatling sources.
 * An invariant that does not hold aborts, so libFuzzer records the input.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "invariant broken at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort(); \
        } \
    } while (0)

/* A copy of the input in a buffer of its exact size: ASan sees every over-read. */
static inline char *fuzz_copy(const uint8_t *data, size_t n)
{
    char *p = malloc(n ? n : 1);
    if (p && n)
        memcpy(p, data, n);
    return p;
}

/* Does [p, p+n) lie inside [base, base+len)? */
static inline int inside(const char *p, size_t n, const char *base, size_t len)
{
    return n == 0 || (p >= base && p + n <= base + len);
}

#endif
