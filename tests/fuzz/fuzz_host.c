/* Host to vhost directory name: bounded, lower-case, never a path. */
#include "fuzz.h"
#include "vhost.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    char *h = fuzz_copy(data + 2, size - 2);
    http_str_t host = {h, size - 2};
    char out[VHOST_NAME_MAX];
    int n = vhost_name(&host, 1 + data[0] * 256, data[1] & 1, out);
    CHECK(n >= -1 && n < VHOST_NAME_MAX);
    if (n > 0) {
        CHECK((size_t)n == strlen(out));
        CHECK(!strchr(out, '/') && !strstr(out, "..") && out[0] != '.');
        const char *colon = strrchr(out, ':'); /* one name per site: no final dot */
        CHECK(colon && colon > out && colon[-1] != '.');
        for (int i = 0; i < n; i++)
            CHECK(!(out[i] >= 'A' && out[i] <= 'Z'));
    }
    free(h);
    return 0;
}
