#!/bin/bash
test_description='a real three-node Slurm cluster with tier.so loaded'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM || skip_all "needs root and Slurm"

test_expect_success 'start the cluster (munged, slurmctld, 3 slurmd)' '
    cluster_start && sinfo -N -h -o "%N %t" | tee "$TRASH/sinfo" &&
    test "$(grep -c idle "$TRASH/sinfo")" = 3
'
test "$(grep -c idle "$TRASH/sinfo" 2>/dev/null)" = 3 || bail_out "no cluster"

test_expect_success 'plugstack.conf names the built tier.so' '
    grep -q "^required .*/tier.so conf=" "$CLUSTER/etc/plugstack.conf" &&
    cmp "$CLUSTER/lib/tier.so" "$TIER_BUILDDIR/spank_plugin/.libs/tier.so"
'
for cmd in sbatch srun salloc; do
    test_expect_success "$cmd --help lists the --tier options" "
        as_user alice $cmd --help >\"\$TRASH/help-$cmd\" 2>&1 &&
        for o in cache batch scratch stage-in stage-out keep; do
            grep -q -- \"--tier-\$o=\" \"\$TRASH/help-$cmd\" || exit 1
        done
    "
done

test_expect_success 'a 4-task array job runs as alice' '
    id=$(sbatch_wait alice --array=1-4 -o "out-%A_%a.txt" \
        --wrap "echo task \$SLURM_ARRAY_TASK_ID user \$(id -un) node \$SLURMD_NODENAME") &&
    test "$(job_state $id)" = COMPLETED &&
    for i in 1 2 3 4; do
        grep "^task $i user alice node n[123]$" "$GFS/home/alice/out-${id}_$i.txt" || exit 1
    done
'
test_expect_success 'an srun -N3 step runs on the three nodes as alice' '
    (cd "$GFS/home/alice" &&
     run_timeout 60 runuser -u alice -- env SLURM_CONF="$SLURM_CONF" \
        srun -N3 -l sh -c "echo \$(id -un) \$SLURMD_NODENAME") >"$TRASH/srun" &&
    cat "$TRASH/srun" &&
    grep -q "alice n1" "$TRASH/srun" && grep -q "alice n2" "$TRASH/srun" &&
    grep -q "alice n3" "$TRASH/srun"
'
test_expect_success 'no node is drained' '
    ! sinfo -h -R | grep .
'
test_expect_success 'stopping the cluster leaves no process of it running' '
    cluster_stop &&
    for p in /proc/[0-9]*; do
        exe=$(readlink "$p/exe" 2>/dev/null) || continue
        grep -q "^State:[[:space:]]*Z" "$p/status" 2>/dev/null && continue
        tr "\0" " " <"$p/cmdline" 2>/dev/null | grep -q "$CLUSTER" && {
            echo "left: $(tr "\0" " " <"$p/cmdline")"; exit 1; }
    done; true
'
test_expect_success 'nothing of it is mounted' '
    ! grep -q "$CLUSTER" /proc/self/mountinfo
'
test_done
