/*
 * ftp_xfer — the data half of an FTP session: the data link (PASV/EPSV
 * listeners, PORT/EPRT connections), the transfers and their deadlines, and
 * the paths both halves open.  ftp.c (the control half) calls these; they
 * call only ftp_sess.c and ftp_list.c back, never ftp.c.
 */
#ifndef GATLING_FTP_XFER_H
#define GATLING_FTP_XFER_H

#include "ftp_sess.h"

/* Close the data link (the listener or the data socket), if any. */
void ftp_link_close(ftp_sess_t *s);
/* PASV, EPSV: a listener for the client's data connection, and the reply
   that names it (or why not).  0, or -1 when the reply did not fit. */
int ftp_cmd_pasv(ftp_sess_t *s, const ftp_cmd_t *cmd);
/* PORT, EPRT: where to connect for the next transfer, and the reply.  0,
   or -1 when the reply did not fit. */
int ftp_cmd_port(ftp_sess_t *s, const ftp_cmd_t *cmd);
/* RETR, STOR, APPE, LIST, NLST, MLSD on path (resolved): begins it, or
   waits for the data link. */
void ftp_cmd_transfer(ftp_sess_t *s, const ftp_cmd_t *cmd, const char *path);
/* End the transfer under way or waiting (if any): logged with code (0:
   426), and the reply "code why" unless code is 0. */
void ftp_xfer_abort(ftp_sess_t *s, int code, const char *why);
/* Readiness (or the deadline: events 0) of the data link's fd. */
void ftp_data_event(ftp_sess_t *s, int fd, unsigned events);
/* Open path (absolute, from ftp_path_join) below s->root as
   HTTP would serve it: no dotfiles, no password asked, only what everyone
   may read (fs_public: world-readable, directories also searchable, no
   closed directory on the way).  fd, or -1 with errno; *st gets its stat.
   RETR, SIZE, MDTM, MLST, STAT, CWD and the listings all open through it. */
int ftp_open(ftp_sess_t *s, const char *path, struct stat *st);
/* Where fs_public walks from for the session's paths. */
fs_at_t ftp_at(const ftp_sess_t *s);
/* For STOR, APPE, MKD: the world-writable directory that path's
   parent is, opened (its fd), with path's last segment in *name; -1 after
   replying why not (uploads off, not world-writable, a dotfile, ...). */
int ftp_upload_dir(ftp_sess_t *s, const char *path, const char **name);

#endif
