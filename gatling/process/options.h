/*
 * options — the command line and the options file (--config, site/conffile.h)
 * parsed into a config_t (site/config.h) by the one table of options: each
 * option is a row (site/optdef.h) in the file of the module that owns it,
 * and getopt's strings, -h, the file's path options, the "unknown option"
 * message and --list-options are read from the rows.  Every value is checked
 * for range and length, and what does not go together refused.  Nothing is
 * opened, bound or started here: --check and the start both begin with it,
 * and the fuzz harness (tests/fuzz/fuzz_options.c) drives it alone.
 */
#ifndef GATLING_OPTIONS_H
#define GATLING_OPTIONS_H

#include "site/config.h"
#include "site/conffile.h"

#include <stdio.h>

/*
 * Parse the options file (--config) and argv into cfg; ca keeps the file's
 * words, which cfg points into (conf_free(ca) once cfg is done with).
 * Returns -1 to go on, or an exit code (with --check: 2 after every problem
 * found in the options is said; -h, -V: 0 after printing).
 */
int options_parse(int argc, char **argv, config_t *cfg, conf_args_t *ca);

/* --list-options: a line a row (names, kind, "file" if the options file may
   hold it, "reload" if a reload may change it, "relative" if the file's
   relative value is made relative to it, how often, the range). */
void options_list(FILE *f);

/* A bad option's second line ("try 'gatling -h'"), on stderr: 2.  Under
   --check it is said once, after every option's problems. */
int usage_error(void);

#endif
