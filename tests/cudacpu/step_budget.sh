#!/usr/bin/env bash
# tests/cudacpu/step_budget.sh — bench/gpu/step_budget.lua on a one- and a two-layer model under the
# emulator (TRAINER, default build/cudacpu/trainer), for BERT's erf GELU (hidden_act "gelu") and the
# tanh form ("gelu_new"): its table lists the step's launches by op, and must show the attention
# forward and backward on the tensor-core kernels (attn_tc_*, with their WMMA products counted),
# the Linear products on cuBLASLt with the bias in their epilogue (no launch beside a Linear's
# products but the casts of its operands), the erf GELU and its derivative as passes of their
# own, the tanh GELU in the up-projection's epilogue (linear_gelu on cuBLASLt alone, no forward
# GELU pass) and its derivative in the down-projection's input-gradient epilogue (no GELU
# derivative pass), the LoRA dropout (the flagship's 0.1) inside dropout_linear (no dropout pass of
# its own), the input gradients summed in the products (no add_ pass in the backward), and a
# predicted step time for each.
#   step_budget_table
set -u
cd "$(dirname "$0")/../.." || exit 1
TRAINER=${TRAINER:-build/cudacpu/trainer}
W="${OUT:-build/cudacpu_out}/step_budget"
rm -rf "$W"; mkdir -p "$W"
if [ ! -x "$TRAINER" ]; then echo "SKIP step_budget_table: no $TRAINER (make cudacpu builds it)"; exit 0; fi
for act in gelu gelu_new; do
  if ! "$TRAINER" run bench/gpu/step_budget.lua --act $act --json "$W/budget_$act.json" >"$W/budget_$act.txt" 2>&1; then
    echo "FAIL step_budget_table: the bench failed (--act $act): $(tail -n 3 "$W/budget_$act.txt" | tr '\n' ' ')"
    echo "0 passed, 1 failed"; exit 1
  fi
done
why=$("$TRAINER" run <(cat <<'LUA'
local function read(p) local f = assert(io.open(p)); local s = f:read("*a"); f:close(); return s end
local bad, times = {}, {}
for _, act in ipairs({ "gelu", "gelu_new" }) do
  local s = read(arg[1] .. "/budget_" .. act .. ".json")
  local function row(op, kernel)
    for line in s:gmatch("[^\n]+") do
      if line:find('"op": "' .. op .. '"', 1, true) and line:find(kernel, 1, true) then
        return tonumber(line:match('"measured_mma_flops": ([%d.e+]+)')), tonumber(line:match('"predicted_s": ([%d.e+-]+)'))
      end
    end
  end
  local function field(name) return tonumber(s:match('"' .. name .. '": ([%d.e+-]+)')) end
  for _, w in ipairs({ { "attention", "attn_tc_fwd_kernel" }, { "attention_backward", "attn_tc_dkv_kernel" },
      { "attention_backward", "attn_tc_dq_kernel" } }) do
    local mma, t = row(w[1], w[2])
    if not mma or mma <= 0 or not (t > 0) then bad[#bad + 1] = act .. ": " .. w[1] .. " on " .. w[2] end
  end
  -- the backward reads the kept forward output: no forward kernel, 7 products (FA2's 5 + dQ's S, dP)
  local ab = s:match('[^\n]*"op": "attention_backward"[^\n]*') or ""
  local abf, abmin = tonumber(ab:match('"flops": ([%d.e+]+)')), tonumber(ab:match('"min_flops": ([%d.e+]+)'))
  if ab:find("fwd", 1, true) or not (abf and abmin and math.abs(abf / abmin - 7 / 5) < 1e-9) then
    bad[#bad + 1] = act .. ": attention_backward without the forward's recompute"
  end
  if not row("linear", "cublasLt product") then bad[#bad + 1] = act .. ": linear on cuBLASLt" end
  if field("bias_kernels") ~= 0 then bad[#bad + 1] = act .. ": the bias in the products' epilogue" end
  if act == "gelu" and not (field("gelu_pass_calls") > 0 and field("gelu_fused_calls") == 0 and
      field("dgelu_pass_calls") > 0 and field("dgelu_fused_calls") == 0) then
    bad[#bad + 1] = "gelu: the erf GELU and its derivative as passes of their own"
  end
  if act == "gelu_new" and not (field("gelu_fused_calls") > 0 and field("gelu_pass_calls") == 0) then
    bad[#bad + 1] = "gelu_new: the tanh GELU in the up-projection's epilogue"
  end
  if act == "gelu_new" and not (field("dgelu_fused_calls") > 0 and field("dgelu_pass_calls") == 0) then
    bad[#bad + 1] = "gelu_new: the GELU derivative in the down-projection's input-gradient epilogue"
  end
  -- the flagship's LoRA dropout rides in dropout_linear: the only dropout passes left are the
  -- embeddings' and the classifier's
  local drop = s:match('[^\n]*"op": "dropout", [^\n]*') or ""
  if not s:find('"op": "dropout_linear"', 1, true) or (tonumber(drop:match('"calls": (%d+)')) or 0) > 2 then
    bad[#bad + 1] = act .. ": the LoRA dropout inside dropout_linear"
  end
  if field("backward_add_calls") ~= 0 then
    bad[#bad + 1] = act .. ": input gradients summed in the products (no add_ in the backward)"
  end
  local step = field("predicted_step_s")
  if not (step and step > 0) then bad[#bad + 1] = act .. ": a predicted step time" end
  times[#times + 1] = ("%s %.2f ms"):format(act, (step or 0) * 1e3)
end
print(#bad == 0 and ("predicted step " .. table.concat(times, ", ")) or "missing: " .. table.concat(bad, ", "))
os.exit(#bad == 0 and 0 or 1)
LUA
) "$W" 2>&1)
if [ $? = 0 ] && grep -q "^predicted step time" "$W/budget_gelu.txt" && grep -q "^epilogues: " "$W/budget_gelu_new.txt" &&
  grep -q "^input gradients: summed in the products" "$W/budget_gelu.txt"; then
  echo "PASS step_budget_table ($why)"; echo "1 passed, 0 failed"
else
  echo "FAIL step_budget_table: $why"; echo "0 passed, 1 failed"; exit 1
fi
