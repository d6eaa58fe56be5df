/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* hangfs.c - a FUSE file system whose flush never answers (a test's
 * hostile user)
 *
 *   hangfs [-g] [-a] MOUNTPOINT
 *
 * Mounted by an unprivileged user (fusermount3), as any user can on a
 * stock install where /dev/fuse is 0666.  The root holds one file, "f"
 * (64 bytes of 'x', mode 0644).  Open and read answer; flush -- sent on
 * every close(2) of a descriptor of f, in whichever process closes it --
 * is never answered, so that close sleeps in the kernel until the daemon
 * dies or the connection is aborted.  The attacker opens f and passes
 * the descriptor to a daemon that will close it (tests/t/0140).  With -g
 * no GETATTR or LOOKUP is answered either: a stat(2) of the mount point,
 * or of any path through it, sleeps the same way (the attacker mounts it
 * over a directory of the GFS after opening a file beneath it).  With -a
 * it is mounted allow_other (which /etc/fuse.conf's user_allow_other
 * lets users do): without it the kernel refuses other users, root too,
 * every request on it but the flush of a descriptor they were given.
 * Runs in
 * the foreground, single-threaded; ends on SIGTERM (its mount goes with
 * it).
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_INO 2
#define FILE_SIZE 64

static int hang_attr; /* -g */

static void fill (fuse_ino_t ino, struct stat *st)
{
    memset (st, 0, sizeof (*st));
    st->st_ino = ino;
    st->st_uid = getuid ();
    st->st_gid = getgid ();
    if (ino == FUSE_ROOT_ID) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
    }
    else {
        st->st_mode = S_IFREG | 0644;
        st->st_nlink = 1;
        st->st_size = FILE_SIZE;
    }
}

static void hang_lookup (fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fuse_entry_param e;

    if (hang_attr) {
        fprintf (stderr, "hangfs: a lookup came; not answering it\n");
        return;
    }
    if (parent != FUSE_ROOT_ID || strcmp (name, "f")) {
        fuse_reply_err (req, ENOENT);
        return;
    }
    memset (&e, 0, sizeof (e));
    e.ino = FILE_INO;
    fill (FILE_INO, &e.attr);
    fuse_reply_entry (req, &e);
}

static void hang_getattr (fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi)
{
    struct stat st;

    (void) fi;
    if (hang_attr) {
        fprintf (stderr, "hangfs: a getattr came; not answering it\n");
        return;
    }
    if (ino != FUSE_ROOT_ID && ino != FILE_INO) {
        fuse_reply_err (req, ENOENT);
        return;
    }
    fill (ino, &st);
    fuse_reply_attr (req, &st, 0);
}

static void hang_open (fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
    if (ino != FILE_INO)
        fuse_reply_err (req, EISDIR);
    else
        fuse_reply_open (req, fi);
}

static void hang_read (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    char buf[FILE_SIZE];

    (void) ino;
    (void) fi;
    memset (buf, 'x', sizeof (buf));
    if (off >= FILE_SIZE)
        size = 0;
    else if (size > (size_t) (FILE_SIZE - off))
        size = (size_t) (FILE_SIZE - off);
    fuse_reply_buf (req, buf + (off < FILE_SIZE ? off : 0), size);
}

/* never answered: the request stays in flight until the daemon dies */
static void hang_flush (fuse_req_t req, fuse_ino_t ino,
                        struct fuse_file_info *fi)
{
    (void) req;
    (void) ino;
    (void) fi;
    fprintf (stderr, "hangfs: a flush came; not answering it\n");
}

static void hang_release (fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi)
{
    (void) ino;
    (void) fi;
    fuse_reply_err (req, 0);
}

static const struct fuse_lowlevel_ops ops = {
    .lookup = hang_lookup,
    .getattr = hang_getattr,
    .open = hang_open,
    .read = hang_read,
    .flush = hang_flush,
    .release = hang_release,
};

int main (int argc, char **argv)
{
    char *fargv[] = { argv[0], NULL, NULL, NULL };
    struct fuse_args args = FUSE_ARGS_INIT (1, fargv);
    struct fuse_session *se;
    int rc = 1;

    while (argc > 2 && argv[1][0] == '-') {
        if (!strcmp (argv[1], "-g"))
            hang_attr = 1;
        else if (!strcmp (argv[1], "-a")) {
            fargv[1] = "-o";
            fargv[2] = "allow_other";
            args.argc = 3;
        }
        else
            break;
        argv++;
        argc--;
    }
    if (argc != 2) {
        fprintf (stderr, "usage: hangfs [-g] [-a] MOUNTPOINT\n");
        return 2;
    }
    if (!(se = fuse_session_new (&args, &ops, sizeof (ops), NULL)))
        return 1;
    if (fuse_set_signal_handlers (se) == 0) {
        if (fuse_session_mount (se, argv[1]) == 0) {
            fprintf (stderr, "hangfs: mounted at %s\n", argv[1]);
            rc = fuse_session_loop (se) != 0;
            fuse_session_unmount (se);
        }
        fuse_remove_signal_handlers (se);
    }
    fuse_session_destroy (se);
    return rc;
}
