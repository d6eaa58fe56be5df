/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* jobns_tool.c - drive lib/jobns from integration tests (root)
 *
 *   jobns_tool create BASE JOBID UID      make (fresh) the job's namespace
 *   jobns_tool run BASE JOBID CMD...      run CMD inside it
 *   jobns_tool pids BASE JOBID            list processes inside it
 *   jobns_tool teardown BASE JOBID        0 gone, 1 deferred, 2 error
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/jobns.h"

int main (int argc, char **argv)
{
    tier_error_t error = { { 0 } };
    uint32_t id;

    if (argc < 4) {
        fprintf (stderr, "usage: jobns_tool create|run|pids|teardown BASE "
                 "JOBID [...]\n");
        return 2;
    }
    id = (uint32_t) strtoul (argv[3], NULL, 10);
    if (!strcmp (argv[1], "create") && argc == 5) {
        if (tier_ns_base_prepare (argv[2], &error) < 0
            || tier_ns_create (argv[2], id, (uid_t) atoi (argv[4]), true,
                               &error) < 0) {
            fprintf (stderr, "%s\n", error.text);
            return 2;
        }
        return 0;
    }
    if (!strcmp (argv[1], "run") && argc >= 5) {
        if (tier_ns_enter (argv[2], id, &error) < 0) {
            fprintf (stderr, "%s\n", error.text);
            return 2;
        }
        execvp (argv[4], argv + 4);
        perror (argv[4]);
        return 127;
    }
    if (!strcmp (argv[1], "pids")) {
        static pid_t pids[TIER_NS_PIDS_MAX];
        int n = tier_ns_pids (argv[2], id, pids, TIER_NS_PIDS_MAX);
        for (int i = 0; i < n; i++)
            printf ("%d\n", (int) pids[i]);
        return n < 0 ? 2 : 0;
    }
    if (!strcmp (argv[1], "teardown")) {
        int rc = tier_ns_teardown (argv[2], id, 1000, &error);
        if (rc)
            fprintf (stderr, "%s\n", error.text);
        return rc < 0 ? 2 : rc;
    }
    fprintf (stderr, "jobns_tool: unknown command %s\n", argv[1]);
    return 2;
}
