-- tests/lua/bad_ids_case.lua — the fixture of test_bad_ids.lua (CPU) and of
-- tests/cudacpu/host_syncs.lua (emulated CUDA): a tiny BERT whose embedding has 5 rows trained
-- with the tiny tokenizer, whose ids go past them, so the first step's embedding meets a bad
-- id. run(device, testlib) returns the run's error (the CPU op stops at once; on a device the
-- ids are checked by a kernel and the error read at the first logged step). Not a test: run.lua
-- loads only test_*.lua.
local M = {}

function M.run(device, lib)
  local dir = lib.tmpdir()
  require("trainer.models").tiny_folder(dir .. "/tiny", { seed = 2 })
  local lines = {}
  for i = 1, 8 do lines[i] = ('{"sentence1": "the cat sat %d", "sentence2": "a dog is good"}\n'):format(i) end
  lib.write(dir .. "/train.jsonl", table.concat(lines))
  local path = dir .. "/recipe.lua"
  lib.write(path, ([[
return {
  model = { arch = "bert", config = { model_type = "bert", hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 4,
                       intermediate_size = 64, vocab_size = 5, max_position_embeddings = 64, type_vocab_size = 2 },
            tokenizer = %q },
  data = { train = %q, columns = { "sentence1", "sentence2" } },
  loss = { name = "mnrl" }, batch = { size = 4 }, steps = 2, log = { every = 2, quiet = true },
  device = %q, out = %q,
}
]]):format(dir .. "/tiny", dir .. "/train.jsonl", device, dir .. "/out"))
  local ok, err = pcall(require("trainer.train.loop").train, require("trainer.recipe").load(path), { quiet = true })
  os.execute("rm -rf '" .. dir .. "'")
  assert(not ok, "a run over ids outside the embedding did not fail")
  return err
end

-- Asserts that err is the embedding's user error naming the id, its position and the fix.
function M.check(err)
  local errors = require("trainer.core.errors")
  assert(errors.is_user_error(err), "expected a user error (exit 1), got " .. tostring(errors.message(err)))
  local msg = errors.message(err)
  assert(msg:find("^embedding[%w_]*: id %d+ at position %d+ is outside the vocabulary of 5 rows; check that the "
    .. "tokenizer belongs to the model"), msg)
  return msg
end

return M
