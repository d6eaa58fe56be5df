# fuzz.sh - build and run the libFuzzer targets (sourced, not run)
#
# Shared by tests/t/0020-fuzz.t (a bounded run in make check) and
# tests/fuzz/long (make fuzz-long).  Needs TIER_SRCDIR and TIER_BUILDDIR
# (a configured build: fuzz_rpc links what it links the agent with);
# TIER_FUZZ_CC names the compiler (default clang).
#
#   fuzz_build NAME OUT      build tests/fuzz/fuzz_NAME.c into OUT
#   fuzz_exec SECS BIN LOG ARG...
#                            run BIN with the common options and ARGs
#                            (corpus directories, files, more options),
#                            its output into LOG, killed after SECS;
#                            its exit status (124: killed)
#   fuzz_log_clean LOG       no sanitizer report, libFuzzer error or
#                            failed check in LOG
#   fuzz_stat LOG KEY        stat::KEY of -print_final_stats=1 in LOG
#   fuzz_regress_files NAME  the inputs under $FUZZ_REGRESS/NAME/
#   fuzz_replay NAME BIN LOG run BIN on each of them: 0 when none crashes
#                            (nor leaks, nor reports), or there are none
#   fuzz_nobody_owns DIR...  under root, give DIRs to nobody: fuzz_rpc
#                            drops to nobody and writes there
#
# FUZZ_TARGETS_ALL lists the targets, FUZZ_SRC is tests/fuzz, FUZZ_FLAGS
# what every target is compiled with.  FUZZ_REGRESS (default
# tests/fuzz/regress) holds the inputs that once crashed a target, one
# directory per target: each is replayed by make check (README.md).

# shellcheck shell=bash disable=SC2034
FUZZ_TARGETS_ALL="tjson msgreader conf opts names evt policy rpc"
FUZZ_SRC=$TIER_SRCDIR/tests/fuzz
FUZZ_REGRESS=${FUZZ_REGRESS:-$FUZZ_SRC/regress}
FUZZ_CC=${TIER_FUZZ_CC:-clang}
# the quotes are the macros' (string literals); SC2090 where it is used
# shellcheck disable=SC2089
FUZZ_FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined
    -fno-sanitize-recover=all -fno-omit-frame-pointer
    -DHAVE_CONFIG_H -I$TIER_BUILDDIR -I$TIER_SRCDIR -I$TIER_SRCDIR/lib
    -DTIER_SYSCONFDIR=\"/etc/tier\" -DTIER_PKGLIBDIR=\"/usr/lib/tier\"
    -DTIER_SBINDIR=\"/usr/sbin\" -DTIER_FUZZING"

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

# fuzz_build NAME OUT.  -DTIER_FUZZING: what only a fuzzer may change
# (agent/store.c: an LMDB store that never syncs).
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
    # the agent's forks go through fuzz_rpc.c's __wrap_fork
    [ "$_n" = rpc ] && _libs="$(agent_flags) -Wl,--wrap=fork"
    # shellcheck disable=SC2086,SC2090
    "$FUZZ_CC" $FUZZ_FLAGS -Wall -Wextra -Wno-unused-parameter \
        -o "$2" "$FUZZ_SRC/fuzz_$_n.c" $_src $_libs
}

# fuzz_exec SECS BIN LOG ARG...: leaks count; any UB report ends the run.
# fuzz_rpc forks (the agent's children) and a fork copies the page-table
# entries of every page written, those of ASan's quarantine (256 MB by
# default) too: with 8 MB it runs about 1.6 times as many inputs as with
# 64 MB, and freed memory still waits through several inputs before reuse.
fuzz_exec () {
    _secs=$1 _bin=$2 _log=$3 _asan=detect_leaks=1
    shift 3
    case ${_bin##*/} in
        fuzz_rpc*) _asan=$_asan:quarantine_size_mb=8 ;;
    esac
    ASAN_OPTIONS=$_asan \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        timeout --kill-after=5 "$_secs" "$_bin" -max_len=4096 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 "$@" >"$_log" 2>&1
}

fuzz_log_clean () {
    ! grep -E 'runtime error:|ERROR: (Address|Leak)Sanitizer' "$1" &&
    ! grep -E 'ERROR: libFuzzer|check failed' "$1"
}

fuzz_stat () {
    sed -n "s/^stat::$2: *//p" "$1" | tail -n 1
}

fuzz_regress_files () {
    _d=$FUZZ_REGRESS/$1
    test -d "$_d" || return 0
    find "$_d" -type f ! -name '.*' | sort
}

# fuzz_replay NAME BIN LOG: each input alone (libFuzzer runs the files
# it is given once each), within 10 s (-timeout)
fuzz_replay () {
    _files=$(fuzz_regress_files "$1")
    : >"$3"
    [ -n "$_files" ] || return 0
    # shellcheck disable=SC2086
    fuzz_exec 600 "$2" "$3" $_files && fuzz_log_clean "$3" >/dev/null
}

fuzz_nobody_owns () {
    [ "$(id -u)" = 0 ] || return 0
    chown -R 65534:65534 "$@"
}
