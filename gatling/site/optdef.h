/*
 * optdef — one row of the options table: what an option is, once.
 *
 * Each module that owns options declares them in an array of optdef_t in
 * its own .c, ended by OPT_END (main's in gatling/process/options.c, --acme's in
 * acme_setup.c, --cluster's in cluster_setup.c, -P and --pool in
 * handlers/proxy.c, --cache in route/cache.c); gatling/process/options.c reads
 * the arrays in -h's order and makes from them getopt's strings, -h, the
 * options file's path options (site/conffile.h), the "unknown option"
 * message with its suggestion, and --list-options' dump (which the test of
 * man/gatling.8 reads).  optdef.c holds the value checks the rows share.
 */
#ifndef GATLING_OPTDEF_H
#define GATLING_OPTDEF_H

#include "config.h"

#include <stddef.h>

/* What an option's value is.  The kinds of a path say who reads or writes
   it, so that the start (site/privfs.h) and the privilege suite know which
   rule applies; in an options file their relative values are relative to
   the file (conffile.h). */
typedef enum {
    OPT_END = 0,    /* the end of a module's array */
    OPT_FLAG,       /* no value: stores .value into an int */
    OPT_NUMBER,     /* a whole number in [min, max] into an int */
    OPT_SECONDS,    /* the same, in seconds */
    OPT_BYTES,      /* a size in bytes, in [min, max] (K, M, G where it says) */
    OPT_PATH,       /* a file or directory root reads (before -u and the chroot) */
    OPT_LOG,        /* a file appended to: opened by privfs's rules, as -u's user where
                       its directory is not root's alone */
    OPT_USER_DIR,   /* a directory -u's user writes (its layout made as that user) */
    OPT_SECRET,     /* a key or password file, read as root */
    OPT_URL,        /* a URL */
    OPT_NETS,       /* addresses or addr/bits, comma-separated */
    OPT_RULE,       /* a pattern or rule its module parses */
    OPT_WORD,       /* a name, or one of a few words */
    OPT_ACTION,     /* does something now (-h, -V, --check, --config) */
} opt_kind_t;

/* optdef_t.flags */
#define OPT_IN_FILE 1   /* the options file may hold it */
#define OPT_RELOAD 2    /* a reload (the upgrade, SIGNALS) may change it; without: the
                           listening sockets go over as they are */
#define OPT_NO_VALUE 4  /* takes no value (OPT_FLAG and the actions without one) */
#define OPT_NOT_RELATIVE 8 /* a path kind whose value is not a bare path (kid:@file) */
#define OPT_ANY (OPT_IN_FILE | OPT_RELOAD) /* what most options are */

struct optdef;
/* A setter of the module's own: 0, -1 when arg is not what .why says (the
   caller names the option, the value and .why, or the setter's own reason
   given by opt_set_why()), or 2 when it said why itself. */
typedef int (*opt_set_fn)(config_t *cfg, const struct optdef *o, char *arg);

typedef struct optdef {
    char sname;          /* -x, or 0 */
    const char *lname;   /* --name without its dashes, or NULL */
    opt_kind_t kind;
    int flags;           /* OPT_IN_FILE, OPT_RELOAD, ... */
    int repeat;          /* given up to this many times, each adding (0: once, the last wins) */
    long long min, max;  /* a number's range; a string's length at most max (0: any) */
    size_t off;          /* the field it sets (OPT_INT(), OPT_STR()); OPT_NOFIELD: none */
    int value;           /* OPT_FLAG: what it stores */
    opt_set_fn set;      /* NULL: by its kind */
    int id;              /* for the module's setter, which may serve several rows */
    const char *why;     /* a bad value is "not ..." */
    const char *help;    /* its -h lines, each ending in \n (NULL: the row above's say it) */
} optdef_t;

#define OPT_NOFIELD ((size_t)-1)
/* The field's offset, its type checked: an int, a const char *, a long long. */
#define OPT_INT(f) _Generic(((config_t *)0)->f, int: offsetof(config_t, f))
#define OPT_STR(f) _Generic(((config_t *)0)->f, const char *: offsetof(config_t, f))
#define OPT_LL(f) _Generic(((config_t *)0)->f, long long: offsetof(config_t, f))

/* Rows, positionally: sname, lname, kind, flags, repeat, min, max, off, value, set, id, why,
   help.  The usual shapes: */
#define OPT_ROW_NUM(s, l, kind, lo, hi, f, why, help) \
    {s, l, kind, OPT_ANY, 0, lo, hi, OPT_INT(f), 0, NULL, 0, why, help}
#define OPT_ROW_FLAG(s, l, f, v, help) \
    {s, l, OPT_FLAG, OPT_ANY | OPT_NO_VALUE, 0, 0, 0, OPT_INT(f), v, NULL, 0, NULL, help}
#define OPT_ROW_STR(s, l, kind, max, f, why, help) \
    {s, l, kind, OPT_ANY, 0, 0, max, OPT_STR(f), 0, NULL, 0, why, help}
#define OPT_ROW_FN(s, l, kind, flags, repeat, fn, id, why, help) \
    {s, l, kind, flags, repeat, 0, 0, OPT_NOFIELD, 0, fn, id, why, help}
#define OPT_LAST {0, NULL, OPT_END, 0, 0, 0, 0, 0, 0, NULL, 0, NULL, NULL}

/* The field o sets, in cfg. */
#define OPT_FIELD(cfg, o, type) ((type *)(void *)((char *)(cfg) + (o)->off))

/* A whole decimal number in [min, max], or -1. */
long opt_number(const char *s, long min, long max);

/* "FIRST[,REST]": FIRST copied into buf (cap bytes with its NUL), *rest set to REST
   (NULL without a comma); 0, or -1 when FIRST is empty or does not fit. */
int opt_first(const char *arg, char *buf, size_t cap, const char **rest);

/* A size: digits and an optional K, M or G (powers of 1024), in [min, max]; -1 if s is
   not that. */
long long opt_size(const char *s, long long min, long long max);

/*
 * Is the POSIX ERE re's compiled size bounded by about limit nodes?  glibc's
 * regcomp copies the operand of each + and {m,n} (E+ is EE*), so stacked or
 * nested ones ("X++++...", "((a+)+)+") double it each time: 30 of them took
 * regcomp minutes and gigabytes (found by tests/fuzz/fuzz_options).  1, or 0
 * when the estimate passes limit, groups nest deeper than 31, or two
 * repetitions follow each other ("a++", "a+?": undefined in POSIX, and the
 * epsilon closures of a dozen took regcomp seconds even under limit).
 */
int opt_regex_bounded(const char *re, long long limit);

/*
 * o's item in -h's synopsis, from its first -h line: the names and the
 * value up to the two spaces before what it does, bracketed ("[-i addr]",
 * "[-e [addr:]port]", "-d / -D" as "[-d|-D]"), into buf (cap bytes with its
 * NUL).  Its length, or -1 when o has no -h lines or the item does not fit.
 */
int opt_synopsis_item(const optdef_t *o, char *buf, size_t cap);

/*
 * A bad option's second line, pointing at the help, as curl and nginx do (50
 * lines of usage would push the error itself off the screen): said on
 * stderr at once, or, between opt_usage_defer(1) and opt_usage_end(), once
 * at the end however many options were bad (--check says them all).  2.
 */
int opt_usage_error(void);
void opt_usage_defer(int on);

/* The deferred pointer, if a bad option made it owed; rc. */
int opt_usage_end(int rc);

/* A setter's own reason for refusing its value (printf's format, copied;
   at most 511 bytes are kept), said in place of its row's .why: one line
   that says what is wrong, not two.  opt_take_why() returns it (NULL: none)
   and forgets it. */
void opt_set_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *opt_take_why(void);

/* Where the options were given, for the start's later messages: the
   options file (NULL: none; all lines forgotten), and the line of it
   (0: the command line) the short option c was last given on. */
void opt_where_file(const char *path);
void opt_where_line(int c, int line);

/* "FILE:LINE: " where the options file holds c, else "", into buf; buf. */
const char *opt_where_of(int c, char *buf, size_t len);

#define OPT_REGEX_NODES 20000 /* what -w, -P and .cache's patterns may cost: ~8 ms of
                                    regcomp here (glibc 2.36; 100000 took 40 ms) */

#endif
