/* proc — what the process makes of its configuration at start: see proc.h. */
#include "proc.h"

void proc_init(proc_t *p)
{
    *p = (proc_t){.log_fd = -1,
                  .error_fd = -1,
                  .error_dir = -1,
                  .pid_fd = -1,
                  .pid_dir = -1,
                  .uid = -1,
                  .gid = -1,
                  .cgi_uid = -1,
                  .cgi_gid = -1,
                  .proc_fd = -1,
                  .spawn_fd = -1,
                  .acme_od_fd = -1,
                  .cluster_purge_fd = -1};
    for (int i = 0; i < CONFIG_POOLS; i++)
        p->pool_dirfd[i] = -1;
}

void proc_asked(proc_t *p, const config_t *cfg)
{
    p->tls_dir = cfg->tls_dir;
    p->port = cfg->port;
    p->tls_port = cfg->tls_port;
    p->ftp_port = cfg->ftp_port;
}
