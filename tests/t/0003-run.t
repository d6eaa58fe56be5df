#!/bin/bash
test_description='tests/run: its package list and how it counts results'
. "$(dirname "$0")/../lib/tap.sh"

RUN=$TIER_SRCDIR/tests/run

# The packages tests/run installs, one per line.
packages () {
    (. "$RUN" && printf '%s\n' $PACKAGES)
}

# Commands whose presence turns a test prerequisite on, and the Debian
# package that has them.  A prerequisite CI lacks is a failed test.
PREREQ_CMDS="slurmctld:slurmctld slurmd:slurmd munged:munge
  fusermount3:fuse3 busybox:busybox-static python3:python3
  xmllint:libxml2-utils npm:npm openssl:openssl curl:curl strace:strace
  clang-format-14:clang-format git-clang-format-14:clang-format
  git-clang-format:clang-format"

test_expect_success 'every prerequisite command comes from a listed package' '
    packages >"$TRASH/pkgs" && test -s "$TRASH/pkgs" &&
    (for pair in $PREREQ_CMDS; do
        grep -qx "${pair#*:}" "$TRASH/pkgs" || {
            echo "${pair%%:*}: ${pair#*:} is not in PACKAGES"; exit 1; }
    done)
'
test_expect_success 'every command tests probe for is known above' '
    grep -ho "command -v [a-z0-9_-][a-z0-9_-]*" "$TIER_SRCDIR"/tests/t/*.t \
        "$TIER_SRCDIR"/tests/lib/*.sh | sort -u | cut -d" " -f3 >"$TRASH/cmds" &&
    cat "$TRASH/cmds" &&
    (while read -r c; do
        case " $(echo $PREREQ_CMDS) " in *" $c:"*) continue ;; esac
        # valgrind sets a prerequisite no test uses
        if [ "$c" = valgrind ] &&
           ! grep -q "^test_expect_[a-z]* [A-Z,]*VALGRIND" \
               "$TIER_SRCDIR"/tests/t/*.t; then
            continue
        fi
        echo "$c: add it and its package to PREREQ_CMDS and PACKAGES"
        exit 1
    done <"$TRASH/cmds")
'

# fake_tree NAME RECIPE [PASS FAIL]: a directory whose `make check` runs
# RECIPE, with a test-suite.log of PASS and FAIL results in suite.in
fake_tree () {
    mkdir -p "$TRASH/$1/sub" &&
    printf 'check:\n\t%s\n' "$2" >"$TRASH/$1/Makefile" &&
    if [ $# = 4 ]; then
        printf '# TOTAL: %d\n# PASS:  %d\n# SKIP:  0\n# FAIL:  %d\n' \
            $(($3 + $4)) "$3" "$4" >"$TRASH/$1/suite.in"
    fi
}
# counted DIR SUITE...: "passed failed" as tests/run check counts them
counted () {
    (. "$RUN" && check_in "$@" && echo "$passed $failed")
}

test_expect_success 'a make check that passes counts its tests' '
    fake_tree ok "cp suite.in sub/test-suite.log" 3 0 &&
    out=$(counted "$TRASH/ok" "$TRASH/ok.log" sub/test-suite.log) &&
    test "$out" = "3 0"
'
test_expect_success 'failed tests are counted once, not again for make' '
    fake_tree fail "cp suite.in sub/test-suite.log; exit 2" 2 1 &&
    out=$(counted "$TRASH/fail" "$TRASH/fail.log" sub/test-suite.log) &&
    test "$out" = "2 1"
'
test_expect_success 'a check program that does not compile is a failure' '
    fake_tree nocc "echo test_x.c:1: error: expected semicolon; exit 2" &&
    out=$(counted "$TRASH/nocc" "$TRASH/nocc.log" sub/test-suite.log \
          2>"$TRASH/nocc.err") &&
    cat "$TRASH/nocc.err" && test "$out" = "0 1" &&
    grep -q "no $TRASH/nocc/sub/test-suite.log" "$TRASH/nocc.err"
'
test_expect_success 'a missing test-suite.log is a failure even if make passed' '
    fake_tree none "true" &&
    out=$(counted "$TRASH/none" "$TRASH/none.log" sub/test-suite.log) &&
    test "$out" = "0 1"
'
test_expect_success 'a failing make whose logs show no failure is a failure' '
    fake_tree late "cp suite.in sub/test-suite.log; exit 2" 4 0 &&
    out=$(counted "$TRASH/late" "$TRASH/late.log" sub/test-suite.log \
          2>"$TRASH/late.err") &&
    cat "$TRASH/late.err" && test "$out" = "4 1" &&
    grep -q "FAILED: make check in $TRASH/late (exit 2" "$TRASH/late.err"
'
test_done
