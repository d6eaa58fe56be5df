#!/bin/bash
test_description='faults: GFS errors, short writes and hangs in every tier path'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

# The GFS emulator's fault rules (tests/gfsemu/README.md, "Faults") on
# the paths each tier writes or reads: every failure must leave correct
# data or a clear error naming the file and the job, an agent that keeps
# serving other jobs and users, no drained node, and -- for stage-out --
# the outputs kept and retried until they arrive.
test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start the cluster (StageOutTimeout 3 s)' '
    cluster_start --gfs-opts latency=0 &&
    echo "StageOutTimeout = 3s" >>$CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
# whatever fails, no request is left hanging for the reset
test_at_exit "gfsemu_fault_clear '$GFS' 2>/dev/null"
H=$GFS/home/alice
HB=$GFS-backing/home/alice
BH=$GFS/home/bob
SUMS=$H/sums
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
NV=$(cat $CLUSTER/run/nvdimm.path)
outbox_empty () { test -z "$(ls -A "$NV/$1/.outbox" 2>/dev/null)"; }
alice () { (cd $H && as_user alice "$@"); }
# ping_all: every agent answers
ping_all () {
    for n in n1 n2 n3; do
        alice $TIERCTL -N $n ping >/dev/null || { echo "$n: no answer"; return 1; }
    done
}
# bob_job NODE NAME: bob's own stage-out job on NODE completes and its
# output arrives
bob_job () {
    _b=$(cd $BH && as_user bob sbatch --parsable -w $1 --tier-stage-out=$BH/out -o /dev/null \
        --wrap "echo $2 > $BH/out/$2.txt") &&
    wait_for 60 job_done $_b && test "$(job_state $_b)" = COMPLETED &&
    test "$(cat $BH/out/$2.txt)" = "$2"
}
as_user alice mkdir -p "$SUMS" "$H/in" "$H/db"
as_user bob mkdir -p "$BH/out"

# ------------------------------------------------------------- stage-out
#
# One job per case, each with its own output directory and rule, all at
# once: a 3 MiB file and one in a subdirectory, their checksums written
# outside the output directory.  The job's processes write to the
# node's write cache; only the migrator meets the faults.
CASES="eio:n1 nospc:n1 dquot:n2 eacces:n2 rename:n3 short:n3"
rule_of () {
    case $1 in
        eio) echo "home/alice/o-eio/*:write:EIO" ;;
        nospc) echo "home/alice/o-nospc/*:create:ENOSPC" ;;
        dquot) echo "home/alice/o-dquot/*:write:EDQUOT" ;;
        eacces) echo "home/alice/o-eacces/*:create:EACCES" ;;
        rename) echo "home/alice/o-rename/*:rename:EIO" ;;
        short) echo "home/alice/o-short/*:write:short" ;;
    esac
}
reason_of () {
    case $1 in
        eio|rename) echo "Input/output error" ;;
        nospc) echo "No space left on device" ;;
        dquot) echo "Disk quota exceeded" ;;
        eacces) echo "Permission denied" ;;
    esac
}
cat >"$H/out.sh" <<EOF2
#!/bin/bash
D=\$1
head -c 3M /dev/urandom > \$D/a.bin
mkdir -p \$D/sub && head -c 70000 /dev/urandom > \$D/sub/b.txt
(cd \$D && sha256sum a.bin sub/b.txt) > $SUMS/\$2
EOF2
chmod 755 "$H/out.sh"; chown alice "$H/out.sh"

test_expect_success 'stage-out: six jobs, each meeting one fault on its output directory' '
    for c in $CASES; do as_user alice mkdir -p $H/o-${c%:*} || exit 1; done &&
    gfsemu_fault "$GFS" $(for c in $CASES; do rule_of ${c%:*}; done) &&
    gfsemu_faults "$GFS" &&
    for c in $CASES; do
        n=${c%:*} &&
        id=$(alice sbatch --parsable -w ${c#*:} --tier-stage-out=$H/o-$n \
            -o $H/o-$n.out -e $H/o-$n.err $H/out.sh $H/o-$n $n) &&
        echo "$id" >$TRASH/id-$n || exit 1
    done &&
    for c in $CASES; do
        id=$(cat $TRASH/id-${c%:*}) &&
        wait_for 90 job_done $id && echo "$c: job $id $(job_state $id)" &&
        test "$(job_state $id)" = COMPLETED || exit 1
    done &&
    gfsemu_faults "$GFS"
'
test_expect_success 'every rule fired' '
    for c in $CASES; do
        h=$(gfsemu_fault_hits "$GFS" "$(rule_of ${c%:*})") && echo "$c: $h hits" &&
        test "$h" -gt 0 || exit 1
    done
'
# so_on_gfs CASE FILE: say all that tells how FILE of CASE came to be on
# the GFS when no copy of it should have arrived
so_on_gfs () {
    echo "$2 is on the GFS: $(stat -c "%s bytes, uid %u, mode %a, inode %i, birth %w, mtime %y" $HB/o-$1/$2)"
    echo "sha256 $(sha256sum <$HB/o-$1/$2 | cut -c1-16), the job wrote $(grep " $2\$" $SUMS/$1 | cut -c1-16)"
    date +"now %T.%N"
    gfsemu_stats "$GFS" | grep " home/alice/o-$1"
    ls -la --time-style=full-iso $HB/o-$1 $HB/o-$1/sub
}
no_temps () { test -z "$(find "$1" -name ".*.part")"; }
# so_failed CASE: the outputs are kept, not on the GFS, and every report
# names the file, the job and the reason
so_failed () {
    _n=$1 _node=$2 _id=$(cat $TRASH/id-$1) _r=$(reason_of $1) _d=$H/o-$1
    echo "--- $_n (job $_id on $_node): $_r"
    for _f in a.bin sub/b.txt; do
        test ! -e $HB/o-$_n/$_f || { so_on_gfs $_n $_f; return 1; }
    done &&
    # the migrator retries with backoff: an attempt in flight has its
    # temporary for a moment; none may stay
    wait_for 10 no_temps $HB/o-$_n || { find $HB/o-$_n -name ".*.part"; return 1; } &&
    (cd $NV/$_node/.outbox/$_id.0/0/upper && sha256sum -c --quiet $SUMS/$_n) &&
    alice $TIERCTL -N $_node outputs --job $_id >$TRASH/out-$_n && cat $TRASH/out-$_n &&
    grep -q "^failed .* $_d/a.bin .*$_r" $TRASH/out-$_n &&
    grep -q "^failed .* $_d/sub/b.txt .*$_r" $TRASH/out-$_n &&
    cat $H/o-$_n.err &&
    grep -q "^tier: warning: 2 output file(s) could not be written to the GFS yet.* outputs --job $_id; first: $_d/[a-z/]*\.[a-z]*: .*$_r" $H/o-$_n.err &&
    grep "job $_id " $CLUSTER/log/slurmd-$_node.log | grep "not on the GFS" &&
    grep -q "tier: on node $_node, 2 output file(s) of job $_id not on the GFS at job end (2 failed.*first: $_d/.*$_r" \
        $CLUSTER/log/slurmd-$_node.log &&
    grep -q "job $_id: $_d/a.bin did not reach the GFS: .*$_r" $CLUSTER/log/tierd-$_node.log
}
for c in $CASES; do
    [ ${c%:*} = short ] && continue
    test_expect_success "stage-out, $(rule_of ${c%:*}): kept, reported with file, job and reason" "
        so_failed ${c%:*} ${c#*:}
    "
done
test_expect_success 'stage-out, short writes: the migrator writes the rest, the outputs arrive whole' '
    id=$(cat $TRASH/id-short) && (cd $HB/o-short && sha256sum -c $SUMS/short) &&
    alice $TIERCTL -N n3 outputs --job $id >$TRASH/out-short && cat $TRASH/out-short &&
    test "$(grep -c "^done .*sha256:" $TRASH/out-short)" = 2 &&
    ! grep -q "tier: warning" $H/o-short.err
'
test_expect_success 'meanwhile every agent answers, bob'"'"'s jobs on the same nodes run, no node is drained' '
    ping_all && bob_job n1 so1 && bob_job n2 so2 && bob_job n3 so3 && no_drain
'
test_expect_success 'faults cleared: a flush by the job'"'"'s user brings every output, byte for byte' '
    gfsemu_fault_clear "$GFS" &&
    for c in $CASES; do
        [ ${c%:*} = short ] && continue
        n=${c%:*} && id=$(cat $TRASH/id-$n) &&
        alice $TIERCTL -N ${c#*:} flush --job $id &&
        (cd $H/o-$n && sha256sum -c $SUMS/$n) || exit 1
    done &&
    test -z "$(find $HB -name ".*.part")"
'
test_expect_success 'then the write caches go and the manifests say every output arrived' '
    for n in n1 n2 n3; do wait_for 30 outbox_empty $n || { ls -R $NV/$n/.outbox; exit 1; }; done &&
    for c in $CASES; do
        id=$(cat $TRASH/id-${c%:*}) && m=$GFS/.tier/users/alice/jobs/$id.0/outputs-${c#*:}.json &&
        python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
st = sorted((o[\"path\"].rsplit(\"/\", 2)[-1], o[\"state\"]) for o in m[\"outputs\"])
print(sys.argv[1], st)
assert st == [(\"a.bin\", \"done\"), (\"b.txt\", \"done\")], st
assert m[\"pending\"] == 0 and m[\"failed\"] == 0, m" $m || exit 1
    done
'

# -------------------------------------------------------------- stage-in
uid_alice=$(id -u alice)
mkfile () { head -c $2 /dev/urandom >$1 && chown alice: $1; }
mkfile $HB/in/q.txt 1000000
QSUM=$(sha256sum <$HB/in/q.txt | cut -d" " -f1)
test_expect_success 'stage-in, EIO on read of the input: the job fails naming the input; nothing ran' '
    gfsemu_fault "$GFS" "home/alice/in/q.txt:read:EIO" &&
    id=$(sbatch_wait alice -w n1 --tier-stage-in=$H/in/q.txt -o $H/si.out -e $H/si.err \
        --wrap "echo ran; sha256sum < $H/in/q.txt") &&
    echo "job $id $(job_state $id)" && cat $H/si.err && test "$(job_state $id)" = FAILED &&
    grep -q "tier: stage-in failed: $H/in/q.txt: .*Input/output error" $H/si.err &&
    ! grep -q ran $H/si.out &&
    test "$(scontrol show job $id | grep -o "Restarts=[0-9]*")" = Restarts=0 &&
    grep "job $id: stage-in failed: .*q.txt.*Input/output error" $CLUSTER/log/tierd-n1.log &&
    test "$(gfsemu_fault_hits "$GFS" "home/alice/in/q.txt:read:EIO")" -gt 0
'
test_expect_success 'meanwhile the agent answers, bob'"'"'s job on the node runs, no node is drained' '
    ping_all && bob_job n1 si && no_drain
'
test_expect_success 'cleared: the next job stages the input and reads its bytes (no half copy kept)' '
    gfsemu_fault_clear "$GFS" &&
    id=$(sbatch_wait alice -w n1 --tier-stage-in=$H/in/q.txt -o $H/si2.out \
        --wrap "sha256sum < $H/in/q.txt") &&
    test "$(job_state $id)" = COMPLETED && cat $H/si2.out && grep -q "^$QSUM " $H/si2.out
'

# --------------------------------------------------- batch replica fetch
#
# The fetcher copies the source through the task's descriptor.  Through
# the page cache the kernel reads a page again after a failed READ, so
# what a failing READ mid-fetch leads to is the kernel's choice: the
# fetch fails (the task then reads the GFS itself) or goes on.  Either
# way the task must read the right bytes or get an error naming the
# file, and no replica may be half written.
mkfile $HB/db/f.bin 8388608
mkfile $HB/db/s.bin 8388608
mkfile $HB/db/g.bin 1000000
BB=$CLUSTER/bb
key_of () {
    stat -c "%i %s %.9Y %.9Z" "$1" | awk '{
        split($3, m, "."); split($4, c, ".");
        printf "%x-%x-%s.%s-%s.%s\n", $1, $2, m[1], m[2], c[1], c[2] }'
}
sum_of () { sha256sum <$1 | cut -d" " -f1; }
# replica_whole FILE: FILE's replica on the BB is complete, or there is
# none; nothing is half-copied in the BB's temporaries
replica_whole () {
    _r=$BB/replicas/u$uid_alice/$(key_of $HB/db/$1)
    if [ -e $_r ]; then
        test "$(sum_of $_r)" = "$(sum_of $HB/db/$1)" && echo "$1: a complete replica"
    else
        echo "$1: no replica"
    fi &&
    test -z "$(find $BB -path "*/.tmp/*" -type f)"
}
# read_or_fail NAME FILE: the job that read FILE printed its bytes'
# checksum, or failed naming FILE
read_or_fail () {
    cat $H/$1.out $H/$1.err >&2
    if [ "$(job_state $(cat $TRASH/$1))" = COMPLETED ]; then
        grep -qx "$(sum_of $HB/db/$2)  -" $H/$1.out && echo "$2: the task read the right bytes"
    else
        grep -q "$H/db/$2: Input/output error" $H/$1.err && echo "$2: the task got EIO"
    fi
}
printf '#!/bin/bash\nset -o pipefail\ncat "$1" | sha256sum\n' >$H/bread.sh
chmod 755 $H/bread.sh; chown alice $H/bread.sh
batch_read () {
    _id=$(sbatch_wait alice -w n2 --tier-batch=$H/db -o $H/$1.out -e $H/$1.err \
        $H/bread.sh $H/db/$2) && echo $_id >$TRASH/$1
}
test_expect_success 'batch replica, EIO on two READs of the source mid-fetch: right bytes or EIO, no half replica' '
    gfsemu_fault "$GFS" "home/alice/db/f.bin:read:EIO:3" "home/alice/db/f.bin:read:EIO:4" &&
    batch_read b1 f.bin && gfsemu_faults "$GFS" &&
    test "$(gfsemu_fault_hits "$GFS" "home/alice/db/f.bin:read:EIO:3")" = 1 &&
    read_or_fail b1 f.bin >$TRASH/b1.what && replica_whole f.bin >>$TRASH/b1.what &&
    { grep -h "replica of $H/db/f.bin" $CLUSTER/log/tierd-n2.log || :; } && cat $TRASH/b1.what
'
say "$(cat $TRASH/b1.what 2>/dev/null | tr "\n" ";")"
test_expect_success 'batch replica, a short READ mid-fetch: right bytes or EIO, no half replica' '
    gfsemu_fault "$GFS" "home/alice/db/s.bin:read:short:3" &&
    batch_read b2 s.bin && gfsemu_faults "$GFS" &&
    test "$(gfsemu_fault_hits "$GFS" "home/alice/db/s.bin:read:short:3")" = 1 &&
    read_or_fail b2 s.bin >$TRASH/b2.what && replica_whole s.bin >>$TRASH/b2.what &&
    { grep -h "replica of $H/db/s.bin" $CLUSTER/log/tierd-n2.log || :; } && cat $TRASH/b2.what
'
say "$(cat $TRASH/b2.what 2>/dev/null | tr "\n" ";")"
test_expect_success 'batch replica, EIO on every READ: the task gets an error naming the file, no replica' '
    gfsemu_fault "$GFS" "home/alice/db/g.bin:read:EIO" &&
    batch_read b3 g.bin; cat $H/b3.err && test "$(job_state $(cat $TRASH/b3))" = FAILED &&
    grep -q "^cat: $H/db/g.bin: Input/output error" $H/b3.err &&
    grep "job $(cat $TRASH/b3): replica of $H/db/g.bin not made: .*Input/output error" \
        $CLUSTER/log/tierd-n2.log &&
    test ! -e $BB/replicas/u$uid_alice/$(key_of $HB/db/g.bin) && replica_whole g.bin &&
    ping_all && no_drain
'
test_expect_success 'cleared: a later job reads all three right, from complete replicas the cache lists' '
    gfsemu_fault_clear "$GFS" &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$H/db -o $H/b4.out \
        --wrap "for f in f s g; do cat $H/db/\$f.bin | sha256sum; done") &&
    test "$(job_state $id)" = COMPLETED && cat $H/b4.out &&
    test "$(cat $H/b4.out)" = "$(for f in f s g; do echo "$(sum_of $HB/db/$f.bin)  -"; done)" &&
    alice $TIERCTL -N n2 replicas $H/db >$TRASH/reps && cat $TRASH/reps &&
    for f in f s g; do
        r=$BB/replicas/u$uid_alice/$(key_of $HB/db/$f.bin) &&
        test "$(sum_of $r)" = "$(sum_of $HB/db/$f.bin)" &&
        grep -q "$H/db/$f.bin" $TRASH/reps || exit 1
    done &&
    test -z "$(find $BB -path "*/.tmp/*" -type f)"
'

# -------------------------------------- manifest and stats publication
MANRULES=".tier/users/alice/jobs/*:create:ENOSPC .tier/users/alice/stats/*:create:EIO"
test_expect_success 'SharedStateDir full: the job completes, its output arrives, the agent says so' '
    as_user alice mkdir -p $H/o-man &&
    gfsemu_fault "$GFS" $MANRULES &&
    id=$(sbatch_wait alice -w n3 --tier-stage-out=$H/o-man -o /dev/null -e $H/man.err \
        --wrap "echo m > $H/o-man/m.txt; sleep 3") &&
    test "$(job_state $id)" = COMPLETED && echo $id >$TRASH/man &&
    test "$(cat $HB/o-man/m.txt)" = m &&
    wait_for 10 grep -q "job $id: the output manifest could not be written to .* (retried in [0-9]* s)" \
        $CLUSTER/log/tierd-n3.log &&
    grep "stats of alice could not be published" $CLUSTER/log/tierd-n3.log &&
    test ! -e $GFS/.tier/users/alice/jobs/$id.0/outputs-n3.json &&
    for r in $MANRULES; do test "$(gfsemu_fault_hits "$GFS" "$r")" -gt 0 || exit 1; done &&
    ping_all && no_drain
'
stats_final () {
    alice $TIERCTL stats --job $1 --json >$TRASH/js.json 2>/dev/null &&
    python3 -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))[\"running\"] != 0)" $TRASH/js.json
}
test_expect_success 'cleared: the manifest and the job'"'"'s stats appear' '
    gfsemu_fault_clear "$GFS" && id=$(cat $TRASH/man) &&
    wait_for 90 test -s $GFS/.tier/users/alice/jobs/$id.0/outputs-n3.json &&
    python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
assert [(o[\"path\"].rsplit(\"/\", 1)[-1], o[\"state\"]) for o in m[\"outputs\"]] == [(\"m.txt\", \"done\")], m
" $GFS/.tier/users/alice/jobs/$id.0/outputs-n3.json &&
    wait_for 30 stats_final $id && cat $TRASH/js.json
'

# ------------------------------------------------------------------ hang
#
# Every WRITE of the output directory hangs: only the migrator writes
# there (the job writes to its write cache), so only the migrator waits.
HANG="home/alice/o-hang/*:write:hang"
test_expect_success 'a hang on the output directory: the job completes, the agent answers every ping' '
    as_user alice mkdir -p $H/o-hang &&
    gfsemu_fault "$GFS" "$HANG" &&
    id=$(alice sbatch --parsable -w n1 --tier-stage-out=$H/o-hang -o /dev/null -e $H/hang.err \
        --wrap "head -c 2M /dev/urandom > $H/o-hang/h.bin; (cd $H/o-hang && sha256sum h.bin) > $SUMS/hang") &&
    echo $id >$TRASH/hang && wait_for 60 gfsemu_hung "$GFS" &&
    b=$(cd $BH && as_user bob sbatch --parsable -w n1 --tier-stage-out=$BH/out -o /dev/null \
        --wrap "echo hang > $BH/out/hang.txt") &&
    : >$TRASH/ping.ms && i=0 &&
    while [ $i -lt 15 ] || ! job_done $id || ! job_done $b; do
        [ $i -lt 40 ] || { echo "jobs $id $b still $(job_state $id) $(job_state $b)"; exit 1; }
        t0=$(date +%s%N) && alice $TIERCTL -N n1 ping >/dev/null || { echo "ping $i failed"; exit 1; }
        echo $(( ($(date +%s%N) - t0) / 1000 )) >>$TRASH/ping.ms && i=$((i + 1)) && sleep 1
    done &&
    gfsemu_hung "$GFS" && test "$(job_state $id)" = COMPLETED && test "$(job_state $b)" = COMPLETED &&
    test "$(cat $BH/out/hang.txt)" = hang && test ! -e $HB/o-hang/h.bin &&
    sort -n $TRASH/ping.ms | awk "{ v[NR] = \$1 } END {
        printf \"tierctl ping under a hang: %d pings, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n\",
            NR, v[int((NR + 1) * 0.5)] / 1000, v[int(NR * 0.99 + 0.999)] / 1000, v[NR] / 1000 }" \
        >$TRASH/ping.sum && cat $TRASH/ping.sum && no_drain
'
# the figures, never asserted on
[ -s "$TRASH/ping.sum" ] && say "$(cat "$TRASH/ping.sum")"
test_expect_success 'the hang ended (EIO to the hung write): a flush brings the output, byte for byte' '
    id=$(cat $TRASH/hang) && gfsemu_fault_clear "$GFS" &&
    wait_for 30 grep -q "job $id: $H/o-hang/h.bin did not reach the GFS: .*Input/output error" \
        $CLUSTER/log/tierd-n1.log &&
    alice $TIERCTL -N n1 flush --job $id && (cd $HB/o-hang && sha256sum -c $SUMS/hang) &&
    wait_for 30 outbox_empty n1
'

test_expect_success 'no node was drained' 'no_drain'
test_done
