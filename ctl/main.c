/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* main.c - tierctl: global options, then one subcommand from the table */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/conf.h"
#include "lib/log.h"
#include "ctl.h"

#ifndef TIER_SYSCONFDIR
#define TIER_SYSCONFDIR "/etc/tier"
#endif

const struct ctl_cmd ctl_cmds[] = {
    { "help", "[COMMAND]", "show help for tierctl or one command",
      NULL, cmd_help },
    { "version", "", "print the tierctl version", NULL, cmd_version },
    { "ping", "[--json]", "ask the node's agent whether it runs",
      "Prints the agent's version, pid, uptime and whether tier is enabled\n"
      "on the node (-N NODE chooses the node).", cmd_ping },
    { "status", "[--json]", "the node's agent, tiers and jobs",
      "The agent's version and uptime; each tier with its path, whether it\n"
      "is real persistent memory or emulated, capacity, use and\n"
      "reservations; the jobs it knows; the node's GFS streams (GfsStreams)\n"
      "and each user's share (UserBandwidth) with its own accounting (your\n"
      "own only, unless you are root).", cmd_status },
    { "set",
      "policy DIR ROLE [--ttl D] [--revalidate D] [--keep W] [--tier T] "
      "[--size S] [--window S] [--block S] [--prefetch P] [--stage S] "
      "[--comment TEXT]",
      "say what a directory is, for your later jobs (a policy)",
      "ROLE is batch (read-only inputs shared by the batch: a BB replica\n"
      "cache), pipeline (private intermediates: node-local NVDIMM), endpoint\n"
      "(inputs and final outputs: staged and migrated) or none (the plain\n"
      "GFS).  --ttl and --revalidate (batch): replica retention and how\n"
      "often the source is rechecked (30s, 10m, 7d); --keep (pipeline):\n"
      "never, on-failure, always; --size (pipeline): scratch reservation\n"
      "(16G); --tier: bb or nvdimm; --window, --block, --prefetch (off,\n"
      "sequential, stride): the NVDIMM block cache; --stage (endpoint): out\n"
      "(default: an output directory, migrated to the GFS) or in (an input:\n"
      "the tree is staged in as a read-only snapshot when a job's first\n"
      "step starts on a node).  DIR is made absolute\n"
      "and resolved; it must lie under AllowedRoots and outside tier's own\n"
      "directories, and nothing may nest inside a pipeline or endpoint\n"
      "directory.  Stored in SharedStateDir/users/YOU/policies.json; jobs\n"
      "that start afterwards follow it, running jobs keep theirs.  See\n"
      "doc/policies.md.", cmd_set },
    { "unset", "policy DIR", "remove your policy of a directory",
      "Removes DIR from your policies; site policies stay.", cmd_unset },
    { "show", "policy [PATH] [--job ID] [--user NAME] [--json]",
      "the effective policy of a path, and where it came from",
      "The policy a job started now would apply to PATH (default: the\n"
      "current directory): role, attributes with their defaults, and the\n"
      "layer (site, user), file and directory it came from.  With --job ID:\n"
      "the policy the job froze when it started (without PATH: its whole\n"
      "set).  --user NAME reads another user's store (root).", cmd_show },
    { "list", "policies [--all-layers] [--user NAME] [--json]",
      "list the policies in force for your jobs",
      "The policies a job started now would apply (site and yours), with\n"
      "their layer and source.  --all-layers lists every policy of every\n"
      "layer with its status (in force, overridden, refused and why) and\n"
      "the site files that were skipped.", cmd_list },
    { "stats",
      "--batch ID | --job ID | --user[=NAME] [--nodes] [--svg FILE] [--json]",
      "what the tiers did for a batch (a job array) or a job, over all nodes",
      "Per role (endpoint, pipeline, batch): operations, hits, misses, hit\n"
      "rate, bytes served by each tier, GFS bytes read and written, GFS\n"
      "traffic avoided, metadata operations; stage-in/out, migrations and\n"
      "scratch.  Live while the batch runs (nodes publish every\n"
      "StatsInterval) and after it ends (for StatsRetention).  --nodes adds\n"
      "one row per node; --user lists your batches; --svg draws the batch\n"
      "over time.  Only the batch's owner and root can read it.  The JSON\n"
      "schema is in doc/stats.md.", cmd_stats },
    { "prefetch", "[--bind] PATH... [--json]",
      "copy batch-shared files to the burst buffer now",
      "Makes the BB replicas of files (or whole trees) under your batch\n"
      "directories before a batch starts (or while it runs), so that its\n"
      "first tasks hit too.  tierctl opens every file itself, with your\n"
      "credentials, and hands it to the node's agent, which copies each\n"
      "file version once per burst buffer (other nodes sharing the BB use\n"
      "the same replica).  The policy of each path decides (ttl, share):\n"
      "the one of the job tierctl runs in, else the site and user policies\n"
      "your next job would follow.  Symlinks are not followed.  With\n"
      "--bind (eager mode), each directory, once every file of it has a\n"
      "replica, is bound read-only over its path in the namespace of every\n"
      "later job of yours that has it as a batch directory -- as long as\n"
      "the source is unchanged (checked when each job starts): every\n"
      "binary then reads the replicas, static ones and executables too.",
      cmd_prefetch },
    { "evict", "PATH... [--json]", "drop your BB replicas of files under PATH",
      "Removes the replicas this node knows of for files under each PATH\n"
      "(yours; root: everyone's).  Open replicas stay readable by whoever\n"
      "has them open; the next open fetches the source anew.", cmd_evict },
    { "replicas", "[PATH] [--json]", "list your replicas this node knows of",
      "Each replica with its size, how often it was opened, whether this\n"
      "node fetched it (and so evicts it: LRU past BBCapacity, after the\n"
      "policy's ttl), when, and its source.", cmd_replicas },
    { "outputs", "--job ID [--json]",
      "a job's output files on this node and where they stand",
      "Each file written under the job's output directories (--tier-\n"
      "stage-out, endpoint policies) on this node: on the GFS (with its\n"
      "size and SHA-256), pending, failed (and why: it is kept on the\n"
      "write cache and retried) or in conflict (somebody else changed the\n"
      "GFS file during the job: kept, never overwritten).  The job's\n"
      "owner, root and SlurmUser.  Each node also writes its manifest to\n"
      "SharedStateDir/users/USER/jobs/JOB.RESTART/outputs-NODE.json.",
      cmd_outputs },
    { "flush", "--job ID [--timeout S] [--json]",
      "retry a job's outputs that did not reach the GFS, now",
      "Publishes what the job's outputs hold and retries failed ones at\n"
      "once (say, after the GFS directory was made writable again); waits\n"
      "up to S seconds (default 30).  Exit status 1 while some are left.",
      cmd_flush },
    { "wait", "--job ID [--timeout S] [--json]",
      "wait until a job's outputs on this node are all on the GFS",
      "Exit status 0 once every output is on the GFS (or in conflict),\n"
      "1 if the timeout passed first.", cmd_wait },
    { "jobs", "[--json]", "list the jobs the node's agent registered",
      "A user sees their own jobs; root and SlurmUser see all.  States:\n"
      "running, ended (its epilog ran), reconciled (it ended while the agent\n"
      "was down).", cmd_jobs },
    { "counters", "[--job ID | --batch ID] [--json]",
      "show the raw counters of a job, a batch or the node",
      "Every tier's counters, split by role (endpoint, pipeline, batch), as\n"
      "the node's agent holds them (see doc/counters.md).", cmd_counters },
    { "enable", "", "let jobs on the node use tier again (root)", NULL,
      cmd_enable },
    { "disable", "",
      "make jobs on the node run untiered, without draining it (root)",
      NULL, cmd_disable },
    { "predict",
      "[--block B] [--nodes N,N...] [--periods T,T...] [--level L] "
      "[--measured FILE] [--svg FILE] [--json] TIMES.csv",
      "predict the slowest node's time with an extreme-value (GEV) model",
      "TIMES.csv has the header run,node,seconds (the benchmarks write it;\n"
      "'-' reads stdin).  Block maxima (one run = one block, or B nodes in\n"
      "file order with --block B), a GEV fit by maximum likelihood with\n"
      "profile-likelihood intervals at level L (default 0.95), return\n"
      "levels for the periods T in blocks (default 10,100,1000), and the\n"
      "slowest node of N nodes (default 2, 4, 8, 16 blocks' worth): the\n"
      "maximum of N/B blocks, cdf F(z)^(N/B), shown by its median and\n"
      "mean.  --measured FILE (same format) adds each node count's\n"
      "measured slowest-node median and the prediction error; --svg FILE\n"
      "writes a return-level plot.  See doc/evt.md.",
      cmd_predict },
    { NULL, NULL, NULL, NULL, NULL },
};

const struct ctl_cmd *ctl_cmd_find (const char *name)
{
    for (const struct ctl_cmd *c = ctl_cmds; c->name; c++)
        if (!strcmp (c->name, name))
            return c;
    return NULL;
}

int ctl_usage (const struct ctl_cmd *cmd)
{
    fprintf (stderr, "usage: tierctl %s %s\n", cmd->name, cmd->usage);
    fprintf (stderr, "Try 'tierctl help %s' for more.\n", cmd->name);
    return CTL_USAGE;
}

static void usage (FILE *f)
{
    fprintf (f, "usage: tierctl [-c FILE] [-N NODE] [--json] COMMAND [ARGS]\n"
                "Try 'tierctl help' for the commands.\n");
}

int main (int argc, char **argv)
{
    static const struct option longopts[] = {
        { "conf", required_argument, NULL, 'c' },
        { "node", required_argument, NULL, 'N' },
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    struct ctl ctl = {
        .prog = "tierctl",
        .conf_path = TIER_SYSCONFDIR "/tier.conf",
    };
    const struct ctl_cmd *cmd;
    int c;

    tier_log_init ("tierctl", TIER_LOG_STDERR, NULL, LOG_INFO);
    /* "+": stop at the first non-option, which is the subcommand */
    while ((c = getopt_long (argc, argv, "+c:N:jhV", longopts, NULL)) != -1) {
        switch (c) {
            case 'c':
                ctl.conf_path = optarg;
                break;
            case 'N':
                ctl.node = optarg;
                break;
            case 'j':
                ctl.json = true;
                break;
            case 'h':
                return cmd_help (&ctl, 0, NULL);
            case 'V':
                return cmd_version (&ctl, 0, NULL);
            default:
                usage (stderr);
                return CTL_USAGE;
        }
    }
    if (optind >= argc) {
        usage (stderr);
        return CTL_USAGE;
    }
    if (!(cmd = ctl_cmd_find (argv[optind]))) {
        fprintf (stderr, "tierctl: unknown command '%s'\n", argv[optind]);
        usage (stderr);
        return CTL_USAGE;
    }
    /* the subcommand sees argv[0] = its name, as getopt expects */
    optind++;
    {
        int sub_argc = argc - optind + 1;
        char **sub_argv = argv + optind - 1;
        int rc;
        /* --json after the command too, as each command's usage says
         * (up to a "--" that ends its options) */
        for (int i = 1, end = 0; i < sub_argc;) {
            end = end || !strcmp (sub_argv[i], "--");
            if (!end && !strcmp (sub_argv[i], "--json")) {
                ctl.json = true;
                memmove (&sub_argv[i], &sub_argv[i + 1],
                         (size_t) (sub_argc - i) * sizeof (*sub_argv));
                sub_argc--;
            }
            else
                i++;
        }
        optind = 0;                     /* reset getopt for the subcommand */
        rc = cmd->fn (&ctl, sub_argc, sub_argv);
        tier_conf_destroy (ctl.conf);
        return rc;
    }
}
