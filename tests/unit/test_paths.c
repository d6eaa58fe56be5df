/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_paths.c - normalisation, prefix tests, opening beneath a root */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/paths.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_normalize (void **state)
{
    static const struct { const char *in, *out; } cases[] = {
        { "/", "/" }, { "//", "/" }, { "/a", "/a" }, { "/a/", "/a" },
        { "/a//b///c/", "/a/b/c" }, { "/a/./b/.", "/a/b" },
        { "/a/b/..", "/a" }, { "/a/b/../..", "/" }, { "/..", "/" },
        { "/../a", "/a" }, { "/a/../../b", "/b" }, { "/a/.b/..c", "/a/.b/..c" },
        { "/a/b/../c/./d/", "/a/c/d" }, { "/.../x", "/.../x" },
    };
    char out[PATH_MAX];

    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        assert_int_equal (tier_path_normalize (cases[i].in, out,
                                               sizeof (out)), 0);
        assert_string_equal (out, cases[i].out);
    }
    errno = 0;
    assert_int_equal (tier_path_normalize ("a/b", out, sizeof (out)), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_path_normalize ("", out, sizeof (out)), -1);
    assert_int_equal (tier_path_normalize (NULL, out, sizeof (out)), -1);
    errno = 0;
    assert_int_equal (tier_path_normalize ("/abcdef/ghi", out, 8), -1);
    assert_int_equal (errno, ENAMETOOLONG);
    /* exactly fitting */
    assert_int_equal (tier_path_normalize ("/abc/", out, 5), 0);
    assert_string_equal (out, "/abc");
}

static void test_absolute (void **state)
{
    char out[PATH_MAX];

    assert_int_equal (tier_path_absolute ("x/../y", "/gfs/home", out,
                                          sizeof (out)), 0);
    assert_string_equal (out, "/gfs/home/y");
    assert_int_equal (tier_path_absolute ("/abs/./p", "/cwd", out,
                                          sizeof (out)), 0);
    assert_string_equal (out, "/abs/p");
    assert_int_equal (tier_path_absolute ("rel", "notabs", out,
                                          sizeof (out)), -1);
    assert_int_equal (tier_path_absolute ("", "/", out, sizeof (out)), -1);
}

static void test_dotdot (void **state)
{
    assert_true (tier_path_has_dotdot ("/a/../b"));
    assert_true (tier_path_has_dotdot (".."));
    assert_true (tier_path_has_dotdot ("/a/.."));
    assert_false (tier_path_has_dotdot ("/a/..b/c"));
    assert_false (tier_path_has_dotdot ("/a/b.."));
    assert_false (tier_path_has_dotdot ("/a/./b"));
}

static void test_under (void **state)
{
    assert_true (tier_path_under ("/a/b", "/a/b"));
    assert_true (tier_path_under ("/a/b/c", "/a/b"));
    assert_false (tier_path_under ("/a/bc", "/a/b"));
    assert_false (tier_path_under ("/a", "/a/b"));
    assert_true (tier_path_under ("/x", "/"));
    assert_true (tier_path_under ("/", "/"));
    assert_string_equal (tier_path_strip ("/a/b/c/d", "/a/b"), "c/d");
    assert_string_equal (tier_path_strip ("/a/b", "/a/b"), "");
    assert_string_equal (tier_path_strip ("/a/b", "/"), "a/b");
    assert_null (tier_path_strip ("/a/bc", "/a/b"));
}

static char root[PATH_MAX];

static int setup_tree (void **state)
{
    char p[PATH_MAX + 64];
    int fd;

    snprintf (root, sizeof (root), "/tmp/test_paths.XXXXXX");
    if (!mkdtemp (root))
        return -1;
    snprintf (p, sizeof (p), "%s/in", root);
    mkdir (p, 0755);
    snprintf (p, sizeof (p), "%s/in/sub", root);
    mkdir (p, 0755);
    snprintf (p, sizeof (p), "%s/in/sub/file", root);
    if ((fd = open (p, O_CREAT | O_WRONLY, 0644)) < 0)
        return -1;
    close (fd);
    snprintf (p, sizeof (p), "%s/outside", root);
    if ((fd = open (p, O_CREAT | O_WRONLY, 0644)) < 0)
        return -1;
    close (fd);
    snprintf (p, sizeof (p), "%s/in/escape", root);
    symlink ("../outside", p);
    snprintf (p, sizeof (p), "%s/in/abs", root);
    symlink ("/etc/passwd", p);
    snprintf (p, sizeof (p), "%s/in/inner", root);
    symlink ("sub/file", p);
    return 0;
}

static int teardown_tree (void **state)
{
    char cmd[PATH_MAX + 16];

    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", root);
    return system (cmd) == 0 ? 0 : -1;
}

static void test_open_beneath (void **state)
{
    char p[PATH_MAX + 8];
    int rootfd, fd;

    snprintf (p, sizeof (p), "%s/in", root);
    assert_true ((rootfd = open (p, O_PATH | O_DIRECTORY)) >= 0);

    /* ordinary paths, relative or "absolute to the root" */
    assert_true ((fd = tier_path_open_beneath (rootfd, "sub/file", O_RDONLY,
                                               0, 0)) >= 0);
    close (fd);
    assert_true ((fd = tier_path_open_beneath (rootfd, "/sub/file", O_RDONLY,
                                               0, 0)) >= 0);
    close (fd);
    assert_true ((fd = tier_path_open_beneath (rootfd, "", O_RDONLY
                                               | O_DIRECTORY, 0, 0)) >= 0);
    close (fd);
    /* ".." inside is fine, above the root is not */
    assert_true ((fd = tier_path_open_beneath (rootfd, "sub/../sub/file",
                                               O_RDONLY, 0, 0)) >= 0);
    close (fd);
    errno = 0;
    assert_int_equal (tier_path_open_beneath (rootfd, "../outside", O_RDONLY,
                                              0, 0), -1);
    assert_int_equal (errno, EXDEV);
    /* symlinks leading out are refused; one staying inside is allowed
     * unless every symlink is refused */
    assert_int_equal (tier_path_open_beneath (rootfd, "escape", O_RDONLY,
                                              0, 0), -1);
    assert_int_equal (tier_path_open_beneath (rootfd, "abs", O_RDONLY, 0, 0),
                      -1);
    assert_true ((fd = tier_path_open_beneath (rootfd, "inner", O_RDONLY, 0,
                                               0)) >= 0);
    close (fd);
    errno = 0;
    assert_int_equal (tier_path_open_beneath (rootfd, "inner", O_RDONLY, 0,
                                              TIER_BENEATH_NO_SYMLINKS), -1);
    assert_int_equal (errno, ELOOP);
    /* create beneath */
    assert_true ((fd = tier_path_open_beneath (rootfd, "sub/new",
                                               O_CREAT | O_EXCL | O_WRONLY,
                                               0600, 0)) >= 0);
    close (fd);
    close (rootfd);
}

/* TIER_BENEATH_NO_XDEV: a mount point on the way is refused (/proc is
 * one wherever this runs); the root's own file system is fine */
static void test_open_beneath_xdev (void **state)
{
    char p[PATH_MAX + 8];
    int rootfd, fd;

    (void) state;
    assert_true ((rootfd = open ("/", O_PATH | O_DIRECTORY)) >= 0);
    assert_true ((fd = tier_path_open_beneath (rootfd, "proc/self", O_PATH, 0,
                                               0))
                 >= 0);
    close (fd);
    errno = 0;
    assert_int_equal (tier_path_open_beneath (rootfd, "proc/self", O_PATH, 0,
                                              TIER_BENEATH_NO_XDEV),
                      -1);
    assert_int_equal (errno, EXDEV);
    errno = 0;
    assert_int_equal (tier_path_open_beneath (rootfd, "proc", O_PATH, 0,
                                              TIER_BENEATH_NO_XDEV),
                      -1);
    assert_int_equal (errno, EXDEV);
    /* without a mount on the way, as without the flag */
    snprintf (p, sizeof (p), "%s/in", root);
    close (rootfd);
    assert_true ((rootfd = open (p, O_PATH | O_DIRECTORY)) >= 0);
    assert_true ((fd = tier_path_open_beneath (rootfd, "sub/file", O_RDONLY, 0,
                                               TIER_BENEATH_NO_XDEV))
                 >= 0);
    close (fd);
    close (rootfd);
}

/* any name survives escaping into a list item and splitting it again */
static void test_list_escape (void **state)
{
    static const char *names[] = {
        "/gfs/x,upperdir=/etc", "/gfs/y:/root", "/gfs/z\\", "/gfs/a\\,b:4M",
        "/gfs/w:keep=always", "/gfs/plain",
    };
    char esc[256], item[300], dir[256], keep[16], list[1024] = "";
    const char *p;
    uint64_t size;
    size_t i;

    for (i = 0; i < sizeof (names) / sizeof (names[0]); i++) {
        assert_int_equal (tier_list_escape (names[i], esc, sizeof (esc)), 0);
        snprintf (item, sizeof (item), "%s:8M:keep=on-failure", esc);
        assert_int_equal (tier_item_split (item, dir, sizeof (dir), &size,
                                           keep, sizeof (keep)), 0);
        assert_string_equal (dir, names[i]);
        assert_true (size == 8ULL << 20);
        assert_string_equal (keep, "on-failure");
        assert_int_equal (tier_item_split (esc, dir, sizeof (dir), &size,
                                           keep, sizeof (keep)), 0);
        assert_string_equal (dir, names[i]);
        assert_true (size == 0 && keep[0] == '\0');
        strcat (list, i ? "," : "");
        strcat (list, esc);
    }
    for (p = list, i = 0; (p = tier_list_next (p, item, sizeof (item))); i++) {
        assert_int_equal (tier_item_split (item, dir, sizeof (dir), &size,
                                           NULL, 0), 0);
        assert_string_equal (dir, names[i]);
    }
    assert_int_equal (i, sizeof (names) / sizeof (names[0]));
    /* a size past 8 EiB is an error, not part of the name */
    errno = 0;
    assert_int_equal (tier_item_split ("/gfs/d:8192P", dir, sizeof (dir), &size,
                                       NULL, 0),
                      -1);
    assert_int_equal (errno, EOVERFLOW);
    assert_int_equal (tier_item_split ("/gfs/d\\:8192P", dir, sizeof (dir),
                                       &size, NULL, 0),
                      0);
    assert_string_equal (dir, "/gfs/d:8192P");
    assert_int_equal (tier_list_escape ("/a,b", esc, 5), -1);
    assert_int_equal (errno, ENAMETOOLONG);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_normalize),
        cmocka_unit_test (test_absolute),
        cmocka_unit_test (test_dotdot),
        cmocka_unit_test (test_under),
        cmocka_unit_test (test_list_escape),
        cmocka_unit_test_setup_teardown (test_open_beneath_xdev, setup_tree,
                                         teardown_tree),
        cmocka_unit_test_setup_teardown (test_open_beneath, setup_tree,
                                         teardown_tree),
    };
    return UNIT_RUN (tests);
}
