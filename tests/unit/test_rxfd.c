/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_rxfd.c - agent/rxfd.c: which received descriptors the agent may
 * touch, and the closer threads of those it gives up
 *
 * rxfd_check reads the real /proc (fdinfo, the caller's mountinfo): a
 * file on a mount of this process's namespace is taken; a pipe, a socket
 * (the kernel's internal mounts, in no mountinfo) and a pid that does not
 * exist are refused, each with a reason.  The FUSE rule (a user's mount,
 * a FUSE mount seen from another user namespace) needs a real FUSE mount
 * by a user: tests/t/0140 does that on the cluster.  rxfd_drop closes on
 * a thread of its own and returns once the descriptor has left the table
 * (a child forked afterwards must not inherit it).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/agent.h"

static void test_regular_file_taken (void **state)
{
    char path[] = "/tmp/test_rxfd.XXXXXX";
    tier_error_t e = { { 0 } };
    int fd = mkstemp (path);

    (void) state;
    assert_true (fd >= 0);
    (void) unlink (path);
    assert_int_equal (rxfd_check (getpid (), fd, &e), 0);
    /* a directory too: any file of a mount the node has */
    {
        int d = open ("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true (d >= 0);
        assert_int_equal (rxfd_check (getpid (), d, &e), 0);
        close (d);
    }
    close (fd);
}

static void test_internal_mounts_refused (void **state)
{
    tier_error_t e = { { 0 } };
    int p[2], s[2];

    (void) state;
    assert_int_equal (pipe2 (p, O_CLOEXEC), 0);
    errno = 0;
    assert_int_equal (rxfd_check (getpid (), p[0], &e), -1);
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (e.text, "outside the client's mounts"));
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s),
                      0);
    assert_int_equal (rxfd_check (getpid (), s[0], &e), -1);
    close (p[0]);
    close (p[1]);
    close (s[0]);
    close (s[1]);
}

static void test_bad_descriptor_or_peer (void **state)
{
    tier_error_t e = { { 0 } };
    int fd = open ("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    (void) state;
    errno = 0;
    assert_int_equal (rxfd_check (getpid (), 1000000, &e), -1);
    assert_int_equal (errno, EBADF);
    /* a client that is gone: its mounts cannot vouch for anything */
    errno = 0;
    assert_int_equal (rxfd_check (0x3fffffff, fd, &e), -1);
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (e.text, "cannot read the mounts"));
    close (fd);
}

static void test_drop_closes_off_the_caller (void **state)
{
    int fds[8];

    (void) state;
    for (int i = 0; i < 8; i++) {
        int p[2];
        assert_int_equal (pipe2 (p, O_CLOEXEC), 0);
        close (p[1]);
        fds[i] = p[0];
    }
    for (int i = 0; i < 8; i++) {
        rxfd_drop (4242, fds[i]);
        /* out of the table when rxfd_drop returns (unless another
         * thread reused the number: none here) */
        assert_true (fcntl (fds[i], F_GETFD) < 0 && errno == EBADF);
    }
    assert_int_equal (rxfd_wait_idle (5000), 0);
    assert_int_equal (rxfd_closing (NULL), 0);
    assert_false (rxfd_busy (4242));
    rxfd_drop (4242, -1); /* nothing */
    assert_int_equal (rxfd_wait_idle (5000), 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_regular_file_taken),
        cmocka_unit_test (test_internal_mounts_refused),
        cmocka_unit_test (test_bad_descriptor_or_peer),
        cmocka_unit_test (test_drop_closes_off_the_caller),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
