-- `trainer rerank MODEL_DIR QUERIES DOCS`: a cross-encoder (reranker: one logit per pair) scores
-- every document of DOCS (one a line) for each query of QUERIES (one a line); one JSON object
-- a line out per query, the documents best first, as CrossEncoder.rank:
--   {"query": "...", "ranking": [{"corpus_id": 3, "score": 0.93}, ...]}
-- corpus_id counts DOCS' lines from 0; score is the sigmoid of the logit (CrossEncoder.predict).
local usage = "trainer rerank MODEL_DIR QUERIES DOCS [--top-k N] [--adapter DIR] [--batch N] [--max-length N] "
  .. "[--device D]   rank documents for queries"

return {
  usage = usage,
  run = function(args)
    local cl = require("trainer.cli.model_args")
    local errors = require("trainer.core.errors")
    local json = require("trainer.core.json")
    local rerank = require("trainer.train.rerank")
    local runtime = require("trainer.core.runtime")
    local pos, flags = cl.parse(args, { adapter = "value", batch = "value", ["max-length"] = "value",
      device = "value", ["top-k"] = "value" }, usage)
    if #pos ~= 3 then errors.user("rerank needs a model folder, a queries file and a documents file\nusage: %s", usage) end
    require("trainer.models").check_folder(pos[1], { tokenizer = true,
      adapter_example = ("trainer rerank BASE %s %s --adapter ADAPTER"):format(pos[2], pos[3]) })
    local queries, docs = cl.read_lines(pos[2]), cl.read_lines(pos[3])
    if #docs == 0 then errors.user("%s: no documents (one a line)", pos[3]) end
    local top_k = cl.int(flags, "top-k", #docs)
    if not flags.adapter and not require("trainer.models").has_head(pos[1]) then
      errors.user("%s: this folder has no classification head, so it is no cross-encoder (reranker); train one with "
        .. "model.task = \"cross_encoder\" (recipes/reranker_stsb.lua) and rerank with the checkpoint it saves", pos[1])
    end
    local model = require("trainer.models").load_model(pos[1], { task = "classification", device = flags.device,
      max_length = cl.int(flags, "max-length", nil), num_labels = flags.adapter and cl.adapter_num_labels(flags.adapter) })
    if flags.adapter then cl.apply_adapter(model, flags.adapter, "rerank") end
    local tok = require("trainer.core.tokenizer").load(pos[1])
    local opts = { batch_size = cl.int(flags, "batch", 32), device = flags.device }
    for _, q in ipairs(queries) do
      local pairs = {}
      for i, d in ipairs(docs) do pairs[i] = { q, d } end
      local ranked = rerank.rank(rerank.scores(model, tok, pairs, opts))
      runtime.check_device_errors(flags.device)
      local items = {}
      for i = 1, math.min(top_k, #ranked) do
        items[i] = ('{"corpus_id":%d,"score":%.9g}'):format(ranked[i].corpus_id, ranked[i].score)
      end
      io.write('{"query":', json.encode(q), ',"ranking":[', table.concat(items, ","), "]}\n")
    end
    tok:free()
    model:free()
    return 0
  end,
}
