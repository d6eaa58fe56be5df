/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* args.c - the plugin's arguments in plugstack.conf */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "lib/conf.h"
#include "lib/paths.h"
#include "args.h"

#ifndef TIER_SYSCONFDIR
#define TIER_SYSCONFDIR "/etc/tier"
#endif
#ifndef TIER_PKGLIBDIR
#define TIER_PKGLIBDIR "/usr/lib/tier"
#endif

static int set_path (const char *arg, const char *value, char *out,
                     size_t size, tier_error_t *error)
{
    if (value[0] != '/' || tier_path_has_dotdot (value)) {
        errno = EINVAL;
        return tier_errprintf (error, "plugstack argument %s: '%.200s' is "
                               "not an absolute path without '..'",
                               arg, value);
    }
    if (tier_path_normalize (value, out, size) < 0)
        return tier_errprintf (error, "plugstack argument %s: path too long",
                               arg);
    return 0;
}

int args_parse (int ac, char **av, struct tier_args *args, tier_error_t *error)
{
    memset (args, 0, sizeof (*args));
    (void) snprintf (args->conf, sizeof (args->conf), "%s/tier.conf",
                     TIER_SYSCONFDIR);
    (void) snprintf (args->preload, sizeof (args->preload),
                     "%s/libtier_preload.so", TIER_PKGLIBDIR);
    args->default_mode = TIER_CACHE_OFF;

    for (int i = 0; i < ac; i++) {
        const char *a = av[i];
        const char *eq = strchr (a, '=');

        if (!eq) {
            errno = EINVAL;
            return tier_errprintf (error, "plugstack argument '%.200s': "
                                   "expected key=value (conf=, default=, "
                                   "preload=)", a);
        }
        if (!strncmp (a, "conf=", 5)) {
            char tmp[PATH_MAX];
            if (set_path ("conf", eq + 1, args->conf, sizeof (args->conf),
                          error) < 0)
                return -1;
            /* %n: the node's NodeName, expanded on the node */
            if (tier_conf_expand_node (args->conf, "n", tmp,
                                       sizeof (tmp)) < 0) {
                errno = EINVAL;
                return tier_errprintf (error, "plugstack argument conf: "
                                       "only %%n and %%%% may follow a %%");
            }
        }
        else if (!strncmp (a, "preload=", 8)) {
            if (set_path ("preload", eq + 1, args->preload,
                          sizeof (args->preload), error) < 0)
                return -1;
        }
        else if (!strncmp (a, "default=", 8)) {
            tier_error_t e;
            if (opts_cache_parse (eq + 1, &args->default_mode, &e) < 0) {
                errno = EINVAL;
                return tier_errprintf (error, "plugstack argument default: "
                                       "'%.64s' is not one of off, auto, "
                                       "required", eq + 1);
            }
        }
        else {
            errno = EINVAL;
            return tier_errprintf (error, "unknown plugstack argument "
                                   "'%.*s' (known: conf, default, preload)",
                                   (int) (eq - a > 64 ? 64 : eq - a), a);
        }
    }
    return 0;
}
