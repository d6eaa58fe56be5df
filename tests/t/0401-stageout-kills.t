#!/bin/bash
test_description='stage-out under kill -9: tierd and its children killed at random moments while large outputs are staged out; the afterok dependent, the GFS and the records after each iteration'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

# Issue 16's acceptance scenario.  Each iteration: a SK_TASKS-task array
# (3), one task per node, each writing SK_MB MiB (160) of random data
# into a --tier-stage-out directory (big_T.dat, then its checksum file
# big_T.dat.sha256), its size and SHA-256 recorded outside tier; an
# afterok dependent (untiered) that records, for every expected output,
# whether it is present and complete at the moment it runs.  From the
# first output's close until the array has left the queue, a killer
# sends kill -9 every 0.1 to 1.0 s, SK_PER_ITER (14) times at most, to
# one node's tierd (its supervisor restarts it within a second) or to
# one of the agents' children (tierd-mig, tierd-manifest, ...), found by
# pid below the agent's pid file via /proc and checked by its comm just
# before the kill.  It stops after at least SK_MIN_KILLS kills (50) and
# SK_ITERATIONS iterations (3), at most SK_MAX_ITERATIONS (12); the GFS
# is capped at SK_BW (120M).  make torture runs it larger.
SK_TASKS=${SK_TASKS:-3}
SK_MB=${SK_MB:-160}
SK_BW=${SK_BW:-120M}
SK_PER_ITER=${SK_PER_ITER:-14}
SK_MIN_KILLS=${SK_MIN_KILLS:-50}
SK_ITERATIONS=${SK_ITERATIONS:-3}
SK_MAX_ITERATIONS=${SK_MAX_ITERATIONS:-12}
SK_SEED=${SK_SEED:-$$}
RANDOM=$SK_SEED

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success "start a cluster whose agents are supervised (GFS capped at $SK_BW)" '
    CLUSTER_NAME=skill cluster_start --supervise --gfs-opts bandwidth=$SK_BW &&
    echo "StageOutTimeout = 120s" >>$CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
. "$TIER_SRCDIR/tests/lib/crashloop.sh"     # cr_children, cr_residue

SK_H=$GFS/home/alice
SK_OUT=$SK_H/sk                 # SK_OUT/I: iteration I's output directory
SK_REC=$SK_H/sk-rec             # the writers' records (outside tier)
SK_DEP=$SK_H/sk-dep             # what each dependent saw
SK_BACK=$GFS-backing/home/alice/sk
SK_MANI=$GFS-backing/.tier/users/alice/jobs
SK_INV="bad_output not_once partial false_conflict bad_manifest late_disagree dep_incomplete dep_missing leak false_late"
declare -A SK_BAD SK_CHECKS
for _v in $SK_INV; do SK_BAD[$_v]=0; SK_CHECKS[$_v]=0; done
SK_ITER=0 SK_NOTRUN=0 SK_LATE=0 SK_EXCUSED=0
echo "# seed $SK_SEED (SK_SEED=$SK_SEED repeats the kill choices, not their timing)"

sk_setup () {
    as_user alice mkdir -p "$SK_OUT" "$SK_REC" "$SK_DEP" || return 1
    # the writer: the data's checksum from the stream, never read back
    cat >"$SK_H/sk-task.sh" <<EOF
#!/bin/bash
i=\$1 t=\$SLURM_ARRAY_TASK_ID out=$SK_OUT/\$1 rec=$SK_REC/\$1-\$SLURM_ARRAY_TASK_ID
echo "\$SLURM_JOB_ID \$SLURMD_NODENAME" > \$rec.job
sum=\$(head -c \$(($SK_MB << 20)) /dev/urandom | tee \$out/big_\$t.dat | sha256sum | cut -c1-64)
line="\$sum  big_\$t.dat"
echo "\$line" > \$out/big_\$t.dat.sha256
{ echo "big_\$t.dat \$(($SK_MB << 20)) \$sum"
  echo "big_\$t.dat.sha256 \$(( \${#line} + 1 )) \$(echo "\$line" | sha256sum | cut -c1-64)"
} > \$rec.tmp && mv \$rec.tmp \$rec.out
EOF
    # the afterok dependent (untiered): what it finds on the GFS
    cat >"$SK_H/sk-dep.sh" <<EOF
#!/bin/bash
i=\$1
for t in \$(seq $SK_TASKS); do
    rec=$SK_REC/\$i-\$t.out
    [ -e \$rec ] || { echo "task\$t norecord"; continue; }
    while read -r name size sum; do
        f=$SK_OUT/\$i/\$name
        if [ ! -e \$f ]; then echo "\$name missing"
        elif [ "\$(stat -c %s \$f)" != "\$size" ]; then echo "\$name size=\$(stat -c %s \$f)"
        elif [ "\$(sha256sum < \$f | cut -c1-64)" != "\$sum" ]; then echo "\$name other-bytes"
        else echo "\$name complete"; fi
    done < \$rec
done > $SK_DEP/\$i.tmp && mv $SK_DEP/\$i.tmp $SK_DEP/\$i.out
EOF
    chmod 755 "$SK_H/sk-task.sh" "$SK_H/sk-dep.sh"
    chown alice "$SK_H/sk-task.sh" "$SK_H/sk-dep.sh"
}

# sk_pick: one of stdin's lines, picked by $RANDOM (SK_SEED repeats it)
sk_pick () {
    local l
    mapfile -t l
    [ ${#l[@]} -gt 0 ] && printf '%s\n' "${l[RANDOM % ${#l[@]}]}"
}

# sk_kill_one I: kill -9 one process of I's nodes: its tierd half the
# time (or when no child runs), else one child of a kind among those
# running.  Logs "KIND NODE PID PHASE" (PHASE: tasks = some task still
# writing, after = every task done, its outputs staged out).
sk_kill_one () {
    local i=$1 nodes node kind pid phase=after t
    nodes=$(cat "$SK_REC/$i"-*.job 2>/dev/null | awk '{ print $2 }' | sort -u)
    [ -n "$nodes" ] || nodes=$CR_NODES
    node=$(printf '%s\n' $nodes | sk_pick)
    kind=tierd
    pid=$(cat "$CLUSTER/state/$node/tierd.pid" 2>/dev/null)
    if [ $((RANDOM % 2)) = 1 ] && cr_children >"$TRASH/sk.c" && [ -s "$TRASH/sk.c" ]; then
        kind=$(awk '{ print $1 }' "$TRASH/sk.c" | sort -u | sk_pick)
        read -r kind node pid <<<"$(awk -v k="$kind" '$1 == k' "$TRASH/sk.c" | sk_pick)"
    fi
    # the very process: alive, not a zombie, of that comm
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$kind" ] || return 1
    [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" != Z ] || return 1
    for t in $(seq "$SK_TASKS"); do [ -e "$SK_REC/$i-$t.out" ] || phase=tasks; done
    kill -9 "$pid" 2>/dev/null && echo "$kind $node $pid $phase" >>"$TRASH/sk-kills"
}

# sk_killer I STOPFILE: from the first closed outputs of iteration I
# (the host sees the GFS directory, not the job's overlay: a writer's
# record says its outputs are closed)
# until STOPFILE goes, up to SK_PER_ITER kills, 0.1 to 1.0 s apart
sk_killer () {
    local i=$1 stop=$2 n=0
    while [ -e "$stop" ] && ! ls "$SK_REC/$i"-*.out >/dev/null 2>&1; do
        sleep 0.1
    done
    while [ -e "$stop" ] && [ $n -lt "$SK_PER_ITER" ]; do
        sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.1 + (r % 91) / 100 }')"
        [ -e "$stop" ] || break
        sk_kill_one "$i" && n=$((n + 1))
    done
}

sk_kills () { cat "$TRASH/sk-kills" 2>/dev/null | wc -l; }
sk_outboxes_empty () {
    for n in $CR_NODES; do test -z "$(ls -A "$CR_NV/$n/.outbox" 2>/dev/null)" || return 1; done
}

# the records of iteration I as one JSON document for the checker:
# per task its job, node, tierctl outputs --json and new tierd log lines
sk_collect () {
    local i=$1 t job node
    for t in $(seq "$SK_TASKS"); do
        read -r job node <"$SK_REC/$i-$t.job" 2>/dev/null || { echo "task $t - -"; continue; }
        echo "task $t $job $node"
        $TIERCTL -N "$node" outputs --job "$job" --json >"$TRASH/sk-$i-$t.json" 2>"$TRASH/sk-$i-$t.err" ||
            echo '{"error": "tierctl outputs failed"}' >"$TRASH/sk-$i-$t.json"
    done
}

cat >"$TRASH/sk-check.py" <<'EOF'
# sk-check.py - the invariants of one iteration; prints "INV CHECKS BAD"
# lines and "# ..." explanations
import json, os, re, sys, hashlib
i, ntasks, rec, back, mani, dep, trash, logs, slurmdlog = sys.argv[1:10]
ntasks = int(ntasks)
bad = {}; checks = {}
def count(inv, ok, why=None):
    checks[inv] = checks.get(inv, 0) + 1
    if not ok:
        bad[inv] = bad.get(inv, 0) + 1
        if why: print("# iteration %s: %s: %s" % (i, inv, why))
def sha(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""): h.update(b)
    return h.hexdigest()
tasks = {}
for line in open(os.path.join(trash, "sk-%s.tasks" % i)):
    _, t, job, node = line.split()
    tasks[int(t)] = (job, node)
expected = {}
for t in range(1, ntasks + 1):
    p = os.path.join(rec, "%s-%d.out" % (i, t))
    rows = [l.split() for l in open(p)] if os.path.exists(p) else []
    expected[t] = {r[0]: (int(r[1]), r[2]) for r in rows}
    count("bad_output", len(rows) == 2, "task %d: no writer record" % t)
outdir = os.path.join(back, i)
names = sorted(os.listdir(outdir)) if os.path.isdir(outdir) else []
allexp = {n: v for t in expected for n, v in expected[t].items()}
# every output on the GFS byte for byte, exactly once
for n, (size, s) in sorted(allexp.items()):
    p = os.path.join(outdir, n)
    ok = os.path.isfile(p) and os.path.getsize(p) == size and sha(p) == s
    count("bad_output", ok, "%s not on the GFS byte for byte" % n)
temps = [n for n in names if n.endswith(".part") or ".tier-" in n and n != ".tier-conflicts"]
count("partial", not temps, "temporaries left: %s" % temps)
extra = [n for n in names if n not in allexp and n not in temps and n != ".tier-conflicts"]
count("not_once", not extra, "names besides the outputs: %s" % extra)
# conflicts: logs, tierctl, manifest, .tier-conflicts
loglines = [l.strip() for l in open(logs, errors="replace")
            if "conflict" in l and not re.search(r"\(0 in conflict", l)]
count("false_conflict", not loglines, "tierd logged: %s" % " | ".join(loglines[:3]))
slurmd = open(slurmdlog, errors="replace").read()
count("false_conflict", ".tier-conflicts" not in names, ".tier-conflicts exists")
depfile = os.path.join(dep, "%s.out" % i)
seen = {}
if os.path.exists(depfile):
    for l in open(depfile):
        w = l.split()
        if len(w) >= 2: seen[w[0]] = w[1]
count("dep_missing", os.path.exists(depfile), "the dependent recorded nothing")
late_n = 0; excused = 0
for t in range(1, ntasks + 1):
    job, node = tasks.get(t, ("-", "-"))
    try: ctl = json.load(open(os.path.join(trash, "sk-%s-%d.json" % (i, t))))
    except Exception as e: ctl = {"error": str(e)}
    mp = os.path.join(mani, "%s.0" % job, "outputs-%s.json" % node)
    try: m = json.load(open(mp))
    except Exception as e: m = None
    count("bad_manifest", m is not None, "task %d (job %s on %s): no manifest %s" % (t, job, node, mp))
    ctl_late = ctl.get("late") is True
    m_late = m is not None and m.get("late") is True
    count("late_disagree", m is None or ctl_late == m_late,
          "job %s: tierctl late=%s, manifest late=%s" % (job, ctl_late, m_late))
    count("false_conflict", ctl.get("conflicts", 0) == 0 and "error" not in ctl,
          "job %s: tierctl outputs: %s" % (job, json.dumps(ctl)[:300]))
    if m is not None:
        count("false_conflict", m.get("conflicts", 0) == 0, "job %s: manifest conflicts %s" % (job, m.get("conflicts")))
        got = {os.path.basename(o.get("path", o.get("file", ""))): o for o in m.get("outputs", [])}
        for n, (size, s) in expected[t].items():
            o = got.get(n)
            count("bad_manifest", o is not None and o.get("state") == "done" and o.get("size") == size and o.get("sha256") == s,
                  "job %s: manifest entry of %s: %s" % (job, n, o))
        count("bad_manifest", sorted(got) == sorted(expected[t]), "job %s: manifest lists %s" % (job, sorted(got)))
    late = ctl_late and m_late
    late_n += late
    # late only if the epilog's bound passed (slurmd's log says so)
    bound = re.search(r"job %s\b[^\n]*(StageOutTimeout|no tierd answered)" % job, slurmd)
    count("false_late", not (ctl_late or m_late) or bound,
          "job %s marked late (tierctl %s, manifest %s), but its epilog did not pass the bound: %s" %
          (job, ctl_late, m_late, " | ".join(l for l in slurmd.splitlines() if "job %s:" % job in l or "job %s " % job in l)[:400]))
    for n in sorted(expected[t]):
        st = seen.get(n, "unrecorded")
        if st != "complete" and late:
            excused += 1
            print("# iteration %s: the dependent found %s %s; job %s is late (tierctl and manifest)" % (i, n, st, job))
        count("dep_incomplete", st == "complete" or late,
              "the dependent found %s %s, job %s not late (tierctl %s, manifest %s)" % (n, st, job, ctl_late, m_late))
for inv in sorted(checks):
    print("%s %d %d" % (inv, checks[inv], bad.get(inv, 0)))
print("late %d 0" % late_n)
print("excused %d 0" % excused)
EOF

sk_iteration () {
    local i=$1 id dep state t0 st inv c b n0l l
    t0=$(date +%s)
    as_user alice mkdir -p "$SK_OUT/$i" || return 1
    cr_residue >"$TRASH/residue.before"
    for n in $CR_NODES; do wc -l <"$CLUSTER/log/tierd-$n.log" 2>/dev/null || echo 0; done >"$TRASH/sk-log0"
    for n in $CR_NODES; do wc -l <"$CLUSTER/log/slurmd-$n.log" 2>/dev/null || echo 0; done >"$TRASH/sk-slurmd0"
    id=$(cd "$SK_H" && as_user alice sbatch --parsable --array=1-"$SK_TASKS" -c 2 \
        --tier-stage-out="$SK_OUT/$i" -o /dev/null -e "$SK_H/sk-%A_%a.err" "$SK_H/sk-task.sh" "$i") || return 1
    dep=$(cd "$SK_H" && as_user alice sbatch --parsable --tier-cache=off \
        --dependency=afterok:"$id" -o /dev/null "$SK_H/sk-dep.sh" "$i") || return 1
    touch "$TRASH/sk-run"
    sk_killer "$i" "$TRASH/sk-run" &
    st=$!
    wait_for 300 job_done "$id"
    rm -f "$TRASH/sk-run"
    wait "$st"
    wait_for 120 job_done "$dep" || scancel "$dep"
    SK_ITER=$((SK_ITER + 1))
    state=$(job_state "$id")
    for n in $CR_NODES; do wait_for 30 $TIERCTL -N "$n" ping; done
    wait_for 150 sk_outboxes_empty
    wait_for 60 cr_clean
    if [ "$state" != COMPLETED ]; then
        SK_NOTRUN=$((SK_NOTRUN + 1))
        echo "# iteration $i: array $id ended $state (not counted)"
        scancel "$dep" 2>/dev/null
        return 0
    fi
    sk_collect "$i" >"$TRASH/sk-$i.tasks"
    # the agents' log lines of this iteration
    l=1
    for n in $CR_NODES; do
        n0l=$(sed -n ${l}p "$TRASH/sk-log0"); l=$((l + 1))
        tail -n +$((n0l + 1)) "$CLUSTER/log/tierd-$n.log" 2>/dev/null
    done >"$TRASH/sk-$i.log"
    l=1
    for n in $CR_NODES; do
        n0l=$(sed -n ${l}p "$TRASH/sk-slurmd0"); l=$((l + 1))
        tail -n +$((n0l + 1)) "$CLUSTER/log/slurmd-$n.log" 2>/dev/null
    done >"$TRASH/sk-$i.slurmd"
    python3 "$TRASH/sk-check.py" "$i" "$SK_TASKS" "$SK_REC" "$SK_BACK" "$SK_MANI" "$SK_DEP" \
        "$TRASH" "$TRASH/sk-$i.log" "$TRASH/sk-$i.slurmd" >"$TRASH/sk-$i.check" 2>&1 || {
        cat "$TRASH/sk-$i.check"; echo "# iteration $i: the checker failed"; return 1
    }
    grep '^#' "$TRASH/sk-$i.check"
    while read -r inv c b; do
        case "$inv" in
            '#'*) ;;
            late) SK_LATE=$((SK_LATE + c)) ;;
            excused) SK_EXCUSED=$((SK_EXCUSED + c)) ;;
            *) SK_CHECKS[$inv]=$((SK_CHECKS[$inv] + c)); SK_BAD[$inv]=$((SK_BAD[$inv] + b)) ;;
        esac
    done <"$TRASH/sk-$i.check"
    cr_residue >"$TRASH/residue.after"
    SK_CHECKS[leak]=$((SK_CHECKS[leak] + 1))
    if ! cmp -s "$TRASH/residue.before" "$TRASH/residue.after"; then
        SK_BAD[leak]=$((SK_BAD[leak] + 1))
        echo "# iteration $i: left behind:"; diff "$TRASH/residue.before" "$TRASH/residue.after" | sed 's/^/#   /'
    fi
    # the bytes are checked: free the NVDIMM-sized space on the GFS
    rm -rf "${SK_BACK:?}/$i"
    echo "# iteration $i: array $id $state, dependent $dep $(job_state "$dep"), $(sk_kills) kills so far, $(( $(date +%s) - t0 )) s"
}

sk_report () {
    local k v
    echo "# stage-out kills: $SK_ITER iterations, $(sk_kills) kills ($(for k in tierd $CR_CHILDREN; do
        printf '%s %s, ' "$k" "$(awk -v k="$k" '$1 == k' "$TRASH/sk-kills" 2>/dev/null | wc -l)"; done | sed 's/, $//'))"
    echo "# kills while tasks wrote: $(awk '$4 == "tasks"' "$TRASH/sk-kills" 2>/dev/null | wc -l), after every task ended (batch step end, epilog): $(awk '$4 == "after"' "$TRASH/sk-kills" 2>/dev/null | wc -l)"
    echo "# arrays not completed by Slurm: $SK_NOTRUN; task jobs marked late: $SK_LATE; incomplete outputs seen by a dependent of a late job: $SK_EXCUSED"
    for v in $SK_INV; do
        echo "# invariant $v: ${SK_BAD[$v]} violation(s) in ${SK_CHECKS[$v]} checks"
    done
}
# the acceptance invariants (false_late has a test of its own)
sk_violations () {
    local v n=0
    for v in $SK_INV; do [ "$v" = false_late ] || n=$((n + SK_BAD[$v])); done
    echo "$n"
}

test_expect_success 'the scripts' '
    for n in n1 n2 n3; do wait_for 30 $TIERCTL -N $n ping || exit 1; done &&
    sk_setup
'
test_expect_success "iterations until $SK_MIN_KILLS kills during stage-out" '
    i=0 && ok=0 &&
    while [ $i -lt $SK_MAX_ITERATIONS ] &&
          { [ $i -lt $SK_ITERATIONS ] || [ "$(sk_kills)" -lt $SK_MIN_KILLS ]; }; do
        i=$((i + 1)) && sk_iteration $i || { ok=1; break; }
    done && test $ok = 0 &&
    sk_report && test "$(sk_kills)" -ge $SK_MIN_KILLS
'
test_expect_success 'every invariant held after every iteration' '
    sk_report && test "$(sk_violations)" = 0
'
# A job is late only if its epilog's bound passed (slurmd's log says
# so); one whose epilog got its outputs in time is not.
test_expect_success 'no job marked late whose epilog had its outputs within the bound' '
    echo "# false_late: ${SK_BAD[false_late]} in ${SK_CHECKS[false_late]} checks" &&
    test "${SK_BAD[false_late]}" = 0
'
test_expect_success 'most arrays ran to completion (the rest are counted, not checked)' '
    echo "# $SK_NOTRUN of $SK_ITER not completed" && test $((SK_NOTRUN * 2)) -le $SK_ITER
'
test_expect_success 'no node was drained' '! sinfo -h -R | grep .'
test_done
