/*
 * conffile — the options file (--config FILE): the command line's options,
 * written one or more a line, read into an argv that getopt parses as it
 * parses the command line.
 *
 * The file's words come first, the command line's after them, so that an
 * option given on both wins from the command line (getopt keeps the last
 * value; options that add, as -P, add to the file's).  A word is split at
 * spaces and tabs; '...' keeps everything up to the next ' as it is; "..."
 * too, but for \" and \\; a backslash outside quotes keeps the next byte, and
 * at a line's end joins the next line; a word that begins with # starts a
 * comment to the end of the line.  Quotes do not span lines.  The value of
 * an option that names a path (-c, -l, -q, -m, -C, --acme-dir,
 * --acme-ca-root, --acme-dns-key: the options table's path kinds, which
 * conf_load is given) that does not begin with / is made relative to the
 * file's directory.
 *
 * No knowledge of what an option means beyond that: options.c checks values.
 */
#ifndef GATLING_CONFFILE_H
#define GATLING_CONFFILE_H

#include <stddef.h>

#define CONF_FILE_MAX (1 << 20) /* bytes of an options file */
#define CONF_WORDS_MAX 4096     /* words in it */

typedef struct conf_args {
    char **argv;       /* argv[0], the file's words, the command line's, NULL */
    int argc;
    int nfile;         /* argv[1..nfile] are the file's */
    int *line;         /* line[i]: the file's line of argv[i], 0 for the command line's */
    const char *path;  /* the file, as given (NULL: no file) */
    char **own;        /* the file's words as read, nfile of them: what conf_free frees
                          (getopt permutes argv, so argv[1..nfile] may hold others' by then) */
} conf_args_t;

/*
 * The file that argv names with --config FILE or --config=FILE (the last,
 * and only among the options: not after "--"), or NULL.  -1 in *bad if
 * --config has no value, else 0.
 */
const char *conf_named(int argc, char **argv, int *bad);

/*
 * Read path (NULL: no file) and make a->argv: argv[0], the file's words,
 * then argv[1..argc).  shortopts is getopt's option string, pathopts the
 * short options whose value is a path, pathlong the long ones (NULL-ended):
 * with them the file's relative paths are made relative to its directory;
 * longopts (getopt's) tells a long flag from one whose value must follow.
 * 0; 1 after printing "gatling: FILE:LINE: why" for each line or word that
 * was refused (an unclosed quote: the line's words dropped; a stray word:
 * dropped), a->argv made of the rest so that getopt says what else is
 * wrong; -1 after printing why nothing can be read (the call that failed, a
 * NUL byte, too many words), a->argv then NULL.  conf_free() in any case.
 */
struct option;
int conf_load(conf_args_t *a, const char *path, int argc, char **argv, const char *shortopts,
              const char *pathopts, const char *const *pathlong, const struct option *longopts);

/* "FILE:LINE: " for a->argv[i] from the file, "" for the command line's;
   into buf (len bytes), which it returns. */
const char *conf_where(const conf_args_t *a, int i, char *buf, size_t len);

void conf_free(conf_args_t *a);

#endif
