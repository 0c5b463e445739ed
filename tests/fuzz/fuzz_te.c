/* Transfer-Encoding lists: each input line becomes one field line. */
#include "fuzz.h"

#include <strings.h>
#include "http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4000)
        return 0;
    char *head = malloc(size * 21 + 128); /* a newline becomes 21 bytes */
    size_t n = (size_t)sprintf(head, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ");
    for (size_t i = 0; i < size; i++) {
        if (data[i] == '\n') {
            memcpy(head + n, "\r\nTransfer-Encoding: ", 21);
            n += 21;
        } else if (data[i] != '\r') {
            head[n++] = (char)data[i];
        }
    }
    memcpy(head + n, "\r\n\r\n", 4);
    n += 4;
    char *buf = fuzz_copy((const uint8_t *)head, n);
    static http_request_t req;
    int st;
    if (http_parse_request(buf, n, &req, &st) > 0) {
        int te = http_transfer_coding(&req);
        CHECK(te == HTTP_TE_NONE || te == HTTP_TE_CHUNKED || te == 400 || te == 501);
        if (te == HTTP_TE_CHUNKED) { /* then "chunked" is in there, in some case */
            int found = 0;
            for (size_t i = 0; i + 7 <= n && !found; i++) /* the field values as sent */
                found = strncasecmp(head + i, "chunked", 7) == 0;
            CHECK(found);
        }
    }
    free(buf);
    free(head);
    return 0;
}
