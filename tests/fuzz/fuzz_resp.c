/* A backend's response head: every pointer inside the input, and a prefix of
   a complete head is never malformed. */
#include "fuzz.h"
#include "http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *b = fuzz_copy(data, size);
    http_response_t *r = malloc(sizeof *r);
    long n = http_parse_response(b, size, r);
    if (n > 0) {
        CHECK((size_t)n <= size);
        CHECK(r->status >= 100 && r->status <= 999 && r->nheaders <= HTTP_MAX_HEADERS);
        for (size_t i = 0; i < r->nheaders; i++) {
            CHECK(inside(r->headers[i].name.p, r->headers[i].name.n, b, (size_t)n));
            CHECK(inside(r->headers[i].value.p, r->headers[i].value.n, b, (size_t)n));
        }
        for (size_t k = 0; k < (size_t)n; k += 1 + k / 8)
            CHECK(http_parse_response(b, k, r) == HTTP_INCOMPLETE);
    }
    /* the chunk decoder over the same bytes: output never grows */
    http_chunked_t st = {0};
    size_t used, out;
    int c = http_chunked_decode(&st, b, size, &used, &out);
    CHECK(c == HTTP_MALFORMED || (out <= used && used <= size));
    free(r);
    free(b);
    return 0;
}
