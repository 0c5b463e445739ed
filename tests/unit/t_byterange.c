/* Range header parsing (RFC 9110 14.2). */
#include "byterange.h"
#include "tap.h"

static int parse(const char *v, uint64_t size, byterange_t *r)
{
    return byterange_parse(v, strlen(v), size, r, BYTERANGE_MAX);
}

static void one(const char *v, uint64_t size, uint64_t a, uint64_t b)
{
    byterange_t r[BYTERANGE_MAX];
    int n = parse(v, size, r);
    ok(n == 1 && r[0].first == a && r[0].last == b, "%s of %llu -> %llu-%llu", v,
       (unsigned long long)size, (unsigned long long)a, (unsigned long long)b);
    if (n != 1)
        printf("#   got %d ranges\n", n);
}

int main(void)
{
    byterange_t r[BYTERANGE_MAX];
    one("bytes=0-99", 1000, 0, 99);
    one("bytes=100-", 1000, 100, 999);
    one("bytes=-100", 1000, 900, 999);
    one("bytes=-5000", 1000, 0, 999);
    one("bytes=990-5000", 1000, 990, 999);
    one("BYTES=0-0", 1000, 0, 0);
    one("bytes= 5-6 ", 1000, 5, 6);
    one("bytes=5-6, 2000-3000", 1000, 5, 6);
    is_int(parse("bytes=1000-", 1000, r), BYTERANGE_UNSATISFIABLE, "start at EOF: 416");
    is_int(parse("bytes=-0", 1000, r), BYTERANGE_UNSATISFIABLE, "empty suffix: 416");
    is_int(parse("bytes=0-", 0, r), BYTERANGE_UNSATISFIABLE, "empty file: 416");
    is_int(parse("bytes=5-1", 1000, r), BYTERANGE_IGNORE, "last < first: ignored");
    is_int(parse("items=0-5", 1000, r), BYTERANGE_IGNORE, "other unit: ignored");
    is_int(parse("bytes=", 1000, r), BYTERANGE_IGNORE, "no ranges: ignored");
    is_int(parse("bytes=a-b", 1000, r), BYTERANGE_IGNORE, "garbage: ignored");
    is_int(parse("bytes=1-2-3", 1000, r), BYTERANGE_IGNORE, "garbage after a range");
    is_int(parse("bytes=99999999999999999999-", 1000, r), BYTERANGE_IGNORE, "overflow");
    is_int(parse("bytes=0-9,20-29,40-49", 1000, r), 3, "three ranges");
    ok(r[1].first == 20 && r[2].last == 49, "in the order asked");
    is_int(parse("bytes=0-9,5-14", 1000, r), BYTERANGE_IGNORE, "overlap: whole file");
    is_int(parse("bytes=0-9,,20-29", 1000, r), 2, "empty list elements skipped");
    char many[512] = "bytes=";
    for (int i = 0; i <= BYTERANGE_MAX; i++)
        sprintf(many + strlen(many), "%d-%d,", i * 10, i * 10 + 1);
    is_int(parse(many, 100000, r), BYTERANGE_IGNORE, "too many ranges: whole file");
    return tap_done();
}
