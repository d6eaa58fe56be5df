#!/bin/bash
test_description='under load with the agents built with ASan and UBSan: no error, no leak'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

# t/0410's array (stage-in, batch replicas, stage-out and an afterok
# dependent; every invariant of the crash loop checked at the end) with
# each node's tierd from the sanitizer build (tests/run asan-build:
# -fsanitize=address,undefined, UBSan fatal).  The agents run under
# their supervisors, which hand them ASAN_OPTIONS and UBSAN_OPTIONS: the
# plugin starts an agent with PATH alone, and with stdio on /dev/null.
# Every report goes to a file of TRASH/san; at the end the supervisors
# stop the agents with SIGTERM and LeakSanitizer checks each agent at its
# exit (children end with _exit: only the agent itself is checked).
# CI: 100 tasks; make torture: 1,000 (ASAN_TASKS, ASAN_MB).
#
# By hand, AGENT_VALGRIND=1 runs the agents of the normal build under
# valgrind's memcheck instead (20 tasks; AgentTimeout raised to
# VG_AGENT_TIMEOUT, 120 s: the plugin waits that long for an agent that
# slow); its reports go to TRASH/san/vg.PID.
VG=${AGENT_VALGRIND:-0}
CRASH_TASKS=${ASAN_TASKS:-$([ "$VG" = 1 ] && echo 20 || echo 100)}
CRASH_MB=${ASAN_MB:-1}
CRASH_NOKILL=1
CRASH_IN_KB=${ASAN_IN_KB:-64}
CRASH_DB_MB=${ASAN_DB_MB:-8}
CRASH_ARRAY_TIMEOUT=${CRASH_ARRAY_TIMEOUT:-1800}

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
[ "$VG" = 1 ] && { test_have_prereq VALGRIND || skip_all "AGENT_VALGRIND=1 needs valgrind"; }
ASAN_BUILD=$TIER_SRCDIR/_build/asan
SAN=$TRASH/san
if [ "$VG" = 1 ]; then
    WHAT=valgrind
    test_expect_success 'valgrind runs' 'valgrind --version'
else
    WHAT=ASan
    test_expect_success 'the sanitizer build of tierd' '
        "$TIER_SRCDIR/tests/run" asan-build &&
        test -x $ASAN_BUILD/agent/tierd && ldd $ASAN_BUILD/agent/tierd | grep -q libasan
    '
fi
# the agents' children run as the job's user: they may report too
mkdir -p "$SAN" && chmod 1777 "$SAN"
export ASAN_OPTIONS="log_path=$SAN/asan:detect_leaks=1:halt_on_error=1:abort_on_error=0"
export UBSAN_OPTIONS="log_path=$SAN/ubsan:print_stacktrace=1:halt_on_error=1"
test_expect_success 'start a cluster whose agents are supervised' '
    CLUSTER_NAME=asan cluster_start --supervise
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
unset ASAN_OPTIONS UBSAN_OPTIONS
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
. "$TIER_SRCDIR/tests/lib/crashloop.sh"
rss () { awk '/^VmRSS|^VmHWM/ { printf "%s %s kB  ", $1, $2 }' /proc/$1/status; }
if [ "$VG" = 1 ]; then
    # the supervisors run lib/tierd from bash: a script will do
    install_agent () {
        sed -i "/^AgentTimeout *=/d" $CLUSTER/etc/tier.conf &&
        echo "AgentTimeout = ${VG_AGENT_TIMEOUT:-120}s" >>$CLUSTER/etc/tier.conf &&
        cp $CLUSTER/lib/tierd $CLUSTER/lib/tierd.real &&
        printf "#!/bin/sh\nexec valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite --suppressions=%s --log-file=%s/vg.%%p %s \"\$@\"\n" \
            "$TIER_SRCDIR/tests/valgrind.supp" "$SAN" "$CLUSTER/lib/tierd.real" >$CLUSTER/lib/tierd.new &&
        chmod 755 $CLUSTER/lib/tierd.new && mv $CLUSTER/lib/tierd.new $CLUSTER/lib/tierd
    }
    is_checked () { p=$(agent_pid $1) && [ -n "$p" ] && readlink /proc/$p/exe | grep -q valgrind && $TIERCTL -N $1 ping; }
    # every log ends with its summary; none with an error or a definite leak
    san_reports () {
        grep -l "ERROR SUMMARY: [1-9]\|definitely lost: [1-9]" $SAN/vg.* 2>/dev/null | grep .
    }
else
    install_agent () {
        cp $ASAN_BUILD/agent/tierd $CLUSTER/lib/tierd.new && mv $CLUSTER/lib/tierd.new $CLUSTER/lib/tierd
    }
    is_checked () { p=$(agent_pid $1) && [ -n "$p" ] && grep -q libasan /proc/$p/maps && $TIERCTL -N $1 ping; }
    san_reports () { ls -d $SAN/* 2>/dev/null | grep .; }
fi

test_expect_success "the supervisors restart the agents under $WHAT" '
    install_agent &&
    ( for n in $CR_NODES; do kill -TERM "$(agent_pid $n)" || exit 1; done ) &&
    ( for n in $CR_NODES; do wait_for 120 is_checked $n || { echo "$n: no agent under $WHAT"; exit 1; }; done )
'
test_expect_success 'the inputs, the batch directory and the scripts' '
    crashloop_setup
'
test_expect_success "a $CRASH_TASKS-task array with stage-in, batch replicas and stage-out, and its afterok dependent" '
    crashloop_iteration 1 && test "$CR_NOTRUN" = 0
'
test_expect_success 'every invariant held' '
    crashloop_report && test "$(crashloop_violations)" = 0
'
test_expect_success "the agents served it all, each still under $WHAT (memory reported)" '
    (
        for n in $CR_NODES; do
            p=$(agent_pid $n) && echo "# tierd $n ($WHAT): $(rss $p)" && is_checked $n || exit 1
        done
    )
'
for n in $CR_NODES; do
    p=$(agent_pid $n) && echo "# tierd $n ($WHAT) after $CRASH_TASKS tasks: $(rss $p)"
done
gone () { ! kill -0 "$1" 2>/dev/null; }
test_expect_success "stopped with SIGTERM, every agent ends; $WHAT reported nothing" '
    pids= &&
    for n in $CR_NODES; do pids="$pids $(agent_pid $n)"; done &&
    ( for f in $CLUSTER/run/supervisor-*.dpid; do kill -TERM "$(cat $f)" && rm -f $f || exit 1; done ) &&
    ( for p in $pids; do wait_for 60 gone $p || { echo "agent $p still runs"; exit 1; }; done ) &&
    ! grep -h "ERROR: \|runtime error" $CLUSTER/log/tierd-*.out &&
    { ! san_reports || { head -n 80 $(san_reports); false; }; }
'
test_expect_success 'a second agent on a node exits at once, and leaks nothing' '
    ASAN_OPTIONS="log_path=$SAN/asan:detect_leaks=1" $CLUSTER/lib/tierd -c $CLUSTER/etc/tier.conf -N n1 &&
    wait_for 60 $TIERCTL -N n1 ping && first=$(agent_pid n1) && kill -0 $first &&
    ASAN_OPTIONS="log_path=$SAN/asan:detect_leaks=1" $CLUSTER/lib/tierd -F -c $CLUSTER/etc/tier.conf -N n1 \
        >$TRASH/second.out 2>&1; echo "second: $?" && cat $TRASH/second.out &&
    grep -q "another tierd already serves node n1" $TRASH/second.out $CLUSTER/log/tierd-n1.log &&
    test "$(agent_pid n1)" = "$first" && kill -TERM $first && wait_for 60 gone $first &&
    { ! san_reports || { head -n 80 $(san_reports); false; }; }
'
crashloop_report
test_done
