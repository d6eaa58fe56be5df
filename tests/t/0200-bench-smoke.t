#!/bin/bash
test_description='a smoke run of every benchmark scenario (no assertion on time)'
. "$(dirname "$0")/../lib/tap.sh"

test_have_prereq ROOT,SLURM,FUSE || skip_all "needs root, Slurm and FUSE"
[ -x "$TIER_BUILDDIR/bench/cwrite" ] && test_set_prereq MPI
test_expect_success MPI 'bench/run --smoke runs every scenario and prints the table' '
    run_timeout 600 "$TIER_SRCDIR/bench/run" --smoke --out "$TRASH/res" >"$TRASH/out" 2>"$TRASH/err";
    rc=$?; cat "$TRASH/out"; tail -5 "$TRASH/err"; test $rc = 0 &&
    grep -q "^| scenario | metric | without tier | with tier | ratio" "$TRASH/out" &&
    for s in launch pipeline batch interposer stage-cp stage-rsync cwrite; do
        grep "^| $s |" "$TRASH/out" | grep -qv "| - |" || { echo "no $s"; exit 1; }
    done
'
test_expect_success MPI 'the JSON results and the CSV for tierctl predict are written' '
    ls "$TRASH/res" && python3 -c "import json,glob; d=json.load(open(glob.glob(\"$TRASH/res/bench-*.json\")[0])); assert d[\"results\"]" &&
    head -2 "$TRASH/res/cwrite-gfs.csv" | grep -q "^run,node,seconds$"
'
test_done
