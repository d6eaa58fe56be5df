/* cat_fopen.c - copy a file to stdout through fopen/fread (stdio), as C
 * programs read their inputs: for the interposer tests */
#include <stdio.h>

int main (int argc, char **argv)
{
    char buf[65536];
    size_t n;
    FILE *f;

    if (argc != 2 || !(f = fopen (argv[1], "rb"))) {
        perror (argc == 2 ? argv[1] : "usage: cat_fopen FILE");
        return 1;
    }
    while ((n = fread (buf, 1, sizeof (buf), f)) > 0)
        if (fwrite (buf, 1, n, stdout) != n)
            return 1;
    return ferror (f) ? 1 : fclose (f) != 0;
}
