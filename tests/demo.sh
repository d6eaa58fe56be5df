#!/bin/bash
# demo.sh - the README's demo: a job array of pipelines with a shared input,
# run on a local three-node Slurm cluster with tier.so loaded.
# Called by `tests/run demo` (which installs and builds first).
#
#   tests/run demo [--keep]     --keep leaves the cluster running

set -u
: "${TIER_SRCDIR:?}" "${TIER_BUILDDIR:?}"
export TIER_SRCDIR TIER_BUILDDIR
keep=0
[ "${1:-}" = --keep ] && keep=1

DEMO=${TIER_DEMO_DIR:-/tmp/tier-demo}
CL="$TIER_SRCDIR/tests/cluster/tier-cluster"
TASKS=4

banner () {
    printf '\n=== %s\n' "$*"
}

"$CL" stop "$DEMO" 2>/dev/null
rm -rf "$DEMO"
banner "starting a local Slurm cluster in $DEMO"
QUIET=1 "$CL" start "$DEMO" || exit 1
[ $keep = 1 ] || trap 'QUIET=1 "$CL" stop "$DEMO"' EXIT
eval "$("$CL" env "$DEMO")"
GFS=$DEMO/gfs
P=$GFS/home/alice/proj
sinfo -N -o '%N %P %T %c %m'

banner "alice's project on the GFS ($P)"
as_alice () {
    runuser -u alice -- env SLURM_CONF="$SLURM_CONF" PATH="$PATH" "$@"
}
as_alice mkdir -p "$P/db" "$P/queries" "$P/runs" \
    "$P/results"
as_alice dd if=/dev/urandom of="$P/db/reference.db" bs=1M count=16 \
    status=none
for i in $(seq $TASKS); do
    as_alice sh -c "head -c 4096 /dev/urandom | od -An -tx1 | head -n 8 \
        >'$P/queries/q$i.txt'"
done
cat >"$P/pipeline.sh" <<'EOF'
#!/bin/bash
# A two-stage pipeline: stage 1 reads the shared database (batch) and this
# task's query (endpoint in) and writes an intermediate (pipeline); stage 2
# reads it back and writes the final report (endpoint out).
set -e
P=$1
i=$SLURM_ARRAY_TASK_ID
q=$P/queries/q$i.txt
mkdir -p "$P/runs/$i"
# stage 1: "search" the query against the database
sha=$(cat "$P/db/reference.db" "$q" | sha256sum | cut -c1-16)
{ echo "query $i"; echo "hits $sha"; wc -c <"$q"; } >"$P/runs/$i/raw.txt"
# stage 2: summarise the intermediate into the result
echo "task $i on $SLURMD_NODENAME: $(tr '\n' ' ' <"$P/runs/$i/raw.txt")" \
    >"$P/results/report-$i.txt"
EOF
chmod 755 "$P/pipeline.sh"
chown alice:alice "$P/pipeline.sh"
ls -l "$P/db" "$P/queries"

banner "sbatch --array=1-$TASKS --tier-cache=auto ... pipeline.sh (as alice)"
opts="--tier-cache=auto --tier-batch=$P/db --tier-scratch=$P/runs"
opts="$opts --tier-stage-in=$P/queries/q%a.txt --tier-stage-out=$P/results"
echo "sbatch --array=1-$TASKS $opts -o $P/slurm-%A_%a.out pipeline.sh $P"
cd "$P" || exit 1
# shellcheck disable=SC2086
id=$(as_alice sbatch --parsable --array=1-$TASKS $opts \
    -o "$P/slurm-%A_%a.out" "$P/pipeline.sh" "$P") \
    || exit 1
echo "submitted batch $id"
for _ in $(seq 600); do
    squeue -h -j "$id" 2>/dev/null | grep -q . || break
    sleep 0.2
done
sacct_state=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z]*\).*/\1/p' | sort | uniq -c)
echo "job states: ${sacct_state:-purged}"

banner "results (endpoint outputs on the GFS)"
cat "$P"/results/report-*.txt
for f in "$P"/slurm-"$id"_*.out; do
    [ -s "$f" ] && { echo "--- $(basename "$f")"; cat "$f"; }
done

banner "GFS traffic"
if [ "$(cat "$DEMO/run/gfs.mode")" = gfsemu ] && [ -r "$GFS/.gfsemu/stats" ]; then
    . "$TIER_SRCDIR/tests/lib/gfsemu.sh"
    db=$(gfsemu_stat "$GFS" home/alice/proj/db/reference.db read_bytes 2>/dev/null)
    echo "reference.db (16 MiB) bytes read from the GFS by $TASKS tasks:" \
         "${db:-?} ($(awk -v b="${db:-0}" 'BEGIN { printf "%.1f", b / 16777216 }')" \
         "x its size; tasks reading at the same time on one host share its" \
         "page cache)"
else
    echo "(the GFS emulator is not built; GFS traffic is not counted)"
fi

banner "per-batch statistics"
if "$TIER_BUILDDIR/ctl/tierctl" help stats >/dev/null 2>&1; then
    as_alice "$TIER_BUILDDIR/ctl/tierctl" -c "$DEMO/etc/tier.conf" stats --batch "$id"
else
    echo "(tierctl stats comes with the statistics issue; the tiers are not"
    echo " active yet: this run shows the job array with tier.so loaded)"
fi
[ $keep = 1 ] && echo "cluster left running: eval \$($CL env $DEMO); stop with $CL stop $DEMO"
exit 0
