# cluster.sh - start a test cluster for one test script (sourced after tap.sh)
#
#   cluster_start [tier-cluster start options]   sets CLUSTER, SLURM_CONF
#   as_user USER CMD...                          run CMD as USER with SLURM_CONF
#   sbatch_wait USER SBATCH-ARGS...              submit, wait until done,
#                                                 print the job id
#   job_state JOBID                              e.g. COMPLETED, FAILED
#   slurmd_restart NODE                          restart one slurmd, wait
#                                                 until it is back
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
