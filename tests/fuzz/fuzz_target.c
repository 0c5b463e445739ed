/* Request-target to path: inside the buffer, rooted, no dot segments, no NUL. */
#include "fuzz.h"
#include "path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > HTTP_MAX_TARGET)
        return 0;
    char *t = fuzz_copy(data, size);
    size_t cap = size + 2;
    char *out = malloc(cap);
    path_t p;
    int st = path_from_target(t, size, out, cap, &p);
    CHECK(st == 0 || st == 400);
    if (st == 0) {
        CHECK(p.path == out && p.len < cap && p.path[p.len] == 0 && p.path[0] == '/');
        CHECK(strlen(p.path) == p.len); /* no NUL inside */
        CHECK(!strstr(p.path, "/../") && !strstr(p.path, "/./") && !strstr(p.path, "//"));
        CHECK(!(p.len >= 3 && !strcmp(p.path + p.len - 3, "/..")));
        CHECK(!(p.len >= 2 && !strcmp(p.path + p.len - 2, "/.")));
        if (p.query)
            CHECK(inside(p.query, p.query_len, t, size));
        char enc[3 * 64 + 1];
        size_t k = p.len < 64 ? p.len : 64;
        CHECK(path_encode(enc, p.path, k, PATH_KEEP) <= 3 * k);
    }
    free(out);
    free(t);
    return 0;
}
