-- scripts/demo_result.lua RUN_DIR SECONDS [WHAT]: the lines `make demo` ends with. Prints
-- the dev Spearman and Pearson (cosine similarity against the gold scores) before and after
-- training, and the training loss at the start and at the end of the run (the mean of the
-- first and of the last tenth of the steps: single batches are noisy). Returns 0 when both
-- correlations rose and the loss fell, else 1 with a line that says which did not.
--   ./trainer run scripts/demo_result.lua runs/minilm_sts_lora 280 "STS-B dev"
local run = dofile(require("trainer.native").root() .. "/scripts/run_scores.lua")
local dir, secs, what = arg[1], arg[2], arg[3] or "dev"
if not dir then
  io.stderr:write("usage: trainer run scripts/demo_result.lua RUN_DIR SECONDS [WHAT]\n")
  return 1
end

local s, before, after = run.summary(dir)
local names = { "spearman", "pearson" }
for _, k in ipairs(names) do
  if type(before[k]) ~= "number" or type(after[k]) ~= "number" then
    io.write(("demo: %s/summary.json lacks the dev %s before or after training\n"):format(dir, k))
    return 1
  end
end

local losses, n, first, last = run.losses(dir)

io.write(("\n%s, cosine similarity against the gold scores:\n"):format(what))
io.write(("                   %9s %9s\n"):format("Spearman", "Pearson"))
io.write(("  before training: %9.4f %9.4f\n"):format(before.spearman, before.pearson))
io.write(("  after  training: %9.4f %9.4f\n"):format(after.spearman, after.pearson))
io.write(("  change:          %+9.4f %+9.4f\n"):format(after.spearman - before.spearman, after.pearson - before.pearson))
if first then
  io.write(("training loss, mean of the first and of the last %d step%s: %.4f -> %.4f\n"):format(n, n == 1 and "" or "s",
    first, last))
end
io.write(("%d steps in %s s; outputs, checkpoints and report.html in %s\n"):format(s.steps or #losses, secs or "?", dir))

local failed = {}
for _, k in ipairs(names) do
  if after[k] <= before[k] then failed[#failed + 1] = ("the dev %s did not improve"):format(k) end
end
if first and last >= first then failed[#failed + 1] = "the training loss did not fall" end
if #failed > 0 then
  io.write("demo: ", table.concat(failed, "; "), "\n")
  return 1
end
return 0
