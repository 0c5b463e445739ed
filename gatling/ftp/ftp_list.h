/*
 * ftp_list — the lines of FTP listings (LIST, NLST, MLSD, MLST) of what HTTP
 * would serve.  Pure but for reading the directory; calls nothing of the
 * session.
 */
#ifndef GATLING_FTP_LIST_H
#define GATLING_FTP_LIST_H

#include "ftp_parse.h"
#include "site/fs.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* a listing of dirfd, the directory path (from at: its symlinks
   are checked with fs_public), for LIST, NLST or MLSD, into a malloc'd
   buffer.  0 or -1. */
int ftp_list_dir(int dirfd, const fs_at_t *at, const char *path, ftp_verb_t how, int64_t now,
                 char **out, size_t *len);
/* one entry's line: "facts; name" (MLST, MLSD), ls -l (LIST),
   the name (NLST).  Bytes written (without NUL) or -1 if it did not fit. */
long ftp_list_line(char *out, size_t cap, ftp_verb_t how, const struct stat *st, const char *name,
                   int64_t now);


#endif
