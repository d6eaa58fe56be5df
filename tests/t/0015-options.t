#!/bin/bash
test_description='the --tier options are validated at submit; plugstack arguments at load'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM || skip_all "needs root and Slurm"
test_expect_success 'start the cluster' 'cluster_start'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
nothing_queued () { test -z "$(squeue -h)"; }

# refused CMD-ARGS... EXPECTED: the submission fails with one tier line
refused () {
    _exp=$1
    shift
    (cd "$GFS/home/alice" && ! as_user alice "$@" >"$TRASH/out" 2>"$TRASH/err")
    _rc=$?
    cat "$TRASH/err"
    test $_rc = 0 && grep -q "^[a-z]*: error: tier: $_exp" "$TRASH/err" &&
        test "$(grep -c ': error: tier: ' "$TRASH/err")" = 1 && nothing_queued
}

test_expect_success 'sbatch --tier-cache=bogus is refused, nothing queued' '
    refused "--tier-cache: .bogus. is not one of auto, required, off" \
        sbatch --tier-cache=bogus --wrap true
'
test_expect_success 'sbatch --tier-scratch=relative/path is refused' '
    refused "--tier-scratch: .relative/path. is not an absolute path" \
        sbatch --tier-scratch=relative/path --wrap true
'
test_expect_success 'sbatch --tier-stage-in with %a and no --array is refused' '
    refused "--tier-stage-in: %a is used but the job is not an array job" \
        sbatch --tier-stage-in=$GFS/q%a --wrap true
'
test_expect_success '#SBATCH lines are checked too' '
    printf "#!/bin/bash\n#SBATCH --tier-keep=sometimes\ntrue\n" >"$GFS/home/alice/k.sh" &&
    refused "--tier-keep: .sometimes. is not one of never, on-failure, always" \
        sbatch "$GFS/home/alice/k.sh"
'
test_expect_success '%a with --array in an #SBATCH line is accepted' '
    printf "#!/bin/bash\n#SBATCH --array=1-2\n#SBATCH --tier-stage-in=$GFS/q%%a\ntrue\n" >"$GFS/home/alice/a.sh" &&
    (cd "$GFS/home/alice" && as_user alice sbatch --hold "$GFS/home/alice/a.sh") &&
    scancel --user=alice && wait_for 20 nothing_queued
'
test_expect_success '%a with SBATCH_ARRAY_INX is accepted' '
    (cd "$GFS/home/alice" && as_user alice env SBATCH_ARRAY_INX=1-2 sbatch --hold \
        --tier-stage-in=$GFS/q%a --wrap true) &&
    scancel --user=alice && wait_for 20 nothing_queued
'
test_expect_success 'srun and salloc refuse bad values too' '
    refused "--tier-batch: .$GFS/../etc. has a .\.\.. component" \
        srun --tier-batch=$GFS/../etc true &&
    refused "--tier-cache: .x. is not one of" salloc --tier-cache=x true
'
test_expect_success '--tier-cache=off with another --tier option is a contradiction' '
    refused "--tier-cache=off contradicts" \
        sbatch --tier-cache=off --tier-batch=$GFS/db --wrap true
'
test_expect_success 'an unknown plugstack argument stops sbatch with a clear error' '
    cp "$CLUSTER/etc/plugstack.conf" "$TRASH/plugstack.saved" &&
    sed -i "s/\$/ bogus=1/" "$CLUSTER/etc/plugstack.conf" &&
    (cd "$GFS/home/alice" && ! as_user alice sbatch --wrap true 2>"$TRASH/perr");
    cp "$TRASH/plugstack.saved" "$CLUSTER/etc/plugstack.conf"; cat "$TRASH/perr" &&
    grep -q "tier: unknown plugstack argument .bogus. (known: conf, default, preload)" "$TRASH/perr" &&
    nothing_queued
'
test_expect_success 'a script on stdin with %a and no --array fails at start, saying why' '
    printf "#!/bin/bash\necho ran\n" >"$TRASH/stdin.sh" &&
    id=$(sbatch_wait alice -w n1 --tier-stage-in=$GFS/home/alice/q%a \
         -o stdin.out -e stdin.err <"$TRASH/stdin.sh") &&
    cat "$GFS/home/alice/stdin.err" &&
    test "$(job_state $id)" = FAILED &&
    grep -q "tier: --tier-stage-in: %a is used but the job is not an array job" \
        "$GFS/home/alice/stdin.err" &&
    ! grep -q ran "$GFS/home/alice/stdin.out"
'
test_expect_success 'a script on stdin with #SBATCH --array and %a runs' '
    echo one >"$GFS/home/alice/q1" && echo two >"$GFS/home/alice/q2" &&
    chown alice "$GFS/home/alice/q1" "$GFS/home/alice/q2" &&
    printf "#!/bin/bash\n#SBATCH --array=1-2\ncat $GFS/home/alice/q\$SLURM_ARRAY_TASK_ID\n" \
        >"$TRASH/stdin-array.sh" &&
    id=$(sbatch_wait alice --tier-stage-in=$GFS/home/alice/q%a \
         -o stdin-%a.out -e stdin-%a.err <"$TRASH/stdin-array.sh") &&
    cat "$GFS/home/alice"/stdin-[12].err &&
    test "$(job_state $id)" = COMPLETED &&
    grep -qx one "$GFS/home/alice/stdin-1.out" &&
    grep -qx two "$GFS/home/alice/stdin-2.out"
'

# The nodes read plugstack.conf with a bad argument while the submit host
# reads a good one: its own slurm.conf naming a copy of the good file.
test_expect_success 'a bad plugstack argument on a node: the plugin disables itself, no drain' '
    cp "$CLUSTER/etc/plugstack.conf" "$TRASH/plugstack.good" &&
    sed "s|^PlugStackConfig=.*|PlugStackConfig=$TRASH/plugstack.good|" \
        "$SLURM_CONF" >"$TRASH/slurm-submit.conf" &&
    sed -i "s/\$/ bogus=1/" "$CLUSTER/etc/plugstack.conf" &&
    slurmd_restart n1 &&
    id=$(SLURM_CONF=$TRASH/slurm-submit.conf sbatch_wait alice -w n1 \
         --tier-cache=auto -o bad.out -e bad.err \
         --wrap "echo TIER=\${TIER_JOB_ID:-unset}") &&
    cat "$GFS/home/alice/bad.out" "$GFS/home/alice/bad.err" &&
    test "$(job_state $id)" = COMPLETED &&
    grep -qx "TIER=unset" "$GFS/home/alice/bad.out" &&
    grep -q "tier: unknown plugstack argument .bogus." \
        "$CLUSTER/log/slurmd-n1.log" &&
    ! sinfo -h -R | grep .
'
cp "$TRASH/plugstack.good" "$CLUSTER/etc/plugstack.conf" 2>/dev/null
test_expect_success 'with the good plugstack.conf back, the node runs tier jobs' '
    slurmd_restart n1 &&
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o good.out \
         --wrap "echo TIER=\${TIER_JOB_ID:-unset}") &&
    cat "$GFS/home/alice/good.out" &&
    grep -qx "TIER=$id" "$GFS/home/alice/good.out"
'
# The plugstack argument default=: jobs that give no --tier option
test_expect_success 'without default=, a job with no --tier option runs untiered' '
    id=$(sbatch_wait alice -w n1 -o nodef.out \
         --wrap "echo TIER=\${TIER_JOB_ID:-unset}") &&
    cat "$GFS/home/alice/nodef.out" &&
    grep -qx "TIER=unset" "$GFS/home/alice/nodef.out"
'
test_expect_success 'default=auto: a job with no --tier option is tiered' '
    cp "$CLUSTER/etc/plugstack.conf" "$TRASH/plugstack.orig" &&
    sed -i "s/\$/ default=auto/" "$CLUSTER/etc/plugstack.conf" &&
    slurmd_restart n1 &&
    id=$(sbatch_wait alice -w n1 -o def.out -e def.err \
         --wrap "echo TIER=\${TIER_JOB_ID:-unset}") &&
    cat "$GFS/home/alice/def.out" "$GFS/home/alice/def.err" &&
    test "$(job_state $id)" = COMPLETED &&
    grep -qx "TIER=$id" "$GFS/home/alice/def.out" &&
    id=$(sbatch_wait alice -w n1 --tier-cache=off -o defoff.out \
         --wrap "echo TIER=\${TIER_JOB_ID:-unset}") &&
    grep -qx "TIER=unset" "$GFS/home/alice/defoff.out"
'
cp "$TRASH/plugstack.orig" "$CLUSTER/etc/plugstack.conf" 2>/dev/null
# Enabled = no on one node: conf= takes %n, so each node reads its own
# tier.conf, as nodes with their own /etc/tier would.
test_expect_success 'Enabled = no in the tier.conf of n2: its jobs run untiered, one warning, no drain' '
    (for n in n1 n2 n3; do
        cp "$CLUSTER/etc/tier.conf" "$CLUSTER/etc/tier-$n.conf" || exit 1
    done) &&
    echo "Enabled = no" >>"$CLUSTER/etc/tier-n2.conf" &&
    sed -i "s|conf=$CLUSTER/etc/tier.conf|conf=$CLUSTER/etc/tier-%n.conf|" \
        "$CLUSTER/etc/plugstack.conf" && cat "$CLUSTER/etc/plugstack.conf" &&
    grep -q "tier-%n.conf" "$CLUSTER/etc/plugstack.conf" &&
    slurmd_restart n1 && slurmd_restart n2 &&
    id=$(sbatch_wait alice -w n2 --tier-cache=auto -o dis2.out -e dis2.err \
         --wrap "echo TIER=\${TIER_JOB_ID:-unset}") &&
    cat "$GFS/home/alice/dis2.out" "$GFS/home/alice/dis2.err" &&
    test "$(job_state $id)" = COMPLETED &&
    grep -qx "TIER=unset" "$GFS/home/alice/dis2.out" &&
    test "$(grep -c "tier: warning: running untiered on node n2: tier is disabled on node n2 (Enabled = no)" "$GFS/home/alice/dis2.err")" = 1 &&
    test "$(grep -c "tier: " "$GFS/home/alice/dis2.err")" = 1 &&
    ! sinfo -h -R | grep .
'
test_expect_success 'the same plugstack.conf: n1 reads its own tier.conf and runs tier jobs' '
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o en1.out -e en1.err \
         --wrap "echo TIER=\${TIER_JOB_ID:-unset}") &&
    cat "$GFS/home/alice/en1.out" "$GFS/home/alice/en1.err" &&
    grep -qx "TIER=$id" "$GFS/home/alice/en1.out" &&
    ! grep -q "tier: " "$GFS/home/alice/en1.err"
'
cp "$TRASH/plugstack.orig" "$CLUSTER/etc/plugstack.conf" 2>/dev/null
test_expect_success 'no node is drained' '! sinfo -h -R | grep .'
test_done
