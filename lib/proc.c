/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* proc.c - a process's identity from /proc (see proc.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"

unsigned long long tier_proc_start (pid_t pid)
{
    char path[64], buf[1024], *p;
    ssize_t n;
    int fd;

    if (pid <= 0)
        return 0;
    (void) snprintf (path, sizeof (path), "/proc/%d/stat", (int) pid);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* "PID (COMM) S ...": the comm may hold anything, ')' included; field
     * 22 (starttime) is the 20th after the last ')' */
    if (!(p = strrchr (buf, ')')))
        return 0;
    for (int field = 2; field < 22 && p; field++)
        p = strchr (p + 1, ' ');
    return p ? strtoull (p + 1, NULL, 10) : 0;
}
