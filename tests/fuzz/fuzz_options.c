/*
 * The command line and the options file together, through options_parse
 * (gatling/process/options.h): what --check and the start both begin with.  The
 * input is the command line's words, one a line, then a NUL byte, then the
 * options file's text (no NUL: all of it is the file, and the command line
 * is empty).  The file is written to a private temp dir on /dev/shm and
 * named by --config first; a --co... word of the input is dropped, so no
 * other file is read as the options file.  --check's later steps (the logs,
 * the certificates, --acme's directory) are not run: they make files.
 *
 * Invariants: the verdict is "go on" (-1) or an exit code 0 or 2; on "go
 * on", the values the rest of the start relies on are in range.  ASan,
 * UBSan and LeakSanitizer watch the rest (conf_free of the file's words).
 */
#define _GNU_SOURCE
#include "fuzz.h"
#include "options.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define ARGS_MAX 64

static char dir[64] = "/dev/shm/fuzz_options.XXXXXX";
static char path[96];

static void cleanup(void)
{
    unlink(path);
    rmdir(dir);
}

/* The input's command line (before the NUL) into argv, after "gatling
   --config FILE": its words, at most ARGS_MAX.  Returns argc. */
static int command_line(char *text, char **argv)
{
    int argc = 0;
    argv[argc++] = "gatling";
    argv[argc++] = "--config";
    argv[argc++] = path;
    for (char *w = text; w && argc < ARGS_MAX + 3;) {
        char *nl = strchr(w, '\n');
        if (nl)
            *nl = 0;
        if (strncmp(w, "--co", 4) && strcmp(w, "--"))
            argv[argc++] = w;
        w = nl ? nl + 1 : NULL;
    }
    argv[argc] = NULL;
    return argc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof path, "%s/g.conf", dir);
        atexit(cleanup);
        if (!freopen("/dev/null", "w", stdout)) /* -h, -V */
            abort();
    }
    const uint8_t *nul = memchr(data, 0, size);
    size_t nargs = nul ? (size_t)(nul - data) : 0;
    const uint8_t *file = nul ? nul + 1 : data;
    size_t nfile = size - (size_t)(file - data);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, file, nfile) != (ssize_t)nfile)
        abort();
    close(fd);
    char *args = malloc(nargs + 1), *argv[ARGS_MAX + 4];
    if (!args)
        abort();
    memcpy(args, data, nargs);
    args[nargs] = 0;
    int argc = command_line(nargs ? args : NULL, argv);
    config_t cfg;
    conf_args_t ca;
    int rc = options_parse(argc, argv, &cfg, &ca);
    CHECK(rc == -1 || rc == 0 || rc == 2);
    if (rc == -1) {
        CHECK(cfg.port >= 0 && cfg.port <= 65535 && cfg.tls_port >= 0 && cfg.tls_port <= 65535);
        CHECK(cfg.workers >= 1 && cfg.workers <= 64 && cfg.threads >= 1 && cfg.threads <= 64);
        CHECK(cfg.ncgi_regex <= CONFIG_CGI_MAX && cfg.nproxy_rules <= CONFIG_PROXY_RULES &&
              cfg.npools <= CONFIG_POOLS && cfg.ntrust <= CONFIG_TRUST_MAX);
    }
    conf_free(&ca);
    free(args);
    return 0;
}
