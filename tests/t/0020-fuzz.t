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
# tests/run) the default is 2 s: the main build fuzzed already.

FUZZ_SRC=$TIER_SRCDIR/tests/fuzz
FUZZ_CC=${TIER_FUZZ_CC:-clang}
if [ -n "${TIER_FUZZ_SECONDS:-}" ]; then
    fuzz_seconds=$TIER_FUZZ_SECONDS
elif [ "${TIER_SKIP_INTEGRATION:-0}" = 1 ]; then
    fuzz_seconds=2
else
    fuzz_seconds=13
fi
small_seconds=$((fuzz_seconds / 3))
[ "$small_seconds" -ge 1 ] || small_seconds=1
FUZZ_FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined
    -fno-sanitize-recover=all -fno-omit-frame-pointer
    -DHAVE_CONFIG_H -I$TIER_BUILDDIR -I$TIER_SRCDIR -I$TIER_SRCDIR/lib
    -DTIER_SYSCONFDIR=\"/etc/tier\" -DTIER_PKGLIBDIR=\"/usr/lib/tier\"
    -DTIER_SBINDIR=\"/usr/sbin\""

printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput (const uint8_t *d, size_t n);' \
    'int LLVMFuzzerTestOneInput (const uint8_t *d, size_t n)' \
    '{ return d && n > 1000000; }' >"$TRASH/trivial.c"
# shellcheck disable=SC2086
"$FUZZ_CC" $FUZZ_FLAGS -o "$TRASH/trivial" "$TRASH/trivial.c" \
    >/dev/null 2>&1 && test_set_prereq CLANG
pkg-config --exists jansson 2>/dev/null && test_set_prereq JANSSON
# fuzz_rpc links what the configured build links the agent with
test -f "$TIER_BUILDDIR/agent/Makefile" && test_set_prereq AGENT

# am_sources DIR "FILES" VAR...: the .c files the Makefile.am FILES of DIR
# list in VAR (VAR = and VAR += lines, continued with backslashes), as
# paths from the top: fuzz_rpc builds what the agent is built from
am_sources () {
    _d=$1 _fs=$2
    shift 2
    for _v in "$@"; do
        for _f in $_fs; do
            awk -v v="$_v" '
                $1 == v && ($2 == "=" || $2 == "+=") { on = 1; $1 = $2 = "" }
                on { cont = sub(/\\$/, ""); for (i = 1; i <= NF; i++)
                         if ($i ~ /\.c$/) print $i
                     if (!cont) on = 0 }' "$TIER_SRCDIR/$_d/$_f"
        done
    done | sed "s|^|$_d/|"
}

# sources_of NAME: what fuzz_NAME is built from, besides itself
sources_of () {
    case $1 in
        tjson) echo lib/tjson.c ;;
        msgreader) echo lib/proto.c lib/clock.c lib/error.c ;;
        conf) echo lib/conf.c lib/trust.c lib/paths.c lib/units.c lib/error.c ;;
        opts) echo spank_plugin/opts.c spank_plugin/args.c \
                  spank_plugin/submit.c lib/conf.c lib/trust.c lib/paths.c \
                  lib/units.c lib/url.c lib/error.c ;;
        names) echo agent/peer.c lib/state.c lib/counters.c lib/log.c \
                   lib/trust.c lib/paths.c lib/units.c lib/clock.c \
                   lib/error.c ;;
        evt) echo lib/evt_csv.c lib/error.c ;;
        policy) echo policies/policy.c policies/resolve.c lib/paths.c lib/url.c \
                    lib/units.c lib/error.c ;;
        rpc) am_sources agent Makefile.am libtierd_la_SOURCES
             am_sources lib "Makefile.am copy.mk endpoint.mk" CORE_SOURCES \
                 libtier_la_SOURCES libtier_remote_la_SOURCES
             am_sources policies Makefile.am libtierpolicy_la_SOURCES \
                 libtierpolicy_files_la_SOURCES ;;
    esac
}

# agent_flags: how the build links the agent (libtierd's libraries), from
# the configured agent/Makefile
agent_flags () {
    _mk=$TIER_BUILDDIR/agent/Makefile
    _v=""
    for _k in SLURM_CPPFLAGS JANSSON_CFLAGS LMDB_CFLAGS PMEM_CFLAGS \
              ACL_CFLAGS CRYPTO_CFLAGS CURL_CFLAGS PTHREAD_CFLAGS \
              JANSSON_LIBS LMDB_LIBS PMEM_LIBS ACL_LIBS CRYPTO_LIBS \
              CURL_LIBS SLURM_LIBS \
              PTHREAD_LIBS; do
        _v="$_v $(sed -n "s/^$_k = //p" "$_mk" 2>/dev/null)"
    done
    echo "$_v"
}

fuzz_build () {
    _n=$1
    _src=""
    for _f in $(sources_of "$_n"); do
        _src="$_src $TIER_SRCDIR/$_f"
    done
    _libs=""
    [ "$_n" = tjson ] && _libs="$(pkg-config --cflags --libs jansson)"
    [ "$_n" = policy ] && _libs="$(pkg-config --cflags --libs jansson)"
    [ "$_n" = evt ] && _libs=-lm
    [ "$_n" = rpc ] && _libs=$(agent_flags)
    # shellcheck disable=SC2086
    "$FUZZ_CC" $FUZZ_FLAGS -Wall -Wextra -Wno-unused-parameter \
        -o "$TRASH/fuzz_$_n" "$FUZZ_SRC/fuzz_$_n.c" $_src $_libs
}

# fuzz_run NAME SECONDS: fuzz; fail on any report.  fuzz_rpc drops to
# nobody when started as root: its new inputs and artifacts go to
# directories nobody may write.
fuzz_run () {
    _n=$1
    _s=$2
    _log=$TRASH/fuzz_$_n.log
    mkdir -p "$TRASH/corpus-$_n" "$TRASH/crash-$_n"
    if [ "$_n" = rpc ] && [ "$(id -u)" = 0 ]; then
        chown 65534:65534 "$TRASH/corpus-$_n" "$TRASH/crash-$_n"
    fi
    ASAN_OPTIONS=detect_leaks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        run_timeout $((_s + 60)) "$TRASH/fuzz_$_n" \
        -max_total_time="$_s" -max_len=4096 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$TRASH/crash-$_n/" \
        "$TRASH/corpus-$_n" "$FUZZ_SRC/corpus/$_n" >"$_log" 2>&1
    _rc=$?
    tail -n 40 "$_log"
    [ "$_rc" = 0 ] || { echo "exit $_rc; artifacts in $TRASH"; return 1; }
    ! grep -E 'runtime error:|ERROR: (Address|Leak)Sanitizer' "$_log" &&
    ! grep -E 'ERROR: libFuzzer|check failed' "$_log"
}

# fuzz_stats NAME SECONDS
fuzz_stats () {
    _log=$TRASH/fuzz_$1.log
    test -f "$_log" || return 0
    _runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$_log")
    _eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$_log")
    _cov=$(grep -o 'cov: [0-9]*' "$_log" | tail -n 1)
    say "fuzz_$1: ${_runs:-?} inputs in ${2}s," \
        "${_eps:-?} exec/s, ${_cov:-cov: ?}"
}

for name in tjson msgreader conf opts names evt policy rpc; do
    prereq=CLANG
    [ "$name" = tjson ] && prereq=CLANG,JANSSON
    [ "$name" = policy ] && prereq=CLANG,JANSSON
    [ "$name" = rpc ] && prereq=CLANG,JANSSON,AGENT
    secs=$fuzz_seconds
    case $name in names|evt) secs=$small_seconds ;; esac
    test_expect_success "$prereq" "fuzz_$name builds" "fuzz_build $name"
    if test -x "$TRASH/fuzz_$name"; then
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
