# crashloop.sh - kill -9 at random moments while every tier works, and
# check the promises after each iteration (sourced after cluster.sh, on a
# cluster started with --supervise)
#
#   crashloop_setup                 inputs, the batch directory, scripts
#   crashloop_iteration I           one job array through every tier with
#                                   kills meanwhile, then its invariants
#   crashloop_report                kills by kind, iterations, violations
#
# Each iteration submits a TASKS-task array (CRASH_TASKS, default 3) that
# stages in an input per task, reads a shared input through the batch
# replica cache, and writes CRASH_MB MiB (default 48) in two outputs per
# task into a --tier-stage-out directory, with an afterok dependent that
# checks them; the writers record their checksums outside tier.  While
# the array runs, a killer sends kill -9 every 0.1 to 0.7 s to one process picked at random: a node's tierd (its
# supervisor restarts it) or one of its children -- migrator, stager,
# copier, fetcher, manifest writer -- found by its comm below the
# agent's pid, never by a name match on the whole system.  With
# CRASH_NOKILL=1 nothing is killed (a load test: t/0410).  With
# CRASH_SLURMD=1 a slurmd is killed too once in a while (restarted at
# once); jobs that Slurm then fails or requeues are counted apart.
#
# Invariants, counted per iteration (every one must stay 0):
#   bad_output     an output that a writer closed is not on the GFS byte
#                  for byte (missing or other content)
#   partial        a temporary (.NAME.tier-*.part) left in an output dir
#   bad_replica    a task read other bytes of the shared input than its
#                  source's, or of its staged-in input
#   leak           a namespace, mount, write cache or tmpfs left after
#                  the array ended (against the state before it)
#   false_conflict a conflict logged, or a .tier-conflicts directory
#                  (nothing else writes those files)
#   dep_incomplete an afterok dependent that ran and found an output
#                  incomplete, while neither the slurmd log nor the job
#                  record says the bound was passed

CRASH_TASKS=${CRASH_TASKS:-3}
CRASH_MB=${CRASH_MB:-48}
CR_H=$GFS/home/alice
CR_DB=$CR_H/crash-db
CR_IN=$CR_H/crash-in
CR_SUMS=$CR_H/crash-sums
CR_NV=$(cat "$CLUSTER/run/nvdimm.path")
CR_NODES="n1 n2 n3"
CR_KINDS="tierd tierd-mig tierd-stage tierd-stagecp tierd-fetch tierd-manifest"
CR_CHILDREN="tierd-mig tierd-stage tierd-stagecp tierd-fetch tierd-manifest"
declare -A CR_KILLS CR_BAD
CR_ITER=0
CR_NOTRUN=0
CR_STAGEKILL=0                  # of those, failed by a stager or copier kill
CR_LATE=0
for _k in $CR_KINDS slurmd; do CR_KILLS[$_k]=0; done
for _v in bad_output partial bad_replica leak false_conflict dep_incomplete; do CR_BAD[$_v]=0; done

# a new version of the shared input (each iteration fetches it again)
cr_new_shared () {
    as_user alice sh -c "head -c ${CRASH_DB_MB:-24}M /dev/urandom > $CR_DB/shared.bin.new && mv $CR_DB/shared.bin.new $CR_DB/shared.bin" &&
    sha256sum <"$CR_DB/shared.bin" | cut -c1-64 >"$TRASH/crash-db.sum"
}

crashloop_setup () {
    as_user alice mkdir -p "$CR_DB" "$CR_IN" "$CR_SUMS" "$CR_H/crash" "$CR_H/crash-err" || return 1
    cr_new_shared || return 1
    for t in $(seq "$CRASH_TASKS"); do
        as_user alice sh -c "head -c ${CRASH_IN_KB:-4096}K /dev/urandom > $CR_IN/q$t.txt" || return 1
    done
    cat >"$CR_H/crash-task.sh" <<EOF
#!/bin/bash
i=\$1 t=\$SLURM_ARRAY_TASK_ID out=$CR_H/crash/\$1
sha256sum < $CR_IN/q\$t.txt | cut -c1-64 > $CR_SUMS/\$i-\$t.in
sha256sum < $CR_DB/shared.bin | cut -c1-64 > $CR_SUMS/\$i-\$t.db
for f in a b; do
    head -c \$(( ($CRASH_MB << 20) / 2 )) /dev/urandom > \$out/o\$t-\$f.bin
done
(cd \$out && sha256sum o\$t-a.bin o\$t-b.bin) > $CR_SUMS/\$i-\$t.out
EOF
    cat >"$CR_H/crash-verify.sh" <<EOF
#!/bin/bash
# the afterok dependent (untiered): every output complete
i=\$1 bad=0
for t in \$(seq $CRASH_TASKS); do
    (cd $CR_H/crash/\$i && sha256sum -c --quiet $CR_SUMS/\$i-\$t.out) || bad=1
done
[ \$bad = 0 ] && echo COMPLETE || echo INCOMPLETE
EOF
    chmod 755 "$CR_H/crash-task.sh" "$CR_H/crash-verify.sh"
    chown alice "$CR_H/crash-task.sh" "$CR_H/crash-verify.sh"
}

# "KIND NODE PID" of every child of this cluster's agents (below the pid
# in each node's pid file, by comm), one per line
cr_children () {
    local n ap agents=""
    for n in $CR_NODES; do
        ap=$(cat "$CLUSTER/state/$n/tierd.pid" 2>/dev/null)
        [ -n "$ap" ] && [ -d "/proc/$ap" ] && agents="$agents $n=$ap"
    done
    ps -e -o pid=,ppid=,comm= | awk -v agents="$agents" -v kinds="$CR_CHILDREN" '
        BEGIN { n = split(agents, a, " "); for (i = 1; i <= n; i++) { split(a[i], kv, "="); node[kv[2]] = kv[1] }
                m = split(kinds, k, " "); for (i = 1; i <= m; i++) want[k[i]] = 1 }
        { comm[$1] = $3; pp[$1] = $2 }
        END { for (p in comm) if (comm[p] in want) {
                  q = pp[p]
                  while (q > 1 && !(q in node)) q = pp[q]
                  if (q in node) print comm[p], node[q], p
              } }'
}

# the killer: until the file $1 goes, kill -9 one process every 0.1-0.7
# s: a node's agent a quarter of the time (or when no child runs), else
# one of the agents' children, picked at random
cr_killer () {
    local stop=$1 kind node pid line
    while [ -e "$stop" ]; do
        sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.1 + (r % 60) / 100 }')"
        [ -e "$stop" ] || break
        node=n$((RANDOM % 3 + 1))
        kind=tierd
        pid=$(cat "$CLUSTER/state/$node/tierd.pid" 2>/dev/null)
        if [ "${CRASH_SLURMD:-0}" = 1 ] && [ $((RANDOM % 40)) = 0 ]; then
            kind=slurmd
            pid=$(cat "$CLUSTER/run/slurmd-$node.dpid" 2>/dev/null)
        elif [ $((RANDOM % 4)) != 0 ] && cr_children >"$stop.c" && [ -s "$stop.c" ]; then
            # a kind among those running, then one of its processes:
            # the short-lived kinds get their share
            kind=$(awk '{ print $1 }' "$stop.c" | sort -u | shuf -n 1)
            read -r kind node pid <<<"$(awk -v k="$kind" '$1 == k' "$stop.c" | shuf -n 1)"
        fi
        [ -n "$pid" ] && [ -d "/proc/$pid" ] || continue
        kill -9 "$pid" 2>/dev/null && echo "$kind $node $pid" >>"$TRASH/crash-kills"
        [ "$kind" = slurmd ] && (sleep 1; slurmd_restart "$node" >/dev/null 2>&1) &
    done
}

# what must be gone once no job runs: namespaces, mounts of the cluster,
# write caches, job directories of the NVDIMM tier
cr_residue () {
    local n
    for n in $CR_NODES; do
        ls -A "$CLUSTER/run/ns/$n" 2>/dev/null | sed "s|^|ns $n |"
        ls -A "$CR_NV/$n/.outbox" 2>/dev/null | sed "s|^|outbox $n |"
    done
    awk -v d="$CLUSTER" -v v="$CR_NV" 'index($5, d "/") || index($5, v "/") { print "mount " $5 }' /proc/self/mountinfo |
        grep -v "$CLUSTER/gfs\$" | grep -v "$CLUSTER/run/ns/n[0-9]*\$" | sort
}

cr_clean () { test -z "$(cr_residue)"; }
cr_outboxes_empty () {
    for n in $CR_NODES; do test -z "$(ls -A "$CR_NV/$n/.outbox" 2>/dev/null)" || return 1; done
}

crashloop_iteration () {
    local i=$1 id dep st out t v conflicts0 conflicts1 n0 state t0
    t0=$(date +%s)
    out=$CR_H/crash/$i
    as_user alice mkdir -p "$out" || return 1
    [ "$i" = 1 ] || cr_new_shared || return 1
    cr_residue >"$TRASH/residue.before"
    conflicts0=$(cat "$CLUSTER"/log/tierd-n?.log 2>/dev/null | grep -c "conflict on")
    n0=$(cat "$CLUSTER"/log/slurmd-n?.log | wc -l)
    id=$(cd "$CR_H" && as_user alice sbatch --parsable --array=1-"$CRASH_TASKS" \
        --tier-stage-in="$CR_IN/q%a.txt" --tier-stage-out="$out" --tier-batch="$CR_DB" \
        -o /dev/null -e "$CR_H/crash-err/%A_%a.err" "$CR_H/crash-task.sh" "$i") || return 1
    dep=$(cd "$CR_H" && as_user alice sbatch --parsable --tier-cache=off \
        --dependency=afterok:"$id" -o "$CR_H/crash-v$i.out" "$CR_H/crash-verify.sh" "$i") || return 1
    touch "$TRASH/crash-run"
    if [ "${CRASH_NOKILL:-0}" = 1 ]; then
        st=
    else
        cr_killer "$TRASH/crash-run" &
        st=$!
    fi
    wait_for "${CRASH_ARRAY_TIMEOUT:-300}" job_done "$id"
    rm -f "$TRASH/crash-run"
    [ -z "$st" ] || wait "$st"
    wait_for 120 job_done "$dep" || scancel "$dep"
    CR_ITER=$((CR_ITER + 1))
    state=$(job_state "$id")
    # every agent back, every outbox drained, nothing left behind
    for n in $CR_NODES; do wait_for 30 $TIERCTL -N "$n" ping; done
    wait_for 120 cr_outboxes_empty
    wait_for 60 cr_clean
    if [ "$state" != COMPLETED ]; then
        CR_NOTRUN=$((CR_NOTRUN + 1))
        # a part whose stager or copier was killed three times fails
        # its task's stage-in, as documented (doc/staging.md): counted
        # apart
        if grep -qs "stage-in failed: its stager .* ended before\|stage-in failed: the copy was interrupted" \
            "$CR_H/crash-err/${id}"_*.err; then
            CR_STAGEKILL=$((CR_STAGEKILL + 1))
        fi
        echo "# iteration $i: array $id ended $state (not counted)"
        scancel "$dep" 2>/dev/null
    else
        for t in $(seq "$CRASH_TASKS"); do
            if ! (cd "$GFS-backing/home/alice/crash/$i" && sha256sum -c --quiet "$CR_SUMS/$i-$t.out") >/dev/null 2>&1; then
                CR_BAD[bad_output]=$((CR_BAD[bad_output] + 1))
                echo "# iteration $i task $t: output not on the GFS byte for byte"
            fi
            if [ "$(cat "$CR_SUMS/$i-$t.db" 2>/dev/null)" != "$(cat "$TRASH/crash-db.sum")" ] ||
               [ "$(cat "$CR_SUMS/$i-$t.in" 2>/dev/null)" != "$(sha256sum <"$CR_IN/q$t.txt" | cut -c1-64)" ]; then
                CR_BAD[bad_replica]=$((CR_BAD[bad_replica] + 1))
                echo "# iteration $i task $t: an input read other bytes than its source"
            fi
        done
        if ! grep -qx COMPLETE "$CR_H/crash-v$i.out" 2>/dev/null; then
            if tail -n +$((n0 + 1)) -q "$CLUSTER"/log/slurmd-n?.log 2>/dev/null |
                grep -q "job $id.*StageOutTimeout\|no tierd answered"; then
                CR_LATE=$((CR_LATE + 1))
            else
                CR_BAD[dep_incomplete]=$((CR_BAD[dep_incomplete] + 1))
                echo "# iteration $i: the dependent $dep found: $(cat "$CR_H/crash-v$i.out" 2>/dev/null) ($(job_state "$dep"))"
            fi
        fi
    fi
    v=$(find "$out" -name ".*.part" | wc -l)
    [ "$v" = 0 ] || { CR_BAD[partial]=$((CR_BAD[partial] + v)); echo "# iteration $i: $v temporaries left"; }
    conflicts1=$(cat "$CLUSTER"/log/tierd-n?.log 2>/dev/null | grep -c "conflict on")
    if [ "$conflicts1" != "$conflicts0" ] || [ -e "$out/.tier-conflicts" ]; then
        CR_BAD[false_conflict]=$((CR_BAD[false_conflict] + 1))
        echo "# iteration $i: a conflict: $(cat "$CLUSTER"/log/tierd-n?.log | grep "conflict on" | tail -1)"
    fi
    cr_residue >"$TRASH/residue.after"
    if ! cmp -s "$TRASH/residue.before" "$TRASH/residue.after"; then
        CR_BAD[leak]=$((CR_BAD[leak] + 1))
        echo "# iteration $i: left behind:"; diff "$TRASH/residue.before" "$TRASH/residue.after" | sed 's/^/#   /'
    fi
    echo "# iteration $i: array $id $state, $(( $(date +%s) - t0 )) s"
    return 0
}

cr_count_kills () {
    local k
    for k in $CR_KINDS slurmd; do
        CR_KILLS[$k]=$(awk -v k="$k" '$1 == k' "$TRASH/crash-kills" 2>/dev/null | wc -l)
    done
}

crashloop_kills () {
    cat "$TRASH/crash-kills" 2>/dev/null | wc -l
}

crashloop_report () {
    local k v total
    cr_count_kills
    total=$(crashloop_kills)
    echo "# crash loop: $CR_ITER iterations, $total kills ($(for k in $CR_KINDS slurmd; do printf '%s %s, ' "$k" "${CR_KILLS[$k]}"; done | sed 's/, $//'))"
    echo "# arrays not run to completion by Slurm: $CR_NOTRUN ($CR_STAGEKILL with a stage-in failed by a stager or copier kill); dependents told the bound passed: $CR_LATE"
    for v in bad_output partial bad_replica leak false_conflict dep_incomplete; do
        echo "# invariant $v: ${CR_BAD[$v]} violation(s) in $CR_ITER checks"
    done
}

crashloop_violations () {
    local v n=0
    for v in bad_output partial bad_replica leak false_conflict dep_incomplete; do
        n=$((n + CR_BAD[$v]))
    done
    echo "$n"
}
