#!/bin/bash
test_description='pipeline scratch on a root-squashing GFS: refused with a clear warning'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM,FUSE || skip_all "needs root, Slurm and FUSE"
test_expect_success 'start a cluster whose GFS squashes root' '
    cluster_start --gfs-opts root_squash && test "$(cat $CLUSTER/run/gfs.mode)" = gfsemu
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
test_expect_success 'root cannot read alice'"'"'s private directory on this GFS' '
    as_user alice mkdir -m 700 "$H/private" && as_user alice sh -c "echo x > $H/private/f" &&
    ! ls "$H/private" 2>/dev/null
'
test_expect_success 'auto: the job runs on the plain GFS view, with the reason' '
    (cd $H && as_user alice srun -w n1 --tier-scratch=$H/private sh -c "echo job > $H/private/written; grep -c \" - overlay \" /proc/self/mountinfo || true") >$TRASH/o 2>$TRASH/e;
    cat $TRASH/o $TRASH/e &&
    grep -q "the GFS squashes root, so a scratch view cannot be mounted" $TRASH/e &&
    test "$(tail -1 $TRASH/o)" = 0 &&
    test "$(as_user alice cat $H/private/written)" = job
'
test_expect_success 'required: the job fails cleanly with the reason' '
    ! (cd $H && as_user alice srun -w n1 --tier-cache=required --tier-scratch=$H/private true) 2>$TRASH/r;
    cat $TRASH/r && grep -q "required: --tier-scratch: .* the GFS squashes root" $TRASH/r &&
    ! sinfo -h -R | grep .
'
test_done
