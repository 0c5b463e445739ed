/* sandbox — see sandbox.h. */
#define _GNU_SOURCE
#include "sandbox.h"

#include <linux/landlock.h>
#include <seccomp.h>

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Debian 12's header stops at ABI 3: the later bits, as the kernel's ABI fixes them. */
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0) /* ABI 4 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* The ruleset's attributes as ABI 6 has them; the kernel reads the size it is given. */
typedef struct {
    uint64_t handled_access_fs;
    uint64_t handled_access_net; /* ABI 4 */
    uint64_t scoped;             /* ABI 6 */
} ll_attr_t;

#define SANDBOX_SAY_MAX 400 /* the start's line: its parts, each appended within it */

typedef struct {
    char s[SANDBOX_SAY_MAX];
    size_t n;
} say_t;

static void say_add(say_t *b, const char *part)
{
    int w = snprintf(b->s + b->n, sizeof b->s - b->n, "%s%s", b->n ? "; " : "", part);
    if (w > 0)
        b->n += (size_t)w < sizeof b->s - b->n ? (size_t)w : sizeof b->s - b->n - 1;
}

static int sandbox_set(config_t *cfg, const optdef_t *o, char *arg)
{
    (void)o;
    if (strcmp(arg, "on") && strcmp(arg, "off")) {
        fprintf(stderr, "gatling: --sandbox %s: not on or off\n", arg);
        return opt_usage_error();
    }
    cfg->no_sandbox = !strcmp(arg, "off");
    return 0;
}

const optdef_t sandbox_opts[] = {
    OPT_ROW_FN(0, "sandbox", OPT_WORD, OPT_ANY, 0, sandbox_set, 0, NULL,
        "  --sandbox on|off  confine the serving processes: a seccomp deny-list, and in\n"
        "            -W's workers no execve and Landlock (default on): gatling(8)'s SECURITY\n"),
    OPT_LAST};

/* The Landlock ABI this kernel offers: 0 without Landlock (ENOSYS, EOPNOTSUPP: off). */
static int landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v > 0 ? (int)v : 0;
}

/* The calls no serving process makes: EPERM, so that a library probing one
   falls back; worker: execve and execveat as well. */
static int seccomp_rules(scmp_filter_ctx f, sandbox_role_t role)
{
    static const int deny[] = {
#ifndef __SANITIZE_ADDRESS__ /* LeakSanitizer stops the threads with ptrace at exit */
        SCMP_SYS(ptrace),
#endif
        SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev), SCMP_SYS(mount),
        SCMP_SYS(umount2), SCMP_SYS(pivot_root), SCMP_SYS(bpf), SCMP_SYS(kexec_load),
        SCMP_SYS(kexec_file_load), SCMP_SYS(init_module), SCMP_SYS(finit_module),
        SCMP_SYS(delete_module), SCMP_SYS(reboot), SCMP_SYS(swapon), SCMP_SYS(swapoff),
        SCMP_SYS(setns), SCMP_SYS(unshare), SCMP_SYS(keyctl), SCMP_SYS(add_key),
        SCMP_SYS(request_key), SCMP_SYS(perf_event_open), SCMP_SYS(userfaultfd),
        SCMP_SYS(open_by_handle_at), SCMP_SYS(acct), SCMP_SYS(quotactl)};
    int rc = 0;
    for (size_t i = 0; i < sizeof deny / sizeof deny[0]; i++)
        rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), deny[i], 0);
    /* personality(0xffffffff) only asks: a runtime may; setting one is refused */
    rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                           SCMP_A0(SCMP_CMP_NE, 0xffffffffu));
    rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
    rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    if (role == SANDBOX_WORKER) {
        rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(execve), 0);
        rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(execveat), 0);
    }
    return rc ? -1 : 0;
}

/* The filter (NoNewPrivs set by seccomp_load).  0, or -1 with why in err. */
static int seccomp_apply(sandbox_role_t role, int upgraded, say_t *b, char *err,
                         size_t errlen)
{
    if (upgraded && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2) { /* the old process's filter */
        say_add(b, "seccomp deny-list kept from the process before the upgrade");
        return 0;
    }
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
    int made = f && seccomp_rules(f, role) == 0;
    int rc = !made ? -ENOMEM : seccomp_load(f);
    seccomp_release(f);
    if (made && (rc == -EINVAL || rc == -ENOSYS)) { /* no CONFIG_SECCOMP_FILTER */
        say_add(b, "seccomp: the kernel lacks filters");
        return 0;
    }
    if (rc < 0) {
        snprintf(err, errlen, "seccomp: the filter could not be loaded: %s", strerror(-rc));
        return -1;
    }
    say_add(b, role == SANDBOX_WORKER ? "seccomp deny-list (execve refused)"
                                      : "seccomp deny-list (execve kept: the upgrade needs it)");
    return 0;
}

/* A -W worker's Landlock domain as this kernel's ABI allows it: no new TCP
   bind, the two scopes; its attributes' size for the kernel (0: nothing to
   apply), and what it is into b. */
static size_t landlock_plan(const config_t *cfg, ll_attr_t *a, say_t *b)
{
    int abi = landlock_abi();
    size_t size = abi >= 6 ? sizeof *a : abi >= 4 ? 2 * sizeof(uint64_t) : 0;
    char part[160];
    *a = (ll_attr_t){0};
    if (abi >= 4 && cfg->ftp_port < 0)
        a->handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP;
    if (abi >= 6)
        a->scoped = LANDLOCK_SCOPE_SIGNAL | LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
    if (!a->handled_access_net && !a->scoped) {
        snprintf(part, sizeof part, "Landlock: %s", abi ? "this kernel's ABI lacks TCP and scopes"
                                                         : "the kernel lacks it");
        say_add(b, part);
        return 0;
    }
    snprintf(part, sizeof part, "Landlock ABI %d: %s%s%s", abi,
             a->handled_access_net ? "no new TCP bind" : "TCP bind kept (-f's passive mode)",
             a->scoped ? ", signals and abstract sockets scoped" : "",
             abi < 6 ? ", no scopes (ABI 6)" : "");
    say_add(b, part);
    return size;
}

/* A -W worker's Landlock domain (landlock_plan).  0, or -1 with why in err. */
static int landlock_apply(const config_t *cfg, say_t *b, char *err, size_t errlen)
{
    ll_attr_t a;
    size_t size = landlock_plan(cfg, &a, b);
    if (!size)
        return 0;
    int fd = (int)syscall(SYS_landlock_create_ruleset, &a, size, 0);
    if (fd < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        syscall(SYS_landlock_restrict_self, fd, 0) < 0) {
        snprintf(err, errlen, "Landlock: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

static const char *role_name(sandbox_role_t role)
{
    return role == SANDBOX_WORKER ? "-W workers" : "server";
}

int sandbox_enter(const config_t *cfg, sandbox_role_t role, int say, int upgraded)
{
    char err[200];
    say_t b = {.n = 0};
    if (cfg->no_sandbox) {
        if (say)
            fputs("gatling: sandbox: off (--sandbox off)\n", stderr);
        return 0;
    }
    if ((role == SANDBOX_WORKER && landlock_apply(cfg, &b, err, sizeof err) < 0) ||
        seccomp_apply(role, upgraded, &b, err, sizeof err) < 0) {
        fprintf(stderr, "gatling: sandbox (%s): %s\n", role_name(role), err);
        return -1;
    }
    if (role == SANDBOX_SERVER)
        say_add(&b, "Landlock: not in the single process (its upgrade would inherit it)");
    if (say)
        fprintf(stderr, "gatling: sandbox (%s): %s\n", role_name(role), b.s);
    return 0;
}

void sandbox_say_workers(const config_t *cfg)
{
    say_t b = {.n = 0};
    ll_attr_t a;
    if (cfg->no_sandbox) {
        fputs("gatling: sandbox: off (--sandbox off)\n", stderr);
        return;
    }
    landlock_plan(cfg, &a, &b);
    say_add(&b, "seccomp deny-list (execve refused)");
    fprintf(stderr, "gatling: sandbox (%s): %s\n", role_name(SANDBOX_WORKER), b.s);
}

void sandbox_check(const config_t *cfg)
{
    int abi = landlock_abi();
    if (cfg->no_sandbox) {
        fputs("gatling: --check: sandbox: off (--sandbox off)\n", stderr);
        return;
    }
    fprintf(stderr, "gatling: --check: sandbox: seccomp deny-list (libseccomp %u.%u.%u)%s; "
            "Landlock %s%d%s\n", seccomp_version()->major, seccomp_version()->minor,
            seccomp_version()->micro, cfg->workers > 1 ? ", execve refused in the workers" : "",
            abi ? "ABI " : "absent: ", abi,
            cfg->workers == 1 ? " (not used by the single process: -W uses it)"
            : abi >= 6 ? " (workers: no new TCP bind, scoped signals and abstract sockets)"
            : abi >= 4 ? " (workers: no new TCP bind; no scopes before ABI 6)"
                       : " (too old for what the workers would use)");
}
