# cluster.sh - a test cluster for one test script (sourced after tap.sh)
#
#   cluster_start [tier-cluster start options]   sets CLUSTER, SLURM_CONF, GFS
#   as_user USER CMD...                          run CMD as USER with SLURM_CONF
#   sbatch_wait USER SBATCH-ARGS...              submit, wait until done,
#                                                 print the job id
#   job_state JOBID                              e.g. COMPLETED, FAILED
#   slurmd_restart NODE                          restart one slurmd, wait
#                                                 until it is back
#   cluster_procs                                the cluster's processes
#                                                 still running
#   no_drain                                     no node is drained (or
#                                                 down with a reason)
#   agent_pid NODE                               the pid of NODE's tierd
#   agent_children NODE COMM                     "PID STAT" of each child
#                                                 of it with that comm
#   agent_zombies NODE                           its children that are
#                                                 zombies
#
# The cluster is stopped at exit (test_at_exit) -- unless it is shared:
#
# The shared cluster.  Under TIER_CLUSTER_POOL=DIR (tests/run sets it),
# cluster_start with no option but --gfs-opts does not start a cluster of
# its own: it takes the first free cluster of the pool in DIR (DIR/cN,
# owned by this script until it exits: DIR/cN.owner; there are as many as
# scripts run at once), and `tier-cluster reset` makes it what a new
# cluster is -- no job, no agent, every node idle and resumed, the
# configuration, policies and binaries as started, empty logs and tiers,
# and a new GFS (a new emulator with these --gfs-opts over a new backing
# directory).  If there is none yet, or the reset fails, it starts one
# (the reset's failure is logged in DIR/fixture.log).  At exit it cancels
# the cluster's jobs and stops what the script left running
# (`tier-cluster quiesce`), keeps the cluster's logs in the trash
# directory if a test failed, and gives the cluster back; a script that
# stopped it (cluster_stop) leaves the next one to start a new one.
# tests/run stops the pool's clusters at the end.  Scripts that need a
# cluster of their own kind (--prolog-flags, --proctrack, --supervise,
# --job-container, --cpus, ...) start their own, as without a pool.

TIER_CLUSTER_CMD="$TIER_SRCDIR/tests/cluster/tier-cluster"

# cluster_gfs_opts_ ARGS...: the --gfs-opts value, if those are all
cluster_gfs_opts_ () {
    _go=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --gfs-opts) [ $# -ge 2 ] || return 1; _go=$2; shift 2 ;;
            *) return 1 ;;
        esac
    done
    printf '%s' "$_go"
}

# proc_start_ PID: the start time of PID (with the PID, it names a process)
proc_start_ () {
    sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

# cluster_take_: the number of the pool's first free cluster, now ours
cluster_take_ () {
    mkdir -p "$TIER_CLUSTER_POOL" && chmod 755 "$TIER_CLUSTER_POOL" || return 1
    flock "$TIER_CLUSTER_POOL/.lock" bash -c '
        i=1
        while :; do
            o=$1/c$i.owner
            if read -r p st n <"$o" 2>/dev/null &&
               [ "$(sed "s/.*) //" /proc/$p/stat 2>/dev/null | cut -d" " -f20)" = "$st" ]
            then
                i=$((i + 1))
                continue
            fi
            echo "$2" >"$o" && echo "$i" && exit 0
            exit 1
        done' _ "$TIER_CLUSTER_POOL" "$$ $(proc_start_ $$) $test_name_"
}

cluster_shared_start_ () {
    _n=$(cluster_take_) || return 1
    CLUSTER=$TIER_CLUSTER_POOL/c$_n
    test_at_exit "cluster_give_ '$CLUSTER'"
    _log=$TRASH/cluster-start.log
    _t0=$(date +%s.%N)
    if [ -f "$CLUSTER/run/slurmctld.dpid" ]; then
        if QUIET=1 "$TIER_CLUSTER_CMD" reset "$CLUSTER" --gfs-opts "$1" \
            >"$_log" 2>&1; then
            cluster_fixture_log_ "c$_n reset" "$_t0"
            return 0
        fi
        cluster_fixture_log_ "c$_n reset FAILED: $(tail -n 1 "$_log")" "$_t0"
        QUIET=1 "$TIER_CLUSTER_CMD" stop "$CLUSTER" >>"$_log" 2>&1
    fi
    # a new cluster in a new directory (nothing of the old one is left)
    if [ -e "$CLUSTER" ]; then
        rm -rf --one-file-system "$CLUSTER" 2>/dev/null ||
            mv "$CLUSTER" "$CLUSTER.old.$$" || return 1
    fi
    QUIET=1 "$TIER_CLUSTER_CMD" start "$CLUSTER" ${1:+--gfs-opts "$1"} \
        >>"$_log" 2>&1 || {
        sed 's/^/# /' "$_log"
        return 1
    }
    cluster_fixture_log_ "c$_n start" "$_t0"
}

# cluster_fixture_log_ WHAT T0: a line in the pool's log
cluster_fixture_log_ () {
    awk -v t="$(date +%T)" -v s="$test_name_" -v w="$1" -v a="$2" \
        -v b="$(date +%s.%N)" 'BEGIN { printf "%s %s: %s in %.1f s\n", t, s, w, b - a }' \
        >>"$TIER_CLUSTER_POOL/fixture.log"
}

# cluster_give_ DIR: at exit, give the shared cluster back
cluster_give_ () {
    QUIET=1 "$TIER_CLUSTER_CMD" quiesce "$1" >/dev/null 2>&1
    if [ "$test_failed" != 0 ] && [ -d "$1/log" ]; then
        cp -r "$1/log" "$TRASH/cluster-log" 2>/dev/null
        cp -r "$1/etc" "$TRASH/cluster-etc" 2>/dev/null
    fi
    read -r _p _st _n <"$1.owner" 2>/dev/null
    [ "$_p" = $$ ] && rm -f "$1.owner"
}

cluster_start () {
    if [ -n "${TIER_CLUSTER_POOL:-}" ] && _go=$(cluster_gfs_opts_ "$@"); then
        cluster_shared_start_ "$_go" || return 1
        SLURM_CONF="$CLUSTER/etc/slurm.conf"
        GFS="$CLUSTER/gfs"
        export CLUSTER SLURM_CONF GFS
        return 0
    fi
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

no_drain () {
    ! sinfo -h -R | grep .
}

agent_pid () {
    cat $(ls "$CLUSTER/state/$1/tierd.pid" "$CLUSTER/run/tier/$1/tierd.pid" \
        2>/dev/null | head -1) 2>/dev/null
}

# (a copier its stager abandoned is the agent's too: the agent is the
# subreaper of its children's children)
agent_children () {
    ps -o pid=,stat=,comm= --ppid "$(agent_pid "$1")" \
        | awk -v n="$2" '$3 == n { print $1, $2 }'
}

# agent_stuck NODE COMM: one of them sleeps in the kernel (D state)
agent_stuck () {
    agent_children "$1" "$2" | grep -q " D"
}

agent_zombies () {
    ps -o pid=,stat= --ppid "$(agent_pid "$1")" | awk '$2 ~ /^Z/'
}

# keep_child: the epilog's keep copy on n1 -- alice's process whose
# parent is root's, under this cluster's slurmd of n1 (other scripts'
# clusters run alice's jobs too)
ppid_of () { sed 's/.*) //' /proc/$1/stat 2>/dev/null | cut -d" " -f2; }
descends () {
    _p=$1
    while [ -n "$_p" ] && [ "$_p" -gt 1 ]; do
        [ "$_p" = "$2" ] && return 0
        _p=$(ppid_of $_p)
    done
    return 1
}
keep_child () {
    _sd=$(cat $CLUSTER/run/slurmd-n1.pid)
    ps -o pid=,ppid= -u alice | while read -r p pp; do
        [ "$(stat -c %u /proc/$pp 2>/dev/null)" = 0 ] && descends $p $_sd && echo $p
    done | head -1
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
