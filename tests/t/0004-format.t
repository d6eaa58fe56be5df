#!/bin/bash
test_description='C files changed since .clang-format came are formatted with it'
. "$(dirname "$0")/../lib/tap.sh"

# The house style (issue 15) is the top's .clang-format, for clang-format
# 14 (Debian 12's).  The code written before it keeps its hand layout
# (aligned trailing comments, chosen line breaks); every line of a C file
# under the directories below that changed since the commit that added
# .clang-format (committed or not) must be as clang-format 14 writes it:
# git clang-format-14 --diff BASE shows what to change, and without
# --diff makes the change.
STYLE=$TIER_SRCDIR/.clang-format
DIRS="lib agent spank_plugin ctl policies bench tests"

# clang-format 14: $CLANG_FORMAT, clang-format-14, or a clang-format of
# that version (another version formats differently).
CF=
for c in "${CLANG_FORMAT:-}" clang-format-14 clang-format; do
    [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 || continue
    case $("$c" --version 2>/dev/null) in
        *" version 14."*) CF=$c; break ;;
    esac
done
[ -n "$CF" ] && test_set_prereq CLANG_FORMAT

# Which files changed needs the history.  A dist tarball has none: make
# distcheck (TIER_SKIP_INTEGRATION=1) skips this script; anywhere else a
# missing .git is a skip, which CI (TIER_REQUIRE_ALL=1, a git clone)
# counts as a failure.
if ! test -e "$TIER_SRCDIR/.git"; then
    [ "${TIER_SKIP_INTEGRATION:-0}" = 1 ] && TIER_REQUIRE_ALL=0 \
        skip_all "$TIER_SRCDIR is not a git checkout (a dist tarball)"
    skip_all "$TIER_SRCDIR is not a git checkout: no history to compare with"
fi

git_src () {
    git -c safe.directory="$TIER_SRCDIR" -C "$TIER_SRCDIR" "$@"
}

test_expect_success CLANG_FORMAT "$CF reads .clang-format" '
    echo "$CF: $("$CF" --version)" &&
    "$CF" --style=file:"$STYLE" --dump-config >"$TRASH/config" &&
    grep -qx "IndentWidth: *4" "$TRASH/config" &&
    grep -qx "ColumnLimit: *80" "$TRASH/config" &&
    grep -qx "SpaceBeforeParens: *Always" "$TRASH/config"
'

# The shapes of STYLE.md and the code as written, which .clang-format
# must leave as they are.
cat >"$TRASH/sample.c" <<'EOF'
/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* sample.c - the house style, as .clang-format keeps it */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <string.h>

#include "lib/error.h"
#include "sample.h"

struct sample {
    int fd;     /* -1: closed */
    size_t len; /* bytes in buf */
    char buf[4096];
};

static const struct {
    const char *name;
    int value;
} names[] = {
    { "one", 1 },
    { "two", 2 },
};

int sample_read (struct sample *s, const char *path, int flags,
                 tier_error_t *error)
{
    struct stat st = { 0 };
    int rc = -1;

    if (!s || !path) {
        errno = EINVAL;
        return -1;
    }
    if ((s->fd = open (path, flags | O_CLOEXEC)) < 0
        || fstat (s->fd, &st) < 0) {
        tier_errprintf (error, "%s: %s", path, strerror (errno));
        goto error;
    }
    else if (st.st_size > (off_t) sizeof (s->buf))
        goto error;
    switch (flags & O_ACCMODE) {
        case O_RDONLY:
            break;
        default:
            (void) close (s->fd);
            goto error;
    }
    rc = 0;
error:
    return rc;
}
EOF
test_expect_success CLANG_FORMAT '.clang-format keeps the house style' '
    "$CF" --style=file:"$STYLE" "$TRASH/sample.c" >"$TRASH/sample.out" &&
    diff -u "$TRASH/sample.c" "$TRASH/sample.out"
'

# changed_files: the C files under $DIRS that differ from the tree of the
# commit that added .clang-format (HEAD if it is not committed yet), and
# the new files git does not ignore.
changed_files () {
    local base
    base=$(git_src log --diff-filter=A --format=%H -- .clang-format |
           tail -n 1) || return 1
    if [ -z "$base" ]; then
        base=$(git_src rev-parse --verify HEAD) || return 1
    elif [ "$(git_src rev-parse --is-shallow-repository)" = true ] &&
         ! git_src rev-parse -q --verify "$base^" >/dev/null; then
        # the shallow end of the history "adds" every file
        echo "a shallow clone ends at $base: git fetch --unshallow" >&2
        return 1
    fi
    echo "since $base ($(git_src log -1 --format=%s "$base"))" >&2
    # shellcheck disable=SC2086
    { git_src diff --name-only --diff-filter=d "$base" -- $DIRS &&
      git_src ls-files --others --exclude-standard -- $DIRS; } |
        grep -E '\.[ch]$' | sort -u
    return 0
}
test_expect_success 'git lists the C files changed since .clang-format came' '
    changed_files >"$TRASH/changed" &&
    echo "$(wc -l <"$TRASH/changed") changed C files:" &&
    cat "$TRASH/changed"
'
GCF=$(command -v git-clang-format-14 || command -v git-clang-format)
test_expect_success CLANG_FORMAT 'every line changed since then is formatted' '
    test -f "$TRASH/changed" && test -n "$GCF" &&
    base=$(git_src log --diff-filter=A --format=%H -- .clang-format |
           tail -n 1) &&
    : "${base:=HEAD}" &&
    { test ! -s "$TRASH/changed" ||
      (cd "$TIER_SRCDIR" &&
       git -c safe.directory="$TIER_SRCDIR" -c color.ui=never \
           "${GCF##*/git-}" --binary "$CF" --style file --diff "$base" \
           -- $(cat "$TRASH/changed")) >"$TRASH/diff" 2>&1; } &&
    if grep -q "^diff --git" "$TRASH/diff"; then
        cat "$TRASH/diff"
        echo "lines not formatted with .clang-format; to fix, run:"
        echo "  cd $TIER_SRCDIR && ${GCF##*/} --binary $CF $base -- FILES"
        false
    fi
'
test_done
