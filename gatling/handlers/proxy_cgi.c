/* Proxying to FastCGI and SCGI backends.  See proxy.h. */
#include "proxy_int.h"

int px_cgi_request(px_req_t *pr, const path_t *p)
{
    (void)pr, (void)p;
    return -2;
}

void px_cgi_read(px_req_t *pr, char *buf, size_t n)
{
    (void)buf, (void)n;
    px_fail(pr, "not yet");
}

void px_cgi_eof(px_req_t *pr)
{
    px_fail(pr, "not yet");
}

int px_cgi_body(px_req_t *pr, const char *p, size_t n, int last)
{
    (void)pr, (void)p, (void)n, (void)last;
    return 0;
}
