/* What a static request is about: see target.h. */
#include "target.h"
#include "host.h"

#include <errno.h>

int target_dir(exchange_t *ex, int *which)
{
    const host_t *h = host_of(ex);
    if (which)
        *which = host_which(h);
    if (!h || h->dirfd < 0)
        errno = h ? h->err : ENOENT;
    return h ? h->dirfd : -1;
}
