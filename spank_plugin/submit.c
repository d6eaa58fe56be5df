/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* submit.c - is the job being submitted an array job? */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "submit.h"

#define SCRIPT_SCAN_MAX (1024 * 1024)

/* sbatch's short options that take an argument (Slurm 22.05). */
static const char short_with_arg[] = "AaBbCcDdeFGiJLMmNnopqSTtwx";

/* Long options that never take a separate argument word: no argument, or
 * an optional one given only as --opt=value.
 */
static const char *long_no_sep_arg[] = {
    "contiguous", "container", "exclusive", "export", "get-user-env",
    "help", "hold", "ignore-pbs", "mem", "nice", "no-kill", "no-requeue",
    "overcommit", "oversubscribe", "parsable", "propagate", "quiet",
    "reboot", "requeue", "spread-job", "test-only", "usage",
    "use-min-nodes", "verbose", "version", "wait", "kill-on-invalid-dep",
    "exact", "no-kill", NULL,
};

static bool long_takes_separate_arg (const char *name, size_t len)
{
    for (int i = 0; long_no_sep_arg[i]; i++)
        if (strlen (long_no_sep_arg[i]) == len
            && !strncmp (long_no_sep_arg[i], name, len))
            return false;
    return true;
}

static bool is_array_long (const char *name, size_t len)
{
    /* getopt_long accepts unambiguous prefixes: --arr, --array */
    return len >= 3 && len <= 5 && !strncmp (name, "array", len);
}

int submit_argv_array (int argc, char *const argv[], int *script, int *wrap)
{
    int array = 0;

    *script = 0;
    *wrap = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (!strcmp (a, "--")) {
            if (i + 1 < argc)
                *script = i + 1;
            break;
        }
        if (a[0] == '-' && a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr (name, '=');
            size_t len = eq ? (size_t) (eq - name) : strlen (name);

            if (is_array_long (name, len))
                array = 1;
            if (len == 4 && !strncmp (name, "wrap", 4))
                *wrap = 1;
            if (!eq && long_takes_separate_arg (name, len))
                i++;                    /* the value is the next word */
            continue;
        }
        if (a[0] == '-' && a[1]) {
            /* bundled short options: -Hv, -a1-4, -N 2 */
            for (const char *c = a + 1; *c; c++) {
                if (strchr (short_with_arg, *c)) {
                    if (*c == 'a')
                        array = 1;
                    if (c[1] == '\0')
                        i++;            /* value in the next word */
                    break;
                }
            }
            continue;
        }
        *script = i;                    /* the first operand */
        break;
    }
    return array;
}

/* Split one #SBATCH line into words (whitespace; a "#" word ends it). */
static int line_has_array (const char *p, const char *end)
{
    while (p < end) {
        const char *w;
        size_t len;

        while (p < end && isspace ((unsigned char) *p))
            p++;
        if (p >= end || *p == '#')
            break;
        w = p;
        while (p < end && !isspace ((unsigned char) *p))
            p++;
        len = p - w;
        if (len >= 2 && w[0] == '-' && w[1] == 'a')
            return 1;                   /* -a 1-4, -a1-4 */
        if (len > 2 && w[0] == '-' && w[1] == '-') {
            const char *eq = memchr (w + 2, '=', len - 2);
            size_t nlen = eq ? (size_t) (eq - w - 2) : len - 2;
            if (is_array_long (w + 2, nlen))
                return 1;
        }
    }
    return 0;
}

int submit_script_array (const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    bool first = true;

    while (p < end) {
        const char *nl = memchr (p, '\n', end - p);
        const char *le = nl ? nl : end;
        const char *q = p;

        while (q < le && isspace ((unsigned char) *q))
            q++;
        if (first && le - p >= 2 && p[0] == '#' && p[1] == '!')
            ;                           /* the interpreter line */
        else if (q == le)
            ;                           /* blank */
        else if (*q != '#')
            break;                      /* the first command ends them */
        else if (le - q >= 7 && !strncmp (q, "#SBATCH", 7)
                 && line_has_array (q + 7, le))
            return 1;
        first = false;
        p = nl ? nl + 1 : end;
    }
    return 0;
}

int submit_self_argv (char **bufp, char ***argvp)
{
    char *buf = NULL, **argv = NULL;
    size_t len = 0, cap = 0;
    int fd, argc = 0;

    if ((fd = open ("/proc/self/cmdline", O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    for (;;) {
        ssize_t n;
        if (len + 4096 > cap) {
            char *nb = realloc (buf, cap + 65536);
            if (!nb)
                goto error;
            buf = nb;
            cap += 65536;
        }
        n = read (fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto error;
        if (n == 0)
            break;
        len += n;
    }
    close (fd);
    fd = -1;
    buf[len] = '\0';
    for (size_t i = 0; i < len; i++)
        if (buf[i] == '\0')
            argc++;
    if (!(argv = calloc (argc + 1, sizeof (*argv))))
        goto error;
    for (size_t i = 0, k = 0; i < len && (int) k < argc; k++) {
        argv[k] = buf + i;
        i += strlen (buf + i) + 1;
    }
    *bufp = buf;
    *argvp = argv;
    return argc;
error:
    if (fd >= 0)
        close (fd);
    free (buf);
    free (argv);
    return -1;
}

int submit_is_array (void)
{
    const char *inx = getenv ("SBATCH_ARRAY_INX");
    char *buf = NULL, **argv = NULL;
    int argc, script, wrap, rc;

    if (inx && *inx)
        return 1;
    if ((argc = submit_self_argv (&buf, &argv)) < 0)
        return -1;
    rc = submit_argv_array (argc, argv, &script, &wrap);
    if (rc == 0) {
        if (script > 0) {
            int fd = open (argv[script], O_RDONLY | O_CLOEXEC | O_NOCTTY);
            char *text;
            ssize_t n;

            rc = -1;
            if (fd >= 0 && (text = malloc (SCRIPT_SCAN_MAX))) {
                if ((n = read (fd, text, SCRIPT_SCAN_MAX)) >= 0)
                    rc = submit_script_array (text, n);
                free (text);
            }
            if (fd >= 0)
                close (fd);
        }
        else if (!wrap)
            rc = -1;                    /* the script comes on stdin */
    }
    free (argv);
    free (buf);
    return rc;
}

/* The minimum of a node count "N" or "N-M" (0 if not a count). */
static long min_nodes (const char *v)
{
    char *end;
    long n = strtol (v, &end, 10);

    if (end == v || n < 0)
        return 0;
    return n;
}

/* -N/--nodes in a word list (argv or one #SBATCH line's words). */
static long words_nodes (int argc, char *const argv[])
{
    long n = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp (a, "--nodes=", 8))
            n = min_nodes (a + 8);
        else if (!strcmp (a, "--nodes") && i + 1 < argc)
            n = min_nodes (argv[++i]);
        else if (!strcmp (a, "-N") && i + 1 < argc)
            n = min_nodes (argv[++i]);
        else if (!strncmp (a, "-N", 2) && a[2])
            n = min_nodes (a + 2);
    }
    return n;
}

long submit_nodes (void)
{
    const char *env = getenv ("SBATCH_NNODES");
    char *buf = NULL, **argv = NULL;
    int argc;
    long n = 0;

    if (env)
        n = min_nodes (env);
    if ((argc = submit_self_argv (&buf, &argv)) > 0) {
        int script, wrap;
        long m;

        (void) submit_argv_array (argc, argv, &script, &wrap);
        /* the submit command's own options, before the script */
        if ((m = words_nodes (script > 0 ? script : argc, argv)) > 0)
            n = m;
        else if (script > 0) {
            /* #SBATCH -N lines of the script */
            FILE *f = fopen (argv[script], "re");
            char line[4096];
            while (f && fgets (line, sizeof (line), f)) {
                char *w[64];
                int nw = 1;
                if (line[0] != '#' || strncmp (line, "#SBATCH", 7)) {
                    if (line[0] == '#' || line[0] == '\n')
                        continue;
                    break;
                }
                w[0] = "x";
                for (char *t = strtok (line + 7, " \t\n"); t && nw < 64;
                     t = strtok (NULL, " \t\n"))
                    w[nw++] = t;
                if ((m = words_nodes (nw, w)) > 0)
                    n = m;
            }
            if (f)
                fclose (f);
        }
    }
    free (argv);
    free (buf);
    return n;
}
