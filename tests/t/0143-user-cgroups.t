#!/bin/bash
# 0143-user-cgroups.t - the work the agent does for a user is charged to
# that user's cgroup (agent/usercg.h), not to the agent's: the stager and
# its copier, the migrator and the batch fetcher (which stays root) of
# alice's and bob's jobs each run in MOUNT/UserCgroupDir/uid_UID in every
# v1 hierarchy of cpu, cpuacct, memory, pids and blkio, made with the
# configured limits and the default weights; the CPU time is accounted
# there; a new agent removes the empty ones.
test_description='the work done for a user is charged to that user'"'"'s cgroup'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
CTRLS="cpu cpuacct memory pids blkio"
for c in $CTRLS; do
    [ -f /sys/fs/cgroup/$c/cgroup.procs ] || skip_all "needs cgroup v1's $c hierarchy"
done
CG=/tier-0143.$$
# every directory this script made, deepest first
cg_clean () {
    for c in $CTRLS; do
        [ -d /sys/fs/cgroup/$c$CG ] &&
            find /sys/fs/cgroup/$c$CG -depth -type d -exec rmdir {} + 2>/dev/null
    done
    return 0
}
test_at_exit cg_clean
test_expect_success 'start the cluster (UserCgroupDir, 100 tasks and 1 GiB for each user)' '
    cluster_start &&
    printf "UserCgroupDir = %s/%%n\nUserCgroupTasks = 100\nUserCgroupMemory = 1G\n" $CG \
        >>$CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
test_at_exit "gfsemu_fault_clear '$GFS' 2>/dev/null"
H=$GFS/home/alice
HB=$GFS-backing/home/alice
BH=$GFS/home/bob
uid_alice=$(id -u alice)
uid_bob=$(id -u bob)
mkfile () { head -c $3 /dev/urandom >$2 && chown $1: $2; }
as_user alice mkdir -p $H/in $H/db
as_user bob mkdir -p $BH/o
mkfile alice $HB/in/a.bin 1000000
mkfile alice $HB/db/f.bin 1000000

# cg_of PID CTRL: PID's cgroup in CTRL's hierarchy
cg_of () { awk -F: -v c="$2" '{ n = split($2, w, ","); for (i = 1; i <= n; i++) if (w[i] == c) print $3 }' /proc/$1/cgroup; }
# in_user_cg PID NODE UID: PID is in NODE's cgroup of UID in every hierarchy
in_user_cg () {
    for c in $CTRLS; do
        _g=$(cg_of $1 $c) && echo "$1 ($(cat /proc/$1/comm)) $c: $_g" &&
        test "$_g" = "$CG/$2/uid_$3" || return 1
    done
}
# first_child NODE COMM [PARENT]: the first process named COMM whose
# parent is PARENT (default: NODE's agent)
first_child () {
    ps -o pid=,comm= --ppid "${3:-$(agent_pid $1)}" | awk -v n="$2" '$2 == n { print $1; exit }'
}
has_child () { test -n "$(first_child "$@")"; }
copier_of_stager () { _s=$(first_child n1 tierd-stage) && [ -n "$_s" ] && has_child n1 tierd-stagecp $_s; }

test_expect_success 'alice'"'"'s stager (root) and its copier (alice) run in her cgroups' '
    gfsemu_fault "$GFS" "home/alice/in/a.bin:open:delay4000" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-in=$H/in/a.bin \
        -o $H/si.out --wrap "sha256sum < $H/in/a.bin") &&
    wait_for 30 copier_of_stager && s=$(first_child n1 tierd-stage) &&
    cp=$(first_child n1 tierd-stagecp $s) &&
    in_user_cg $s n1 $uid_alice && in_user_cg $cp n1 $uid_alice &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED &&
    test "$(cut -d" " -f1 $H/si.out)" = "$(sha256sum <$HB/in/a.bin | cut -d" " -f1)"
'
test_expect_success 'the agent itself is in none of them' '
    for c in $CTRLS; do
        g=$(cg_of $(agent_pid n1) $c) && echo "tierd $c: $g" &&
        case $g in $CG*) exit 1 ;; esac
    done
'
test_expect_success 'bob'"'"'s migrator runs in his cgroups, not in alice'"'"'s' '
    gfsemu_fault "$GFS" "home/bob/o/*:create:delay4000" &&
    id=$(cd $BH && as_user bob sbatch --parsable -w n1 --tier-stage-out=$BH/o -o /dev/null \
        --wrap "echo b > $BH/o/b.txt") &&
    wait_for 30 has_child n1 tierd-mig && m=$(first_child n1 tierd-mig) &&
    in_user_cg $m n1 $uid_bob &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED &&
    wait_for 30 test -s $BH/o/b.txt && test "$(cat $BH/o/b.txt)" = b
'
test_expect_success 'the batch fetcher, a root process, is charged to the job'"'"'s user' '
    gfsemu_fault "$GFS" "home/alice/db/f.bin:read:delay3000" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-batch=$H/db -o $H/b.out \
        --wrap "sha256sum < $H/db/f.bin") &&
    wait_for 30 has_child n2 tierd-fetch && f=$(first_child n2 tierd-fetch) &&
    test "$(stat -c %u /proc/$f)" = 0 && in_user_cg $f n2 $uid_alice &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED &&
    test "$(cut -d" " -f1 $H/b.out)" = "$(sha256sum <$HB/db/f.bin | cut -d" " -f1)" &&
    gfsemu_fault_clear "$GFS"
'
# the epilog's keep copy (cluster.sh keep_child)
has_keep_child () { test -n "$(keep_child)"; }
test_expect_success 'the epilog'"'"'s keep copy, forked by slurmd, is charged to the job'"'"'s user' '
    as_user alice mkdir -p $H/kscr &&
    gfsemu_fault "$GFS" "home/alice/kscr/.tier-kept/*:mkdir:delay3000" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-scratch=$H/kscr --tier-keep=always \
        -o /dev/null --wrap "head -c 1M /dev/urandom > $H/kscr/k.bin") &&
    wait_for 60 has_keep_child && k=$(keep_child) && in_user_cg $k n1 $uid_alice &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED &&
    gfsemu_fault_clear "$GFS" && find $H/kscr/.tier-kept -name k.bin | grep .
'
test_expect_success 'each user'"'"'s cgroup: the limits of tier.conf, the default weights, the CPU time' '
    for u in $uid_alice $uid_bob; do
        d=$CG/n1/uid_$u &&
        echo "uid $u: pids.max $(cat /sys/fs/cgroup/pids$d/pids.max)," \
            "memory $(cat /sys/fs/cgroup/memory$d/memory.limit_in_bytes)," \
            "cpu.shares $(cat /sys/fs/cgroup/cpu$d/cpu.shares)," \
            "cpuacct.usage $(cat /sys/fs/cgroup/cpuacct$d/cpuacct.usage) ns" &&
        test "$(cat /sys/fs/cgroup/pids$d/pids.max)" = 100 &&
        test "$(cat /sys/fs/cgroup/memory$d/memory.limit_in_bytes)" = 1073741824 &&
        test "$(cat /sys/fs/cgroup/cpu$d/cpu.shares)" = 1024 &&
        test "$(cat /sys/fs/cgroup/cpuacct$d/cpuacct.usage)" -gt 0 || exit 1
    done &&
    grep "charged to their cgroup uid_UID in /sys/fs/cgroup/cpu$CG/n1" $CLUSTER/log/tierd-n1.log
'
# an earlier agent's user cgroups: one empty, one a process is still in
# (its pid in TRASH/busy)
busy_in () {
    sh -c "for c in $CTRLS; do echo 0 >/sys/fs/cgroup/\$c$CG/n1/$1/cgroup.procs; done; exec sleep 60" \
        >/dev/null 2>&1 &
    echo $! >$TRASH/busy
}
test_expect_success 'a new agent removes the user cgroups that are empty, not a busy one' '
    p=$(agent_pid n1) && kill -TERM $p && wait_for 20 sh -c "! kill -0 $p 2>/dev/null" &&
    for c in $CTRLS; do mkdir /sys/fs/cgroup/$c$CG/n1/uid_4000001 /sys/fs/cgroup/$c$CG/n1/uid_4000002 || exit 1; done &&
    busy_in uid_4000002 && busy=$(cat $TRASH/busy) && wait_for 10 sh -c "grep -qx $busy /sys/fs/cgroup/pids$CG/n1/uid_4000002/cgroup.procs" &&
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o /dev/null --wrap true) &&
    test "$(job_state $id)" = COMPLETED && test "$(agent_pid n1)" != "$p" &&
    for c in $CTRLS; do
        ls /sys/fs/cgroup/$c$CG/n1 | grep uid_ | tr "\n" " " && echo &&
        test ! -e /sys/fs/cgroup/$c$CG/n1/uid_4000001 &&
        test -d /sys/fs/cgroup/$c$CG/n1/uid_4000002 || exit 1
    done &&
    kill $busy
'
test_done
