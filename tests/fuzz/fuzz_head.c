/* The request head parser: verdicts, bounds, and the same answer when fed in pieces. */
#include "fuzz.h"
#include "http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    static http_request_t req, req2;
    int st = 0, st2 = 0;
    long n = http_parse_request(buf, size, &req, &st);
    CHECK(n == HTTP_INCOMPLETE || n == HTTP_MALFORMED || (n > 0 && (size_t)n <= size));
    if (n == HTTP_MALFORMED)
        CHECK(st == 400 || st == 414 || st == 431 || st == 505);
    if (n > 0) {
        CHECK(inside(req.method.p, req.method.n, buf, size));
        CHECK(inside(req.target.p, req.target.n, buf, size));
        CHECK(req.target.n <= HTTP_MAX_TARGET && req.nheaders <= HTTP_MAX_HEADERS);
        CHECK(req.version == 10 || req.version == 11);
        for (size_t i = 0; i < req.nheaders; i++) {
            CHECK(inside(req.headers[i].name.p, req.headers[i].name.n, buf, size));
            CHECK(inside(req.headers[i].value.p, req.headers[i].value.n, buf, size));
        }
        int te = http_transfer_coding(&req);
        CHECK(te == HTTP_TE_NONE || te == HTTP_TE_CHUNKED || te == 400 || te == 501);
        (void)http_header_count(&req, "Host");
        const http_str_t *c = http_header(&req, "Connection");
        if (c)
            (void)http_list_has(*c, "close");
    }
    /* the server feeds it growing prefixes, resuming: each answer must be
       the one a parse from scratch gives for that prefix */
    http_progress_t pr = {0};
    size_t step = size > 64 ? size / 16 : 1;
    for (size_t k = step < size ? step : size;; k = k + step < size ? k + step : size) {
        int st1 = 0;
        long m = http_parse_request_more(buf, k, &req2, &st2, &pr);
        long one = http_parse_request(buf, k, &req, &st1);
        CHECK(m == one && (m != HTTP_MALFORMED || st1 == st2));
        if (m > 0)
            CHECK(req.nheaders == req2.nheaders);
        /* and a verdict on a prefix is the verdict on the whole */
        if (m != HTTP_INCOMPLETE)
            CHECK(m == n && (m != HTTP_MALFORMED || st2 == st));
        if (m != HTTP_INCOMPLETE || k == size)
            break;
    }
    free(buf);
    return 0;
}
