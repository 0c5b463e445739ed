/* acme_try — run the ACME client (gatling/acme/) alone, for a try against
   Pebble before the server side forks it:
     acme_try CA_URL CA_ROOT STATE_DIR TLS_DIR SECONDS NAME... 
   (env ACME_TRY_CHALLENGE=http|alpn, ACME_TRY_PROFILE, ACME_TRY_ISSUER,
   ACME_TRY_NOHTTP=1, ACME_TRY_UNTIL=N, ACME_TRY_EAB_KID and _HMAC, ACME_TRY_RSA,
   ACME_TRY_UID).  It counts the SIGUSR1s the client sends and ends it
   (SIGTERM) after SECONDS. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acme/acme.h"

static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
    (void)sig;
    usr1++;
}

int main(int argc, char **argv)
{
    static config_t cfg;
    static proc_t proc;
    char err[256];
    if (argc < 7) {
        fprintf(stderr, "usage: acme_try CA_URL CA_ROOT STATE_DIR TLS_DIR SECONDS NAME...\n");
        return 2;
    }
    cfg.acme.email = "admin@example.org";
    cfg.acme.ca = cfg.acme.cas[0].url = argv[1];
    cfg.acme.ncas = 1;
    cfg.acme.ca_root = argv[2][0] ? argv[2] : NULL;
    cfg.acme.state_dir = argv[3];
    cfg.tls_dir = argv[4];
    const char *ch = getenv("ACME_TRY_CHALLENGE");
    cfg.acme.challenge = !ch ? CONFIG_ACME_ANY
                         : strcmp(ch, "http") == 0 ? CONFIG_ACME_HTTP01 : CONFIG_ACME_TLSALPN01;
    cfg.acme.profile = getenv("ACME_TRY_PROFILE");
    cfg.acme.issuer = getenv("ACME_TRY_ISSUER");
    cfg.acme.cas[0].eab_kid = getenv("ACME_TRY_EAB_KID");
    cfg.acme.cas[0].eab_hmac = getenv("ACME_TRY_EAB_HMAC");
    if (getenv("ACME_TRY_RSA"))
        cfg.acme.key_type = CONFIG_ACME_RSA2048;
    proc_init(&proc);
    proc_asked(&proc, &cfg); /* -C: the certificates' directory is proc_t's */
    proc.error_fd = 2;
    if (getenv("ACME_TRY_UID")) /* as root: the client drops to these ids */
        proc.uid = proc.gid = atoi(getenv("ACME_TRY_UID"));
    signal(SIGUSR1, on_usr1);
    pid_t pid = acme_start(&cfg, &proc, (const char *const *)argv + 6, argc - 6,
                           !getenv("ACME_TRY_NOHTTP"), getpid(), NULL, err, sizeof err);
    if (pid < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* ACME_TRY_UNTIL=N: end once N certificates have landed (N SIGUSR1s) */
    int until = getenv("ACME_TRY_UNTIL") ? atoi(getenv("ACME_TRY_UNTIL")) : 0;
    time_t end = time(NULL) + atoi(argv[5]);
    while (time(NULL) < end && waitpid(pid, NULL, WNOHANG) == 0 && (!until || usr1 < until))
        usleep(100000);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    printf("acme_try: %d SIGUSR1, child exit %d\n", (int)usr1,
           WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    return 0;
}
