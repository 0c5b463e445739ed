/*
 * kb-fork: fork(); the child writes one byte to a pipe and stays; the parent
 * reads it.  The latency of that (and of fork() returning in the parent) as
 * the live children grow.  Built twice, dynamically (kb-fork) and statically
 * (kb-fork-static): a static binary has fewer mappings to copy.  Every child
 * is killed and reaped at the end, also when interrupted; a child whose
 * parent dies is killed by the kernel (PR_SET_PDEATHSIG).
 */
#include "kb.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    kb_opts_t o;
#ifdef KB_STATIC
    const char *name = "kb-fork-static";
#else
    const char *name = "kb-fork";
#endif
    kb_start(argc, argv, name,
             "latency of fork() until the child has run, as live children grow",
             "fork+run\tfork", 2000, 0, 0, &o);
    pid_t *kids = calloc((size_t)o.n, sizeof *kids);
    int p[2];
    if (!kids || pipe(p) < 0)
        return kb_end(0, kb_fail("set-up", errno, 0));
    pid_t parent = getpid();
    int rc = KB_OK;
    long n;
    for (n = 1; n <= o.n && !kb_stop; n++) {
        uint64_t t0 = kb_now();
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(0);
            char b = 'c';
            (void)!write(p[1], &b, 1);
            for (;;)
                pause();
        }
        uint64_t t1 = kb_now();
        if (pid < 0) {
            rc = kb_fail("fork()", errno, n - 1);
            break;
        }
        kids[n - 1] = pid;
        char b;
        while (read(p[0], &b, 1) < 0 && errno == EINTR)
            ;
        uint64_t t2 = kb_now();
        uint64_t d[2] = {t2 - t0, t1 - t0};
        if (kb_due(n))
            kb_sample(n, 2, d);
    }
    long made = n - 1;
    for (long i = 0; i < made; i++)
        kill(kids[i], SIGKILL);
    for (long i = 0; i < made; i++)
        waitpid(kids[i], NULL, 0);
    free(kids);
    return kb_end(made, rc);
}
