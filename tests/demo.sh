#!/bin/bash
# demo.sh - the README's demo: a BLAST batch -- a job array of pipelines
# with a shared database -- through the tiers, on a local three-node Slurm
# cluster with tier.so loaded, against the same batch without tier.
# Called by `tests/run demo` (which installs and builds first).
#
#   tests/run demo [--keep]     --keep leaves the cluster running
#
# Exits non-zero if a job of the batch fails or its results are wrong.

set -u
: "${TIER_SRCDIR:?}" "${TIER_BUILDDIR:?}"
export TIER_SRCDIR TIER_BUILDDIR
keep=0
[ "${1:-}" = --keep ] && keep=1

DEMO=${TIER_DEMO_DIR:-/tmp/tier-demo}
CL="$TIER_SRCDIR/tests/cluster/tier-cluster"
TASKS=${TIER_DEMO_TASKS:-6}
TIERCTL="$TIER_BUILDDIR/ctl/tierctl -c $DEMO/etc/tier.conf -N n1"

banner () {
    printf '\n=== %s\n' "$*"
}

fail () {
    echo "demo: $*" >&2
    exit 1
}

for c in blastp makeblastdb; do
    command -v $c >/dev/null || fail "$c not found (install ncbi-blast+)"
done
"$CL" stop "$DEMO" 2>/dev/null
rm -rf "$DEMO"
banner "starting a local Slurm cluster in $DEMO"
# a GFS capped at 200 MiB/s (a contended parallel file system); the
# agents run under a supervisor, as a site's service manager runs them
QUIET=1 "$CL" start "$DEMO" --gfs-opts bandwidth=200M --supervise || exit 1
[ $keep = 1 ] || trap 'QUIET=1 "$CL" stop "$DEMO"' EXIT
eval "$("$CL" env "$DEMO")"
GFS=$DEMO/gfs
P=$GFS/home/alice/proj
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"
sinfo -N -o '%N %P %T %c %m'

as_alice () {
    (cd "$GFS/home/alice" && runuser -u alice -- env SLURM_CONF="$SLURM_CONF" \
        PATH="$PATH" "$@")
}

banner "alice's BLAST project on the GFS ($P)"
as_alice mkdir -p "$P/db" "$P/queries" "$P/runs" "$P/results"
# a protein database (made with makeblastdb) and one query file per task:
# sequences of the database with some mutations, so that there are hits
as_alice python3 - "$P" "$TASKS" <<'EOF'
import random, sys
p, tasks = sys.argv[1], int(sys.argv[2])
rng = random.Random(42)
aa = "ACDEFGHIKLMNPQRSTVWY"
seqs = ["".join(rng.choice(aa) for _ in range(rng.randint(200, 400)))
        for _ in range(40000)]
with open(p + "/db/proteins.fa", "w") as f:
    for i, s in enumerate(seqs):
        f.write(">prot%d reference protein %d\n%s\n" % (i, i, s))
for t in range(1, tasks + 1):
    with open("%s/queries/q%d.fa" % (p, t), "w") as f:
        for k in range(3):
            n = rng.randrange(len(seqs))
            s = list(seqs[n])
            for _ in range(len(s) // 8):
                s[rng.randrange(len(s))] = rng.choice(aa)
            f.write(">task%d_query%d (from prot%d)\n%s\n" % (t, k, n, "".join(s)))
EOF
# (built in a local directory, then copied: makeblastdb renames its files,
# and the emulator counts a file under the name it was created with)
tmpdb=$(mktemp -d) && chown alice "$tmpdb"
as_alice makeblastdb -in "$P/db/proteins.fa" -dbtype prot -out "$tmpdb/ref" \
    -title reference >/dev/null || fail "makeblastdb failed"
as_alice cp "$tmpdb"/ref.* "$P/db/" || fail "cannot copy the database"
rm -rf "$tmpdb"
ls -l "$P/db" | sed 1d
DBFILES=$(cd "$P/db" && ls ref.*)
DBSIZE=$(cd "$P/db" && cat $DBFILES | wc -c)

cat >"$P/pipeline.sh" <<'EOF'
#!/bin/bash
# One pipeline per array task:
#   stage 1  blastp: this task's query (endpoint, staged in) against the
#            shared database (batch) -> raw hits (pipeline intermediate)
#   stage 2  the best hit of each query -> the task's report (endpoint)
set -e
P=$1
i=$SLURM_ARRAY_TASK_ID
mkdir -p "$P/runs/$i"
blastp -query "$P/queries/q$i.fa" -db "$P/db/ref" -outfmt 6 -evalue 1e-10 \
       -max_target_seqs 5 -out "$P/runs/$i/raw.tsv"
sort -k1,1 -k12,12gr "$P/runs/$i/raw.tsv" | awk '!seen[$1]++ {
    printf "%s best hit %s (%.1f%% identity, e-value %s)\n", $1, $2, $3, $11 }' \
    >"$P/results/report-$i.txt"
echo "task $i on $SLURMD_NODENAME: $(wc -l <"$P/runs/$i/raw.tsv") raw hits"
EOF
chmod 755 "$P/pipeline.sh"
chown alice:alice "$P/pipeline.sh"

banner "alice says what her directories are (once)"
for pol in "$P/db batch --ttl 7d" "$P/runs pipeline --size 256M" \
           "$P/results endpoint"; do
    # shellcheck disable=SC2086
    echo "\$ tierctl set policy $pol" && as_alice $TIERCTL set policy $pol \
        || fail "tierctl set policy failed"
done

# run_batch LABEL SBATCH-OPTIONS...: submit the array, wait, check it
run_batch () {
    local label=$1 id state
    shift
    rm -rf "$P/runs"/* "$P/results"/*
    gfsemu_reset "$GFS"
    echo "\$ sbatch --array=1-$TASKS $* pipeline.sh"
    id=$(as_alice sbatch --parsable --array=1-"$TASKS" "$@" \
         -o "$P/results/slurm-%A_%a.out" "$P/pipeline.sh" "$P") \
        || fail "sbatch failed"
    for _ in $(seq 900); do
        squeue -h -j "$id" 2>/dev/null | grep -q . || break
        sleep 0.2
    done
    state=$(scontrol show job "$id" | sed -n 's/.*JobState=\([A-Z]*\).*/\1/p' \
            | sort | uniq -c | tr -s ' ' | tr '\n' ' ')
    user=$(scontrol show job "$id" | sed -n 's/^ *UserId=\([^(]*\)(.*/\1/p' | sort -u | tr '\n' ' ')
    echo "batch $id ($label): $state(as ${user% })"
    case "$state" in *FAILED*|*CANCELLED*|*TIMEOUT*) fail "batch $id failed" ;; esac
    for i in $(seq "$TASKS"); do
        [ "$(grep -c "best hit" "$P/results/report-$i.txt" 2>/dev/null)" = 3 ] \
            || fail "task $i of batch $id has no complete report"
    done
    db_read=0
    for f in $DBFILES; do
        db_read=$((db_read + $(gfsemu_stat "$GFS" "home/alice/proj/db/$f" read_bytes)))
    done
    runs_written=$(awk '$1 == "file.write_bytes" && $3 ~ /^home\/alice\/proj\/runs\// {
                        s += $2 } END { print s + 0 }' "$GFS/.gfsemu/stats")
    BATCH=$id
}

banner "the batch without tier (--tier-cache=off), for comparison"
run_batch "without tier" --tier-cache=off
off_read=$db_read off_written=$runs_written
cat "$P/results"/slurm-*.out | sort

banner "the same batch through the tiers"
# the database: batch (BB replicas); runs/: pipeline (NVDIMM scratch);
# each task's query: staged in before its tasks start
run_batch "with tier" --tier-cache=auto --tier-stage-in="$P/queries/q%a.fa"
cat "$P/results"/slurm-*.out | sort
echo
cat "$P/results/report-1.txt"

banner "GFS traffic, counted by the GFS emulator"
mib () { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
printf '%-44s %14s %14s\n' "" "without tier" "with tier"
printf '%-44s %14s %14s\n' "database ($TASKS tasks, $(mib "$DBSIZE")): bytes read" \
    "$(mib "$off_read")" "$(mib "$db_read")"
printf '%-44s %14s %14s\n' "intermediates under runs/: bytes written" \
    "$off_written B" "$runs_written B"
nodes=$(sinfo -h -N -o %N | sort -u | wc -l)
echo "(without tier, the emulated nodes share one host's page cache; a real GFS"
echo " client on each node would read the database: about $nodes x $(mib "$DBSIZE")" \
     "= $(mib $((nodes * DBSIZE))))"

banner "tierctl stats --batch $BATCH --nodes (as alice)"
sleep 3        # the nodes publish their counters every StatsInterval
as_alice $TIERCTL stats --batch "$BATCH" --nodes
[ $keep = 1 ] && echo "cluster left running: eval \$($CL env $DEMO); stop with $CL stop $DEMO"
exit 0
