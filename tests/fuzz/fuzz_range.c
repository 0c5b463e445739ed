/* Range: every range inside the representation, at most max, never overlapping. */
#include "byterange.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t fsize;
    memcpy(&fsize, data, 8);
    fsize %= (uint64_t)1 << 50; /* any file a server could hold, zero included */
    char *v = fuzz_copy(data + 8, size - 8);
    byterange_t r[BYTERANGE_MAX];
    int n = byterange_parse(v, size - 8, fsize, r, BYTERANGE_MAX);
    CHECK(n >= BYTERANGE_UNSATISFIABLE && n <= BYTERANGE_MAX);
    for (int i = 0; i < n; i++) {
        CHECK(r[i].first <= r[i].last && r[i].last < fsize);
        for (int j = 0; j < i; j++)
            CHECK(r[i].last < r[j].first || r[j].last < r[i].first);
    }
    free(v);
    return 0;
}
