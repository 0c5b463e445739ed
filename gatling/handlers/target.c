/* What a static request is about: see target.h. */
#include "target.h"

int target_open_vhost(const site_t *s, const target_t *t, int *which)
{
    const char *name = s->cfg->vhosts ? t->vhost : NULL;
    return vhost_open(s->rootfd, name, s->cfg->vhost_only, site_root_check(s), which);
}
