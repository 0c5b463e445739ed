/*
 * editdist — how far apart two names are, for "did you mean".
 */
#ifndef GATLING_EDITDIST_H
#define GATLING_EDITDIST_H

#include <stddef.h>

/* The edit distance (Levenshtein) of a[0..na) and the string b (b at most
   31 bytes, a under 64; longer: 99). */
int editdist(const char *a, size_t na, const char *b);

#endif
