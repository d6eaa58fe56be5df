/* cat_fortify.c - copy a file to stdout, opened as a program built with
 * -D_FORTIFY_SOURCE=2 -O2 opens it: glibc turns an open with flags that
 * are not a compile-time constant and no mode into __open_2 (open64:
 * __open64_2, openat: __openat_2, openat64: __openat64_2).  Build with
 * -DOPEN_KIND=0..3 for open, open64, openat, openat64; the interposer
 * tests check with nm which one the binary calls.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#ifndef OPEN_KIND
#define OPEN_KIND 0
#endif

static volatile int extra_flags;       /* 0, unknown to the compiler */

int main (int argc, char **argv)
{
    /* not a constant: the fortified wrapper calls __open*_2 */
    int flags = O_RDONLY | extra_flags;
    char buf[65536];
    ssize_t n;
    int fd;

    if (argc != 2) {
        fprintf (stderr, "usage: cat_fortify FILE\n");
        return 2;
    }
#if OPEN_KIND == 0
    fd = open (argv[1], flags);
#elif OPEN_KIND == 1
    fd = open64 (argv[1], flags);
#elif OPEN_KIND == 2
    fd = openat (AT_FDCWD, argv[1], flags);
#else
    fd = openat64 (AT_FDCWD, argv[1], flags);
#endif
    if (fd < 0) {
        perror (argv[1]);
        return 1;
    }
    while ((n = read (fd, buf, sizeof (buf))) > 0)
        if (write (STDOUT_FILENO, buf, (size_t) n) != n)
            return 1;
    return n < 0 || close (fd) != 0;
}
