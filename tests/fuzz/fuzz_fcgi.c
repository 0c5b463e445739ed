/* FastCGI records: the same pieces whether fed whole or split where the input says. */
#include "fcgi.h"
#include "fuzz.h"

/* Feed b[0..n) in pieces of step; a digest of what came out. */
static long feed(const char *b, size_t n, size_t step, uint64_t *digest)
{
    fcgi_parser_t st = {0};
    size_t off = 0;
    *digest = 0;
    while (off < n) {
        size_t k = n - off < step ? n - off : step, used = 0;
        while (used < k) {
            fcgi_piece_t pc;
            long r = fcgi_next(&st, b + off + used, k - used, &pc);
            if (r < 0)
                return r;
            CHECK(r > 0 && (size_t)r <= k - used);
            CHECK(inside(pc.p, pc.n, b + off + used, (size_t)r));
            for (size_t i = 0; i < pc.n; i++) /* the bytes, whatever the split */
                *digest = *digest * 31 + (unsigned char)pc.p[i] + (uint64_t)pc.type * 7;
            if (pc.type == FCGI_END_REQUEST)
                *digest = *digest * 131 + pc.app_status + (uint64_t)pc.proto_status;
            used += (size_t)r;
        }
        off += k;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = data[0] ? data[0] : 1;
    char *b = fuzz_copy(data + 1, size - 1);
    uint64_t d1, d2;
    long r1 = feed(b, size - 1, size, &d1), r2 = feed(b, size - 1, step, &d2);
    CHECK(r1 == r2);
    if (r1 == 0)
        CHECK(d1 == d2);
    free(b);
    return 0;
}
