/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_conf.c - tier.conf parsing */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/conf.h"
#include "unit.h"
#include "failalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FAILALLOC_DEFINE

static const char *full = "# a full configuration\n"
                          "SocketDir = /run/tier/%n   # per node\n"
                          "statedir=/var/lib/tier/%n/\n"
                          "SharedStateDir = /gfs/.tier\n"
                          "LogFile = /var/log/tier-%n.log\n"
                          "LogLevel = debug\n"
                          "NvdimmDir = /dev/shm/tier/%n\n"
                          "NvdimmCapacity = 4G\n"
                          "BBDir = /bb/%u\n"
                          "BBCapacity = 100G\n"
                          "AllowedRoots = /gfs , /scratch//x/\n"
                          "TierdPath = /opt/tier/sbin/tierd\n"
                          "SlurmUser = slurm\n"
                          "Enabled = no\n"
                          "AgentTimeout = 5s\n"
                          "ClientsPerUser = 200\n"
                          "FetchesPerUser = 7\n"
                          "SitePolicyDir = /etc/tier/site.d/%n/\n"
                          "EndpointCAFile = /etc/tier/ca-%n.pem\n"
                          "EndpointPartSize = 16M\n"
                          "EndpointMultipartThreshold = 1G\n"
                          "StallTimeout = 90s\n"
                          "UserCgroupDir = /site/tier/%n\n"
                          "UserCgroupTasks = 64\n"
                          "UserCgroupMemory = 2G\n"
                          "\n"
                          "   \t\n";

static void test_defaults (void **state)
{
    struct tier_conf *conf = tier_conf_create ("n1");
    char path[PATH_MAX];

    assert_non_null (conf);
    assert_string_equal (conf->socket_dir, "/run/tier");
    assert_string_equal (conf->shared_state_dir, "");
    assert_true (conf->enabled);
    assert_int_equal (conf->clients_per_user, 64);
    assert_int_equal (conf->fetches_per_user, 64);
    assert_int_equal (conf->allowed_roots_count, 0);
    assert_non_null (strstr (conf->site_policy_dir, "/policies.d"));
    assert_string_equal (conf->endpoint_ca_file, "");
    assert_true (conf->endpoint_part_size == 0);
    assert_true (conf->endpoint_multipart == 0);
    assert_true (conf->stall_timeout == 300);
    assert_string_equal (conf->user_cgroup_dir, "/tier");
    assert_int_equal (conf->user_cgroup_tasks, 512);
    assert_true (conf->user_cgroup_memory == 0);
    assert_int_equal (tier_conf_socket_path (conf, path, sizeof (path)), 0);
    assert_string_equal (path, "/run/tier/tierd.sock");
    tier_conf_destroy (conf);
    assert_null (tier_conf_create ("bad/name"));
    assert_null (tier_conf_create ("-x"));
}

static void test_full (void **state)
{
    struct tier_conf *conf = tier_conf_create ("n2");
    tier_error_t error;
    char out[PATH_MAX];

    assert_non_null (conf);
    assert_int_equal (tier_conf_parse (conf, full, "t.conf", &error), 0);
    assert_string_equal (conf->socket_dir, "/run/tier/n2");
    assert_string_equal (conf->state_dir, "/var/lib/tier/n2");
    assert_string_equal (conf->log_file, "/var/log/tier-n2.log");
    assert_int_equal (conf->log_level, 7);
    assert_string_equal (conf->nvdimm_dir, "/dev/shm/tier/n2");
    assert_true (conf->nvdimm_capacity == 4ULL << 30);
    assert_string_equal (conf->bb_dir, "/bb/%u");
    assert_int_equal (conf->allowed_roots_count, 2);
    assert_string_equal (conf->allowed_roots[0], "/gfs");
    assert_string_equal (conf->allowed_roots[1], "/scratch/x");
    assert_string_equal (conf->tierd_path, "/opt/tier/sbin/tierd");
    assert_false (conf->enabled);
    assert_true (conf->agent_timeout_ms == 5000);
    assert_int_equal (conf->clients_per_user, 200);
    assert_int_equal (conf->fetches_per_user, 7);
    assert_string_equal (conf->site_policy_dir, "/etc/tier/site.d/n2");
    assert_string_equal (conf->endpoint_ca_file, "/etc/tier/ca-n2.pem");
    assert_true (conf->endpoint_part_size == 16ULL << 20);
    assert_true (conf->endpoint_multipart == 1ULL << 30);
    assert_true (conf->stall_timeout == 90);
    assert_string_equal (conf->user_cgroup_dir, "/site/tier/n2");
    assert_int_equal (conf->user_cgroup_tasks, 64);
    assert_true (conf->user_cgroup_memory == 2ULL << 30);
    /* empty: off; a relative one is refused */
    assert_int_equal (tier_conf_parse (conf, "UserCgroupDir =\n", "t.conf",
                                       &error),
                      0);
    assert_string_equal (conf->user_cgroup_dir, "");
    assert_int_equal (tier_conf_parse (conf, "UserCgroupDir = tier\n", "t.conf",
                                       &error),
                      -1);
    assert_non_null (strstr (error.text, "UserCgroupDir"));
    assert_int_equal (tier_conf_expand_user (conf->bb_dir, "alice", out,
                                             sizeof (out)), 0);
    assert_string_equal (out, "/bb/alice");
    assert_int_equal (tier_conf_expand_user ("/x/%%u/%u", "bob", out,
                                             sizeof (out)), 0);
    assert_string_equal (out, "/x/%u/bob");
    assert_int_equal (tier_conf_expand_node ("/etc/tier/%n/t%%.conf", "n2",
                                             out, sizeof (out)), 0);
    assert_string_equal (out, "/etc/tier/n2/t%.conf");
    assert_int_equal (tier_conf_expand_node ("/a/%u", "n2", out,
                                             sizeof (out)), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_conf_expand_node ("/a/%", "n2", out,
                                             sizeof (out)), -1);
    assert_int_equal (tier_conf_expand_node ("/a/%n", "../x", out,
                                             sizeof (out)), -1);
    assert_int_equal (tier_conf_expand_node ("/a/%n", NULL, out,
                                             sizeof (out)), -1);
    assert_int_equal (tier_conf_expand_node ("/a/%n", "node1", out, 8), -1);
    assert_int_equal (errno, ENAMETOOLONG);
    assert_int_equal (tier_conf_expand_user ("/x/%u", "../a", out,
                                             sizeof (out)), -1);
    assert_int_equal (tier_conf_expand_user ("/x/%u", "", out,
                                             sizeof (out)), -1);
    tier_conf_destroy (conf);
}

static void expect_error (const char *text, const char *msg)
{
    struct tier_conf *conf = tier_conf_create ("n1");
    tier_error_t error = { { 0 } };

    assert_non_null (conf);
    assert_int_equal (tier_conf_parse (conf, text, "site.conf", &error), -1);
    if (!strstr (error.text, msg))
        fail_msg ("for %s: expected '%s' in '%s'", text, msg, error.text);
    tier_conf_destroy (conf);
}

static void test_errors (void **state)
{
    expect_error ("Bogus = 1\n", "site.conf:1: unknown key 'Bogus'");
    expect_error ("# c\nSocketDir = relative\n",
                  "site.conf:2: SocketDir: must be an absolute path");
    expect_error ("SocketDir = /a/../etc\n", "must not contain '..'");
    expect_error ("SocketDir\n", "site.conf:1: expected 'Key = value'");
    expect_error ("NvdimmCapacity = lots\n", "NvdimmCapacity: not a size");
    expect_error ("LogLevel = chatty\n", "LogLevel: must be error");
    expect_error ("Enabled = maybe\n", "Enabled: must be yes or no");
    expect_error ("ClientsPerUser = 0\n", "ClientsPerUser: ");
    expect_error ("FetchesPerUser = 1025\n", "FetchesPerUser: ");
    expect_error ("AllowedRoots = /gfs,,/x\n", "empty list item");
    expect_error ("AllowedRoots = /gfs,\n", "empty list item");
    expect_error ("AllowedRoots = /\n", "'/' may not be an allowed root");
    expect_error ("AllowedRoots = /gfs,rel\n", "must be an absolute path");
    expect_error ("SocketDir = /run/%x\n", "only %n, %u and %% may appear");
    expect_error ("SocketDir = /a\nsocketdir = /b\n",
                  "site.conf:2: SocketDir is already set on line 1");
    expect_error ("SlurmUser =\n", "SlurmUser: must not be empty");
    expect_error ("AgentTimeout = 2d\n", "AgentTimeout: not a duration");
    expect_error ("LogFile = /a\001b\n", "control character");
    expect_error ("SitePolicyDir = policies.d\n",
                  "SitePolicyDir: must be an absolute path");
    expect_error ("EndpointCAFile = ca.pem\n",
                  "EndpointCAFile: must be an absolute path");
    {
        /* a very long unknown key is clipped in the message */
        char big[3000];
        memset (big, 'K', sizeof (big) - 4);
        strcpy (big + sizeof (big) - 4, "=1\n");
        expect_error (big, "unknown key 'KKKK");
    }
    {
        char huge[5000];
        memset (huge, 'a', sizeof (huge) - 1);
        huge[sizeof (huge) - 1] = '\0';
        expect_error (huge, "line too long");
    }
}

static void test_nodename_required (void **state)
{
    struct tier_conf *conf = tier_conf_create (NULL);
    tier_error_t error;

    assert_non_null (conf);
    assert_int_equal (tier_conf_parse (conf, "StateDir = /s/%n\n", "c",
                                       &error), -1);
    assert_non_null (strstr (error.text, "no NodeName"));
    tier_conf_destroy (conf);
}

static void test_load (void **state)
{
    char path[] = "/tmp/test_conf.XXXXXX";
    struct tier_conf *conf;
    tier_error_t error;
    int fd = mkstemp (path);

    assert_true (fd >= 0);
    assert_int_equal (write (fd, full, strlen (full)), (int) strlen (full));
    close (fd);
    conf = tier_conf_create ("n3");
    assert_int_equal (tier_conf_load (conf, path, false, &error), 0);
    assert_string_equal (conf->socket_dir, "/run/tier/n3");
    tier_conf_destroy (conf);

    if (geteuid () == 0) {
        /* root code refuses a file others could change */
        chmod (path, 0666);
        conf = tier_conf_create ("n3");
        assert_int_equal (tier_conf_load (conf, path, true, &error), -1);
        assert_non_null (strstr (error.text, "owned by root"));
        tier_conf_destroy (conf);
        chmod (path, 0644);
        conf = tier_conf_create ("n3");
        assert_int_equal (tier_conf_load (conf, path, true, &error), 0);
        tier_conf_destroy (conf);
    }
    conf = tier_conf_create ("n3");
    assert_int_equal (tier_conf_load (conf, "/nonexistent/tier.conf", false,
                                      &error), -1);
    assert_non_null (strstr (error.text, "/nonexistent/tier.conf: No such"));
    assert_int_equal (tier_conf_load (conf, "/tmp", false, &error), -1);
    assert_non_null (strstr (error.text, "not a regular file"));
    tier_conf_destroy (conf);
    unlink (path);
}

/* Every allocation of the parser may fail: it must then return -1 with
 * ENOMEM and leak nothing (ASan's leak checker watches in CI).
 */
static void test_failalloc (void **state)
{
    for (int n = 1; n < 1000; n++) {
        struct tier_conf *conf;
        tier_error_t error;
        int rc;

        failalloc_arm (n);
        if (!(conf = tier_conf_create ("n1"))) {
            assert_true (failalloc_failed);
            continue;
        }
        rc = tier_conf_parse (conf, full, "t.conf", &error);
        tier_conf_destroy (conf);
        if (!failalloc_failed) {
            failalloc_arm (-1);
            assert_int_equal (rc, 0);
            assert_true (n > 10);
            return;
        }
        assert_int_equal (rc, -1);
        assert_int_equal (errno, ENOMEM);
    }
    fail_msg ("the parser never finished");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_defaults),
        cmocka_unit_test (test_full),
        cmocka_unit_test (test_errors),
        cmocka_unit_test (test_nodename_required),
        cmocka_unit_test (test_load),
        cmocka_unit_test (test_failalloc),
    };
    return UNIT_RUN (tests);
}
