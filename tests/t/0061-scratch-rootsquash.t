#!/bin/bash
test_description='pipeline scratch on a root-squashing GFS: refused with a clear warning'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM,FUSE || skip_all "needs root, Slurm and FUSE"
test_expect_success 'start a cluster whose GFS squashes root' '
    cluster_start --gfs-opts root_squash && test "$(cat $CLUSTER/run/gfs.mode)" = gfsemu &&
    grep -qx "GfsRootSquash = yes" $CLUSTER/etc/tier.conf
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
    grep -q "the GFS squashes root (GfsRootSquash = yes in tier.conf), so a scratch view cannot be mounted" $TRASH/e &&
    test "$(tail -1 $TRASH/o)" = 0 &&
    test "$(as_user alice cat $H/private/written)" = job
'
test_expect_success 'required: the job fails cleanly with the reason' '
    ! (cd $H && as_user alice srun -w n1 --tier-cache=required --tier-scratch=$H/private true) 2>$TRASH/r;
    cat $TRASH/r && grep -q "required: --tier-scratch: .* the GFS squashes root" $TRASH/r &&
    ! sinfo -h -R | grep .
'
# srun_scratch DIR FILE: cat FILE in a job with DIR as scratch, then count
# its overlays; stdout in $TRASH/o, stderr in $TRASH/e
srun_scratch () {
    (cd $H && as_user alice srun -w n1 --tier-scratch=$1 sh -c \
        "cat $2; grep -c \" - overlay \" /proc/self/mountinfo || true") >$TRASH/o 2>$TRASH/e
    _rc=$?; cat $TRASH/o $TRASH/e; return $_rc
}
test_expect_success 'GfsRootSquash = yes: even a directory anyone can read stays on the GFS' '
    as_user alice mkdir -m 755 "$H/pub" && as_user alice sh -c "echo hi > $H/pub/f" &&
    srun_scratch $H/pub $H/pub/f && test "$(cat $TRASH/o)" = "$(printf "hi\n0")" &&
    grep -q "the GFS squashes root (GfsRootSquash = yes in tier.conf)" $TRASH/e
'
# without the setting, the probe: root lists a 0755 directory, but cannot
# read alice's 0600 file in it -- which an overlay would give her EACCES on
test_expect_success 'without it, a 0755 directory with her 0600 file: the GFS view, never EACCES' '
    as_user alice mkdir -m 755 "$H/open" &&
    as_user alice sh -c "echo mine > $H/open/secret && chmod 600 $H/open/secret" &&
    ls $H/open >/dev/null && ! cat $H/open/secret 2>/dev/null &&
    sed -i "/^GfsRootSquash/d" $CLUSTER/etc/tier.conf &&
    srun_scratch $H/open $H/open/secret; rc=$?;
    echo "GfsRootSquash = yes" >>$CLUSTER/etc/tier.conf;
    test $rc = 0 && test "$(cat $TRASH/o)" = "$(printf "mine\n0")" &&
    grep -q "the GFS squashes root (root cannot read secret in it), so a scratch view cannot be mounted" $TRASH/e &&
    ! grep -q "Permission denied" $TRASH/e
'
test_expect_success 'and a 0755 directory with her 0700 subdirectory' '
    as_user alice mkdir -p -m 755 "$H/open2" && as_user alice mkdir -m 700 "$H/open2/sub" &&
    as_user alice sh -c "echo deep > $H/open2/sub/f" &&
    sed -i "/^GfsRootSquash/d" $CLUSTER/etc/tier.conf &&
    srun_scratch $H/open2 $H/open2/sub/f; rc=$?;
    echo "GfsRootSquash = yes" >>$CLUSTER/etc/tier.conf;
    test $rc = 0 && test "$(cat $TRASH/o)" = "$(printf "deep\n0")" &&
    grep -q "(root cannot read sub in it)" $TRASH/e
'
test_done
