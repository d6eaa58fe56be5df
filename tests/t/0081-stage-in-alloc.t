#!/bin/bash
test_description='stage-in with PrologFlags=Alloc: every node stages at allocation'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM,FUSE || skip_all "needs root, Slurm and FUSE"
test_expect_success 'start a cluster with PrologFlags=Alloc' '
    cluster_start --prolog-flags Alloc && grep -q "^PrologFlags=Alloc" $SLURM_CONF
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
OUT=$H/out
as_user alice mkdir -p "$H/in" "$OUT"
as_user alice sh -c "echo in-1 > $H/in/q1.txt; echo in-2 > $H/in/q2.txt"

test_expect_success 'both nodes staged before any step reached the second (the script waits for the test)' '
    id=$(cd $H && as_user alice sbatch --parsable -N2 -w n1,n2 --array=1 --tier-stage-in=$H/in/q%a.txt -o $OUT/a.out \
        --wrap "while [ ! -e $OUT/go ]; do sleep 0.2; done; srun -N2 cat $H/in/q1.txt") &&
    j=$(scontrol show job $id | sed -n "s/^JobId=\([0-9]*\).*/\1/p" | head -1) &&
    wait_for 30 grep -q "\"state\":\"done\"" $CLUSTER/run/ns/n2/$j/stage.status &&
    touch $OUT/go &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED &&
    cat $OUT/a.out && test "$(grep -c in-1 $OUT/a.out)" = 2
'
test_expect_success 'a missing input fails the job cleanly; the node is not drained' '
    id=$(sbatch_wait alice -N1 -w n2 --tier-stage-in=$H/in/none -o /dev/null -e $OUT/m.err --wrap true) &&
    test "$(job_state $id)" = FAILED && grep -q "stage-in failed: $H/in/none" $OUT/m.err &&
    ! sinfo -h -R | grep .
'
test_done
