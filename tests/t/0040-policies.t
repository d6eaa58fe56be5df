#!/bin/bash
test_description='directory policies: tierctl, layers, locked site policies, frozen job sets'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,USERS || skip_all "needs root, Slurm and the users alice and bob"
PY=/usr/bin/python3

test_expect_success 'start the cluster' 'cluster_start'
[ -n "${CLUSTER:-}" ] && [ -f "$SLURM_CONF" ] || bail_out "no cluster"
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf -N n1"
SITE=$CLUSTER/etc/policies.d
STATE=$GFS/.tier
field () { $PY -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }
alice () { as_user alice $TIERCTL "$@"; }
bob () { as_user bob $TIERCTL "$@"; }
show_role () { as_user "$1" $TIERCTL show policy --json "$2" | field 'd["role"] + " " + d["layer"]'; }
job_role () { as_user "$1" $TIERCTL show policy --json --job "$2" "$3" | field 'd["role"] + " " + d["layer"]'; }
running () { test "$(job_state "$1")" = RUNNING; }
# exits CODE CMD...: CMD exits with CODE exactly; its stderr in $TRASH/e
exits () {
    _want=$1; shift
    "$@" 2>$TRASH/e; _rc=$?; cat $TRASH/e
    test "$_rc" = "$_want" || { echo "exit $_rc, expected $_want"; return 1; }
}

# alice's directories on the GFS
for d in db/tmp proj runs out secure; do
    mkdir -p "$GFS/alice/$d"
done
chown -R alice:alice "$GFS/alice"
A=$GFS/alice

test_expect_code 2 'tierctl set without arguments is a usage error' 'alice set'
test_expect_code 2 'tierctl set policy DIR without a role is a usage error' \
    'alice set policy $A/db'
test_expect_code 2 'an unknown role is a usage error' \
    'alice set policy $A/db archive 2>$TRASH/e && cat $TRASH/e >&2'
test_expect_success 'a bad value names the command line and the key' '
    exits 2 alice set policy $A/db batch --ttl 7x &&
    grep -q "command line: policy .$A/db.: key .ttl.: not a duration" $TRASH/e &&
    exits 2 alice set policy $A/db batch --keep always &&
    grep -q "key .keep.: does not apply to role batch" $TRASH/e &&
    exits 2 alice set policy $A/db batch --share world &&
    grep -q "key .share.: is for site policies only" $TRASH/e
'
test_expect_success 'tierctl help lists the policy commands; help set explains' '
    alice help | grep -q "^  set " && alice help | grep -q "^  show " &&
    alice help set | grep -q "usage: tierctl set policy DIR ROLE"
'
test_expect_success 'without an agent on the node, set policy says who makes the directory' '
    ! test -d $STATE/users/alice &&
    exits 1 alice set policy $A/db batch &&
    grep -q "the node.s agent makes it" $TRASH/e
'
test_expect_success 'start the agent of n1' '
    $CLUSTER/lib/tierd -c $CLUSTER/etc/tier.conf -N n1 &&
    wait_for 10 $TIERCTL ping
'
test_expect_success 'alice sets db batch and db/tmp none before her first job' '
    alice set policy $A/db batch --ttl 7d &&
    (cd $A/db && alice set policy tmp/ none) &&
    stat -c "%U %a" $STATE/users/alice | grep -qx "alice 700" &&
    stat -c "%U %a" $STATE/users/alice/policies.json | grep -qx "alice 600" &&
    ! ls -a $STATE/users/alice | grep "^\.policies"
'
test_expect_success 'show policy: db/x is batch (user layer), db/tmp/y is none' '
    alice show policy $A/db/x | tee $TRASH/out &&
    grep -q "^$A/db/x: batch" $TRASH/out &&
    grep -q "from the user layer: the policy of $A/db in $STATE/users/alice/policies.json" $TRASH/out &&
    grep -q "ttl=7d revalidate=30s" $TRASH/out &&
    test "$(show_role alice $A/db/x)" = "batch user" &&
    test "$(show_role alice $A/db/tmp/y)" = "none user" &&
    alice show policy --json $A/db/tmp/y | field "d[\"dir\"]" | grep -qx "$A/db/tmp"
'
test_expect_success 'resolution: component boundaries, trailing slashes, . and ..' '
    mkdir -p $GFS/alice/dbx && chown alice $GFS/alice/dbx &&
    test "$(show_role alice $A/dbx/f)" = "none default" &&
    test "$(show_role alice $A/db/)" = "batch user" &&
    test "$(show_role alice $A/db/tmp/../x)" = "batch user" &&
    test "$(show_role alice $A/db/./tmp//y/)" = "none user" &&
    (cd $A/db/tmp && test "$(show_role alice .)" = "none user" &&
     test "$(show_role alice ..)" = "batch user")
'
test_expect_success 'a symlinked directory resolves to its target' '
    as_user alice ln -s $A/db $A/dblink &&
    test "$(show_role alice $A/dblink/x)" = "batch user" &&
    as_user alice ln -s $A/runs $A/runlink &&
    alice set policy $A/runlink pipeline --size 64M 2>$TRASH/e && cat $TRASH/e &&
    grep -q "note: $A/runlink resolves to $A/runs" $TRASH/e &&
    test "$(show_role alice $A/runs/f)" = "pipeline user"
'
test_expect_success 'refused: outside AllowedRoots, inside tier'"'"'s own directories' '
    exits 1 alice set policy /tmp batch &&
    grep -q "refused: /tmp is outside the directories tier may act on (AllowedRoots)" $TRASH/e &&
    exits 1 alice set policy $STATE/users/alice/x batch &&
    grep -q "one of tier.s own directories" $TRASH/e &&
    exits 1 alice set policy $GFS pipeline &&
    grep -q "contains $STATE" $TRASH/e
'
test_expect_success 'a directory that does not exist is a warning, not an error' '
    alice set policy $A/later endpoint 2>$TRASH/e && cat $TRASH/e &&
    grep -q "warning: $A/later does not exist" $TRASH/e
'
test_expect_success 'a directory alice cannot read is a warning, not an error' '
    as_user alice mkdir -p $A/closed && chmod 000 $A/closed &&
    alice set policy $A/closed batch 2>$TRASH/e; rc=$?; cat $TRASH/e;
    chmod 755 $A/closed && test $rc = 0 &&
    grep -q "^tierctl: warning: you cannot read $A/closed$" $TRASH/e &&
    test "$(show_role alice $A/closed/x)" = "batch user" &&
    alice unset policy $A/closed
'
test_expect_success 'nesting that changes mounts is refused when set, either way round' '
    exits 1 alice set policy $A/runs/sub none &&
    grep -q "lies inside the pipeline directory $A/runs" $TRASH/e &&
    exits 1 alice set policy $A/later/p pipeline &&
    grep -q "inside the endpoint directory $A/later" $TRASH/e &&
    exits 1 alice set policy $A/db pipeline &&
    grep -q "the user policy of $A/db/tmp would no longer apply" $TRASH/e &&
    test "$(show_role alice $A/db/x)" = "batch user"
'
test_expect_success 'unset policy removes one directory; an unknown one is an error' '
    alice unset policy $A/later &&
    exits 1 alice unset policy $A/later && grep -q "no policy for $A/later" $TRASH/e &&
    test "$(show_role alice $A/later)" = "none default"
'
test_expect_success 'bob cannot read alice'"'"'s store, nor plant one for her' '
    ! as_user bob cat $STATE/users/alice/policies.json &&
    ! as_user bob sh -c "echo {} > $STATE/users/alice/policies.json" &&
    ! as_user bob ls $STATE/users/alice &&
    exits 1 bob show policy --user alice $A/db/x &&
    grep -q "Permission denied\|refused" $TRASH/e &&
    exits 1 bob list policies --user alice
'
test_expect_success 'bob'"'"'s policies are his: alice still sees hers' '
    bob set policy $A/db none &&
    test "$(show_role bob $A/db/x)" = "none user" &&
    test "$(show_role alice $A/db/x)" = "batch user" &&
    stat -c %U $STATE/users/bob/policies.json | grep -qx bob
'
test_expect_success 'list policies: in force, and every layer with --json' '
    alice list policies | tee $TRASH/l &&
    grep -q "^$A/db  *batch  *user  *ttl=7d" $TRASH/l &&
    alice list policies --all-layers --json >$TRASH/l.json &&
    field "sorted(p[\"dir\"] for p in d[\"policies\"])" <$TRASH/l.json | grep -q "$A/runs"
'
# the site layer
cat >"$SITE/10-site.json" <<EOF
{ "version": 1, "policies": {
    "$A/secure": { "role": "none", "locked": true },
    "$A/proj": { "role": "batch", "ttl": "1d" },
    "$GFS/apps": { "role": "batch", "share": "world" } } }
EOF
chmod 644 "$SITE/10-site.json"
test_expect_success 'a site policy applies where alice has none' '
    test "$(show_role alice $A/proj/x)" = "batch site" &&
    alice show policy $A/proj/x | grep -q "in $SITE/10-site.json"
'
test_expect_success 'a locked site policy beats alice'"'"'s, and refuses hers when set' '
    exits 1 alice set policy $A/secure/mine batch &&
    grep -q "lies under the locked site policy $A/secure" $TRASH/e &&
    alice set policy $A/proj none &&
    test "$(show_role alice $A/proj/x)" = "none user" &&
    sed -i "s|\"$A/proj\": { \"role\": \"batch\", \"ttl\": \"1d\" }|\"$A/proj\": { \"role\": \"batch\", \"locked\": true }|" $SITE/10-site.json &&
    cat $SITE/10-site.json &&
    test "$(show_role alice $A/proj/x)" = "batch site" &&
    alice show policy $A/proj/x | grep -q "locked by the site" &&
    alice list policies --all-layers | grep "^$A/proj .* user " | grep -q "refused: .*locked site policy"
'
test_expect_success 'a malformed site file is reported with file and key and skipped' '
    printf "{\"version\":1,\"policies\":{\"$A/x\":{\"role\":\"batch\",\"tll\":\"1d\"}}}" >$SITE/20-bad.json &&
    chmod 644 $SITE/20-bad.json &&
    alice show policy $A/db/x >$TRASH/o 2>$TRASH/e; cat $TRASH/o $TRASH/e &&
    grep -q "warning: site policies: $SITE/20-bad.json: policy .$A/x.: key .tll.: unknown key; the file is skipped" $TRASH/e &&
    grep -q "^$A/db/x: batch" $TRASH/o &&
    test "$(show_role alice $A/proj/x)" = "batch site"
'
test_expect_success 'a site file others can write is refused' '
    cp $SITE/10-site.json $SITE/30-open.json && chmod 666 $SITE/30-open.json &&
    alice show policy $A/db/x 2>$TRASH/e >/dev/null; cat $TRASH/e &&
    grep -q "$SITE/30-open.json: must be owned by root and writable by root only; skipped" $TRASH/e &&
    chown alice $SITE/30-open.json && chmod 644 $SITE/30-open.json &&
    alice show policy $A/db/x 2>$TRASH/e >/dev/null; cat $TRASH/e &&
    grep -q "30-open.json: must be owned by root" $TRASH/e &&
    rm -f $SITE/30-open.json
'
# jobs freeze their set
test_expect_success 'a running job freezes its set; every node of it applies the same' '
    cd $GFS/home/alice &&
    J1=$(as_user alice sbatch --parsable -N2 --tier-cache=auto \
         --tier-batch=$A/out -o j1.out --wrap "srun -N2 true; sleep 60") &&
    echo "job $J1" && wait_for 60 running $J1 &&
    wait_for 60 test -f $STATE/users/alice/jobs/$J1.0/policy.json &&
    wait_for 60 sh -c "ls $CLUSTER/state/n*/policies/$J1.0.json 2>/dev/null | wc -l | grep -qx 2" &&
    stat -c "%U %a" $STATE/users/alice/jobs/$J1.0/policy.json | grep -qx "alice 600" &&
    n=$(ls $CLUSTER/state/n*/policies/$J1.0.json) && echo $n &&
    for f in $n $STATE/users/alice/jobs/$J1.0/policy.json; do
        field "sorted(json.dumps(p, sort_keys=True) for p in d[\"policies\"])" <$f
    done >$TRASH/sets && test "$(sort -u $TRASH/sets | wc -l)" = 1 &&
    grep -q "$A/out" $TRASH/sets &&
    test "$(job_role alice $J1 $A/db/x)" = "batch user" &&
    test "$(job_role alice $J1 $A/out/f)" = "batch job" &&
    test "$(job_role alice $J1 $A/proj/x)" = "batch site"
'
test_expect_success 'the node'"'"'s agent answers show policy --job from its registry' '
    node=$(ls $CLUSTER/state/n*/policies/$J1.0.json | tail -n 1 | sed "s|.*/state/\(n[0-9]*\)/.*|\1|") &&
    echo "node $node" &&
    mv $STATE/users/alice/jobs/$J1.0 $STATE/users/alice/jobs/.away &&
    as_user alice $TIERCTL -N $node show policy --job $J1 $A/db/x | tee $TRASH/o &&
    grep -q "^job $J1, $A/db/x: batch" $TRASH/o &&
    mv $STATE/users/alice/jobs/.away $STATE/users/alice/jobs/$J1.0
'
test_expect_success 'bob cannot read alice'"'"'s frozen job set' '
    exits 1 bob show policy --job $J1 $A/db/x &&
    grep -q "belongs to another user" $TRASH/e &&
    ! as_user bob cat $STATE/users/alice/jobs/$J1.0/policy.json
'
test_expect_success 'a change applies to the next job; the running one keeps its own' '
    alice unset policy $A/db &&
    alice set policy $A/db/tmp batch --ttl 1h &&
    test "$(show_role alice $A/db/x)" = "none default" &&
    J2=$(sbatch_wait alice -w n3 --tier-cache=auto -o j2.out --wrap true) &&
    echo "job $J2" &&
    test "$(job_role alice $J2 $A/db/x)" = "none default" &&
    test "$(job_role alice $J2 $A/db/tmp/y)" = "batch user" &&
    running $J1 &&
    test "$(job_role alice $J1 $A/db/x)" = "batch user" &&
    test "$(job_role alice $J1 $A/db/tmp/y)" = "none user" &&
    as_user alice $TIERCTL -N n3 show policy --job $J2 | tee $TRASH/o &&
    grep -q "frozen on node n3" $TRASH/o
'
test_expect_success 'a job option inside a pipeline directory wins; the refusal is recorded' '
    J3=$(sbatch_wait alice -w n3 --tier-cache=auto --tier-batch=$A/runs/db -o j3.out --wrap true) &&
    test "$(job_role alice $J3 $A/runs/db/x)" = "batch job" &&
    test "$(job_role alice $J3 $A/runs/f)" = "none default" &&
    as_user alice $TIERCTL show policy --job $J3 --json | field "[r[\"dir\"] for r in d[\"refused\"]]" | grep -q "$A/runs"
'
# overlays DIR...: how many overlays the job's namespace has at each DIR
cat >$GFS/home/alice/overlays <<'EOF'
for d; do awk -v d="$d" '$5 == d && / - overlay /' /proc/self/mountinfo | wc -l; done
EOF
chmod 755 $GFS/home/alice/overlays
test_expect_success 'a frozen set alice plants for her next job gives her only her own layers' '
    as_user alice mkdir -p $A/secure/in &&
    JP=$(as_user alice sbatch --parsable --hold -w n3 --tier-cache=auto -o $GFS/home/alice/jp.out \
         -e $GFS/home/alice/jp.err \
         --wrap "sh $GFS/home/alice/overlays $A/proj $A/secure/in $A/runs") &&
    echo "job $JP" &&
    cat >$TRASH/planted.json <<-EOF &&
	{ "format": 1, "job_id": $JP, "restart": 0, "user": "alice",
	  "policies": [
	    { "dir": "$A/proj", "layer": "site", "role": "pipeline", "source": "x" },
	    { "dir": "$A/db", "layer": "site", "role": "batch", "share": "world", "source": "x" },
	    { "dir": "$A/secure/in", "layer": "job", "role": "pipeline", "source": "x" },
	    { "dir": "$A/runs", "layer": "user", "role": "pipeline", "source": "x" } ],
	  "refused": [], "errors": [] }
	EOF
    as_user alice sh -c "mkdir $STATE/users/alice/jobs/$JP.0 &&
        cat >$STATE/users/alice/jobs/$JP.0/policy.json" <$TRASH/planted.json &&
    scontrol release $JP && wait_for 120 job_done $JP &&
    cat $GFS/home/alice/jp.out $GFS/home/alice/jp.err &&
    test "$(cat $GFS/home/alice/jp.out)" = "$(printf "0\n0\n1")" &&
    grep -q "refused: .*$A/secure/in lies under the locked site policy $A/secure" $GFS/home/alice/jp.err &&
    N=$CLUSTER/state/n3/policies/$JP.0.json && cat $N &&
    field "[p[\"dir\"] for p in d[\"policies\"] if p[\"layer\"] == \"site\" and not p[\"source\"].startswith(\"$SITE/\")]" <$N | grep -qx "\[\]" &&
    field "[p[\"dir\"] for p in d[\"policies\"] if \"share\" in p]" <$N | grep -qx "\[.$GFS/apps.\]" &&
    field "[p[\"dir\"] for p in d[\"policies\"] if p[\"dir\"] == \"$A/proj\"]" <$N | grep -qx "\[.$A/proj.\]" &&
    field "[r[\"reason\"] for r in d[\"refused\"] if r[\"dir\"] == \"$A/secure/in\"][0]" <$N |
        grep -q "lies under the locked site policy $A/secure" &&
    grep -q "job $JP: .* policies, frozen by another node" $CLUSTER/log/tierd-n3.log
'
test_expect_success 'the agent logged the malformed site file with file and key' '
    grep -q "site policies: $SITE/20-bad.json: policy .$A/x.: key .tll.: unknown key" $CLUSTER/log/tierd-n3.log
'
test_have_prereq ROOT && command -v strace >/dev/null && test_set_prereq STRACE
# The GFS does not answer the freeze (the link that publishes the job's
# policy.json is held for a minute by strace on n3's agent and its
# children): the
# agent gives up after 5 s, and the job still runs with tier.
test_expect_success STRACE 'a GFS that does not answer the freeze holds the agent 5 s at most' '
    pid=$(cat $CLUSTER/state/n3/tierd.pid) &&
    { strace -f -qq -o /dev/null -p $pid -e trace=link,linkat \
        -e inject=link,linkat:delay_enter=60000000 -P policy.json & } && st=$! &&
    wait_for 10 grep -q "^TracerPid:[[:space:]]*$st\$" /proc/$pid/status &&
    { id=$(sbatch_wait alice -w n3 --tier-cache=auto -o $A/hang.out --wrap "echo TIER \$TIER_JOB_ID"); rc=$?
      kill $st; wait $st; test $rc = 0; } &&
    cat $A/hang.out && grep -qx "TIER $id" $A/hang.out && ! grep -q warning $A/hang.out &&
    grep "job $id: .* did not answer within 5 s" $CLUSTER/log/tierd-n3.log
'
# each job's frozen set is a file on the GFS: freezing one job's must not
# read the sets of the jobs before it (once that was quadratic in the jobs
# a user ran within the retention time: a metadata storm on the GFS)
test_expect_success FUSE 'freezing a job'"'"'s set leaves other jobs'"'"' sets alone' '
    a=$(sbatch_wait alice -w n2 --tier-cache=auto -o /dev/null --wrap true) &&
    b=$(sbatch_wait alice -w n2 --tier-cache=auto -o /dev/null --wrap true) &&
    test -f $STATE/users/alice/jobs/$a.0/policy.json &&
    gfsemu_reset "$GFS" &&
    c=$(sbatch_wait alice -w n2 --tier-cache=auto -o /dev/null --wrap true) &&
    test -f $STATE/users/alice/jobs/$c.0/policy.json &&
    (for j in $a $b; do
        for k in lookup getattr open; do
            n=$(gfsemu_stat "$GFS" .tier/users/alice/jobs/$j.0/policy.json $k) &&
            echo "job $j policy.json $k: $n" && test "${n:-0}" = 0 || exit 1
        done
    done)
'
test_expect_success 'end the running job; no node was drained' '
    scancel $J1 && wait_for 60 job_done $J1 && no_drain
'
test_done
