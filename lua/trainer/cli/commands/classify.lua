-- `trainer classify MODEL_DIR FILE [--adapter DIR]`: one text, or a tab-separated pair, a line in; one
-- JSON object a line out: {"label": best, "probabilities": {label: p, ...}}; a one-label model (a
-- cross-encoder / reranker) gives {"score": sigmoid(logit)}, as CrossEncoder.predict.
-- --adapter applies a PEFT LoRA adapter (ours or peft's) to MODEL_DIR without merging it.
local usage = "trainer classify MODEL_DIR FILE [--adapter DIR] [--batch N] [--max-length N] [--device D]   labels of texts or TAB pairs"

return {
  usage = usage,
  run = function(args)
    local cl = require("trainer.cli.model_args")
    local json = require("trainer.core.json")
    local ops = require("trainer.core.ops")
    local tk = require("trainer.core.tokenizer")
    local runtime = require("trainer.core.runtime")
    local flags, lines, model, tok, bs = cl.load_for("classify", "classification", args, usage)
    for first = 1, #lines, bs do
      local chunk = {}
      for i = first, math.min(first + bs - 1, #lines) do
        local a, b = lines[i]:match("^([^\t]*)\t(.*)$")
        chunk[#chunk + 1] = a and { a, b } or { lines[i] }
      end
      local batch = tok:batch(chunk, { max_length = model.max_length, device = flags.device })
      local logits = model:forward(batch)
      tk.free_batch(batch)
      local K = logits:shape()[2]
      if K == 1 then
        -- one label (a cross-encoder / reranker): the sigmoid of the logit, as
        -- sentence-transformers' CrossEncoder.predict gives (a softmax over one logit is 1)
        local v = logits:values()
        logits:free()
        runtime.check_device_errors(flags.device)
        for r = 1, #chunk do io.write(('{"score":%.9g}\n'):format(require("trainer.losses.bce").sigmoid(v[r]))) end
      else
        local probs = ops.softmax(logits)
        logits:free()
        local v = probs:values()
        probs:free()
        -- on a device the ids are checked by a kernel: its verdict is read here, where the host
        -- waits for the probabilities anyway, before this batch's lines are written
        runtime.check_device_errors(flags.device)
        for r = 0, #chunk - 1 do
          local best, p = 0, {}
          for k = 0, K - 1 do
            p[model.labels[k]] = v[r * K + k + 1]
            if v[r * K + k + 1] > v[r * K + best + 1] then best = k end
          end
          io.write(json.encode({ label = model.labels[best], probabilities = p }), "\n")
        end
      end
    end
    tok:free()
    model:free()
    return 0
  end,
}
