/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* paths.h - lexical path normalisation, prefix tests on component
 * boundaries, and opening a path beneath a root without escaping it */
#ifndef TIER_PATHS_H
#define TIER_PATHS_H

#include <stdbool.h>
#include <stddef.h>

/* Normalise an absolute path lexically: collapse "//", drop "." and
 * trailing "/", resolve ".." against the previous component ("/.." is
 * "/").  Returns 0, or -1 with errno EINVAL (not absolute, empty, NUL-free
 * required) or ENAMETOOLONG (does not fit in size).
 */
int tier_path_normalize (const char *in, char *out, size_t size);

/* Make path absolute against cwd (if relative), then normalise. */
int tier_path_absolute (const char *path, const char *cwd, char *out,
                        size_t size);

/* True if path has a ".." component. */
bool tier_path_has_dotdot (const char *path);

/* True if the normalised path equals root or lies beneath it on a
 * component boundary: "/a/b/c" and "/a/b" are under "/a/b", "/a/bc" is
 * not.  Both must be normalised.
 */
bool tier_path_under (const char *path, const char *root);

/* If path is under root, return the remainder ("" for root itself, else
 * without a leading "/"); NULL otherwise.
 */
const char *tier_path_strip (const char *path, const char *root);

enum {
    TIER_BENEATH_NO_SYMLINKS = 1,   /* refuse every symlink, even inside */
};

/* Open rel (relative, or absolute = taken relative to the root) beneath
 * the directory rootfd.  No component may lead out of the root: ".."
 * above it and symlinks pointing outside fail with EXDEV (openat2) or
 * ELOOP; with TIER_BENEATH_NO_SYMLINKS any symlink fails with ELOOP.
 * Uses openat2 (RESOLVE_BENEATH) and falls back to an O_NOFOLLOW walk that
 * refuses every symlink.  Returns a descriptor, or -1 with errno set.
 */
int tier_path_open_beneath (int rootfd, const char *rel, int flags,
                            int mode, int bflags);

#endif /* !TIER_PATHS_H */
