/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* procfd.c - the files a process has open, as /proc shows them
 *
 * See procfd.h.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "procfd.h"

bool procfd_each (pid_t pid, procfd_f fn, void *arg)
{
    char dir[64], path[512], target[PATH_MAX], line[128];
    struct dirent *de;
    bool done = false;
    DIR *d;

    (void) snprintf (dir, sizeof (dir), "/proc/%d/fd", (int) pid);
    if (!(d = opendir (dir)))
        return false;
    while (!done && (de = readdir (d))) {
        unsigned long flags = 0;
        ssize_t n;
        FILE *f;

        if (de->d_name[0] == '.')
            continue;
        (void) snprintf (path, sizeof (path), "/proc/%d/fdinfo/%s", (int) pid,
                         de->d_name);
        if (!(f = fopen (path, "re")))
            continue;
        while (fgets (line, sizeof (line), f))
            if (sscanf (line, "flags: %lo", &flags) == 1)
                break;
        fclose (f);
        (void) snprintf (path, sizeof (path), "%s/%s", dir, de->d_name);
        if ((n = readlink (path, target, sizeof (target) - 1)) <= 0)
            continue;
        target[n] = '\0';
        done = fn (target, flags, arg);
    }
    closedir (d);
    return done;
}
