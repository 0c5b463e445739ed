/* cluster_setup — see cluster_setup.h. */
#define _GNU_SOURCE
#include "cluster_setup.h"
#include "acme/acme_cluster.h"
#include "acme/acme_etcd.h"
#include "site/cluster.h"
#include "tls/tls.h"

#include <openssl/x509.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLUSTER_NAME_MAX 64

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > CLUSTER_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
            return 0;
    return 1;
}

/* A bad value: the pointer to the help follows, as for every option's. */
static int bad_value(void)
{
    return opt_usage_error();
}

enum { CLUSTER_OPT, CLUSTER_OPT_NAME };

/* --cluster, --cluster-name: 0, or 2 after saying why. */
static int cluster_set(config_t *cfg, const optdef_t *o, char *arg)
{
    if (o->id == CLUSTER_OPT) {
        if (strncmp(arg, "etcd=", 5) || (strncmp(arg + 5, "http://", 7) &&
                                         strncmp(arg + 5, "https://", 8)) ||
            strlen(arg) > 2000 || strpbrk(arg, " \t\r\n")) {
            fprintf(stderr, "gatling: --cluster %s: not etcd=URL[,URL...] (http:// or "
                    "https://, no spaces)\n", arg);
            return bad_value();
        }
        cfg->cluster_etcd = arg + 5;
        return 0;
    }
    if (!name_ok(arg)) {
        fprintf(stderr, "gatling: --cluster-name %s: not 1 to %d letters, digits, '-', "
                "'_' or '.'\n", arg, CLUSTER_NAME_MAX);
        return bad_value();
    }
    cfg->cluster_name = arg;
    return 0;
}

const optdef_t cluster_opts[] = {
    OPT_ROW_FN(0, "cluster", OPT_URL, OPT_ANY, 0, cluster_set, CLUSTER_OPT, NULL,
        "  --cluster etcd=url[,url...],secret=file[,ca=file][,cert=file,key=file]\n"
        "            [,user=name,password-file=file][,insecure]  share ticket keys,\n"
        "            cache purges and --acme's certificates with the other nodes\n"
        "            through etcd (its v3 JSON gateway; https, or http on loopback;\n"
        "            TLS roots, a client certificate, a user of its auth; values\n"
        "            sealed with the secret file): gatling(8)'s CLUSTER\n"),
    OPT_ROW_FN(0, "cluster-name", OPT_WORD, OPT_ANY, 0, cluster_set, CLUSTER_OPT_NAME, NULL,
        "  --cluster-name name  the cluster's keys are /gatling/name/ (default gatling)\n"),
    OPT_LAST};

int cluster_options_done(config_t *cfg)
{
    if (cfg->cluster_name && !cfg->cluster_etcd) {
        fputs("gatling: --cluster-name without --cluster etcd=URL\n", stderr);
        return 2;
    }
    if (!cfg->cluster_name)
        cfg->cluster_name = CLUSTER_NAME_DEFAULT;
    char err[400];
    etcd_t *e = NULL;
    if (cfg->cluster_etcd && (etcd_check(cfg->cluster_etcd, err, sizeof err) < 0 ||
                              /* --check: the files too (a start reads them later) */
                              (cfg->check && !(e = etcd_new(cfg->cluster_etcd, err,
                                                            sizeof err))))) {
        fprintf(stderr, "gatling: --cluster: %s\n", err);
        return bad_value();
    }
    etcd_free(e);
    return -1;
}

int cluster_launch(const config_t *cfg, proc_t *pr)
{
    int p[2];
    char err[600];
    pr->cluster_purge_fd = -1;
    if (!cfg->cluster_etcd)
        return 0;
    if (!(pr->cluster = cluster_view_new()) || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
        fprintf(stderr, "gatling: --cluster: %s failed: %s\n",
                pr->cluster ? "pipe2()" : "mmap()", strerror(errno));
        cluster_view_free(pr->cluster);
        pr->cluster = NULL;
        return -1;
    }
    pid_t pid = acme_cluster_start(cfg, pr, pr->cluster, p[0], err, sizeof err);
    close(p[0]);
    if (pid < 0) {
        fprintf(stderr, "gatling: --cluster: the side process did not start: %s\n", err);
        close(p[1]);
        cluster_view_free(pr->cluster);
        pr->cluster = NULL;
        return -1;
    }
    pr->cluster_purge_fd = p[1];
    pr->cluster_pid = (int)pid;
    fprintf(stderr, "gatling: --cluster: etcd %s, keys under /gatling/%s/\n", cfg->cluster_etcd,
            cfg->cluster_name);
    if (etcd_check(cfg->cluster_etcd, err, sizeof err) > 0)
        fprintf(stderr, "gatling: --cluster: WARNING: insecure: %s is plain http to another "
                "host: etcd's password or token crosses the network in clear (the values "
                "are sealed)\n", err);
    return 0;
}

void cluster_end(proc_t *pr)
{
    pid_t pid = (pid_t)pr->cluster_pid;
    if (pid <= 0)
        return;
    pr->cluster_pid = 0;
    kill(pid, SIGTERM);
    for (int i = 0; i < 300; i++) { /* 3 s: a round's etcd timeouts */
        if (waitpid(pid, NULL, WNOHANG) != 0)
            return;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

int cluster_advise(const config_t *cfg, const proc_t *p)
{
    const char *file = cfg->acme.ca_root, *name;
    X509_STORE *roots = cfg->cluster_etcd && cfg->acme.email && p->tls ? X509_STORE_new() : NULL;
    if (!roots || (file ? X509_STORE_load_file(roots, file) : X509_STORE_set_default_paths(roots))
                      != 1) {
        X509_STORE_free(roots); /* one that does not load: the ACME client says so */
        return 0;
    }
    char top[512], first[512] = "", names[600] = "", link[300];
    int missing = 0;
    size_t len = 0;
    int64_t t;
    for (int i = 0; tls_store_expiry(p->tls, i, &name, &t); i++)
        if (tls_store_link(p->tls, i, link, sizeof link) > 6 && !strncmp(link, ".acme/", 6) &&
            tls_store_root_missing(p->tls, i, roots, top, sizeof top) == 1) {
            if (!missing++)
                memcpy(first, top, sizeof first);
            if (len < sizeof names - 300)
                len += (size_t)snprintf(names + len, sizeof names - len, "%s%.255s",
                                        len ? ", " : "", name);
        }
    X509_STORE_free(roots);
    if (missing)
        fprintf(stderr, "gatling: warning: --cluster: the ACME certificate%s of %s%s lead%s to "
                "no root of %s: its chain's issuing root %s is not there, so the other nodes "
                "refuse this CA's certificates from the cluster and each orders its own; add "
                "that root (the CA's chain's, not only its API's) to --acme-ca-root "
                "(gatling.8, CLUSTER)\n", missing > 1 ? "s" : "", names,
                len < sizeof names - 300 ? "" : " and more", missing > 1 ? "" : "s",
                file ? file : "the system's roots", first);
    return missing > 0;
}
