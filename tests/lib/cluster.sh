# cluster.sh - start a test cluster for one test script (sourced after tap.sh)
#
#   cluster_start [tier-cluster start options]   sets CLUSTER, SLURM_CONF
#   as_user USER CMD...                          run CMD as USER with SLURM_CONF
#   sbatch_wait USER SBATCH-ARGS...              submit, wait until done,
#                                                 print the job id
#   job_state JOBID                              e.g. COMPLETED, FAILED
#   slurmd_restart NODE                          restart one slurmd, wait
#                                                 until it is back
#   cluster_procs                                the cluster's processes
#                                                 still running
#
# The cluster is stopped at exit (test_at_exit).

TIER_CLUSTER_CMD="$TIER_SRCDIR/tests/cluster/tier-cluster"

cluster_start () {
    CLUSTER="$TRASH/${CLUSTER_NAME:-cluster}"
    QUIET=1 "$TIER_CLUSTER_CMD" start "$CLUSTER" "$@" \
        >"$TRASH/cluster-start.log" 2>&1 || {
        cat "$TRASH/cluster-start.log" | sed 's/^/# /'
        return 1
    }
    test_at_exit "QUIET=1 '$TIER_CLUSTER_CMD' stop '$CLUSTER'"
    SLURM_CONF="$CLUSTER/etc/slurm.conf"
    GFS="$CLUSTER/gfs"
    export CLUSTER SLURM_CONF GFS
    return 0
}

cluster_stop () {
    QUIET=1 "$TIER_CLUSTER_CMD" stop "$CLUSTER"
}

slurmd_restart () {
    QUIET=1 "$TIER_CLUSTER_CMD" restart-slurmd "$CLUSTER" "$1"
}

# cluster_procs: "PID COMMAND" of every live process of this cluster: its
# executable lies in CLUSTER, CLUSTER is in its command line, or it
# inherited the cluster's SLURM_CONF (slurmd's children: slurmstepd and
# the jobs).  Not this shell and its ancestors (they have SLURM_CONF), so
# do not run it in a pipeline: a sibling would be listed too.
cluster_procs () {
    python3 - "$CLUSTER" <<-'PYEOF'
	import os, sys
	d = sys.argv[1].rstrip("/")
	conf = ("SLURM_CONF=" + d + "/etc/slurm.conf").encode()
	skip, p = set(), os.getpid()
	while p > 1:
	    skip.add(p)
	    with open("/proc/%d/stat" % p) as f:
	        p = int(f.read().rsplit(")", 1)[1].split()[1])
	for pid in sorted(int(x) for x in os.listdir("/proc") if x.isdigit()):
	    if pid in skip:
	        continue
	    try:
	        with open("/proc/%d/stat" % pid) as f:
	            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
	                continue
	        with open("/proc/%d/cmdline" % pid, "rb") as f:
	            cmd = f.read().replace(b"\0", b" ").strip()
	        with open("/proc/%d/environ" % pid, "rb") as f:
	            env = f.read().split(b"\0")
	        try:
	            exe = os.readlink("/proc/%d/exe" % pid)
	        except OSError:
	            exe = ""
	    except OSError:
	        continue
	    if (exe.startswith(d + "/") or d.encode() in cmd or conf in env):
	        print(pid, cmd.decode("utf-8", "replace")[:200])
	PYEOF
}

as_user () {
    _u=$1
    shift
    runuser -u "$_u" -- env SLURM_CONF="$SLURM_CONF" PATH="$PATH" "$@"
}

# job_state JOBID: the state of a job (or of every task of an array)
job_state () {
    scontrol show job "$1" 2>/dev/null \
        | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | sort -u | tr '\n' ' ' \
        | sed 's/ $//'
}

job_done () {
    _s=$(job_state "$1")
    [ -n "$_s" ] || return 0            # purged: done
    case "$_s" in
        *PENDING*|*RUNNING*|*COMPLETING*|*CONFIGURING*|*SUSPENDED*) return 1 ;;
    esac
    return 0
}

# sbatch_wait USER [sbatch args]: submit from USER's GFS home, wait up to
# ${SBATCH_TIMEOUT:-120} s for the job (all array tasks) to end; prints
# the job id.
sbatch_wait () {
    _u=$1
    shift
    _id=$(cd "$GFS/home/$_u" && as_user "$_u" sbatch --parsable "$@") \
        || return 1
    _id=${_id%%;*}
    wait_for "${SBATCH_TIMEOUT:-120}" job_done "$_id" || {
        echo "job $_id did not finish: $(job_state "$_id")" >&2
        return 1
    }
    echo "$_id"
}
