-- `trainer tokenize MODEL_DIR FILE`: one JSON array of token ids per input line, special
-- tokens included, no padding; truncated (longest first) only with --max-length.
local usage = "trainer tokenize MODEL_DIR FILE [--max-length N]   token ids, one JSON array a line"

return {
  usage = usage,
  run = function(args)
    local cl = require("trainer.cli.model_args")
    local errors = require("trainer.core.errors")
    local pos, flags = cl.parse(args, { ["max-length"] = "value" }, usage)
    if #pos ~= 2 then errors.user("tokenize needs a model folder and an input file\nusage: %s", usage) end
    local tok = require("trainer.core.tokenizer").load(pos[1])
    local lines = cl.read_lines(pos[2])
    local max = cl.int(flags, "max-length", nil)
    for _, line in ipairs(lines) do
      io.write(cl.int_array((tok:encode(line, nil, { max_length = max }))), "\n")
    end
    tok:free()
    return 0
  end,
}
