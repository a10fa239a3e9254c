#!/usr/bin/env bash
# tests/cudacpu/train_fit.sh — batch.size = "auto" and memory.fit = true on device = "cuda"
# (lua/trainer/plan/fit.lua; the CPU's end-to-end test is tests/cli/test_memory_fit.sh): with
# memory.limit below the recipe's need (its plan: 83 MiB, the cuBLASLt workspace included),
# each run chooses a configuration whose measured peak (summary.json's peak_reserved, what
# the limit bounds) stays under the limit, never out of memory; "auto" keeps the 32 rows a step
# by accumulation, whose first loss is the CPU's unchanged recipe's (the parity bound of the
# training comparisons).
#   train_fit_auto_100MiB, train_fit_auto_80MiB   batch.size = "auto", batch.effective = 32
#   train_fit_memory_90MiB                        memory.fit = true (bf16 on this card is allowed)
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_fit_auto_100MiB train_fit_auto_80MiB train_fit_memory_90MiB"
need_cuda
fixture
export TRAINER_CPU_RATES=gflops=178,gbps=40,rows_half=102,op_us=122,token_ns=16.4,token_half_ns=33.9,product_half=1.10
cat >"$W/cls.lua" <<EOF2
return {
  steps = 1, seed = 3, device = "cpu",
  loss = { name = "cross_entropy" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 32 },
  grad_clip = 1.0, log = { every = 1, quiet = true, tensorboard = false }, eval = { at_start = false },
  save = { final = false },
  model = { arch = "bert", init = "random", tokenizer = "$FX/cls", task = "classification", num_labels = 3,
    max_length = 32, dropout = 0, config = { hidden_size = 128, num_hidden_layers = 4, num_attention_heads = 4,
    intermediate_size = 512, vocab_size = 500, max_position_embeddings = 512 } },
  data = { train = "$FX/long.jsonl", columns = { "sentence1", "sentence2", "label" } },
}
EOF2
facts() { "$TRAINER" run <(cat <<'EOF2'
local json = require("trainer.core.json")
local s = json.read(arg[1] .. "/summary.json")
local f = io.open(arg[1] .. "/metrics.jsonl") local first = json.decode(f:read("*l")) f:close()
local r = require("trainer.recipe.sandbox").read_data(arg[1] .. "/resolved_recipe.lua", {})
print(("%d %.9g %d %s"):format(s.peak_reserved, first.loss, r.batch.size * r.batch.accumulate,
  table.concat(s.fit and s.fit.overrides or { "-" }, ",")))
EOF2
) "$1"; }
train cpu "$W/cls.lua" device=cpu || { fail train_fit_cpu "the cpu run failed: $(tail -n 2 "$W/runs/cpu.log")"; finish; }
read -r _ CPU_LOSS _ <<<"$(facts "$W/runs/cpu")"

check() { # NAME LIMIT_MIB EXACT overrides...
  local name=$1 mib=$2 exact=$3 rc peak loss rows overrides; shift 3
  train "$name" "$W/cls.lua" device=cuda memory.limit=${mib}MiB "$@"; rc=$?
  if [ $rc != 0 ]; then fail "$name" "rc $rc: $(tail -n 2 "$W/runs/$name.log" | tr '\n' ' ')"; return; fi
  read -r peak loss rows overrides <<<"$(facts "$W/runs/$name")"
  if [ "$peak" -ge $((mib * 1048576)) ]; then fail "$name" "peak_reserved $peak >= ${mib} MiB ($overrides)"
  elif [ "$rows" != 32 ]; then fail "$name" "$rows rows a step ($overrides)"
  elif [ "$overrides" = "-" ]; then fail "$name" "no fit record in summary.json"
  elif [ "$exact" = yes ] && ! awk -v a="$loss" -v b="$CPU_LOSS" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b) }'; then
    fail "$name" "first loss $loss, the cpu's unchanged recipe $CPU_LOSS ($overrides)"
  else pass "$name" "$overrides: peak_reserved $((peak / 1048576)) MiB, first loss $loss (cpu $CPU_LOSS)"; fi
}
check train_fit_auto_100MiB 100 yes batch.size=auto batch.effective=32
check train_fit_auto_80MiB 80 yes batch.size=auto batch.effective=32
check train_fit_memory_90MiB 90 no memory.fit=true
finish
