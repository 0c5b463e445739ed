/*
 * mime — Content-Type from a file name's extension.
 *
 * The table comes from a mime.types file (/etc/mime.types on Debian) when
 * one is readable, else from a built-in list; text types get
 * "; charset=utf-8".  Extensions compare case-insensitively.
 */
#ifndef GATLING_MIME_H
#define GATLING_MIME_H

#include <stddef.h>

typedef struct mime_table mime_table_t;

/*
 * Load file (NULL: /etc/mime.types, silently falling back to the built-in
 * table if it is missing).  Returns NULL with errno set if an explicitly
 * named file cannot be read (EINVAL: it is not a regular file; as root, the
 * rule of site/privfs.h for a file root reads: ELOOP, EPERM, EMLINK), or on
 * ENOMEM.
 */
mime_table_t *mime_load(const char *file);
void mime_free(mime_table_t *t);

/* The Content-Type for name[0..n); "application/octet-stream" if unknown. */
const char *mime_lookup(const mime_table_t *t, const char *name, size_t n);

#endif
