/* Chunked framing: the same result fed whole or split where the input says. */
#include "fuzz.h"
#include "http_parse.h"

static int feed(const char *b, size_t n, size_t step, size_t *consumed, uint64_t *total)
{
    http_chunked_t st = {0};
    size_t off = 0, used;
    while (off < n) {
        size_t k = n - off < step ? n - off : step;
        int r = http_chunked_skip(&st, b + off, k, &used);
        if (r == HTTP_MALFORMED)
            return r;
        CHECK(used <= k);
        off += used;
        if (r == HTTP_CHUNKED_DONE) {
            *consumed = off, *total = st.total;
            return r;
        }
    }
    *consumed = off, *total = st.total;
    return HTTP_CHUNKED_MORE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = data[0] ? data[0] : 1;
    char *b = fuzz_copy(data + 1, size - 1);
    size_t c1 = 0, c2 = 0;
    uint64_t t1 = 0, t2 = 0;
    int r1 = feed(b, size - 1, size, &c1, &t1), r2 = feed(b, size - 1, step, &c2, &t2);
    CHECK(r1 == r2);
    if (r1 != HTTP_MALFORMED)
        CHECK(c1 == c2 && t1 == t2 && c1 <= size - 1);
    free(b);
    return 0;
}
