-- scripts/retrieval_result.lua RUN_DIR [SECONDS]: the lines recipes/minilm_retrieval.lua's demo ends
-- with: the held-out retrieval metrics (NDCG@10, MRR@10, Recall@10, Accuracy@1) before and after
-- training and the training loss at the start and at the end (the mean of the first and of the
-- last tenth of the steps). Returns 0 when NDCG@10 rose, else 1 with a line that says so.
--   ./trainer run scripts/retrieval_result.lua runs/minilm_retrieval
local run = dofile(require("trainer.native").root() .. "/scripts/run_scores.lua")
local dir, secs = arg[1], arg[2]
if not dir then
  io.stderr:write("usage: trainer run scripts/retrieval_result.lua RUN_DIR [SECONDS]\n")
  return 1
end
local s, before, after = run.summary(dir)
local metrics = { { "swenli_cosine_ndcg@10", "NDCG@10" }, { "swenli_cosine_mrr@10", "MRR@10" },
                  { "swenli_cosine_recall@10", "Recall@10" }, { "swenli_cosine_accuracy@1", "Accuracy@1" } }
for _, m in ipairs(metrics) do
  if type(before[m[1]]) ~= "number" or type(after[m[1]]) ~= "number" then
    io.write(("retrieval: %s/summary.json lacks %s before or after training\n"):format(dir, m[1]))
    return 1
  end
end
io.write("\nSweNLI held-out premises -> entailed hypotheses, cosine similarity:\n")
io.write(("                  "):rep(1))
for _, m in ipairs(metrics) do io.write(("%11s"):format(m[2])) end
io.write("\n")
for _, row in ipairs({ { "before training:", before }, { "after  training:", after } }) do
  io.write(("  %-16s"):format(row[1]))
  for _, m in ipairs(metrics) do io.write(("%11.4f"):format(row[2][m[1]])) end
  io.write("\n")
end
io.write(("  %-16s"):format("change:"))
for _, m in ipairs(metrics) do io.write(("%+11.4f"):format(after[m[1]] - before[m[1]])) end
io.write("\n")
local _, n, first, last = run.losses(dir)
if first then
  io.write(("training loss, mean of the first and of the last %d logged step%s: %.4f -> %.4f\n"):format(n,
    n == 1 and "" or "s", first, last))
end
io.write(("%d steps%s; outputs and checkpoints in %s\n"):format(s.steps or 0, secs and (" in " .. secs .. " s") or "", dir))
local k = metrics[1][1]
if after[k] <= before[k] then
  io.write(("retrieval: NDCG@10 did not rise (%.4f -> %.4f)\n"):format(before[k], after[k]))
  return 1
end
return 0
