#!/usr/bin/env bash
# tests/cudacpu/step_budget.sh — bench/gpu/step_budget.lua on a one- and a two-layer model under the
# emulator (TRAINER, default build/cudacpu/trainer): its table lists the step's launches by op,
# and must show the attention forward and backward on the tensor-core kernels (attn_tc_*, with
# their WMMA products counted), the Linear products on cuBLASLt, and a predicted step time.
#   step_budget_table
set -u
cd "$(dirname "$0")/../.." || exit 1
TRAINER=${TRAINER:-build/cudacpu/trainer}
W="${OUT:-build/cudacpu_out}/step_budget"
rm -rf "$W"; mkdir -p "$W"
if [ ! -x "$TRAINER" ]; then echo "SKIP step_budget_table: no $TRAINER (make cudacpu builds it)"; exit 0; fi
if ! "$TRAINER" run bench/gpu/step_budget.lua --json "$W/budget.json" >"$W/budget.txt" 2>&1; then
  echo "FAIL step_budget_table: the bench failed: $(tail -n 3 "$W/budget.txt" | tr '\n' ' ')"; echo "0 passed, 1 failed"; exit 1
fi
why=$("$TRAINER" run <(cat <<'LUA'
local f = assert(io.open(arg[1])); local s = f:read("*a"); f:close()
local function row(op, kernel)
  for line in s:gmatch("[^\n]+") do
    if line:find('"op": "' .. op .. '"', 1, true) and line:find(kernel, 1, true) then
      return tonumber(line:match('"measured_mma_flops": ([%d.e+]+)')), tonumber(line:match('"predicted_s": ([%d.e+-]+)'))
    end
  end
end
local bad = {}
for _, w in ipairs({ { "attention", "attn_tc_fwd_kernel" }, { "attention_backward", "attn_tc_dkv_kernel" },
    { "attention_backward", "attn_tc_dq_kernel" } }) do
  local mma, t = row(w[1], w[2])
  if not mma or mma <= 0 or not (t > 0) then bad[#bad + 1] = w[1] .. " on " .. w[2] end
end
if not row("linear", "cublasLt product") then bad[#bad + 1] = "linear on cuBLASLt" end
local step = tonumber(s:match('"predicted_step_s": ([%d.e+-]+)'))
if not (step and step > 0) then bad[#bad + 1] = "a predicted step time" end
print(#bad == 0 and ("predicted step %.2f ms"):format(step * 1e3) or "missing: " .. table.concat(bad, ", "))
os.exit(#bad == 0 and 0 or 1)
LUA
) "$W/budget.json" 2>&1)
if [ $? = 0 ] && grep -q "^predicted step time" "$W/budget.txt"; then
  echo "PASS step_budget_table ($why)"; echo "1 passed, 0 failed"
else
  echo "FAIL step_budget_table: $why"; echo "0 passed, 1 failed"; exit 1
fi
