/*
 * acme_store — the ACME client's files: written whole to a temporary name
 * (starting with '.'), fsynced, renamed; certificates installed into the -C
 * directory as acme.h says (NAME -> .acme/NAME.SERIAL/, swapped by rename of
 * a new symlink), and the old versions pruned.
 */
#ifndef GATLING_ACME_STORE_H
#define GATLING_ACME_STORE_H

#include <stddef.h>
#include <sys/types.h>

/* Write data to dirfd/name through ".name.tmp", fsynced, renamed, and its
   directory fsynced: 0, or -1 with errno set (nothing of the new file left
   behind). */
int acme_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode);

/* Read dirfd/name whole (at most max bytes) into a malloc'd NUL-terminated
   buffer; NULL with errno set. */
char *acme_read_file(int dirfd, const char *name, size_t max, size_t *len);

/* mkdir at/path (mode), or find the directory there (not a link): 0, or -1
   with errno set. */
int acme_make_dir(int at, const char *path, mode_t mode);

/* The mode of a challenge file that --cluster's side process took from
   another node (acme_cluster_acme.c): the client's own are 0644. */
#define ACME_TAKEN_MODE 0444

/* Remove the files in at/path (not below), but those of mode keep_mode
   when it is not 0: the challenges a killed client left, at start-up,
   and not the other nodes' that the side process keeps. */
void acme_empty_dir(int at, const char *path, unsigned keep_mode);

/*
 * Install a chain and its key for name in the -C directory (tls_fd):
 * .acme/NAME.SERIAL/{fullchain,privkey}.pem, fsynced, then NAME swapped to
 * point at it, then the versions other than this one and the previous one
 * removed.  0, or -1 with errno set and the old certificate untouched.
 */
int acme_install(int tls_fd, const char *name, const char *serial, const char *chain,
                 size_t chain_len, const char *key, size_t key_len);

/* 1 when tls_fd/name is missing or the client's own symlink (.acme/NAME.
   SERIAL, acme_install's): what the client may replace.  Not a directory or
   file (an admin's pair), nor a symlink elsewhere (an admin's, to certbot's
   live/NAME say), which would be replaced without a word. */
int acme_replaceable(int tls_fd, const char *name);

#endif
