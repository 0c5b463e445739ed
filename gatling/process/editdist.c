/* The edit distance of two names, for "did you mean" (options.c's unknown
   long option).  See editdist.h. */
#include "editdist.h"

#include <string.h>

int editdist(const char *a, size_t na, const char *b)
{
    size_t nb = strlen(b);
    int row[32];
    if (nb >= 32 || na >= 64)
        return 99;
    for (size_t j = 0; j <= nb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            diag = up, row[j] = best;
        }
    }
    return row[nb];
}
