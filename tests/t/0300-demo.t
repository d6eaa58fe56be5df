#!/bin/bash
test_description='the README demo: a BLAST batch through the tiers'
. "$(dirname "$0")/../lib/tap.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'the demo runs to the end (3 tasks)' '
    TIER_DEMO_DIR=$TRASH/demo TIER_DEMO_TASKS=3 bash $TIER_SRCDIR/tests/demo.sh >$TRASH/out 2>&1;
    rc=$?; cat $TRASH/out; test $rc = 0
'
test_expect_success 'it shows the three nodes of the cluster' '
    for n in n1 n2 n3; do grep -q "^$n debug\*\? " $TRASH/out || exit 1; done
'
test_expect_success 'both batches completed as alice, every task with its report' '
    test "$(grep -c "^batch [0-9]* (with\(out\)\? tier):  3 COMPLETED (as alice)$" $TRASH/out)" = 2 &&
    test "$(grep -c "^task [123] on n[123]: 3 raw hits" $TRASH/out)" = 6
'
test_expect_success 'with tier, pipeline intermediates never reached the GFS (without, they did)' '
    line=$(grep "^intermediates under runs/: bytes written " $TRASH/out) && echo "$line" &&
    set -- $(echo "$line" | sed "s/^intermediates under runs\/: bytes written//") &&
    test "$1 $2 $3 $4" = "$1 B 0 B" && test "$1" -gt 0
'
test_expect_success 'with tier, the database was read from the GFS at most once' '
    line=$(grep "^database (3 tasks" $TRASH/out) && echo "$line" &&
    size=$(echo "$line" | sed -n "s/^database (3 tasks, \([0-9.]*\) MiB).*/\1/p") &&
    set -- $(echo "$line" | sed "s/^database ([^)]*)//") &&
    echo "size $size MiB, read without tier $4 MiB, with tier $6 MiB" &&
    awk -v s="$size" -v on="$6" "BEGIN { exit !(on > 0 && on <= s) }"
'
test_expect_success 'it ends with the per-batch statistics: the database hit in the BB cache' '
    grep -q "^=== tierctl stats --batch" $TRASH/out &&
    line=$(grep -E "^batch +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+%" $TRASH/out) && echo "$line" &&
    hits=$(echo "$line" | awk "{print \$3}") && test "$hits" -gt 0
'
test_expect_success 'the demo stopped its cluster' '
    test ! -e $TRASH/demo/run/slurmctld.pid
'
test_done
