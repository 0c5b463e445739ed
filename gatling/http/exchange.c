/* One request and its response: see exchange.h. */
#include "exchange.h"

#include <stdlib.h>

int ex_error(exchange_t *ex, int status, const char *name, const char *value)
{
    ex->nfields = 0;
    ex->fields_over = 0;
    if (name)
        ex_field(ex, name, value);
    return ex->codec->error(ex, status);
}

int ex_page(exchange_t *ex, const char *ctype, char *page, size_t len)
{
    int r = ex_head(ex, 200, ctype, len, -1);
    if (r != 0) {
        free(page);
        return r < 0 ? -1 : 0;
    }
    return ex_body_buf(ex, page, len, EX_FREE);
}

int ex_own(exchange_t *ex, void *p)
{
    if (ex->owned)
        return -1;
    ex->owned = p;
    return 0;
}

void ex_end(exchange_t *ex)
{
    const ex_producer_t *p = ex->producer;
    if (p) { /* first: the producer may still hold the exchange's buffers */
        ex->producer = NULL;
        p->end(ex);
    }
    free(ex->owned);
    ex->owned = NULL;
}
