/* Accept-Encoding: a coding that is available (or identity), preferences well formed. */
#include "encoding.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned avail = data[0] & ENC_ALL;
    char *ae = fuzz_copy(data + 1, size - 1);
    int enc = enc_choose(ae, size - 1, avail);
    CHECK(enc == ENC_IDENTITY || (avail & (unsigned)enc));
    unsigned char prefer[ENC_PREFER_MAX];
    int np = 0;
    unsigned acc = enc_accepted(ae, size - 1, prefer, &np);
    CHECK(np >= 1 && np <= ENC_PREFER_MAX && np == __builtin_popcount(acc & ENC_ALL) + 1);
    free(ae);
    return 0;
}
