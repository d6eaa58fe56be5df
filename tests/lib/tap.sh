# tap.sh - a small sharness-like TAP library for tier's shell tests
#
# A test script:
#
#   #!/bin/bash
#   test_description='what this file tests'
#   . "$(dirname "$0")/../lib/tap.sh"
#   test_expect_success 'name' 'commands'
#   test_expect_success ROOT,SLURM 'name' 'commands'
#   test_done
#
# Commands run with `eval` in the script's own shell (variables they set
# stay set), with their output captured in the trash directory and shown
# as TAP comments when they fail.  A test whose prerequisites are missing
# is skipped -- unless TIER_REQUIRE_ALL=1 (CI), where it fails.
#
# Environment: TIER_SRCDIR, TIER_BUILDDIR (set by make check; guessed
# otherwise), TIER_TEST_VERBOSE=1 (show output of passing tests too),
# TIER_TEST_KEEP=1 (keep the trash directory).

set -u

: "${TIER_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${TIER_BUILDDIR:=$TIER_SRCDIR}"
export TIER_SRCDIR TIER_BUILDDIR

test_count=0
test_failed=0
test_skipped=0
test_prereqs=" "
test_name_=$(basename "$0" .t)

# A world-traversable trash directory outside the build tree: tests run
# jobs as unprivileged users, who must reach it.
TRASH=$(mktemp -d "${TMPDIR:-/tmp}/tier-$test_name_.XXXXXX") || exit 99
chmod 755 "$TRASH"
export TRASH

test_set_prereq () {
    test_prereqs="$test_prereqs$1 "
}

test_have_prereq () {
    _p=$(printf '%s' "$1" | tr ',' ' ')
    for _q in $_p; do
        case "$test_prereqs" in
            *" $_q "*) ;;
            *) test_missing_prereq_="$_q"; return 1 ;;
        esac
    done
    return 0
}

# Standard prerequisites.  TIER_SKIP_INTEGRATION=1 (make distcheck from
# tests/run, after the integration tests ran in the main build) drops the
# ones that start clusters and file systems.
[ "$(id -u)" = 0 ] && test_set_prereq ROOT
if [ "${TIER_SKIP_INTEGRATION:-0}" != 1 ] \
   && command -v slurmctld >/dev/null 2>&1 \
   && command -v slurmd >/dev/null 2>&1 \
   && command -v munged >/dev/null 2>&1; then
    test_set_prereq SLURM
fi
[ "${TIER_SKIP_INTEGRATION:-0}" != 1 ] && [ -c /dev/fuse ] && command -v fusermount3 >/dev/null 2>&1 \
    && test_set_prereq FUSE
command -v valgrind >/dev/null 2>&1 && test_set_prereq VALGRIND
[ "${TIER_TEST_EXPENSIVE:-0}" = 1 ] && test_set_prereq EXPENSIVE
if [ "$(id -u)" = 0 ] && id alice >/dev/null 2>&1 && id bob >/dev/null 2>&1
then
    test_set_prereq USERS
fi

say () {
    printf '# %s\n' "$*"
}

test_show_output_ () {
    sed 's/^/#   /' "$1"
}

test_ok_ () {
    test_count=$((test_count + 1))
    printf 'ok %d - %s\n' "$test_count" "$1"
}

test_not_ok_ () {
    test_count=$((test_count + 1))
    test_failed=$((test_failed + 1))
    printf 'not ok %d - %s\n' "$test_count" "$1"
}

test_skip_ () {
    test_count=$((test_count + 1))
    if [ "${TIER_REQUIRE_ALL:-0}" = 1 ]; then
        test_failed=$((test_failed + 1))
        printf 'not ok %d - %s (missing %s; TIER_REQUIRE_ALL=1)\n' \
            "$test_count" "$1" "$2"
    else
        test_skipped=$((test_skipped + 1))
        printf 'ok %d # SKIP %s (missing %s)\n' "$test_count" "$1" "$2"
    fi
}

test_running_=""
test_run_ () {
    _out="$TRASH/.test-$((test_count + 1)).out"
    # Run in the current shell (variables set by a test stay set), so an
    # `exit` in a test ends the script: wrap such code in ( ... ).  If it
    # happens anyway, the EXIT trap reports the test as failed.
    test_running_=$2
    set +u
    { eval "$1"; } >"$_out" 2>&1 </dev/null
    _rc=$?
    set -u
    test_running_=""
    return $_rc
}

# test_expect_success [PREREQS] NAME COMMANDS
test_expect_success () {
    if [ $# = 3 ]; then
        if ! test_have_prereq "$1"; then
            test_skip_ "$2" "$test_missing_prereq_"
            return 0
        fi
        shift
    fi
    if test_run_ "$2" "$1"; then
        test_ok_ "$1"
        [ "${TIER_TEST_VERBOSE:-0}" = 1 ] && test_show_output_ "$_out"
    else
        test_not_ok_ "$1"
        test_show_output_ "$_out"
    fi
    return 0
}

# test_expect_code [PREREQS] CODE NAME COMMANDS: the commands exit CODE.
test_expect_code () {
    if [ $# = 4 ]; then
        if ! test_have_prereq "$1"; then
            test_skip_ "$3" "$test_missing_prereq_"
            return 0
        fi
        shift
    fi
    test_run_ "$3" "$2"
    _rc=$?
    if [ "$_rc" = "$1" ]; then
        test_ok_ "$2"
    else
        test_not_ok_ "$2 (exit $_rc, expected $1)"
        test_show_output_ "$_out"
    fi
    return 0
}

# Stop the whole script: every remaining test is lost, so this is a failure.
bail_out () {
    printf 'Bail out! %s\n' "$*"
    test_cleanup_
    exit 1
}

# Skip the whole script (a failure under TIER_REQUIRE_ALL=1).
skip_all () {
    if [ "${TIER_REQUIRE_ALL:-0}" = 1 ]; then
        printf '1..1\nnot ok 1 - %s: %s (TIER_REQUIRE_ALL=1)\n' \
            "$test_name_" "$*"
        test_cleanup_
        exit 1
    fi
    printf '1..0 # SKIP %s\n' "$*"
    test_cleanup_
    exit 0
}

# Commands registered here run at exit, last registered first.
test_cleanup_cmds_=""
test_at_exit () {
    test_cleanup_cmds_="$1
$test_cleanup_cmds_"
}

test_cleanup_ () {
    if [ -n "$test_cleanup_cmds_" ]; then
        _cmds=$test_cleanup_cmds_
        test_cleanup_cmds_=""
        set +u
        eval "$_cmds" >/dev/null 2>&1
        set -u
    fi
    if [ "${TIER_TEST_KEEP:-0}" = 1 ] || [ "$test_failed" != 0 ]; then
        say "kept $TRASH"
    else
        rm -rf "$TRASH" 2>/dev/null
    fi
}

test_done () {
    printf '1..%d\n' "$test_count"
    test_cleanup_
    trap - EXIT
    [ "$test_failed" = 0 ]
    exit $?
}

exec 7>&1       # TAP's stdout, kept for the EXIT trap
test_exit_trap_ () {
    if [ -n "$test_running_" ]; then
        {
            test_not_ok_ "$test_running_ (the test called exit)"
            test_show_output_ "$TRASH/.test-$test_count.out"
            printf '1..%d\n' "$test_count"
        } >&7 2>&1
    fi
    test_cleanup_ >&7 2>&1
}
trap 'test_exit_trap_' EXIT
trap 'test_cleanup_; exit 130' INT TERM

# run_timeout SECS CMD...: fail (124) if CMD takes longer than SECS.
run_timeout () {
    _t=$1
    shift
    timeout --kill-after=5 "$_t" "$@"
}

# wait_for SECS CMD...: poll CMD every 0.1 s until it succeeds.
wait_for () {
    _deadline=$(( $(date +%s) + $1 ))
    shift
    while ! "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -ge "$_deadline" ] && return 1
        sleep 0.1
    done
    return 0
}
