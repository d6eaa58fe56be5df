/* cat_paths.c - open each path in turn, in one process, and print what
 * the open gave: "PATH: BYTES HASH" (FNV-1a of the contents) or
 * "PATH: error message".  Run with and without the interposer, the two
 * outputs must be equal (the interposer never changes what is read).
 *
 *   cat_paths [-f] PATH...      (-f: print the descriptor's O_DIRECT bit)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main (int argc, char **argv)
{
    int flags = 0, i = 1;

    if (argc > 1 && !strcmp (argv[1], "-f")) {
        flags = 1;
        i++;
    }
    for (; i < argc; i++) {
        uint64_t h = 14695981039346656037ULL, bytes = 0;
        char buf[65536];
        ssize_t n;
        int fd = open (argv[i], O_RDONLY);

        if (fd < 0) {
            printf ("%s: %s\n", argv[i], strerror (errno));
            continue;
        }
        if (flags)
            printf ("%s: O_DIRECT %s\n", argv[i],
                    fcntl (fd, F_GETFL) & O_DIRECT ? "set" : "clear");
        while ((n = read (fd, buf, sizeof (buf))) > 0) {
            for (ssize_t k = 0; k < n; k++)
                h = (h ^ (unsigned char) buf[k]) * 1099511628211ULL;
            bytes += (uint64_t) n;
        }
        if (n < 0)
            printf ("%s: read: %s\n", argv[i], strerror (errno));
        else
            printf ("%s: %llu %016llx\n", argv[i], (unsigned long long) bytes,
                    (unsigned long long) h);
        close (fd);
    }
    return 0;
}
