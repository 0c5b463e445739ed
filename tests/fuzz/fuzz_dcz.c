/* RFC 9842's parsers (http/dcz.c): Available-Dictionary, Accept-Encoding's dcz, a
   .dictionary line and the Use-As-Dictionary value it makes, match patterns: bounds,
   and a value made always reads back and is a pattern the matcher takes. */
#include "dcz.h"
#include "fuzz.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_copy(data, size);
    uint8_t hash[DCZ_HASH_LEN];
    int r = dcz_parse_available(s, size, hash);
    CHECK(r == 0 || r == -1);
    CHECK(r < 0 || size >= 45); /* ':' + 43 characters + ':' at least */
    CHECK(dcz_accepted(s, size) <= 1);
    dcz_rule_t rule;
    r = dcz_rule_parse(s, size, &rule);
    CHECK(r >= -1 && r <= 1);
    if (r == 1) {
        char out[3 * DCZ_PATTERN_MAX];
        size_t n = dcz_use_value(&rule, "/dir/", out, sizeof out);
        CHECK(n < sizeof out && (n == 0 || strlen(out) == n));
        size_t pn;
        const char *m = n ? dcz_use_match(out, &pn) : NULL;
        CHECK(!n || (m && dcz_pattern_ok(m, pn)));
        if (m) /* a pattern matches itself read as a path */
            CHECK(dcz_match(m, pn, m, pn));
    }
    size_t half = size / 2;
    (void)dcz_match(s, half, s + half, size - half);
    free(s);
    return 0;
}
