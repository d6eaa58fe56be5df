#!/bin/bash
test_description='pipeline directories from policies get the NVDIMM scratch tier'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM || skip_all "needs root and Slurm"
test_expect_success 'start the cluster' 'cluster_start'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
as_alice () { (cd "$H" && as_user alice "$@"); }
as_user alice mkdir -p "$H/runs" "$H/out"

test_expect_success 'alice says runs is pipeline data, with a 4M reservation' '
    as_alice srun -w n1 --tier-cache=auto true &&
    (cd $H && as_user alice $TIERCTL -N n1 set policy $H/runs pipeline --size 4M) &&
    as_alice $TIERCTL -N n1 show policy $H/runs/x | tee $TRASH/show && grep -q pipeline $TRASH/show
'
test_expect_success 'a job with --tier-cache=auto writes there privately' '
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o $H/out/p.out \
        --wrap "echo inter > $H/runs/i.txt; cat $H/runs/i.txt; grep -c \" - overlay \" /proc/self/mountinfo") &&
    cat $H/out/p.out && grep -qx inter $H/out/p.out && grep -qx 1 $H/out/p.out &&
    test ! -e $H/runs/i.txt
'
# overlays DIR: how many overlays the job's namespace has at DIR
cat >$H/overlays <<'EOF'
awk -v d="$1" '$5 == d && / - overlay /' /proc/self/mountinfo | wc -l
EOF
chmod 755 $H/overlays
test_expect_success 'a shadowed pipeline entry is not mounted, one named twice once' '
    as_user alice mkdir -p $H/sitep &&
    printf "{\"version\":1,\"policies\":{\"$H/sitep\":{\"role\":\"pipeline\"}}}" \
        >$CLUSTER/etc/policies.d/sitep.json &&
    chmod 644 $CLUSTER/etc/policies.d/sitep.json &&
    as_alice $TIERCTL -N n1 set policy $H/sitep none &&
    as_alice $TIERCTL -N n1 show policy $H/sitep/x | tee $TRASH/show &&
    grep -q "^$H/sitep/x: none" $TRASH/show &&
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o $H/out/sh1.out \
        --wrap "sh $H/overlays $H/sitep; sh $H/overlays $H/runs") &&
    cat $H/out/sh1.out && test "$(cat $H/out/sh1.out)" = "$(printf "0\n1")" &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$H/runs -o $H/out/sh2.out \
        --wrap "sh $H/overlays $H/runs") &&
    cat $H/out/sh2.out && test "$(cat $H/out/sh2.out)" = 0 &&
    id=$(sbatch_wait alice -w n1 --tier-scratch=$H/runs -o $H/out/sh3.out \
        --wrap "sh $H/overlays $H/runs; srun sh $H/overlays $H/runs") &&
    cat $H/out/sh3.out && test "$(cat $H/out/sh3.out)" = "$(printf "1\n1")" &&
    rm -f $CLUSTER/etc/policies.d/sitep.json
'
test_expect_success 'the reservation from the policy is enforced' '
    id=$(sbatch_wait alice -w n2 --tier-cache=auto -o $H/out/f.out \
        --wrap "head -c 8M /dev/zero > $H/runs/big; echo rc=\$?") &&
    cat $H/out/f.out && grep -q "rc=1" $H/out/f.out && test ! -e $H/runs/big
'
test_expect_success 'without --tier-cache (default off) the policy does not apply' '
    id=$(sbatch_wait alice -w n3 -o /dev/null --wrap "echo gfs > $H/runs/g.txt") &&
    test "$(cat $H/runs/g.txt)" = gfs
'
test_expect_success 'bob'"'"'s jobs do not follow alice'"'"'s policy' '
    as_user bob mkdir -p $GFS/home/bob/out && chmod 777 $H/runs &&
    id=$(sbatch_wait bob -w n1 --tier-cache=auto -o /dev/null --wrap "echo bob > $H/runs/b.txt") &&
    test "$(cat $H/runs/b.txt)" = bob
'
test_expect_success 'a policy'"'"'s own keep applies: always, and on-failure when the job fails' '
    as_user alice mkdir -p $H/kalways $H/kfail &&
    as_alice $TIERCTL -N n1 set policy $H/kalways pipeline --keep always &&
    as_alice $TIERCTL -N n1 set policy $H/kfail pipeline --keep on-failure &&
    ok=$(sbatch_wait alice -w n1 --tier-cache=auto -o $H/out/ok.out -e $H/out/ok.err \
        --wrap "echo a > $H/kalways/f; echo b > $H/kfail/f") &&
    bad=$(sbatch_wait alice -w n1 --tier-cache=auto -o $H/out/bad.out -e $H/out/bad.err \
        --wrap "echo a > $H/kalways/f; echo b > $H/kfail/f; exit 3") &&
    cat $H/out/ok.err $H/out/bad.err && test "$(job_state $bad)" = FAILED &&
    test "$(cat $H/kalways/.tier-kept/$ok/n1/f)" = a && test ! -e $H/kfail/.tier-kept/$ok &&
    test "$(cat $H/kalways/.tier-kept/$bad/n1/f)" = a &&
    test "$(cat $H/kfail/.tier-kept/$bad/n1/f)" = b &&
    test ! -e $H/kalways/f && test ! -e $H/kfail/f &&
    grep -q "tier: keep=always: the pipeline data of $H/kalways is kept in $H/kalways/.tier-kept/$ok/NODE/" $H/out/ok.err &&
    ! grep -q kfail $H/out/ok.err &&
    grep -q "tier: keep=on-failure: the pipeline data of $H/kfail is kept in $H/kfail/.tier-kept/$bad/NODE/" $H/out/bad.err
'
test_expect_success '--tier-keep decides for the job'"'"'s own scratch, and where a policy says nothing' '
    id=$(sbatch_wait alice -w n1 --tier-scratch=$H/kalways --tier-keep=never -o /dev/null \
        --wrap "echo g > $H/kalways/g") &&
    test ! -e $H/kalways/.tier-kept/$id &&
    id=$(sbatch_wait alice -w n1 --tier-cache=auto --tier-keep=always -o /dev/null \
        --wrap "echo r > $H/runs/r") &&
    test "$(cat $H/runs/.tier-kept/$id/n1/r)" = r && test ! -e $H/runs/r
'
test_expect_success 'a job on two nodes is warned once that its policy directories are per node' '
    id=$(sbatch_wait alice -N2 --tier-cache=auto -o $H/out/two.out -e $H/out/two.err \
        --wrap "srun -N2 true; srun -N2 true") &&
    cat $H/out/two.err &&
    test "$(grep -c "tier: warning: the pipeline directories of your policies (.*$H/runs.*) give each of the 2 nodes of this job its own private view" $H/out/two.err)" = 1 &&
    ! grep -q "private view" $H/out/ok.err
'
test_expect_success 'its own --tier-scratch directories are not named again (sbatch warned)' '
    id=$(sbatch_wait alice -N2 --tier-cache=auto --tier-scratch=$H/runs -o /dev/null -e $H/out/two2.err \
        --wrap "srun -N2 true") &&
    cat $H/out/two2.err &&
    test "$(grep -c "pipeline directories of your policies" $H/out/two2.err)" = 1 &&
    grep -q "policies (.*$H/kalways" $H/out/two2.err && ! grep -q "$H/runs" $H/out/two2.err
'
test_done
