-- trainer.plan.eval: the memory the retrieval evaluators of eval.sets hold while they run
-- (trainer.train.evaluate.ir), for `trainer plan`. Per ir set, on the run's device (f32):
--   queries   every query's embedding, once per similarity (cosine keeps normalised ones)
--   chunk     one chunk of corpus_chunk_size documents' embeddings (or the whole corpus when
--             it is smaller)
--   tile      one [queries, chunk] block of scores (at most evaluate.IR_TILE of them)
-- The training activations are freed before an evaluation, so the run's peak while
-- evaluating is its weights, grads, optimizer state and workspace plus the largest set's
-- bytes (plus one evaluation batch's forward, which keeps nothing). The counts are the
-- files' lines (every query counted, also those without a relevant document).
local M = {}

local function count_lines(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local n = 0
  for line in f:lines() do if line:match("%S") then n = n + 1 end end
  f:close()
  return n
end

-- { { name, documents, queries, chunk, queries_bytes, chunk_bytes, tile_bytes, bytes }, ... }
-- of recipe's ir sets whose files exist, by name; nil when there is none.
function M.estimate(recipe, hidden)
  local sets = recipe.eval and recipe.eval.sets
  if type(sets) ~= "table" or not hidden then return nil end
  local evaluate = require("trainer.train.evaluate")
  local beir = require("trainer.train.beir")
  local names = {}
  for name, s in pairs(sets) do if type(s) == "table" and s.type == "ir" then names[#names + 1] = name end end
  table.sort(names)
  local out = {}
  for _, name in ipairs(names) do
    local s = sets[name]
    local ok, cpath, qpath = pcall(beir.paths, s)
    local nd, nq = ok and count_lines(cpath), ok and count_lines(qpath)
    if nd and nq and nd > 0 and nq > 0 then
      local seen, nfn = {}, 0
      for _, f in ipairs(s.similarity_fn_names or { "cosine" }) do
        if not seen[f] then seen[f] = true nfn = nfn + 1 end
      end
      local chunk = math.min(s.corpus_chunk_size or evaluate.IR_CHUNK, nd)
      local rows = math.min(nq, math.max(1, math.floor(evaluate.IR_TILE / chunk)))
      local e = { name = name, documents = nd, queries = nq, chunk = chunk,
                  queries_bytes = 4 * hidden * nq * nfn, chunk_bytes = 4 * hidden * chunk, tile_bytes = 4 * rows * chunk }
      e.bytes = e.queries_bytes + e.chunk_bytes + e.tile_bytes
      out[#out + 1] = e
    end
  end
  return #out > 0 and out or nil
end

-- The plan's lines about them (plan: trainer.plan.estimate's, with .eval).
function M.lines(plan)
  if not plan.eval then return {} end
  local fs = require("trainer.recipe.schema").format_size
  local lines, worst = {}, 0
  for _, e in ipairs(plan.eval) do
    lines[#lines + 1] = ("evaluation eval.sets.%s (ir): %d documents in chunks of %d, %d queries: %s of query "
      .. "embeddings + %s of a chunk's + %s score tile = %s"):format(e.name, e.documents, e.chunk, e.queries,
      fs(e.queries_bytes), fs(e.chunk_bytes), fs(e.tile_bytes), fs(e.bytes))
    worst = math.max(worst, e.bytes)
  end
  local held = plan.total_bytes - plan.by_tag.activations
  lines[#lines + 1] = ("while evaluating: %s (weights, grads, optimizer, workspace) + %s = %s; the training "
    .. "activations are freed by then"):format(fs(held), fs(worst), fs(held + worst))
  return lines
end

return M
