-- tests/cudacpu/plan_compare.lua — `trainer plan --json`'s ledger against a run's measured one:
--   ./trainer run tests/cudacpu/plan_compare.lua PLAN.json RUN_DIR
-- For each tag (weights, grads, optimizer, activations, workspace) the planned bytes within
-- 15 % of the training steps' peak (the largest of metrics.jsonl's mem_peak_by_tag: the
-- allocator's peak is reset at each step), the bound tests/lua/test_plan.lua holds the plan to
-- on the CPU, or within 64 KiB where that is more: the plan counts bytes, the allocator rounds
-- every tensor up to 512 B (a 64-wide bf16 bias is 128 B), under 512 B x 128 tensors for the
-- fixture's models (89 tensors with LoRA), and the CUDA slots' own scratch adds some KiB to
-- cuBLASLt's 32 MiB workspace. The
-- plan is a step's ledger: summary.json's peak_by_tag also holds what happened before the
-- first step (the f32 weights as loaded, before amp.prepare stores the frozen ones in half),
-- which it does not model; that peak is printed beside, never judged. Also the same device. Prints one line
-- per run (every tag: planned, measured, the difference) and exits 0 when all are within.
local json = require("trainer.core.json")
local plan_path, run = arg[1], arg[2]
local function verdict(ok, text) io.write(text, "\n") os.exit(ok and 0 or 1) end
local okp, p = pcall(json.read, plan_path)
local oks, s = pcall(json.read, (run or "") .. "/summary.json")
local okm, rows = pcall(require("trainer.train.outputs").read_metrics, run or "")
if not okp then verdict(false, "cannot read the plan " .. tostring(plan_path) .. ": " .. tostring(p)) end
if not oks then verdict(false, "cannot read " .. tostring(run) .. "/summary.json: " .. tostring(s)) end
if not okm or #rows == 0 then verdict(false, "no steps in " .. tostring(run) .. "/metrics.jsonl") end
if not tostring(s.device):match("^" .. p.device) then
  verdict(false, ("the plan is for %s, the run was on %s"):format(p.device, tostring(s.device)))
end
local ok, parts = true, {}
for _, tag in ipairs(require("trainer.core.memory").tags) do
  local want, got = p.by_tag[tag], 0
  for _, r in ipairs(rows) do got = math.max(got, r.mem_peak_by_tag[tag]) end
  local tol = math.max(0.15 * got, 64 * 1024)
  local within = math.abs(want - got) <= tol
  ok = ok and within
  parts[#parts + 1] = ("%s %d planned, %d measured (%+.1f%%; run peak %d)%s"):format(tag, want, got,
    100 * (want - got) / math.max(got, 1), s.peak_by_tag[tag], within and "" or " OUTSIDE")
end
verdict(ok, table.concat(parts, "; "))
