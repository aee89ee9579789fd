#!/bin/sh
# test_tco.sh: `gpuorch tco` end to end without a server: bad input exits 2 with a
# message naming it; every default is printed with its source; the docs/tco.md case
# (2,920 GPU-hours a month on one $384,000 server, 7 kW at $150 per kW-month, 10%
# operations) gives the break-even months worked out by hand below; JSON keys; the
# usage CSV read per month and over a span; every cloud price from the one instance
# priced, an option it has no price for shown as not priced (table, JSON, chart) unless
# --cloud-price gives it; the SVG chart written with its break-even marks. The --from-server path
# against a real server is test_sys_tco.sh.
# Usage: test_tco.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"

run 0 "$GPUORCH" tco --help
out_has "usage: gpuorch tco"
out_has "--cloud-price OPTION=USD"
run 0 "$GPUORCH" --help
out_has "tco "

# ---- bad input: exit 2, the argument named ----
run 2 "$GPUORCH" tco
err_has "give one of --gpu-hours N, --usage FILE or --from-server"
run 2 "$GPUORCH" tco --gpu-hours 10 --usage "$T/u.csv"
err_has "give one of"
run 2 "$GPUORCH" tco --gpu-hours -5
err_has "not '-5'"
run 2 "$GPUORCH" tco --gpu-hours 1,,2
err_has "separated by commas"
run 2 "$GPUORCH" tco --gpu-hours nan
run 2 "$GPUORCH" tco --gpu-hours 10 --gpu Z100
err_has "unknown GPU model 'Z100'"
run 2 "$GPUORCH" tco --gpu-hours 10 --instance p9.huge
err_has "unknown instance 'p9.huge'"
err_has "aws/p5.48xlarge"
run 2 "$GPUORCH" tco --gpu-hours 10 --instance gcp/a3-highgpu-8g --gpu A100-80GB --capex 1
err_has "compare like with like"
run 2 "$GPUORCH" tco --gpu-hours 10 --capex -1
err_has "capex must be dollars"
run 2 "$GPUORCH" tco --gpu-hours 10 --power-kw -3
err_has "power-kw"
run 2 "$GPUORCH" tco --gpu-hours 10 --ops-pct 150
err_has "ops-pct"
run 2 "$GPUORCH" tco --gpu-hours 10 --max-util 0
err_has "max-util"
run 2 "$GPUORCH" tco --gpu-hours 10 --years 0
err_has "years must be a whole number"
run 2 "$GPUORCH" tco --gpu-hours 10 --years 1.5
run 2 "$GPUORCH" tco --gpu-hours 10 --cloud-price warm=1
err_has "unknown option 'warm'"
run 2 "$GPUORCH" tco --gpu-hours 10 --cloud-price spot
err_has "OPTION=USD_PER_GPU_HOUR"
run 2 "$GPUORCH" tco --gpu-hours 10 --cloud-price spot=1 --cloud-price spot=2
err_has "given twice"
run 2 "$GPUORCH" tco --gpu-hours 10 -o yaml
err_has "-o must be table or json"
run 2 "$GPUORCH" tco --gpu-hours 10 --days 30
err_has "go with --usage FILE"
run 2 "$GPUORCH" tco --gpu-hours 10 stray
err_has "unexpected argument 'stray'"
# the catalogue knows no A100 server price, no L4 server at all
run 2 "$GPUORCH" tco --gpu-hours 10 --gpu A100-80GB
err_has "no server price for A100-80GB: give --capex"
run 2 "$GPUORCH" tco --gpu-hours 10 --gpu L4 --capex 50000
err_has "no power figure for L4: give --power-kw"

# ---- the defaults, each printed with where it came from ----
run 0 "$GPUORCH" tco --gpu-hours 2920
for label in "GPU model" "GPUs per server" "capex per server" "depreciation" "period compared" \
    "contracted power per server" "colocation per kW-month" "electricity billed apart" \
    "typical draw per server" "operations a year" "planned peak utilisation" "hours in a month" \
    "spot share of the spot mix" "instance priced" "on-demand price" "reserved 1y price" \
    "reserved 3y price" "spot price"; do
    out_has "^$label  "
done
out_has "H100-80GB-SXM5"
out_has "aws/p5.48xlarge"
out_has '\$6.8800 per GPU-h  *catalogue aws/p5.48xlarge: \$55.04 an hour for 8 GPUs'
out_has '\$384,000  *catalogue hgx_h100_8gpu'
out_has '10.2 kW  *catalogue hgx_h100_8gpu: maximum draw'
out_has '\$190  *catalogue: the middle of \$130-250'
out_has '10% of capex  *default'
out_has '80%  *default'
out_has '3 years  *default: the depreciation period'
out_has "owning cheaper from"

# ---- the case worked by hand (prices given, so the catalogue cannot move it) ----
# 2,920 GPU-hours a month; 1 server (2,920 <= 8 x 730 x 80% = 4,672). Owned: $384,000 in
# month 1, then 7 kW x $150 + $384,000 x 10% / 12 = $4,250 a month: $537,000 over 36.
# On-demand $6.88: $20,089.60 a month; owning cheaper once 384,000 + 4,250 m < 20,089.60 m,
# m > 24.24: month 25; $723,225.60 over 36. Reserved 1y at $8 holds 8 x 730 GPU-hours:
# $46,720 a month, m > 384,000 / 42,470 = 9.04: month 10. Reserved 3y at $5: $29,200,
# m > 384,000 / 24,950 = 15.39: month 16. Spot mix, 40% at $2.50 and 60% at $6.88:
# 2,920 x 5.128 = $14,973.76, m > 384,000 / 10,723.76 = 35.81: month 36 ($537,000
# against $539,055.36; month 35: $532,750 against $524,081.60).
PRICES="--capex 384000 --power-kw 7 --colo-usd-per-kw-month 150 --ops-pct 10
  --cloud-price on_demand=6.88 --cloud-price reserved-1y=8 --cloud-price reserved_3y=5
  --cloud-price spot=2.5 --spot-share 40"
HAND="--gpu-hours 2920 $PRICES"
# shellcheck disable=SC2086 # HAND is a list of words
run 0 "$GPUORCH" tco $HAND -o json
cp "$T/out" "$T/hand.json"
json_ok "$T/hand.json" 'd["months"] == 36 and d["owned"]["servers"] == 1'
json_ok "$T/hand.json" 'd["owned"]["running_per_month_usd"] == 4250 and d["owned"]["total_usd"] == 537000'
json_ok "$T/hand.json" 'd["owned"]["monthly_usd"][0] == 388250 and d["owned"]["amortised_per_month_usd"] == 14916.666667'
json_ok "$T/hand.json" 'd["options"]["on_demand"]["break_even_month"] == 25'
json_ok "$T/hand.json" 'd["options"]["on_demand"]["total_usd"] == 723225.6'
json_ok "$T/hand.json" 'd["options"]["reserved_1y"]["break_even_month"] == 10 and d["options"]["reserved_1y"]["monthly_usd"][0] == 46720'
json_ok "$T/hand.json" 'd["options"]["reserved_3y"]["break_even_month"] == 16 and d["options"]["reserved_3y"]["monthly_usd"][7] == 29200'
json_ok "$T/hand.json" 'd["options"]["spot_mix"]["break_even_month"] == 36 and d["options"]["spot_mix"]["cumulative_usd"][35] == 539055.36'
json_ok "$T/hand.json" 'd["options"]["spot_mix"]["cumulative_usd"][34] == 524081.6 and d["owned"]["cumulative_usd"][34] == 532750'
json_ok "$T/hand.json" 'd["assumptions"]["on_demand_usd_per_gpu_hour"] == {"value": 6.88, "source": "--cloud-price"}'
json_ok "$T/hand.json" 'd["assumptions"]["capex_usd_per_server"]["source"] == "--capex"'
# every key a consumer reads
json_ok "$T/hand.json" 'all(k in d for k in ("gpu_model", "months", "assumptions", "usage", "owned", "options", "chart"))'
json_ok "$T/hand.json" 'all(len(d["options"][o]["monthly_usd"]) == 36 and len(d["options"][o]["cumulative_usd"]) == 36 and "total_usd" in d["options"][o] and d["options"][o]["priced"] for o in ("on_demand", "reserved_1y", "reserved_3y", "spot_mix"))'
json_ok "$T/hand.json" 'all("value" in v and v["source"] for v in d["assumptions"].values()) and len(d["assumptions"]) >= 18'
json_ok "$T/hand.json" 'd["usage"]["gpu_hours_per_month"] == [2920.0] * 36 and d["chart"] is None'
# the same in the table
# shellcheck disable=SC2086
run 0 "$GPUORCH" tco $HAND
out_has '^on-demand  *6.8800  *\$20,089.60  *\$723,225.60  *6.8800  *month 25$'
out_has '^owned  .*\$537,000.00'
out_has '^spot mix 40%  .*month 36$'
out_has "bought once at \$384,000"

# ---- one year: owning never catches up; the 3-year term owes 24 more months ----
# shellcheck disable=SC2086
run 0 "$GPUORCH" tco $HAND --years 1 -o json
json_ok "$T/out" 'd["months"] == 12 and d["options"]["on_demand"]["break_even_month"] is None'
json_ok "$T/out" 'd["options"]["reserved_3y"]["committed_after_period_usd"] == 24 * 29200'
json_ok "$T/out" 'd["owned"]["book_value_at_end_usd"] == 256000'
# shellcheck disable=SC2086
run 0 "$GPUORCH" tco $HAND --years 1
out_has '^on-demand  .*never$'
out_has "its 36-month term still owes \$700,800.00 after the period"

# ---- no usage: nothing to own, nothing breaks even ----
run 0 "$GPUORCH" tco --gpu-hours 0 -o json
json_ok "$T/out" 'd["owned"]["servers"] == 0 and d["owned"]["total_usd"] == 0'
json_ok "$T/out" 'all(o["break_even_month"] is None for o in d["options"].values() if o["priced"])'

# ---- every price from the one instance priced (issue 17) ----
# The H100 default is aws/p5.48xlarge, which lists an on-demand price only. Its
# reservations and spot are not priced: not GCP's a3-highgpu-8g ones, whose 1-year
# commitment ($7.6730 a GPU-hour) was shown above AWS's on-demand ($6.88).
UNPRICED='("reserved_1y", "reserved_3y", "spot_mix")'
run 0 "$GPUORCH" tco --gpu-hours 2920 -o json
cp "$T/out" "$T/p5.json"
json_ok "$T/p5.json" 'd["assumptions"]["instance"]["value"] == "aws/p5.48xlarge"'
json_ok "$T/p5.json" 'd["assumptions"]["on_demand_usd_per_gpu_hour"]["value"] == 6.88 and d["assumptions"]["on_demand_usd_per_gpu_hour"]["source"].startswith("catalogue aws/p5.48xlarge: ")'
json_ok "$T/p5.json" 'not any("gcp/" in v["source"] or v["value"] == "gcp/a3-highgpu-8g" for v in d["assumptions"].values())'
json_ok "$T/p5.json" 'all(d["assumptions"][k + "_usd_per_gpu_hour"] == {"value": None, "source": "aws/p5.48xlarge lists none: give --cloud-price " + k + "=USD"} for k in ("reserved_1y", "reserved_3y", "spot"))'
# an option not priced is null with the reason, its break-even skipped, not borrowed
json_ok "$T/p5.json" 'd["options"]["on_demand"]["priced"] and d["options"]["on_demand"]["break_even_month"] == 26'
json_ok "$T/p5.json" 'all(d["options"][o]["priced"] is False and all(d["options"][o][k] is None for k in ("price_per_gpu_hour_usd", "monthly_usd", "cumulative_usd", "total_usd", "break_even_month")) for o in '"$UNPRICED"')'
json_ok "$T/p5.json" 'd["options"]["reserved_1y"]["why"] == "aws/p5.48xlarge lists no reserved 1y price: give --cloud-price reserved_1y=USD"'
json_ok "$T/p5.json" 'd["options"]["spot_mix"]["why"] == "aws/p5.48xlarge lists no spot price: give --cloud-price spot=USD"'
run 0 "$GPUORCH" tco --gpu-hours 2920
out_has '^reserved 1y  *-  *-  *-  *-  *not priced$'
out_has '^reserved 3y  *-  *-  *-  *-  *not priced$'
out_has '^spot mix 50%  *-  *-  *-  *-  *not priced$'
out_has '^reserved 1y price  *not priced  *aws/p5.48xlarge lists none'
out_has "^reserved 1y: not priced: aws/p5.48xlarge lists no reserved 1y price: give --cloud-price reserved_1y=USD"
if grep -q "gcp/" "$T/out"; then fail "the p5.48xlarge comparison names a GCP listing"; fi
# the chart: owned and on-demand drawn, the others in the legend as not priced
run 0 "$GPUORCH" tco --gpu-hours 2920 --out "$T/chart-p5"
python3 - "$T/chart-p5/tco.svg" <<'EOF' || fail "the p5.48xlarge chart"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
assert len(root.findall(ns + "polyline")) == 2  # owned and on-demand
marks = [c for c in root.findall(ns + "circle") if c.get("class") == "break-even"]
assert len(marks) == 1, len(marks)
unpriced = ["".join(t.itertext()) for t in root.iter(ns + "text") if t.get("class") == "not-priced"]
assert unpriced == ["reserved 1y: not priced", "reserved 3y: not priced", "spot mix 50%: not priced"], unpriced
text = " ".join("".join(t.itertext()) for t in root.iter(ns + "text"))
assert "on-demand: from month 26" in text, text
EOF
# --cloud-price fills what the instance lacks; the rest stay the instance's or unpriced.
# Reserved 1y at $4: 8 x 730 x $4 = $23,360 a month against $384,000 + $5,138 m: m >
# 384,000 / 18,222 = 21.07, month 22.
run 0 "$GPUORCH" tco --gpu-hours 2920 --instance p5.48xlarge --cloud-price reserved_1y=4 -o json
json_ok "$T/out" 'd["assumptions"]["instance"] == {"value": "aws/p5.48xlarge", "source": "--instance"}'
json_ok "$T/out" 'd["assumptions"]["reserved_1y_usd_per_gpu_hour"] == {"value": 4, "source": "--cloud-price"}'
json_ok "$T/out" 'd["options"]["reserved_1y"]["monthly_usd"][0] == 23360 and d["options"]["reserved_1y"]["break_even_month"] == 22'
json_ok "$T/out" 'd["options"]["reserved_3y"]["priced"] is False and d["options"]["spot_mix"]["priced"] is False'
# one provider's four prices: --instance gcp/a3-highgpu-8g, its reservation below its
# own on-demand price
run 0 "$GPUORCH" tco --gpu-hours 2920 --instance gcp/a3-highgpu-8g -o json
json_ok "$T/out" 'all(d["assumptions"][k + "_usd_per_gpu_hour"]["source"].startswith("catalogue gcp/a3-highgpu-8g: ") for k in ("on_demand", "reserved_1y", "reserved_3y", "spot"))'
json_ok "$T/out" 'all(o["priced"] for o in d["options"].values())'
json_ok "$T/out" 'd["options"]["reserved_1y"]["price_per_gpu_hour_usd"] < d["options"]["on_demand"]["price_per_gpu_hour_usd"]'
# every price given: no instance is priced
# shellcheck disable=SC2086
run 0 "$GPUORCH" tco $HAND -o json
json_ok "$T/out" 'd["assumptions"]["instance"] == {"value": None, "source": "none: every price is given (--cloud-price)"}'
# an instance that lists no price at all prices nothing: an error, not another listing
run 2 "$GPUORCH" tco --gpu-hours 10 --instance aws/p5e.48xlarge --capex 300000 --power-kw 10
err_has "aws/p5e.48xlarge lists no price to compare with: give --cloud-price on_demand=USD or another --instance"

# ---- A100: aws/p4de.24xlarge lists on-demand and 1-year prices, no 3-year, no spot ----
run 0 "$GPUORCH" tco --gpu-hours 3000 --gpu A100-80GB --capex 200000 -o json
json_ok "$T/out" 'd["assumptions"]["instance"]["value"] == "aws/p4de.24xlarge" and d["options"]["on_demand"]["priced"] and d["options"]["reserved_1y"]["priced"]'
json_ok "$T/out" 'd["options"]["reserved_3y"]["why"] == "aws/p4de.24xlarge lists no reserved 3y price: give --cloud-price reserved_3y=USD"'
json_ok "$T/out" 'd["options"]["spot_mix"]["priced"] is False and d["assumptions"]["spot_usd_per_gpu_hour"]["value"] is None'
run 0 "$GPUORCH" tco --gpu-hours 3000 --gpu A100-80GB --capex 200000
out_has "reserved 3y: not priced: aws/p4de.24xlarge lists no reserved 3y price: give --cloud-price reserved_3y=USD"
# nothing priced at all is an error: L4 servers of 6 GPUs match no listing
run 2 "$GPUORCH" tco --gpu-hours 10 --gpu L4 --capex 50000 --power-kw 1 --gpus-per-server 6
err_has "no cloud price is known for L4"
run 0 "$GPUORCH" tco --gpu-hours 10 --gpu L4 --capex 50000 --power-kw 1 --gpus-per-server 6 \
    --cloud-price on_demand=1 -o json
json_ok "$T/out" 'd["assumptions"]["instance"]["value"] is None and d["options"]["reserved_1y"]["why"] == "no reserved 1y price: give --cloud-price reserved_1y=USD"'

# ---- usage from the CSV of `gpuorch usage -o csv` ----
# 2,880 GPU-hours over the default 30 days (720 h) = 2,920 in a 730-hour month: the hand
# case again. The idle showback line is capacity nobody used: left out.
printf 'team,project,gpu_hours,cost_usd,jobs\n(idle),(idle),9000.000000,0.0000,0\nsearch,ranking,2000.000000,0.0000,3\nplatform,,880.000000,0.0000,2\n' >"$T/u.csv"
# shellcheck disable=SC2086
run 0 "$GPUORCH" tco $PRICES --usage "$T/u.csv" -o json
json_ok "$T/out" 'd["usage"]["gpu_hours_per_month"][0] == 2920 and d["options"]["on_demand"]["break_even_month"] == 25'
json_ok "$T/out" 'd["assumptions"]["usage_span_days"]["value"] == 30 and "default" in d["assumptions"]["usage_span_days"]["source"]'
json_ok "$T/out" 'd["usage"]["source"].endswith("u.csv: 2 rows, 2880.0 GPU-hours over 30 days, idle lines left out")'
# grouped by model, an idle line has no team: its kind marks it
printf 'model,gpu_hours,cost_usd,jobs,kind\nH100-80GB-SXM5,2000.000000,0.000000,3,use\nH100-80GB-SXM5,9000.000000,0.000000,0,idle\nA100-80GB,880.000000,0.000000,2,use\n' >"$T/k.csv"
# shellcheck disable=SC2086
run 0 "$GPUORCH" tco $PRICES --usage "$T/k.csv" -o json
json_ok "$T/out" 'd["usage"]["gpu_hours_per_month"][0] == 2920 and d["usage"]["source"].endswith("k.csv: 2 rows, 2880.0 GPU-hours over 30 days, idle lines left out")'
run 0 "$GPUORCH" tco --usage "$T/u.csv" --days 60 -o json
json_ok "$T/out" 'd["usage"]["gpu_hours_per_month"][0] == 1460'
run 0 "$GPUORCH" tco --usage "$T/u.csv" --months 2 -o json
json_ok "$T/out" 'd["usage"]["gpu_hours_per_month"][0] == 1440'
run 2 "$GPUORCH" tco --usage "$T/u.csv" --months 2 --days 3
err_has "not both"
# a month column gives the months in order, gaps at 0, the last repeating
printf 'month,team,gpu_hours\n2026-03,a,100\n2026-01,a,1000\n2026-01,b,500\n' >"$T/m.csv"
run 0 "$GPUORCH" tco --usage "$T/m.csv" --years 1 -o json
json_ok "$T/out" 'd["usage"]["gpu_hours_per_month"] == [1500, 0] + [100] * 10'
run 2 "$GPUORCH" tco --usage "$T/m.csv" --days 30
err_has "has a month column"
# malformed files: the file and line named
printf 'team,gpu_hours\na,"12\n' >"$T/bad1.csv"
run 2 "$GPUORCH" tco --usage "$T/bad1.csv"
err_has "bad1.csv:2: a quote is not closed"
printf 'team,gpu_hours\na,1\nb,x\n' >"$T/bad2.csv"
run 2 "$GPUORCH" tco --usage "$T/bad2.csv"
err_has "bad2.csv:3: gpu_hours must be a number from 0, not 'x'"
printf 'team,gpu_hours\na,-4\n' >"$T/bad3.csv"
run 2 "$GPUORCH" tco --usage "$T/bad3.csv"
err_has "bad3.csv:2:"
printf 'team,hours\na,1\n' >"$T/bad4.csv"
run 2 "$GPUORCH" tco --usage "$T/bad4.csv"
err_has "no gpu_hours column"
printf 'month,gpu_hours\n2026-13,5\n' >"$T/bad5.csv"
run 2 "$GPUORCH" tco --usage "$T/bad5.csv"
err_has "month must be YYYY-MM, not '2026-13'"
printf 'team,gpu_hours\n' >"$T/bad6.csv"
run 2 "$GPUORCH" tco --usage "$T/bad6.csv"
err_has "no usage rows"
run 2 "$GPUORCH" tco --usage "$T/missing.csv"
err_has "missing.csv: No such file"

# ---- --from-server with no server there: a run-time failure, exit 1 ----
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
run 1 "$GPUORCH" tco --from-server --server "http://127.0.0.1:$PORT" --token t
err_has "gpuorch tco: cannot reach the gpuorch server at http://127.0.0.1:$PORT"
run 2 "$GPUORCH" tco --from-server --server "ftp://x" --token t
err_has "must be an http:// or https:// URL"

# ---- the chart ----
# shellcheck disable=SC2086
run 0 "$GPUORCH" tco $HAND --out "$T/chart" -o json
[ -s "$T/chart/tco.svg" ] || fail "no $T/chart/tco.svg"
json_ok "$T/out" 'd["chart"].endswith("/chart/tco.svg")'
python3 - "$T/chart/tco.svg" <<'EOF' || fail "the chart"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == ns + "svg", root.tag
lines = root.findall(ns + "polyline")
assert len(lines) == 5, len(lines)  # owned and four options
for l in lines:
    assert len(l.get("points").split()) == 37  # month 0 and 36 months
marks = [c for c in root.findall(ns + "circle") if c.get("class") == "break-even"]
assert len(marks) == 4, len(marks)
text = " ".join("".join(t.itertext()) for t in root.iter(ns + "text"))
for want in ("on-demand: from month 25", "reserved 1y: from month 10", "reserved 3y: from month 16",
             "spot mix 40%: from month 36", "H100-80GB-SXM5"):
    assert want in text, want
EOF
# shellcheck disable=SC2086
run 0 "$GPUORCH" tco $HAND --years 1 --out "$T/chart1"
out_has "^Chart: $T/chart1/tco.svg"
grep -q "on-demand: never" "$T/chart1/tco.svg" || fail "the one-year chart lacks 'on-demand: never'"
: >"$T/notadir"
run 1 "$GPUORCH" tco --gpu-hours 10 --out "$T/notadir"

echo "tco ok"
