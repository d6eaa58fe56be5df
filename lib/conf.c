/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* conf.c - parse tier.conf */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"
#include "trust.h"
#include "units.h"
#include "conf.h"

#define CONF_FILE_MAX (1024 * 1024)

enum conf_type {
    CONF_PATH,          /* absolute path, normalised */
    CONF_PATH_EMPTY,    /* absolute path, or "" (feature off) */
    CONF_STRING,
    CONF_SIZE,
    CONF_MSEC,          /* a duration, stored in milliseconds */
    CONF_SEC,           /* a duration, stored in seconds */
    CONF_LOGLEVEL,
    CONF_BOOL,
    CONF_PATHLIST,      /* comma-separated absolute paths */
    CONF_COUNT,         /* an integer in 1..1024, stored as unsigned */
};

struct conf_key {
    const char *name;
    enum conf_type type;
    size_t offset;
    size_t count_offset;        /* CONF_PATHLIST only */
};

#define OFF(f) offsetof (struct tier_conf, f)

static const struct conf_key keys[] = {
    { "SocketDir", CONF_PATH, OFF (socket_dir), 0 },
    { "StateDir", CONF_PATH, OFF (state_dir), 0 },
    { "NamespaceDir", CONF_PATH, OFF (namespace_dir), 0 },
    { "SharedStateDir", CONF_PATH_EMPTY, OFF (shared_state_dir), 0 },
    { "LogFile", CONF_PATH_EMPTY, OFF (log_file), 0 },
    { "LogLevel", CONF_LOGLEVEL, OFF (log_level), 0 },
    { "NvdimmDir", CONF_PATH_EMPTY, OFF (nvdimm_dir), 0 },
    { "NvdimmCapacity", CONF_SIZE, OFF (nvdimm_capacity), 0 },
    { "ScratchDefaultSize", CONF_SIZE, OFF (scratch_default), 0 },
    { "GfsRootSquash", CONF_BOOL, OFF (gfs_root_squash), 0 },
    { "BBDir", CONF_PATH_EMPTY, OFF (bb_dir), 0 },
    { "BBCapacity", CONF_SIZE, OFF (bb_capacity), 0 },
    { "BBMinFree", CONF_SIZE, OFF (bb_min_free), 0 },
    { "BBUserMax", CONF_SIZE, OFF (bb_user_max), 0 },
    { "WriteCacheSize", CONF_SIZE, OFF (write_cache_size), 0 },
    { "WriteCacheUserMax", CONF_SIZE, OFF (write_cache_user_max), 0 },
    { "UserCgroupDir", CONF_PATH_EMPTY, OFF (user_cgroup_dir), 0 },
    { "UserCgroupMemory", CONF_SIZE, OFF (user_cgroup_memory), 0 },
    { "UserCgroupTasks", CONF_COUNT, OFF (user_cgroup_tasks), 0 },
    { "BBLockStale", CONF_SEC, OFF (bb_lock_stale), 0 },
    { "GfsStreams", CONF_COUNT, OFF (gfs_streams), 0 },
    { "UserBandwidth", CONF_SIZE, OFF (user_bandwidth), 0 },
    { "ClientsPerUser", CONF_COUNT, OFF (clients_per_user), 0 },
    { "FetchesPerUser", CONF_COUNT, OFF (fetches_per_user), 0 },
    { "ReplicaWait", CONF_SEC, OFF (replica_wait), 0 },
    { "AllowedRoots", CONF_PATHLIST, OFF (allowed_roots),
      OFF (allowed_roots_count) },
    { "TierdPath", CONF_PATH, OFF (tierd_path), 0 },
    { "SlurmUser", CONF_STRING, OFF (slurm_user), 0 },
    { "SlurmConf", CONF_PATH_EMPTY, OFF (slurm_conf), 0 },
    { "Enabled", CONF_BOOL, OFF (enabled), 0 },
    { "AgentTimeout", CONF_MSEC, OFF (agent_timeout_ms), 0 },
    { "StatsInterval", CONF_MSEC, OFF (stats_interval_ms), 0 },
    { "StatsRetention", CONF_SEC, OFF (stats_retention), 0 },
    { "StageInTimeout", CONF_SEC, OFF (stage_in_timeout), 0 },
    { "StageOutTimeout", CONF_SEC, OFF (stage_out_timeout), 0 },
    { "StallTimeout", CONF_SEC, OFF (stall_timeout), 0 },
    { "KeepTimeout", CONF_SEC, OFF (keep_timeout), 0 },
    { "MetricsFile", CONF_PATH_EMPTY, OFF (metrics_file), 0 },
    { "SitePolicyDir", CONF_PATH_EMPTY, OFF (site_policy_dir), 0 },
    { "EndpointCAFile", CONF_PATH_EMPTY, OFF (endpoint_ca_file), 0 },
    { "EndpointPartSize", CONF_SIZE, OFF (endpoint_part_size), 0 },
    { "EndpointMultipartThreshold", CONF_SIZE, OFF (endpoint_multipart), 0 },
};

#define NKEYS (sizeof (keys) / sizeof (keys[0]))

#ifndef TIER_SBINDIR
#define TIER_SBINDIR "/usr/sbin"
#endif
#ifndef TIER_SYSCONFDIR
#define TIER_SYSCONFDIR "/etc/tier"
#endif

bool tier_conf_nodename_valid (const char *name)
{
    size_t n;

    if (!name || !*name || (n = strlen (name)) >= TIER_NODENAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = name[i];
        if (!isalnum (c) && c != '.' && c != '_' && c != '-')
            return false;
    }
    return name[0] != '.' && name[0] != '-';
}

static void free_list (char **list, int count)
{
    if (list) {
        for (int i = 0; i < count; i++)
            free (list[i]);
        free (list);
    }
}

void tier_conf_destroy (struct tier_conf *conf)
{
    if (conf) {
        int saved = errno;
        for (size_t i = 0; i < NKEYS; i++) {
            char *base = (char *) conf;
            if (keys[i].type == CONF_PATHLIST)
                free_list (*(char ***) (base + keys[i].offset),
                           *(int *) (base + keys[i].count_offset));
            else if (keys[i].type == CONF_PATH
                     || keys[i].type == CONF_PATH_EMPTY
                     || keys[i].type == CONF_STRING)
                free (*(char **) (base + keys[i].offset));
        }
        free (conf->node);
        free (conf);
        errno = saved;
    }
}

struct tier_conf *tier_conf_create (const char *node)
{
    struct tier_conf *conf;

    if (node && !tier_conf_nodename_valid (node)) {
        errno = EINVAL;
        return NULL;
    }
    if (!(conf = calloc (1, sizeof (*conf))))
        return NULL;
    conf->log_level = 6;                /* LOG_INFO */
    conf->enabled = true;
    conf->agent_timeout_ms = 10000;
    conf->stats_interval_ms = 5000;
    conf->stats_retention = 7 * 86400;
    conf->stage_in_timeout = 1800;
    conf->stage_out_timeout = 600;
    conf->stall_timeout = 300;
    conf->keep_timeout = 300;
    conf->bb_lock_stale = 30;
    conf->gfs_streams = 4;
    conf->clients_per_user = 64;
    conf->fetches_per_user = 64;
    conf->user_cgroup_tasks = 512;
    conf->replica_wait = 600;
    if (!(conf->socket_dir = strdup ("/run/tier"))
        || !(conf->state_dir = strdup ("/var/lib/tier"))
        || !(conf->namespace_dir = strdup ("/run/tier/ns"))
        || !(conf->shared_state_dir = strdup (""))
        || !(conf->log_file = strdup ("")) || !(conf->nvdimm_dir = strdup (""))
        || !(conf->bb_dir = strdup (""))
        || !(conf->user_cgroup_dir = strdup ("/tier"))
        || !(conf->tierd_path = strdup (TIER_SBINDIR "/tierd"))
        || !(conf->slurm_user = strdup ("slurm"))
        || !(conf->slurm_conf = strdup (""))
        || !(conf->metrics_file = strdup (""))
        || !(conf->site_policy_dir = strdup (TIER_SYSCONFDIR "/policies.d"))
        || !(conf->endpoint_ca_file = strdup (""))
        || !(conf->node = strdup (node ? node : ""))) {
        tier_conf_destroy (conf);
        return NULL;
    }
    return conf;
}

/* Expand %n into out; keep %u and %% for tier_conf_expand_user.  Any
 * other %-sequence is an error.
 */
static int expand_node (const char *in, const char *node, char *out,
                        size_t size, const char **problem)
{
    size_t o = 0;

    for (const char *p = in; *p; p++) {
        const char *add = NULL;
        char tmp[3] = { 0 };
        size_t len;

        if (*p == '%') {
            p++;
            if (*p == 'n') {
                if (!node || !*node) {
                    *problem = "%n is used but no NodeName is known";
                    return -1;
                }
                add = node;
            }
            else if (*p == 'u' || *p == '%') {
                tmp[0] = '%';
                tmp[1] = *p;
                add = tmp;
            }
            else {
                *problem = "only %n, %u and %% may appear";
                return -1;
            }
        }
        else {
            tmp[0] = *p;
            add = tmp;
        }
        len = strlen (add);
        if (o + len >= size) {
            *problem = "value too long";
            return -1;
        }
        memcpy (out + o, add, len);
        o += len;
    }
    out[o] = '\0';
    return 0;
}

int tier_conf_expand_node (const char *value, const char *node, char *out,
                           size_t size)
{
    size_t o = 0;

    if (!value || !out || size == 0) {
        errno = EINVAL;
        return -1;
    }
    for (const char *p = value; *p; p++) {
        const char *add = p;
        size_t len = 1;

        if (p[0] == '%') {
            if (p[1] == 'n' && tier_conf_nodename_valid (node))
                len = strlen (add = node);
            else if (p[1] != '%') {
                errno = EINVAL;
                return -1;
            }
            p++;
        }
        if (o + len >= size) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy (out + o, add, len);
        o += len;
    }
    out[o] = '\0';
    return 0;
}

int tier_conf_expand_user (const char *value, const char *user, char *out,
                           size_t size)
{
    size_t o = 0;

    if (!value || !out) {
        errno = EINVAL;
        return -1;
    }
    for (const char *p = value; *p; p++) {
        const char *add;
        char tmp[2] = { 0 };
        size_t len;

        if (p[0] == '%' && p[1] == 'u') {
            if (!user || !*user || strchr (user, '/')) {
                errno = EINVAL;
                return -1;
            }
            add = user;
            p++;
        }
        else if (p[0] == '%' && p[1] == '%') {
            add = "%";
            p++;
        }
        else {
            tmp[0] = *p;
            add = tmp;
        }
        len = strlen (add);
        if (o + len >= size) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy (out + o, add, len);
        o += len;
    }
    out[o] = '\0';
    return 0;
}

static int set_string (char **slot, const char *value)
{
    char *s = strdup (value);

    if (!s)
        return -1;
    free (*slot);
    *slot = s;
    return 0;
}

static int parse_path (const char *value, char *out, size_t size,
                       const char **problem)
{
    if (value[0] != '/') {
        *problem = "must be an absolute path";
        return -1;
    }
    if (tier_path_has_dotdot (value)) {
        *problem = "must not contain '..'";
        return -1;
    }
    if (tier_path_normalize (value, out, size) < 0) {
        *problem = "path too long";
        return -1;
    }
    return 0;
}

static int parse_pathlist (const char *value, char ***listp, int *countp,
                           const char **problem)
{
    char **list = NULL;
    int count = 0;
    const char *p = value;

    while (*p) {
        char item[PATH_MAX], norm[PATH_MAX];
        const char *end = strchr (p, ',');
        size_t len = end ? (size_t) (end - p) : strlen (p);
        char **nl;

        while (len > 0 && isspace ((unsigned char) *p)) {
            p++;
            len--;
        }
        while (len > 0 && isspace ((unsigned char) p[len - 1]))
            len--;
        if (len == 0 || len >= sizeof (item)) {
            *problem = len ? "path too long" : "empty list item";
            goto error;
        }
        memcpy (item, p, len);
        item[len] = '\0';
        if (parse_path (item, norm, sizeof (norm), problem) < 0)
            goto error;
        if (!strcmp (norm, "/")) {
            *problem = "'/' may not be an allowed root";
            goto error;
        }
        if (!(nl = realloc (list, (count + 1) * sizeof (*list)))) {
            *problem = "out of memory";
            goto error;
        }
        list = nl;
        if (!(list[count] = strdup (norm))) {
            *problem = "out of memory";
            goto error;
        }
        count++;
        if (!end)
            break;
        p = end + 1;
        if (!*p) {
            *problem = "empty list item";
            goto error;
        }
    }
    *listp = list;
    *countp = count;
    return 0;
error:
    free_list (list, count);
    return -1;
}

static int set_value (struct tier_conf *conf, const struct conf_key *k,
                      const char *raw, const char **problem)
{
    char value[PATH_MAX];
    char norm[PATH_MAX];
    char *base = (char *) conf;
    uint64_t u;

    if (expand_node (raw, conf->node, value, sizeof (value), problem) < 0)
        return -1;
    switch (k->type) {
        case CONF_PATH_EMPTY:
            if (value[0] == '\0')
                return set_string ((char **) (base + k->offset), "")
                       ? (*problem = "out of memory", -1) : 0;
            /* fall through */
        case CONF_PATH:
            if (parse_path (value, norm, sizeof (norm), problem) < 0)
                return -1;
            if (set_string ((char **) (base + k->offset), norm) < 0) {
                *problem = "out of memory";
                return -1;
            }
            return 0;
        case CONF_STRING:
            if (value[0] == '\0') {
                *problem = "must not be empty";
                return -1;
            }
            if (set_string ((char **) (base + k->offset), value) < 0) {
                *problem = "out of memory";
                return -1;
            }
            return 0;
        case CONF_SIZE:
            if (tier_size_parse (value, &u) < 0) {
                *problem = "not a size (e.g. 512M, 16G)";
                return -1;
            }
            *(uint64_t *) (base + k->offset) = u;
            return 0;
        case CONF_MSEC:
            if (tier_duration_parse (value, &u) < 0 || u > 86400) {
                *problem = "not a duration of at most 1d (e.g. 10s, 5m)";
                return -1;
            }
            *(uint64_t *) (base + k->offset) = u * 1000;
            return 0;
        case CONF_COUNT: {
            char *end;
            unsigned long n;
            errno = 0;
            n = strtoul (value, &end, 10);
            if (!isdigit ((unsigned char) value[0]) || *end || errno
                || n < 1 || n > 1024) {
                *problem = "not a whole number in 1..1024";
                return -1;
            }
            *(unsigned *) (base + k->offset) = (unsigned) n;
            return 0;
        }
        case CONF_SEC:
            if (tier_duration_parse (value, &u) < 0) {
                *problem = "not a duration (e.g. 7d, 12h)";
                return -1;
            }
            *(uint64_t *) (base + k->offset) = u;
            return 0;
        case CONF_LOGLEVEL: {
            static const char *names[] = { "error", "warning", "notice",
                                           "info", "debug" };
            static const int levels[] = { 3, 4, 5, 6, 7 };
            for (int i = 0; i < 5; i++)
                if (!strcasecmp (value, names[i])) {
                    *(int *) (base + k->offset) = levels[i];
                    return 0;
                }
            *problem = "must be error, warning, notice, info or debug";
            return -1;
        }
        case CONF_BOOL:
            if (!strcasecmp (value, "yes") || !strcasecmp (value, "true")
                || !strcmp (value, "1"))
                *(bool *) (base + k->offset) = true;
            else if (!strcasecmp (value, "no") || !strcasecmp (value, "false")
                     || !strcmp (value, "0"))
                *(bool *) (base + k->offset) = false;
            else {
                *problem = "must be yes or no";
                return -1;
            }
            return 0;
        case CONF_PATHLIST: {
            char **list;
            int count;
            if (parse_pathlist (value, &list, &count, problem) < 0)
                return -1;
            free_list (*(char ***) (base + k->offset),
                       *(int *) (base + k->count_offset));
            *(char ***) (base + k->offset) = list;
            *(int *) (base + k->count_offset) = count;
            return 0;
        }
    }
    *problem = "internal error";
    return -1;
}

static char *trim (char *s)
{
    char *e;

    while (isspace ((unsigned char) *s))
        s++;
    e = s + strlen (s);
    while (e > s && isspace ((unsigned char) e[-1]))
        *--e = '\0';
    return s;
}

int tier_conf_parse (struct tier_conf *conf, const char *text,
                     const char *name, tier_error_t *error)
{
    int seen[NKEYS] = { 0 };
    const char *p = text;
    int lineno = 0;

    if (!conf || !text) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: invalid arguments",
                               name ? name : "tier.conf");
    }
    if (!name)
        name = "tier.conf";
    while (*p) {
        char line[4096];
        const char *nl = strchr (p, '\n');
        size_t len = nl ? (size_t) (nl - p) : strlen (p);
        char *hash, *eq, *key, *value;
        const struct conf_key *k = NULL;
        const char *problem = NULL;

        lineno++;
        if (len >= sizeof (line)) {
            errno = EINVAL;
            return tier_errprintf (error, "%s:%d: line too long", name, lineno);
        }
        memcpy (line, p, len);
        line[len] = '\0';
        p += len + (nl ? 1 : 0);

        if ((hash = strchr (line, '#')))
            *hash = '\0';
        key = trim (line);
        if (*key == '\0')
            continue;
        for (char *c = key; *c; c++) {
            if (*c < 0x20 || *c == 0x7f) {
                errno = EINVAL;
                return tier_errprintf (error,
                                       "%s:%d: control character in line",
                                       name, lineno);
            }
        }
        if (!(eq = strchr (key, '='))) {
            errno = EINVAL;
            return tier_errprintf (error, "%s:%d: expected 'Key = value'",
                                   name, lineno);
        }
        *eq = '\0';
        value = trim (eq + 1);
        key = trim (key);
        for (size_t i = 0; i < NKEYS; i++) {
            if (!strcasecmp (key, keys[i].name)) {
                k = &keys[i];
                if (seen[i]) {
                    errno = EINVAL;
                    return tier_errprintf (error, "%s:%d: %s is already set "
                                           "on line %d", name, lineno,
                                           keys[i].name, seen[i]);
                }
                seen[i] = lineno;
                break;
            }
        }
        if (!k) {
            errno = EINVAL;
            /* name the key but clip it: the line may be anything */
            return tier_errprintf (error, "%s:%d: unknown key '%.64s'",
                                   name, lineno, key);
        }
        if (set_value (conf, k, value, &problem) < 0) {
            errno = !strcmp (problem, "out of memory") ? ENOMEM : EINVAL;
            return tier_errprintf (error, "%s:%d: %s: %s", name, lineno,
                                   k->name, problem);
        }
    }
    return 0;
}

/* The file root code reads: lib/trust.h's ROOT_FILE (a relative path is
 * taken from the working directory). */
static int open_trusted (const char *path, tier_error_t *error)
{
    enum tier_trust_why why;
    const struct tier_trust rule = { .kind = TIER_TRUST_ROOT_FILE,
                                     .why = &why };
    char cwd[PATH_MAX], abs[PATH_MAX];
    tier_error_t e;
    int fd;

    if (path[0] != '/' && !tier_path_has_dotdot (path)
        && getcwd (cwd, sizeof (cwd))
        && tier_path_absolute (path, cwd, abs, sizeof (abs)) == 0)
        path = abs;
    if ((fd = tier_trust_open (path, &rule, &e)) >= 0)
        return fd;
    if (errno == EPERM && why == TIER_TRUST_TYPE) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: not a regular file", path);
    }
    if (errno == EPERM && (why == TIER_TRUST_OWNER || why == TIER_TRUST_MODE))
        return tier_errprintf (error,
                               "%s: must be owned by root and "
                               "writable by root only",
                               path);
    if (errno == EPERM || errno == EINVAL)
        return tier_errprintf (error, "%s", e.text);
    return tier_errprintf (error, "%s: %s", path, strerror (errno));
}

int tier_conf_load (struct tier_conf *conf, const char *path,
                    bool check_owner, tier_error_t *error)
{
    struct stat st;
    char *text = NULL;
    size_t len = 0;
    int fd, rc = -1;

    if (check_owner)
        fd = open_trusted (path, error);
    else if ((fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
        tier_errprintf (error, "%s: %s", path, strerror (errno));
    if (fd < 0)
        return -1;
    if (fstat (fd, &st) < 0) {
        tier_errprintf (error, "%s: %s", path, strerror (errno));
        goto out;
    }
    if (!S_ISREG (st.st_mode)) {
        errno = EINVAL;
        tier_errprintf (error, "%s: not a regular file", path);
        goto out;
    }
    if (st.st_size > CONF_FILE_MAX) {
        errno = EFBIG;
        tier_errprintf (error, "%s: larger than %d bytes", path, CONF_FILE_MAX);
        goto out;
    }
    if (!(text = malloc (st.st_size + 1))) {
        tier_errprintf (error, "%s: out of memory", path);
        goto out;
    }
    while (len < (size_t) st.st_size) {
        ssize_t n = read (fd, text + len, st.st_size - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            tier_errprintf (error, "%s: %s", path, strerror (errno));
            goto out;
        }
        if (n == 0)
            break;
        len += n;
    }
    text[len] = '\0';
    if (memchr (text, '\0', len)) {
        errno = EINVAL;
        tier_errprintf (error, "%s: contains a NUL byte", path);
        goto out;
    }
    rc = tier_conf_parse (conf, text, path, error);
out:
    free (text);
    if (fd >= 0) {
        int saved = errno;
        close (fd);
        errno = saved;
    }
    return rc;
}

int tier_conf_socket_path (const struct tier_conf *conf, char *out,
                           size_t size)
{
    if (snprintf (out, size, "%s/tierd.sock", conf->socket_dir)
        >= (int) size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}
