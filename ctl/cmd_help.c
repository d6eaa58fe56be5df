/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cmd_help.c - tierctl help, tierctl version */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>

#include "ctl.h"

int cmd_help (struct ctl *ctl, int argc, char **argv)
{
    const struct ctl_cmd *cmd;

    if (argc > 2) {
        fprintf (stderr, "usage: tierctl help [COMMAND]\n");
        return CTL_USAGE;
    }
    if (argc == 2) {
        if (!(cmd = ctl_cmd_find (argv[1]))) {
            fprintf (stderr, "tierctl: unknown command '%s'\n", argv[1]);
            return CTL_USAGE;
        }
        printf ("usage: tierctl %s %s\n\n%s.\n", cmd->name, cmd->usage,
                cmd->summary);
        if (cmd->help)
            printf ("\n%s\n", cmd->help);
        return CTL_OK;
    }
    printf ("usage: tierctl [-c FILE] [-N NODE] [--json] COMMAND [ARGS]\n\n"
            "Global options:\n"
            "  -c, --conf FILE   tier.conf to read (default %s)\n"
            "  -N, --node NODE   the node whose agent to ask\n"
            "      --json        machine-readable output\n\n"
            "Commands:\n", ctl ? ctl->conf_path : "");
    for (cmd = ctl_cmds; cmd->name; cmd++)
        printf ("  %-10s %s\n", cmd->name, cmd->summary);
    printf ("\nExit status: 0 ok, 1 error, 2 usage.\n");
    return CTL_OK;
}

int cmd_version (struct ctl *ctl, int argc, char **argv)
{
    printf ("tierctl %s\n", PACKAGE_VERSION);
    return CTL_OK;
}
