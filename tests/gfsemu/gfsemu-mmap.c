/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* gfsemu-mmap.c - copy FILE to stdout through a shared read-only mapping
 * (what BLAST does with its database), to test mmap through the emulator
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main (int argc, char **argv)
{
    struct stat st;
    const char *p;
    size_t done = 0;
    ssize_t n;
    int fd;

    if (argc != 2) {
        fprintf (stderr, "Usage: gfsemu-mmap FILE\n");
        return 2;
    }
    if ((fd = open (argv[1], O_RDONLY)) < 0 || fstat (fd, &st) < 0) {
        fprintf (stderr, "gfsemu-mmap: %s: %s\n", argv[1], strerror (errno));
        return 1;
    }
    if (st.st_size == 0)
        return 0;
    p = mmap (NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        fprintf (stderr, "gfsemu-mmap: mmap %s: %s\n", argv[1],
                 strerror (errno));
        return 1;
    }
    close (fd);
    while (done < (size_t)st.st_size) {
        if ((n = write (STDOUT_FILENO, p + done, (size_t)st.st_size - done))
            < 0) {
            if (errno == EINTR)
                continue;
            fprintf (stderr, "gfsemu-mmap: write: %s\n", strerror (errno));
            return 1;
        }
        done += (size_t)n;
    }
    munmap ((void *)p, (size_t)st.st_size);
    return 0;
}
