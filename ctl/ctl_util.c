/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* ctl_util.c - what tierctl's commands share: configuration, the agent */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/client.h"
#include "lib/conf.h"
#include "ctl.h"

static char node_buf[TIER_NODENAME_MAX];

const char *ctl_node (struct ctl *ctl)
{
    const char *n = ctl->node;

    if (!n)
        n = getenv ("SLURMD_NODENAME");
    if (!n && gethostname (node_buf, sizeof (node_buf)) == 0) {
        node_buf[sizeof (node_buf) - 1] = '\0';
        node_buf[strcspn (node_buf, ".")] = '\0';
        n = node_buf;
    }
    return n;
}

struct tier_conf *ctl_conf (struct ctl *ctl)
{
    struct tier_conf *conf;
    tier_error_t error;
    const char *node = ctl_node (ctl);

    if (ctl->conf)
        return ctl->conf;
    if (!node || !tier_conf_nodename_valid (node)) {
        fprintf (stderr, "tierctl: invalid node name '%s' (use -N NODE)\n",
                 node ? node : "");
        return NULL;
    }
    if (!(conf = tier_conf_create (node))) {
        fprintf (stderr, "tierctl: out of memory\n");
        return NULL;
    }
    /* tierctl has no privilege: any tier.conf will do, since the agent's
     * socket must be served by root anyway */
    if (tier_conf_load (conf, ctl->conf_path, false, &error) < 0) {
        fprintf (stderr, "tierctl: %s\n", error.text);
        tier_conf_destroy (conf);
        return NULL;
    }
    ctl->conf = conf;
    return conf;
}

json_t *ctl_call (struct ctl *ctl, json_t *req)
{
    struct tier_conf *conf = ctl_conf (ctl);
    char path[PATH_MAX], *body, *reply = NULL;
    size_t len = 0;
    tier_error_t error;
    json_error_t jerr;
    json_t *res;
    int fd;

    if (!conf) {
        json_decref (req);
        return NULL;
    }
    body = json_dumps (req, JSON_COMPACT);
    json_decref (req);
    if (!body || tier_conf_socket_path (conf, path, sizeof (path)) < 0) {
        free (body);
        fprintf (stderr, "tierctl: out of memory\n");
        return NULL;
    }
    if ((fd = tier_client_connect (path, (int) conf->agent_timeout_ms,
                                   &error)) < 0) {
        fprintf (stderr, "tierctl: node %s: %s\n", conf->node, error.text);
        free (body);
        return NULL;
    }
    if (tier_client_call (fd, body, NULL, 0, &reply, &len,
                          (int) conf->agent_timeout_ms, &error) < 0) {
        fprintf (stderr, "tierctl: %s\n", error.text);
        close (fd);
        free (body);
        return NULL;
    }
    close (fd);
    free (body);
    if (!(res = json_loadb (reply, len, 0, &jerr)))
        fprintf (stderr, "tierctl: the agent's reply is not JSON: %s\n",
                 jerr.text);
    free (reply);
    return res;
}

void ctl_print_json (json_t *o)
{
    char *s = json_dumps (o, JSON_INDENT (2) | JSON_SORT_KEYS);

    if (s) {
        printf ("%s\n", s);
        free (s);
    }
}
