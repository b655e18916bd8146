#!/bin/bash
# The window's origin under a CPU quota: a 16-thread, 1 s window with no warm-up, run by the
# checkout OLD and by this one alternately, each under tools/slow-machine --cpus 0.5, printing
# each repetition's status and SEND rate. Usage (from the repository's root):
#   docs/findings/scripts/window_origin.sh OLD_CHECKOUT [PAIRS]
set -u
old=$(cd "$1" && pwd); new=$(pwd); pairs=${2:-3}; out=$(mktemp -d)
cat > "$out/m.yaml" <<'YAML'
name: origin
axes: {initiators: [1], threads: [16], dialogs: [per_thread], payload_bytes: [100], server: [durable]}
run: {warmup_seconds: 0, measure_seconds: 1, repetitions: 3, drain_timeout_seconds: 30, sample_interval_seconds: 0.5}
YAML
for i in $(seq "$pairs"); do
  for side in old new; do
    root=$old; [ "$side" = new ] && root=$new
    (cd "$root" && PYTHONPATH="$root" SSBENCH_HOME="$root" "$new/tools/slow-machine" --cpus 0.5 -- \
      "$new/.venv/bin/python" -m harness.cli run "$out/m.yaml" --out "$out/$side-$i" > "$out/$side-$i.log" 2>&1)
    echo "$side $i: $(grep -o 'measured nothing' "$out/$side-$i.log" | head -1)"
    "$new/.venv/bin/python" - "$out/$side-$i" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("*/rep-*/summary.json")):
    d = json.loads(f.read_text())
    print(f"  {f.parent.name}: {d['status']}, SEND {d['load']['send_rate']:.0f}/s")
PY
  done
done
echo "runs in $out"
