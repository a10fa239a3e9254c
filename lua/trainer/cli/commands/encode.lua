-- `trainer encode MODEL_DIR FILE [--adapter DIR]`: one sentence a line in, its embedding out as one JSON
-- array of floats a line (the folder's pooling and normalisation, as sentence-transformers).
-- --adapter applies a PEFT LoRA adapter (ours or peft's) to MODEL_DIR without merging it.
-- --prompt NAME puts the folder's prompt NAME (config_sentence_transformers.json) before every
-- line, as sentence-transformers' encode(prompt_name=NAME); without it the folder's
-- default_prompt_name applies, if any; --prompt-text TEXT puts TEXT itself (encode(prompt=TEXT)).
local usage = "trainer encode MODEL_DIR FILE [--adapter DIR] [--batch N] [--max-length N] [--device D] "
  .. "[--prompt NAME | --prompt-text TEXT]   sentence embeddings, JSON a line"

return {
  usage = usage,
  run = function(args)
    local cl = require("trainer.cli.model_args")
    local tk = require("trainer.core.tokenizer")
    local runtime = require("trainer.core.runtime")
    local flags, lines, model, tok, bs = cl.load_for("encode", "embedding", args, usage,
      { prompt = "value", ["prompt-text"] = "value" })
    local prompts = require("trainer.models.prompts")
    if flags.prompt and flags["prompt-text"] then
      require("trainer.core.errors").user("give --prompt NAME or --prompt-text TEXT, not both\nusage: %s", usage)
    end
    local prompt = prompts.resolve(model, flags.prompt, flags["prompt-text"])
    local prompt_length = prompts.pool_length(model, tok, prompt)
    -- Like sentence-transformers: within a window, encode texts sorted by length so a batch
    -- pads little (by tokens here, see tokenizer:by_length), then write the embeddings back
    -- in input order.
    local window = math.max(bs, 2048)
    for wfirst = 1, #lines, window do
      local wlast = math.min(wfirst + window - 1, #lines)
      local wtexts = {}
      for i = wfirst, wlast do wtexts[#wtexts + 1] = prompt and (prompt .. lines[i]) or lines[i] end
      local sorted = tok:by_length(wtexts, { max_length = model.max_length, device = flags.device,
        prompt_length = prompt_length })
      local out = {}
      for first = 1, sorted.n, bs do
        local last = math.min(first + bs - 1, sorted.n)
        local b = sorted:batch(first, last)
        local ok, e = pcall(model.forward, model, b)
        tk.free_batch(b)
        if not ok then sorted:free() error(e, 0) end
        local C = e:shape()[2]
        local v = e:values()
        e:free()
        -- on a device the ids are checked by a kernel: its verdict is read here, where the
        -- host waits for the embeddings anyway, before any of them is written
        runtime.check_device_errors(flags.device)
        for r = 0, last - first do
          local row = {}
          for c = 1, C do row[c] = v[r * C + c] end
          out[sorted.order[first + r]] = cl.float_array(row)
        end
      end
      sorted:free()
      for i = 1, #wtexts do io.write(out[i], "\n") end
    end
    tok:free()
    model:free()
    return 0
  end,
}
