/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* paths.h - lexical path normalisation, prefix tests on component
 * boundaries, and opening a path beneath a root without escaping it */
#ifndef TIER_PATHS_H
#define TIER_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    TIER_BENEATH_NO_SYMLINKS = 1, /* refuse every symlink, even inside */
    TIER_BENEATH_NO_XDEV = 2,     /* refuse to cross a mount point */
};

/* Open rel (relative, or absolute = taken relative to the root) beneath
 * the directory rootfd.  No component may lead out of the root: ".."
 * above it and symlinks pointing outside fail with EXDEV (openat2) or
 * ELOOP; with TIER_BENEATH_NO_SYMLINKS any symlink fails with ELOOP.
 * With TIER_BENEATH_NO_XDEV a component that is a mount point fails with
 * EXDEV before its file system is asked anything (openat2 only: without
 * it, ENOSYS).  Uses openat2 (RESOLVE_BENEATH) and falls back to an
 * O_NOFOLLOW walk that refuses every symlink.  Returns a descriptor, or
 * -1 with errno set.
 */
int tier_path_open_beneath (int rootfd, const char *rel, int flags,
                            int mode, int bflags);

/* Lists of directories (the --tier-* options, the agent's list of a
 * job's pipeline directories) are separated by ','.  In an item, '\'
 * escapes the next character, so that any name can be listed:
 * "\\" "\," "\:" stand for '\' ',' ':'; a '\' before any other
 * character is itself.
 */

/* Copy the next item of list (escapes kept) into item; returns a pointer
 * past it, or NULL at the end.
 */
const char *tier_list_next (const char *list, char *item, size_t size);

/* Escape '\', ',' and ':' in a name for such a list.  Returns 0, or -1
 * with ENAMETOOLONG.
 */
int tier_list_escape (const char *in, char *out, size_t size);

/* Split a scratch item "DIR[:SIZE][:keep=WHEN]": the directory with its
 * escapes undone, SIZE in bytes (0 when not given; a ':' that no size
 * follows is part of the name, as in "/gfs/y:/root"), and WHEN (never,
 * on-failure, always; "" when not given) into keep when not NULL.
 * Returns 0, or -1 with errno: EINVAL (an unknown WHEN), ERANGE (a zero
 * size), EOVERFLOW (a size over TIER_SIZE_MAX), ENAMETOOLONG.
 */
int tier_item_split (const char *item, char *dir, size_t dirsize,
                     uint64_t *size, char *keep, size_t keepsize);

#endif /* !TIER_PATHS_H */
