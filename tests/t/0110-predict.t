#!/bin/bash
test_description='tierctl predict: GEV fit, return levels, predictions, errors'
. "$(dirname "$0")/../lib/tap.sh"

tierctl="$TIER_BUILDDIR/ctl/tierctl"
data="$TIER_SRCDIR/tests/unit/fixtures/evt/data"
times="$data/fallocate-ramdisk.csv"
measured="$data/measured-fallocate-ramdisk.csv"
command -v python3 >/dev/null 2>&1 && test_set_prereq PYTHON
command -v xmllint >/dev/null 2>&1 && test_set_prereq XMLLINT

test -x "$tierctl" || bail_out "no $tierctl"
cd "$TRASH" || bail_out "cannot enter $TRASH"

test_expect_success 'the acceptance command prints parameters and predictions' '
    "$tierctl" predict --block 8 --nodes 16,32,64,128 "$times" >out &&
    grep -E "^shape \(xi\) +-0\.1800 +0\.0441 +\[-0\.2532, -0\.0733\]" out &&
    grep -E "^scale \(sigma\) +164\.21 .*\[143\.1[0-9], 191\.1[0-9]\] s" out &&
    grep -E "^location \(mu\) +582\.0[0-9] .*\[546\.8[0-9], 617\.0" out &&
    for n in 16 32 64 128; do
        grep -E "^$n +[0-9.]+ +[0-9.]+ +\[" out || return 1
    done &&
    grep "cdf F(z)^(N/8)" out
'

test_expect_success 'one run is one block by default' '
    "$tierctl" predict --nodes 16,32,64,128 "$times" >out2 &&
    sed 1d out >a && sed 1d out2 >b && cmp a b &&
    grep "(one run = one block)" out2
'

test_expect_success PYTHON '--json: shape, scale, location with intervals' '
    "$tierctl" predict --json --block 8 --nodes 16,128 "$times" >out.json &&
    python3 - out.json <<-PYEOF
	import json, sys
	d = json.load(open(sys.argv[1]))
	for k in ("shape", "scale", "location"):
	    e = d[k]
	    lo, hi = e["interval"]
	    assert lo < e["estimate"] < hi, k
	assert abs(d["shape"]["estimate"] + 0.18004) < 1e-4
	assert abs(d["fit"]["loglik"] + 656.0543441) < 1e-6
	p = d["predictions"]
	assert [x["nodes"] for x in p] == [16, 128]
	assert p[0]["median"]["estimate"] < p[1]["median"]["estimate"]
	assert [r["period"] for r in d["return_levels"]] == [10, 100, 1000]
	PYEOF
'

test_expect_success 'global --json works too' '
    "$tierctl" --json predict "$times" | grep "\"location\""
'

test_expect_success '--measured adds the error table' '
    "$tierctl" predict --measured "$measured" "$times" >out3 &&
    grep -E "^16 .* 10 +[-+][0-9.]+%$" out3 &&
    grep -E "^128 .* 10 +[-+][0-9.]+%$" out3 &&
    grep "measured median" out3
'

# The error table recomputed from the fixtures: each measured run's slowest
# node, their median and count per node count; the predicted median
# F^-1(0.5^(b/N)) and mean of F^(N/b) from the fitted GEV; the error.
test_expect_success PYTHON '--measured: the error table has the right numbers' '
    "$tierctl" predict --block 8 --measured "$measured" "$times" >tab.out &&
    "$tierctl" predict --json --block 8 --measured "$measured" "$times" \
        >tab.json &&
    python3 - "$measured" tab.out tab.json <<-PYEOF
	import csv, json, math, statistics, sys
	runs = {}
	for r in csv.DictReader(open(sys.argv[1])):
	    runs.setdefault(r["run"], []).append(float(r["seconds"]))
	slow = {}
	for t in runs.values():
	    slow.setdefault(len(t), []).append(max(t))
	assert sorted(slow) == [16, 32, 64, 128], sorted(slow)
	d = json.load(open(sys.argv[3]))
	xi, sigma, mu = (d[k]["estimate"] for k in ("shape", "scale", "location"))
	def quantile(p):
	    return mu + sigma / xi * ((-math.log(p)) ** -xi - 1)
	rows = {}
	for line in open(sys.argv[2]):
	    f = line.replace("[", " ").replace("]", " ").replace(",", " ").split()
	    if len(f) == 9 and f[0].isdigit() and f[8].endswith("%"):
	        rows[int(f[0])] = f
	assert sorted(rows) == sorted(slow), rows
	assert [p["nodes"] for p in d["predictions"]] == sorted(slow)
	for p in d["predictions"]:
	    n, t, row = p["nodes"], slow[p["nodes"]], rows[p["nodes"]]
	    med, mean = statistics.median(t), statistics.mean(t)
	    m = n / 8
	    pmed = quantile(0.5 ** (1 / m))
	    # the maximum of m GEVs is a GEV with these parameters
	    s2, mu2 = sigma * m ** xi, mu + sigma * (m ** xi - 1) / xi
	    pmean = mu2 + s2 * (math.gamma(1 - xi) - 1) / xi
	    err = 100 * (pmed - med) / med
	    print(n, med, len(t), pmed, pmean, err, row)
	    assert p["measured"]["runs"] == len(t) == int(row[7])
	    assert abs(p["measured"]["median"] - med) < 1e-6 * med
	    assert abs(p["measured"]["mean"] - mean) < 1e-6 * mean
	    assert abs(p["median"]["estimate"] - pmed) < 1e-6 * pmed
	    assert abs(p["mean"] - pmean) < 1e-4 * pmean
	    assert abs(p["error_pct"] - err) < 1e-6
	    assert row[1] == "%d" % m
	    assert row[2] == "%.2f" % pmed, (row[2], pmed)
	    assert row[5] == "%.2f" % pmean, (row[5], pmean)
	    assert row[6] == "%.2f" % med, (row[6], med)
	    assert row[8] == "%+.2f%%" % err, (row[8], err)
	PYEOF
'

test_expect_success '--periods and --level' '
    "$tierctl" predict --periods 2,50 --level 0.9 "$times" >out4 &&
    grep "90% interval" out4 && grep -E "^50 " out4 && grep -E "^2 " out4 &&
    ! grep -E "^1000 " out4
'

test_expect_success '--svg writes a return-level plot' '
    "$tierctl" predict --svg plot.svg --measured "$measured" "$times" \
        >/dev/null &&
    grep -c "<circle" plot.svg >n && test "$(cat n)" -ge 100 &&
    grep "</svg>" plot.svg
'

test_expect_success XMLLINT 'the plot is well-formed XML' '
    xmllint --noout plot.svg
'

test_expect_success 'stdin is read as -' '
    "$tierctl" predict - <"$times" | grep "^<stdin>: 800 times"
'

# errors: exit 1 and name the file, the line and the problem
expect_fail () {
    _msg=$1
    shift
    "$tierctl" predict "$@" >err.out 2>&1
    _rc=$?
    cat err.out
    test $_rc = 1 && grep -F -- "$_msg" err.out
}

test_expect_success 'a bad header' '
    printf "node,time\n1,2\n" >bad.csv &&
    expect_fail "bad.csv:1: bad header: no '"'"'run'"'"' column" bad.csv
'
test_expect_success 'NaN, negative, missing and non-numeric times' '
    printf "run,node,seconds\n1,1,2\n1,2,nan\n" >nan.csv &&
    expect_fail "nan.csv:3: seconds is NaN" nan.csv &&
    printf "run,node,seconds\n1,1,-2\n" >neg.csv &&
    expect_fail "neg.csv:2: seconds is negative (-2)" neg.csv &&
    printf "run,node,seconds\n1,1,\n" >miss.csv &&
    expect_fail "miss.csv:2: seconds is missing" miss.csv &&
    printf "run,node,seconds\n1,1,fast\n" >word.csv &&
    expect_fail "word.csv:2: seconds '"'"'fast'"'"' is not a number" word.csv
'
test_expect_success 'a duplicate (run, node)' '
    printf "run,node,seconds\n1,1,2\n1,1,3\n" >dup.csv &&
    expect_fail "dup.csv:3: duplicate time for run" dup.csv
'
test_expect_success 'fewer than 3 blocks' '
    printf "run,node,seconds\n1,1,2\n1,2,3\n2,1,4\n2,2,5\n" >two.csv &&
    expect_fail "two.csv:5: 2 blocks of 2 nodes in the file; at least 3" two.csv
'
test_expect_success 'constant times' '
    printf "run,node,seconds\n1,1,7\n2,1,7\n3,1,7\n4,1,7\n" >const.csv &&
    expect_fail "const.csv:2: all 4 block maxima are 7 s" const.csv
'
test_expect_success 'runs of different sizes without --block' '
    printf "run,node,seconds\n1,1,7\n1,2,8\n2,1,7\n3,1,9\n3,2,1\n" >uneq.csv &&
    expect_fail "uneq.csv:4: run '"'"'2'"'"' has 1 node but run" uneq.csv
'
test_expect_success 'a missing file, a directory, an empty file' '
    expect_fail "nosuch.csv: No such file or directory" nosuch.csv &&
    mkdir d && expect_fail "d:1: read error" d &&
    : >empty.csv && expect_fail "empty.csv:0: no header" empty.csv
'
test_expect_success 'a bad --measured file names itself' '
    expect_fail "bad.csv:1: bad header" --measured bad.csv "$times"
'
test_expect_success 'binary junk does not crash' '
    head -c 20000 /dev/urandom >junk.csv &&
    "$tierctl" predict junk.csv >junk.out 2>&1; test $? = 1 &&
    grep "tierctl predict: junk.csv:" junk.out
'

test_expect_code 2 'a bad --block is a usage error' '
    "$tierctl" predict --block 0 "$times"
'
test_expect_code 2 'a bad --nodes is a usage error' '
    "$tierctl" predict --nodes 16,,32 "$times"
'
test_expect_code 2 'a bad --periods is a usage error' '
    "$tierctl" predict --periods 1 "$times"
'
test_expect_code 2 'no file is a usage error' '
    "$tierctl" predict --block 8
'
test_expect_success 'help shows the options' '
    "$tierctl" help predict | grep -- "--measured FILE"
'

test_done
