/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_opts.c - the --tier-* options, plugstack arguments, array detection */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "spank_plugin/opts.h"
#include "spank_plugin/args.h"
#include "spank_plugin/submit.h"
#include "unit.h"
#include "failalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

FAILALLOC_DEFINE

static void expect_list_error (const char *opt, const char *value, int flags,
                               const char *msg)
{
    tier_error_t error = { { 0 } };

    if (opts_list_check (opt, value, flags, NULL, &error) != -1)
        fail_msg ("'%.40s' was accepted", value);
    if (!strstr (error.text, msg))
        fail_msg ("'%.40s': expected '%s' in '%s'", value, msg, error.text);
    /* one line, naming the option */
    assert_null (strchr (error.text, '\n'));
    assert_true (!strncmp (error.text, opt, strlen (opt)));
}

static void test_words (void **state)
{
    enum tier_cache_mode m;
    enum tier_keep k;
    tier_error_t error;

    assert_int_equal (opts_cache_parse ("auto", &m, &error), 0);
    assert_int_equal (m, TIER_CACHE_AUTO);
    assert_int_equal (opts_cache_parse ("required", &m, &error), 0);
    assert_int_equal (m, TIER_CACHE_REQUIRED);
    assert_int_equal (opts_cache_parse ("off", &m, &error), 0);
    assert_int_equal (m, TIER_CACHE_OFF);
    assert_int_equal (opts_cache_parse ("bogus", &m, &error), -1);
    assert_string_equal (error.text, "--tier-cache: 'bogus' is not one of "
                         "auto, required, off");
    assert_int_equal (opts_cache_parse ("AUTO", &m, &error), -1);
    assert_int_equal (opts_cache_parse ("", &m, &error), -1);
    assert_int_equal (opts_keep_parse ("on-failure", &k, &error), 0);
    assert_int_equal (k, TIER_KEEP_ON_FAILURE);
    assert_int_equal (opts_keep_parse ("sometimes", &k, &error), -1);
    assert_non_null (strstr (error.text, "--tier-keep"));
    /* a hostile value is clipped and control characters replaced */
    {
        char big[500];
        memset (big, 'x', sizeof (big) - 1);
        big[sizeof (big) - 1] = '\0';
        big[3] = '\n';
        assert_int_equal (opts_cache_parse (big, &m, &error), -1);
        assert_null (strchr (error.text, '\n'));
        assert_true (strlen (error.text) < 200);
    }
}

static void test_lists (void **state)
{
    tier_error_t error;
    bool a = false;

    assert_int_equal (opts_list_check ("--tier-batch", "/gfs/db", 0, NULL,
                                       &error),
                      0);
    assert_int_equal (opts_list_check ("--tier-batch", "/gfs/db,/gfs/x/", 0,
                                       NULL, &error),
                      0);
    assert_int_equal (opts_list_check ("--tier-scratch", "/gfs/run:16G,/gfs/t",
                                       TIER_ITEM_SIZE, NULL, &error),
                      0);
    assert_int_equal (opts_list_check ("--tier-stage-in",
                                       "/gfs/q/q%a.fa,/gfs/%u/%4j_%%",
                                       TIER_ITEM_PATTERNS, &a, &error),
                      0);
    assert_true (a);
    expect_list_error ("--tier-scratch", "relative/path", TIER_ITEM_SIZE,
                       "'relative/path' is not an absolute path");
    expect_list_error ("--tier-batch", "/gfs/../etc", 0, "'..' component");
    expect_list_error ("--tier-batch", "/gfs/a/..", 0, "'..' component");
    expect_list_error ("--tier-batch", "/gfs,,/x", 0, "empty item");
    expect_list_error ("--tier-batch", "/gfs,", 0, "empty item");
    expect_list_error ("--tier-batch", ",/gfs", 0, "empty item");
    expect_list_error ("--tier-batch", "", 0, "needs a value");
    expect_list_error ("--tier-batch", "/", 0, "'/' itself");
    expect_list_error ("--tier-batch", "///", 0, "'/' itself");
    expect_list_error ("--tier-batch", "/gfs/%a", 0, "patterns are not");
    expect_list_error ("--tier-batch", "/gfs/a\tb", 0, "control character");
    expect_list_error ("--tier-stage-in", "/gfs/%q", TIER_ITEM_PATTERNS,
                       "unknown pattern at '%q'");
    expect_list_error ("--tier-stage-in", "/gfs/%", TIER_ITEM_PATTERNS,
                       "unknown pattern");
    /* sbatch caps a padding width at 10 */
    assert_int_equal (opts_list_check ("--tier-stage-in", "/gfs/%123a",
                                       TIER_ITEM_PATTERNS, NULL, &error),
                      0);
    expect_list_error ("--tier-stage-in", "/gfs/%3%", TIER_ITEM_PATTERNS,
                       "unknown pattern");
    expect_list_error ("--tier-scratch", "/gfs/x:0", TIER_ITEM_SIZE,
                       "size must be more than 0");
    {
        char many[TIER_OPT_ITEMS_MAX * 4 + 16] = "";
        for (int i = 0; i <= TIER_OPT_ITEMS_MAX; i++)
            strcat (many, i ? ",/gf" : "/gf");
        expect_list_error ("--tier-batch", many, 0, "more than");
    }
    {
        static char huge[TIER_OPT_VALUE_MAX + 10];
        memset (huge, 'a', sizeof (huge) - 1);
        huge[0] = '/';
        expect_list_error ("--tier-batch", huge, 0, "value longer than");
    }
    /* a backslash: taken literally, as sbatch does */
    a = false;
    assert_int_equal (opts_list_check ("--tier-stage-in", "/gfs/\\%a",
                                       TIER_ITEM_PATTERNS, &a, &error),
                      0);
    assert_false (a);
}

#define SI (TIER_ITEM_PATTERNS | TIER_ITEM_URL)

static void test_url_items (void **state)
{
    tier_error_t error;
    bool a = false;

    assert_int_equal (opts_list_check ("--tier-stage-in",
                                       "s3://bkt/q%a.txt=/gfs/in/q%a.txt,"
                                       "https://127.0.0.1:8443/dav/x%%20y"
                                       "=/gfs/x,http://h/%u/%j=/gfs/%j,"
                                       "/gfs/plain",
                                       SI, &a, &error),
                      0);
    assert_true (a);
    /* %a in the URL alone counts too */
    a = false;
    assert_int_equal (opts_list_check ("--tier-stage-in",
                                       "s3://bkt/q%3a=/gfs/in/q", SI, &a,
                                       &error),
                      0);
    assert_true (a);
    /* no secrets in URLs: no query, no user:password@ */
    expect_list_error ("--tier-stage-in",
                       "https://h/x?X-Amz-Signature=s3cr3t=/gfs/x", SI,
                       "--tier-stage-in: https://h/x?...: a query string is "
                       "not allowed");
    assert_null (strstr (error.text, "s3cr3t"));
    {
        tier_error_t e = { { 0 } };
        assert_int_equal (opts_list_check ("--tier-stage-in",
                                           "https://al:pw@h/x=/gfs/x", SI, NULL,
                                           &e),
                          -1);
        assert_non_null (strstr (e.text, "credentials in the URL"));
        assert_null (strstr (e.text, "pw"));
        assert_int_equal (opts_list_check ("--tier-stage-in",
                                           "https://al:pw@h/%q=/gfs/x", SI,
                                           NULL, &e),
                          -1);
        assert_non_null (strstr (e.text, "unknown pattern"));
        assert_null (strstr (e.text, "pw"));
    }
    /* a literal '%' of an https URL is %% */
    expect_list_error ("--tier-stage-in", "https://h/a%20b=/gfs/x", SI,
                       "unknown pattern");
    expect_list_error ("--tier-stage-in", "https://h/a%7Eb=/gfs/x", SI,
                       "write %% for a '%' of the URL");
    /* the path is checked as any other */
    expect_list_error ("--tier-stage-in", "s3://bkt/k", SI,
                       "a URL needs the path to show it at: URL=/PATH");
    expect_list_error ("--tier-stage-in", "s3://bkt/k=gfs/x", SI,
                       "a URL needs the path");
    expect_list_error ("--tier-stage-in", "s3://bkt/k=/gfs/../etc/x", SI,
                       "'..' component");
    expect_list_error ("--tier-stage-in", "s3://bkt/k=/", SI, "'/' itself");
    expect_list_error ("--tier-stage-in", "s3://bkt/k=/gfs/%q", SI,
                       "unknown pattern");
    /* one object per item */
    expect_list_error ("--tier-stage-in", "s3://bkt/dir/=/gfs/x", SI,
                       "names a prefix");
    expect_list_error ("--tier-stage-in", "https://h/=/gfs/x", SI,
                       "names a prefix");
    expect_list_error ("--tier-stage-in", "ftp://h/x=/gfs/x", SI,
                       "unsupported scheme 'ftp'");
    expect_list_error ("--tier-stage-in", "s3://Bkt/x=/gfs/x", SI,
                       "lower-case");
    /* without TIER_ITEM_URL (stage-out, batch) a URL is no path */
    expect_list_error ("--tier-batch", "s3://bkt/k=/gfs/x", 0,
                       "is not an absolute path");
    {
        static char huge[5000];
        memset (huge, 'k', sizeof (huge) - 1);
        memcpy (huge, "s3://bkt/", 9);
        memcpy (huge + sizeof (huge) - 8, "=/gfs/x", 8);
        expect_list_error ("--tier-stage-in", huge, SI, "longer than");
    }
    {
        struct tier_opts o;
        memset (&o, 0, sizeof (o));
        strcpy (o.stage_in, "s3://bkt/q%a=/gfs/q");
        assert_int_equal (opts_check (&o, 0, &error), -1);
        assert_non_null (strstr (error.text, "not an array job"));
        strcpy (o.stage_in, "https://h/x?q=/gfs/q");
        assert_int_equal (opts_check (&o, -1, &error), -1);
        assert_non_null (strstr (error.text, "query string"));
    }
}

#define SO (TIER_ITEM_PATTERNS | TIER_ITEM_URL_OUT)

static void test_url_out_items (void **state)
{
    tier_error_t error;
    bool a = false;

    assert_int_equal (opts_list_check ("--tier-stage-out",
                                       "/gfs/out=s3://bkt/out/%a/,"
                                       "/gfs/o2=https://127.0.0.1:8443/"
                                       "dav/%u/%j/,/gfs/plain,"
                                       "/gfs/o3=s3://bkt",
                                       SO, &a, &error),
                      0);
    assert_true (a);
    /* %a in the URL alone counts */
    a = false;
    assert_int_equal (opts_list_check ("--tier-stage-out",
                                       "/gfs/out=s3://bkt/%a/", SO, &a, &error),
                      0);
    assert_true (a);
    /* a prefix: it ends in '/' */
    expect_list_error ("--tier-stage-out", "/gfs/out=s3://bkt/out", SO,
                       "end it with '/'");
    expect_list_error ("--tier-stage-out", "/gfs/out=https://h/dav/x", SO,
                       "end it with '/'");
    /* no secrets: no query, no user:password@ */
    expect_list_error ("--tier-stage-out",
                       "/gfs/out=https://h/dav/?X-Amz-Signature=s3cr3t", SO,
                       "--tier-stage-out: https://h/dav/?...: a query string "
                       "is not allowed");
    assert_int_equal (opts_list_check ("--tier-stage-out",
                                       "/gfs/out="
                                       "https://h/o/?X-Amz-Signature="
                                       "s3cr3t",
                                       SO, NULL, &error),
                      -1);
    assert_null (strstr (error.text, "s3cr3t"));
    expect_list_error ("--tier-stage-out", "/gfs/out=https://al:pw@h/o/", SO,
                       "credentials in the URL");
    assert_int_equal (opts_list_check ("--tier-stage-out",
                                       "/gfs/out="
                                       "https://al:pw@h/o/",
                                       SO, NULL, &error),
                      -1);
    assert_null (strstr (error.text, "pw@"));
    /* patterns: a literal '%' is %% */
    expect_list_error ("--tier-stage-out", "/gfs/out=https://h/a%20b/", SO,
                       "unknown pattern");
    assert_int_equal (opts_list_check ("--tier-stage-out",
                                       "/gfs/out=https://h/a%%20b/", SO, NULL,
                                       &error),
                      0);
    /* the directory is checked as any other */
    expect_list_error ("--tier-stage-out", "gfs/out=s3://bkt/o/", SO,
                       "is not an absolute path");
    expect_list_error ("--tier-stage-out", "=s3://bkt/o/", SO,
                       "needs the directory");
    expect_list_error ("--tier-stage-out", "/gfs/../etc=s3://bkt/o/", SO,
                       "'..' component");
    expect_list_error ("--tier-stage-out", "/=s3://bkt/o/", SO, "'/' itself");
    expect_list_error ("--tier-stage-out", "/gfs/%q=s3://bkt/o/", SO,
                       "unknown pattern");
    expect_list_error ("--tier-stage-out", "/gfs/o=ftp://h/o/", SO,
                       "unsupported scheme 'ftp'");
    expect_list_error ("--tier-stage-out", "/gfs/o=s3://Bkt/o/", SO,
                       "lower-case");
    /* a stage-in item is no output */
    expect_list_error ("--tier-stage-out", "s3://bkt/o/=/gfs/o", SO,
                       "needs the directory the job writes");
    {
        struct tier_opts o;
        memset (&o, 0, sizeof (o));
        strcpy (o.stage_out, "/gfs/o=s3://bkt/%a/");
        assert_int_equal (opts_check (&o, 0, &error), -1);
        assert_non_null (strstr (error.text, "not an array job"));
        strcpy (o.stage_out, "/gfs/o=https://h/o/?q");
        assert_int_equal (opts_check (&o, -1, &error), -1);
        assert_non_null (strstr (error.text, "query string"));
        strcpy (o.stage_out, "/gfs/o=s3://bkt/%a/");
        assert_int_equal (opts_check (&o, 1, &error), 0);
    }
}

static void test_split_size (void **state)
{
    char dir[256];
    uint64_t size;
    tier_error_t error;

    assert_int_equal (opts_split_size ("/gfs/run:16G", dir, sizeof (dir), &size,
                                       &error),
                      0);
    assert_string_equal (dir, "/gfs/run");
    assert_true (size == 16ULL << 30);
    assert_int_equal (opts_split_size ("/gfs/a:b", dir, sizeof (dir), &size,
                                       &error),
                      0);
    assert_string_equal (dir, "/gfs/a:b");      /* not a size: a name */
    assert_true (size == 0);
    assert_int_equal (opts_split_size ("/gfs/a:b:1M", dir, sizeof (dir), &size,
                                       &error),
                      0);
    assert_string_equal (dir, "/gfs/a:b");
    assert_true (size == 1ULL << 20);
}

/* '\' escapes ',' ':' and '\' in list items; keep= per directory */
static void test_escapes (void **state)
{
    const char *list = "/gfs/x\\,upperdir=/etc:4M:keep=always,/gfs/b\\\\,"
                       "/gfs/c\\:16G,/gfs/d\\e";
    char item[256], dir[256];
    const char *p = list;
    enum tier_keep keep;
    uint64_t size;
    tier_error_t error;

    assert_non_null (p = opts_next_item (p, item, sizeof (item)));
    assert_string_equal (item, "/gfs/x\\,upperdir=/etc:4M:keep=always");
    assert_int_equal (opts_split_item (item, dir, sizeof (dir), &size, &keep,
                                       &error),
                      0);
    assert_string_equal (dir, "/gfs/x,upperdir=/etc");
    assert_true (size == 4ULL << 20);
    assert_int_equal (keep, TIER_KEEP_ALWAYS);
    assert_non_null (p = opts_next_item (p, item, sizeof (item)));
    assert_int_equal (opts_split_item (item, dir, sizeof (dir), &size, &keep,
                                       &error),
                      0);
    assert_string_equal (dir, "/gfs/b\\");            /* "\\\\" is one '\\' */
    assert_int_equal (keep, TIER_KEEP_UNSET);
    assert_non_null (p = opts_next_item (p, item, sizeof (item)));
    assert_int_equal (opts_split_size (item, dir, sizeof (dir), &size, &error),
                      0);
    assert_string_equal (dir, "/gfs/c:16G");           /* an escaped ':' */
    assert_true (size == 0);
    assert_non_null (p = opts_next_item (p, item, sizeof (item)));
    assert_int_equal (opts_split_size (item, dir, sizeof (dir), &size, &error),
                      0);
    assert_string_equal (dir, "/gfs/d\\e");           /* '\\' + other: kept */
    assert_null (opts_next_item (p, item, sizeof (item)));
    /* the list check takes the same items */
    assert_int_equal (opts_list_check ("--tier-scratch", list, TIER_ITEM_SIZE,
                                       NULL, &error),
                      0);
    assert_int_equal (opts_list_check ("--tier-scratch", "/gfs/x,upperdir=/etc",
                                       TIER_ITEM_SIZE, NULL, &error),
                      -1);
    assert_non_null (strstr (error.text, "not an absolute path"));
    assert_int_equal (opts_list_check ("--tier-scratch",
                                       "/gfs/x:keep=sometimes", TIER_ITEM_SIZE,
                                       NULL, &error),
                      -1);
    assert_non_null (strstr (error.text, "keep= is not one of"));
    assert_int_equal (opts_list_check ("--tier-scratch", "/gfs/x:0",
                                       TIER_ITEM_SIZE, NULL, &error),
                      -1);
    assert_non_null (strstr (error.text, "more than 0"));
}

static void test_expand (void **state)
{
    struct tier_pattern_ctx ctx = {
        .job_id = 4250, .array_job_id = 4242, .array_task_id = 7,
        .is_array = true, .user = "alice", .job_name = "blast",
        .node_name = "n2", .node_index = 1,
    };
    char out[256];
    tier_error_t error;

    assert_int_equal (opts_pattern_expand ("/g/%A_%a/%j/%u/%x/%N/%n/%%", &ctx,
                                           out, sizeof (out), &error),
                      0);
    assert_string_equal (out, "/g/4242_7/4250/alice/blast/n2/1/%");
    assert_int_equal (opts_pattern_expand ("/g/q%3a.fa", &ctx, out,
                                           sizeof (out), &error),
                      0);
    assert_string_equal (out, "/g/q007.fa");
    assert_int_equal (opts_pattern_expand ("/g/%10j", &ctx, out, sizeof (out),
                                           &error),
                      0);
    assert_string_equal (out, "/g/0000004250");
    assert_int_equal (opts_pattern_expand ("/g/%99j", &ctx, out, sizeof (out),
                                           &error),
                      0);
    assert_string_equal (out, "/g/0000004250");
    assert_int_equal (opts_pattern_expand ("/g/%3u", &ctx, out, sizeof (out),
                                           &error),
                      0);
    assert_string_equal (out, "/g/alice");      /* no padding of names */
    assert_int_equal (opts_pattern_expand ("/g/\\%a", &ctx, out, sizeof (out),
                                           &error),
                      0);
    assert_string_equal (out, "/g/\\%a");       /* literal */
    ctx.is_array = false;
    assert_int_equal (opts_pattern_expand ("/g/%A", &ctx, out, sizeof (out),
                                           &error),
                      0);
    assert_string_equal (out, "/g/4250");       /* %A: the job id */
    assert_int_equal (opts_pattern_expand ("/g/%a", &ctx, out, sizeof (out),
                                           &error),
                      -1);
    assert_non_null (strstr (error.text, "not an array job"));
    ctx.job_name = "../../etc";
    assert_int_equal (opts_pattern_expand ("/g/%x", &ctx, out, sizeof (out),
                                           &error),
                      -1);
    ctx.job_name = "..";
    assert_int_equal (opts_pattern_expand ("/g/%x", &ctx, out, sizeof (out),
                                           &error),
                      -1);
    ctx.job_name = "ok";
    assert_int_equal (opts_pattern_expand ("/g/%j%j%j", &ctx, out, 8, &error),
                      -1);
    assert_int_equal (errno, ENAMETOOLONG);
}

static void test_opts_check (void **state)
{
    struct tier_opts o;
    tier_error_t error;

    memset (&o, 0, sizeof (o));
    strcpy (o.stage_in, "/gfs/q%a");
    assert_int_equal (opts_check (&o, 1, &error), 0);
    assert_int_equal (opts_check (&o, -1, &error), 0);
    assert_int_equal (opts_check (&o, 0, &error), -1);
    assert_string_equal (error.text, "--tier-stage-in: %a is used but the "
                         "job is not an array job (add --array)");
    memset (&o, 0, sizeof (o));
    o.cache = TIER_CACHE_OFF;
    assert_int_equal (opts_check (&o, 0, &error), 0);
    strcpy (o.batch, "/gfs/db");
    assert_int_equal (opts_check (&o, 0, &error), -1);
    assert_non_null (strstr (error.text, "contradicts"));
    /* a value injected on the node is checked there too */
    memset (&o, 0, sizeof (o));
    strcpy (o.scratch, "etc");
    assert_int_equal (opts_check (&o, 0, &error), -1);
}

static void test_args (void **state)
{
    struct tier_args a;
    tier_error_t error;
    char *ok[] = { "conf=/etc/tier//tier.conf", "default=auto",
                   "preload=/opt/tier/lib/libtier_preload.so" };
    char *bad1[] = { "conf=relative" };
    char *bad2[] = { "bogus=1" };
    char *bad3[] = { "default=sometimes" };
    char *bad4[] = { "noequals" };
    char *pernode[] = { "conf=/etc/tier/%n.conf" };
    char *bad5[] = { "conf=/etc/tier/%u.conf" };

    assert_int_equal (args_parse (0, NULL, &a, &error), 0);
    assert_int_equal (a.default_mode, TIER_CACHE_OFF);
    assert_int_equal (args_parse (3, ok, &a, &error), 0);
    assert_string_equal (a.conf, "/etc/tier/tier.conf");
    assert_int_equal (a.default_mode, TIER_CACHE_AUTO);
    assert_string_equal (a.preload, "/opt/tier/lib/libtier_preload.so");
    assert_int_equal (args_parse (1, bad1, &a, &error), -1);
    assert_non_null (strstr (error.text, "plugstack argument conf"));
    assert_int_equal (args_parse (1, bad2, &a, &error), -1);
    assert_string_equal (error.text, "unknown plugstack argument 'bogus' "
                         "(known: conf, default, preload)");
    assert_int_equal (args_parse (1, bad3, &a, &error), -1);
    assert_non_null (strstr (error.text, "default"));
    assert_int_equal (args_parse (1, bad4, &a, &error), -1);
    /* %n in conf=: expanded on the node (remote_load_conf) */
    assert_int_equal (args_parse (1, pernode, &a, &error), 0);
    assert_string_equal (a.conf, "/etc/tier/%n.conf");
    assert_int_equal (args_parse (1, bad5, &a, &error), -1);
    assert_string_equal (error.text, "plugstack argument conf: only %n and "
                         "%% may follow a %");
}

static void test_sbatch_argv (void **state)
{
    struct {
        char *argv[8];
        int array, script, wrap;
    } cases[] = {
        { { "sbatch", "--array=1-4", "job.sh" }, 1, 2, 0 },
        { { "sbatch", "--array", "1-4", "job.sh" }, 1, 3, 0 },
        { { "sbatch", "-a", "1-4", "job.sh" }, 1, 3, 0 },
        { { "sbatch", "-a1-4", "job.sh" }, 1, 2, 0 },
        { { "sbatch", "-Ha", "1-4", "job.sh", "arg" }, 1, 3, 0 },
        { { "sbatch", "-N", "2", "job.sh", "--array=9" }, 0, 3, 0 },
        { { "sbatch", "-o", "out", "--parsable", "job.sh" }, 0, 4, 0 },
        { { "sbatch", "--output", "out", "job.sh" }, 0, 3, 0 },
        { { "sbatch", "--account", "a", "job.sh" }, 0, 3, 0 },
        { { "sbatch", "--arr=1-2", "--wrap", "x" }, 1, 0, 1 },
        { { "sbatch", "--wrap=true" }, 0, 0, 1 },
        { { "sbatch", "--tier-stage-in", "/g/%a", "s.sh" }, 0, 3, 0 },
        { { "sbatch" }, 0, 0, 0 },
    };

    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        int argc = 0, script, wrap;
        while (cases[i].argv[argc])
            argc++;
        assert_int_equal (submit_argv_array (argc, cases[i].argv, &script,
                                             &wrap),
                          cases[i].array);
        assert_int_equal (script, cases[i].script);
        assert_int_equal (wrap, cases[i].wrap);
    }
}

static void test_sbatch_script (void **state)
{
    const char *yes[] = {
        "#!/bin/bash\n#SBATCH --array=1-4\necho\n",
        "#!/bin/bash\n\n#SBATCH -N 1\n#SBATCH -a 1-4\n",
        "#SBATCH -a1-3",
        "#!/bin/sh\n# comment\n#SBATCH --job-name=x --array 1-2\n",
    };
    const char *no[] = {
        "#!/bin/bash\necho\n#SBATCH --array=1-4\n",
        "#!/bin/bash\n#SBATCH --account=a\n",
        "#!/bin/bash\n#SBATCH -A a\n",
        "#!/bin/bash\n#SBATCH --job-name=x # --array=1-2\n",
        "#!/bin/bash\n##SBATCH --array=1-2\n",
        "",
    };

    for (size_t i = 0; i < sizeof (yes) / sizeof (yes[0]); i++)
        assert_int_equal (submit_script_array (yes[i], strlen (yes[i])), 1);
    for (size_t i = 0; i < sizeof (no) / sizeof (no[0]); i++)
        assert_int_equal (submit_script_array (no[i], strlen (no[i])), 0);
}

static void test_self_argv (void **state)
{
    char *buf, **argv;
    int argc = submit_self_argv (&buf, &argv);

    assert_true (argc >= 1);
    assert_non_null (strstr (argv[0], "test_opts"));
    free (argv);
    free (buf);
}

/* Every allocation of submit_self_argv may fail: -1 with ENOMEM, nothing
 * leaked (ASan's leak checker watches in the sanitizer build).
 */
static void test_self_argv_failalloc (void **state)
{
    for (int n = 1; n < 100; n++) {
        char *buf = NULL, **argv = NULL;
        int argc;

        failalloc_arm (n);
        argc = submit_self_argv (&buf, &argv);
        if (!failalloc_failed) {
            failalloc_arm (-1);
            assert_true (argc >= 1 && n > 2);
            free (argv);
            free (buf);
            return;
        }
        assert_int_equal (argc, -1);
        assert_int_equal (errno, ENOMEM);
        assert_null (argv);
        assert_null (buf);
    }
    fail_msg ("submit_self_argv never finished");
}

/* The submit-time checks read the submitting process's own command line
 * (sbatch -N 2 SCRIPT): run in a copy of this program started that way,
 * failing each of their allocations in turn.  The exit status says what
 * went wrong (0: nothing).
 */
static int submit_child (void)
{
    int n;

    for (n = 1; n < 100; n++) {
        int rc;

        failalloc_arm (n);
        rc = submit_is_array ();
        if (!failalloc_failed)
            break;
        if (rc != -1 || errno != ENOMEM)
            return 10;                  /* a failure must say so */
    }
    failalloc_arm (-1);
    if (n < 4 || submit_is_array () != 1)
        return 11;                      /* argv, its words, the script */
    for (n = 1; n < 100; n++) {
        long nodes;

        failalloc_arm (n);
        nodes = submit_nodes ();
        if (!failalloc_failed) {
            failalloc_arm (-1);
            return nodes == 2 && n > 2 ? 0 : 12;
        }
        if (nodes != 0)
            return 13;                  /* unknown, not a wrong count */
    }
    return 14;
}

static void test_submit_failalloc (void **state)
{
    char dir[] = "/tmp/test_opts.XXXXXX", script[64], self[4096];
    const char *text = "#!/bin/bash\n#SBATCH --array=1-4\n#SBATCH -N 3\n"
                       "echo\n";
    ssize_t len;
    int fd, status;
    pid_t pid;

    assert_non_null (mkdtemp (dir));
    (void) snprintf (script, sizeof (script), "%s/job.sh", dir);
    assert_true ((fd = open (script, O_WRONLY | O_CREAT | O_EXCL, 0600))
                 >= 0);
    assert_int_equal (write (fd, text, strlen (text)), (int) strlen (text));
    close (fd);
    assert_true ((len = readlink ("/proc/self/exe", self,
                                  sizeof (self) - 1)) > 0);
    self[len] = '\0';
    assert_true ((pid = fork ()) >= 0);
    if (pid == 0) {
        char *argv[] = { "sbatch", "-N", "2", script, NULL };
        (void) setenv ("TEST_OPTS_SUBMIT_CHILD", "1", 1);
        (void) unsetenv ("SBATCH_ARRAY_INX");
        (void) unsetenv ("SBATCH_NNODES");
        execv (self, argv);
        _exit (127);
    }
    assert_int_equal (waitpid (pid, &status, 0), pid);
    (void) unlink (script);
    (void) rmdir (dir);
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
        fail_msg ("the submit checks under failing allocations: status "
                  "0x%x (see submit_child)", status);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_words),
        cmocka_unit_test (test_lists),
        cmocka_unit_test (test_url_items),
        cmocka_unit_test (test_url_out_items),
        cmocka_unit_test (test_split_size),
        cmocka_unit_test (test_escapes),
        cmocka_unit_test (test_expand),
        cmocka_unit_test (test_opts_check),
        cmocka_unit_test (test_args),
        cmocka_unit_test (test_sbatch_argv),
        cmocka_unit_test (test_sbatch_script),
        cmocka_unit_test (test_self_argv),
        cmocka_unit_test (test_self_argv_failalloc),
        cmocka_unit_test (test_submit_failalloc),
    };

    if (getenv ("TEST_OPTS_SUBMIT_CHILD"))
        return submit_child ();
    return UNIT_RUN (tests);
}
