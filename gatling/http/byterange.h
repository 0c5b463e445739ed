/*
 * byterange — the Range request header (RFC 9110 14.2), bytes unit only.
 * Pure: no I/O, no allocation.  (Not "range_": libowfat owns that prefix.)
 */
#ifndef GATLING_BYTERANGE_H
#define GATLING_BYTERANGE_H

#include <stddef.h>
#include <stdint.h>

#define BYTERANGE_MAX 16 /* more ranges than this: answer 200 with the whole file */

typedef struct byterange {
    uint64_t first, last; /* inclusive, clamped to the representation */
} byterange_t;

enum { BYTERANGE_IGNORE = 0, BYTERANGE_UNSATISFIABLE = -1 };

/*
 * Parse Range value v[0..n) for a representation of size bytes.  Returns the
 * number of satisfiable ranges written to out (at most max, in the order
 * asked; ends past EOF are clamped, unsatisfiable ones dropped);
 * BYTERANGE_UNSATISFIABLE when none is (416); BYTERANGE_IGNORE when the
 * header must be ignored and the whole file served: a unit other than bytes,
 * invalid syntax, more than max ranges, or overlapping ranges (a cheap
 * defence against range amplification, which RFC 9110 14.2 permits).
 */
int byterange_parse(const char *v, size_t n, uint64_t size, byterange_t *out, int max);

#endif
