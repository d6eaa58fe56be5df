#!/bin/bash
test_description='with Slurm'"'"'s job_container/tmpfs: tier detects the job'"'"'s namespace and warns (auto) or fails the job (required)'
# job_container/tmpfs gives every job a private /tmp: the cluster, and its
# GFS, must not lie under /tmp
TMPDIR=/var/tmp
export TMPDIR
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM || skip_all "needs root and Slurm"
test_expect_success 'start the cluster with job_container/tmpfs' '
    cluster_start --job-container tmpfs &&
    grep -qx "JobContainerType=job_container/tmpfs" "$CLUSTER/etc/slurm.conf"
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
as_user alice mkdir -p "$H/runs" "$H/out"

test_expect_success 'auto: one warning; the directory stays the GFS; the job keeps its private /tmp' '
    id=$(sbatch_wait alice -w n1 --tier-scratch=$H/runs -o $H/out/a.out -e $H/out/a.err \
        --wrap "echo x > $H/runs/x; touch /tmp/t-\$SLURM_JOB_ID; ls /tmp; grep -c \" - overlay \" /proc/self/mountinfo || true") &&
    cat $H/out/a.out $H/out/a.err && test "$(job_state $id)" = COMPLETED &&
    test "$(grep -c "tier: warning: this task already runs in another mount namespace (job_container/tmpfs or a container?): tier.s namespace is not joined" $H/out/a.err)" = 1 &&
    test "$(cat $H/runs/x)" = x && grep -qx "t-$id" $H/out/a.out && test ! -e /tmp/t-$id &&
    test "$(tail -n 1 $H/out/a.out)" = 0
'
test_expect_success 'required: the job fails cleanly with the reason; no node is drained' '
    id=$(sbatch_wait alice -w n2 --tier-cache=required --tier-scratch=$H/runs \
        -o $H/out/r.out -e $H/out/r.err --wrap "echo ran") &&
    cat $H/out/r.err && test "$(job_state $id)" = FAILED && ! grep -q ran $H/out/r.out &&
    grep -q "tier: this task already runs in another mount namespace" $H/out/r.err &&
    no_drain
'
test_expect_success 'nothing of the jobs is left on the NVDIMM tiers' '
    NV=$(cat "$CLUSTER/run/nvdimm.path") &&
    for n in n1 n2; do
        test -z "$(ls -A $NV/$n 2>/dev/null | grep -v "^\.tier-pmem-probe$")" || { ls -la $NV/$n; exit 1; }
    done
'
test_expect_success 'no node was drained' 'no_drain'
test_done
