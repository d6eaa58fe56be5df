#!/bin/bash
test_description='fuzz every parser for a bounded time (libFuzzer, ASan, UBSan)'
. "$(dirname "$0")/../lib/tap.sh"

# Each tests/fuzz/fuzz_<name>.c is built with clang from the sources in
# $TIER_SRCDIR and run from its seed corpus tests/fuzz/corpus/<name>/
# (read only: new inputs go to the trash directory) for TIER_FUZZ_SECONDS
# (default 13; the small targets names and evt get a third of it), about
# 105 s in all.  A crash, a leak, an ASan or UBSan report or a failed
# check fails the test; the input that did it is kept in the trash
# directory.  Under TIER_SKIP_INTEGRATION=1 (make distcheck from
# tests/run) the default is 2 s: the main build fuzzed already.  Before
# it fuzzes, each target replays the inputs that once crashed it,
# tests/fuzz/regress/<name>/.  How a target is built and run is in
# tests/fuzz/fuzz.sh, shared with make fuzz-long (tests/fuzz/long).

. "$TIER_SRCDIR/tests/fuzz/fuzz.sh"
if [ -n "${TIER_FUZZ_SECONDS:-}" ]; then
    fuzz_seconds=$TIER_FUZZ_SECONDS
elif [ "${TIER_SKIP_INTEGRATION:-0}" = 1 ]; then
    fuzz_seconds=2
else
    fuzz_seconds=13
fi
small_seconds=$((fuzz_seconds / 3))
[ "$small_seconds" -ge 1 ] || small_seconds=1

# trivial: does clang build fuzzers here; then the replay of regress
# inputs must tell its crash ("boom") from a clean input
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput (const uint8_t *d, size_t n);' \
    'int LLVMFuzzerTestOneInput (const uint8_t *d, size_t n)' \
    '{ if (n >= 4 && d[0] == 98 && d[1] == 111 && d[2] == 111' \
    '      && d[3] == 109) __builtin_trap (); return 0; }' >"$TRASH/trivial.c"
# shellcheck disable=SC2086,SC2090
"$FUZZ_CC" $FUZZ_FLAGS -o "$TRASH/trivial" "$TRASH/trivial.c" \
    >/dev/null 2>&1 && test_set_prereq CLANG
pkg-config --exists jansson 2>/dev/null && test_set_prereq JANSSON
# fuzz_rpc links what the configured build links the agent with
test -f "$TIER_BUILDDIR/agent/Makefile" && test_set_prereq AGENT

# fuzz_run NAME SECONDS: fuzz; fail on any report.  fuzz_rpc drops to
# nobody when started as root: its new inputs and artifacts go to
# directories nobody may write.
fuzz_run () {
    _n=$1
    _s=$2
    _log=$TRASH/fuzz_$_n.log
    mkdir -p "$TRASH/corpus-$_n" "$TRASH/crash-$_n"
    [ "$_n" = rpc ] && fuzz_nobody_owns "$TRASH/corpus-$_n" "$TRASH/crash-$_n"
    fuzz_exec $((_s + 60)) "$TRASH/fuzz_$_n" "$_log" \
        -max_total_time="$_s" -artifact_prefix="$TRASH/crash-$_n/" \
        "$TRASH/corpus-$_n" "$FUZZ_SRC/corpus/$_n"
    _rc=$?
    tail -n 40 "$_log"
    [ "$_rc" = 0 ] || { echo "exit $_rc; artifacts in $TRASH"; return 1; }
    fuzz_log_clean "$_log"
}

# fuzz_replay_ok NAME: every input of tests/fuzz/regress/NAME/ runs clean
fuzz_replay_ok () {
    _log=$TRASH/regress_$1.log
    fuzz_replay "$1" "$TRASH/fuzz_$1" "$_log"
    _rc=$?
    [ "$_rc" = 0 ] || tail -n 40 "$_log"
    [ "$_rc" = 0 ]
}

# fuzz_stats NAME SECONDS
fuzz_stats () {
    _log=$TRASH/fuzz_$1.log
    test -f "$_log" || return 0
    _cov=$(grep -o 'cov: [0-9]*' "$_log" | tail -n 1)
    say "fuzz_$1: $(fuzz_stat "$_log" number_of_executed_units || :)" \
        "inputs in ${2}s, $(fuzz_stat "$_log" average_exec_per_sec || :)" \
        "exec/s, ${_cov:-cov: ?}"
}

test_expect_success CLANG 'a regress input that crashes fails its replay' '
    mkdir -p "$TRASH/regress/trivial" &&
    echo clean >"$TRASH/regress/trivial/clean" &&
    FUZZ_REGRESS=$TRASH/regress fuzz_replay trivial "$TRASH/trivial" \
        "$TRASH/replay-clean.log" &&
    echo boom >"$TRASH/regress/trivial/crash-boom" &&
    ! FUZZ_REGRESS=$TRASH/regress fuzz_replay trivial "$TRASH/trivial" \
        "$TRASH/replay-crash.log" &&
    grep -q "deadly signal" "$TRASH/replay-crash.log"
'

for name in $FUZZ_TARGETS_ALL; do
    prereq=CLANG
    [ "$name" = tjson ] && prereq=CLANG,JANSSON
    [ "$name" = policy ] && prereq=CLANG,JANSSON
    [ "$name" = rpc ] && prereq=CLANG,JANSSON,AGENT
    secs=$fuzz_seconds
    case $name in names|evt) secs=$small_seconds ;; esac
    nregress=$(fuzz_regress_files "$name" | wc -l)
    test_expect_success "$prereq" "fuzz_$name builds" \
        "fuzz_build $name \"\$TRASH/fuzz_$name\""
    if test -x "$TRASH/fuzz_$name"; then
        [ "$nregress" = 0 ] || test_expect_success "$prereq" \
            "fuzz_$name: the $nregress inputs of regress/$name/ replay clean" \
            "fuzz_replay_ok $name"
        test_expect_success "$prereq" \
            "fuzz_$name: ${secs}s without crash, leak or UB" \
            "fuzz_run $name $secs"
        fuzz_stats "$name" "$secs"
    else
        test_expect_success "$prereq" \
            "fuzz_$name: ${secs}s without crash, leak or UB" 'false'
    fi
done
test_done
