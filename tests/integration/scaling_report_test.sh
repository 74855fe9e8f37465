#!/usr/bin/env bash
# scripts/scaling_report.sh works end to end, quickly: 1 and 2 workers, a few steps, into this
# test's scratch dir (never docs/). Checks the table, the JSON (efficiency = speed at N / (N x speed
# at 1), 100% at N = 1, oversubscription stated exactly for N above the core count) and that a PNG
# was drawn.
set -euo pipefail
OUT="$DDP_TEST_TMP/scaling"
rm -rf "$OUT"
cores=$(nproc)
over=$((cores + 1))
table=$("$DDP_SOURCE_DIR/scripts/scaling_report.sh" --build "$(dirname "$DDP_BIN_DIR")" --out "$OUT" \
        --workers "1 2 $over" --steps 40 --warmup 10 --batch 16 --repeat 1 2>/dev/null)
echo "$table"
/usr/bin/python3 - "$OUT" "$cores" <<'PY'
import json, sys
out, cores = sys.argv[1], int(sys.argv[2])
report = json.load(open(out + "/scaling.json"))
results = {r["workers"]: r for r in report["results"]}
assert set(results) == {1, 2, cores + 1}, results.keys()
base = results[1]["samples_per_s"]
assert base > 0 and abs(results[1]["efficiency"] - 1) < 1e-9
for n, r in results.items():
    assert abs(r["efficiency"] - r["samples_per_s"] / (n * base)) < 1e-9, (n, r)
    assert r["oversubscribed"] == (n > cores), (n, r)
png = open(out + "/scaling.png", "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000, len(png)
print("PASS")
PY
grep -q "oversubscribed: $over workers on $cores cores" <<<"$table"
