/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* tiers.c - the node's tiers: their roots, what they are, how full
 *
 * At start the agent makes each tier root (root 0700; a symlink or a
 * directory made by someone else is refused, since /dev/shm and /tmp are
 * world-writable) and asks libpmem whether the NVDIMM tier is real
 * persistent memory: pmem_is_pmem() on a mapped probe file.  A
 * DRAM-emulated tier (tmpfs) works the same and says so.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <libpmem.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "lib/jobns.h"
#include "lib/log.h"
#include "agent.h"

#define TMPFS_MAGIC_ 0x01021994

/* A tier root, made or checked (tier_root_open), then let go. */
static int tier_root (const char *path, tier_error_t *error)
{
    int fd = tier_root_open (path, error);

    if (fd < 0)
        return -1;
    close (fd);
    return 0;
}

void tiers_init (struct agent *a)
{
    const char *nv = a->conf->nvdimm_dir;
    tier_error_t error;
    char probe[4200];
    struct statfs sf;
    size_t len = 0;
    int is_pmem = 0;
    void *addr;

    a->nvdimm_ok = false;
    if (nv[0]) {
        if (tier_root (nv, &error) < 0)
            tier_log (LOG_ERR, "NvdimmDir: %s", error.text);
        else {
            a->nvdimm_ok = true;
            (void) snprintf (probe, sizeof (probe), "%s/.tier-pmem-probe", nv);
            (void) unlink (probe);
            if ((addr = pmem_map_file (probe, 4096, PMEM_FILE_CREATE, 0600,
                                       &len, &is_pmem))) {
                a->nvdimm_pmem = is_pmem != 0;
                pmem_unmap (addr, len);
            }
            else
                tier_log (LOG_WARNING, "NvdimmDir %s: pmem_map_file: %s", nv,
                          pmem_errormsg ());
            (void) unlink (probe);
            a->nvdimm_tmpfs = statfs (nv, &sf) == 0
                              && (unsigned) sf.f_type == TMPFS_MAGIC_;
            tier_log (LOG_INFO, "NVDIMM tier %s: %s%s", nv,
                      a->nvdimm_pmem ? "persistent memory"
                                     : "not persistent memory",
                      a->nvdimm_tmpfs ? " (DRAM-emulated, tmpfs)" : "");
        }
    }
    /* BBDir is the replica cache's (replica.c): root-owned, 0711 */
}

static json_t *fs_json (const char *path, uint64_t capacity)
{
    struct statfs sf;
    json_t *o = json_pack ("{s:s s:I}", "path", path, "capacity",
                           (json_int_t) capacity);

    if (o && statfs (path, &sf) == 0) {
        json_object_set_new (o, "fs_size", json_integer ((json_int_t)
                             ((uint64_t) sf.f_blocks * sf.f_bsize)));
        json_object_set_new (o, "fs_free", json_integer ((json_int_t)
                             ((uint64_t) sf.f_bavail * sf.f_bsize)));
        json_object_set_new (o, "used", json_integer ((json_int_t)
                             ((uint64_t) (sf.f_blocks - sf.f_bfree)
                              * sf.f_bsize)));
    }
    return o;
}

json_t *tiers_json (struct agent *a)
{
    json_t *o = json_object (), *nv;

    if (!o)
        return NULL;
    if (a->conf->nvdimm_dir[0] && (nv = fs_json (a->conf->nvdimm_dir,
                                                 a->conf->nvdimm_capacity))) {
        json_object_set_new (nv, "ok", json_boolean (a->nvdimm_ok));
        json_object_set_new (nv, "pmem", json_boolean (a->nvdimm_pmem));
        json_object_set_new (nv, "emulated", json_boolean (a->nvdimm_tmpfs));
        json_object_set_new (nv, "reserved",
                             json_integer ((json_int_t) agent_reserved (a)));
        /* scratch lives in per-job tmpfs mounted in the jobs' namespaces,
         * which the file system figures above do not include */
        json_object_set_new (nv, "scratch_used",
                             json_integer ((json_int_t) a->scratch_used));
        json_object_set_new (nv, "scratch_jobs",
                             json_integer (a->scratch_jobs));
        json_object_set_new (o, "nvdimm", nv);
    }
    if (a->conf->bb_dir[0] && (nv = fs_json (a->conf->bb_dir,
                                             a->conf->bb_capacity))) {
        /* this node's share of the BB: the replicas it fetched */
        json_object_set_new (nv, "used",
                             json_integer ((json_int_t) replica_used (a)));
        json_object_set_new (o, "bb", nv);
    }
    return o;
}

/* node.enable {enable} (root and SlurmUser: rpc.c's table): tierctl
 * enable and disable; kept across restarts in StateDir/disabled */
json_t *op_node_enable (struct agent *a, struct conn *c, json_t *req,
                        tier_error_t *error)
{
    int enable = 1;

    if (json_unpack (req, "{s:b}", "enable", &enable) < 0) {
        errno = EINVAL;
        tier_errprintf (error, "'enable' must be true or false");
        return NULL;
    }
    {
        char path[4096];
        int fd;
        (void) snprintf (path, sizeof (path), "%s/disabled",
                         a->conf->state_dir);
        if (enable)
            (void) unlink (path);
        else if ((fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                             0644))
                 >= 0)
            close (fd);
    }
    a->disabled = !enable;
    tier_log (LOG_NOTICE, "tier %s on this node by uid %d",
              enable ? "enabled" : "disabled", (int) c->cred.uid);
    return json_pack ("{s:s s:b}", "node", a->node, "enabled",
                      !a->disabled && a->conf->enabled);
}
