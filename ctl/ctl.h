/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* ctl.h - tierctl: the subcommand table and what every command shares */
#ifndef TIER_CTL_H
#define TIER_CTL_H

#include <jansson.h>
#include <stdbool.h>

struct tier_conf;

/* Exit codes of every subcommand. */
enum {
    CTL_OK = 0,
    CTL_ERROR = 1,      /* the command ran and failed */
    CTL_USAGE = 2,      /* bad command line */
};

struct ctl {
    const char *prog;           /* "tierctl" */
    const char *conf_path;      /* -c FILE, or the installed tier.conf */
    const char *node;           /* -N NODE, else SLURMD_NODENAME/hostname */
    bool json;                  /* --json */
    struct tier_conf *conf;     /* loaded on first use (ctl_conf) */
};

struct ctl_cmd {
    const char *name;
    const char *usage;          /* after "tierctl NAME " */
    const char *summary;        /* one line for `tierctl help` */
    const char *help;           /* the rest of `tierctl help NAME` */
    int (*fn) (struct ctl *ctl, int argc, char **argv);
};

/* The table, terminated by an entry with name NULL (main.c). */
extern const struct ctl_cmd ctl_cmds[];
const struct ctl_cmd *ctl_cmd_find (const char *name);

/* Print "tierctl NAME: usage: ..." to stderr and return CTL_USAGE. */
int ctl_usage (const struct ctl_cmd *cmd);

/* ctl_util.c */
const char *ctl_node (struct ctl *ctl);
struct tier_conf *ctl_conf (struct ctl *ctl);
/* Send req (consumed) to the node's agent; the reply, or NULL after an
 * error message on stderr. */
json_t *ctl_call (struct ctl *ctl, json_t *req);
void ctl_print_json (json_t *o);

int cmd_help (struct ctl *ctl, int argc, char **argv);
int cmd_jobs (struct ctl *ctl, int argc, char **argv);
int cmd_counters (struct ctl *ctl, int argc, char **argv);
int cmd_ping (struct ctl *ctl, int argc, char **argv);
int cmd_status (struct ctl *ctl, int argc, char **argv);
int cmd_stats (struct ctl *ctl, int argc, char **argv);
int cmd_enable (struct ctl *ctl, int argc, char **argv);
int cmd_disable (struct ctl *ctl, int argc, char **argv);
int cmd_version (struct ctl *ctl, int argc, char **argv);
int cmd_predict (struct ctl *ctl, int argc, char **argv);
int cmd_set (struct ctl *ctl, int argc, char **argv);       /* policies */
int cmd_unset (struct ctl *ctl, int argc, char **argv);
int cmd_show (struct ctl *ctl, int argc, char **argv);
int cmd_list (struct ctl *ctl, int argc, char **argv);
int cmd_prefetch (struct ctl *ctl, int argc, char **argv);  /* replicas */
int cmd_evict (struct ctl *ctl, int argc, char **argv);
int cmd_replicas (struct ctl *ctl, int argc, char **argv);
int cmd_outputs (struct ctl *ctl, int argc, char **argv);   /* stage-out */
int cmd_flush (struct ctl *ctl, int argc, char **argv);
int cmd_wait (struct ctl *ctl, int argc, char **argv);

#endif /* !TIER_CTL_H */
