-- The Lua binding made from the op table (trainer.core.op_binding): every op with an infer
-- step has its function, outputs take the inferred shapes and dtypes (opts.dtype only where
-- the caller may choose), a NULL input is the dispatcher's user error, and the worked example
-- of docs/ARCHITECTURE.md ("Adding an op") is verbatim code of the files it names.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local native = require("trainer.native")

local function free(...) for _, t in ipairs({ ... }) do t:free() end end

local function read(path)
  local f = assert(io.open(native.root() .. "/" .. path, "r"), "cannot read " .. path)
  local s = f:read("*a")
  f:close()
  return s
end

-- The fenced code blocks of the section `title` of a markdown text, each with the last
-- backticked file path written before it ("In `core/ops/op_list.h`:").
local function snippets(md, title)
  local section = md:match("\n## " .. title .. "\n(.-)\n## ")
  assert(section, "docs/ARCHITECTURE.md has no section " .. title)
  local out, path = {}, nil
  local pos = 1
  while true do
    local s, e, code = section:find("```c\n(.-)\n```", pos)
    if not s then break end
    for p in section:sub(pos, s - 1):gmatch("`([%w_/%.]+%.[ch])`") do path = p end
    out[#out + 1] = { path = path, code = code }
    pos = e + 1
  end
  return out
end

return {
  { "every_op_with_an_infer_step_is_bound", function()
    local n = 0
    for i = 0, C.tr_op_count() - 1 do
      if C.tr_op_has_infer(i) == 1 then
        local name = ffi.string(C.tr_op_name(i))
        assert(type(ops[name]) == "function", "trainer.ops." .. name .. " is missing")
        n = n + 1
      end
    end
    assert(n >= 20, "only " .. n .. " ops have an infer step")
  end },

  { "outputs_follow_the_infer_step", function()
    local x = T.from_table({ { 1, 2, 3 }, { 4, 5, 6 } })
    local w, b = T.ones({ 3 }), T.zeros({ 3 })
    local out, mean, rstd = ops.layernorm(x, w, b, nil, { dtype = "bf16", tag = "workspace" })
    assert(out:dtype() == "bf16" and mean:dtype() == "f32" and rstd:dtype() == "f32", out:dtype())
    assert(out:tag() == "workspace" and mean:numel() == 2 and #out:shape() == 2 and out:shape()[2] == 3)
    local sim = ops.cosine_sim(x, x, { dtype = "bf16" })   -- sim is f32 whatever the caller asks
    assert(sim:dtype() == "f32" and sim:shape()[1] == 2 and sim:shape()[2] == 2)
    local ids = T.from_table({ 0, 1, 1 }, { dtype = "i64" })
    local e = ops.embedding(ids, x)
    assert(e:shape()[1] == 3 and e:shape()[2] == 3 and e:tolist()[3][1] == 4)
    free(x, w, b, out, mean, rstd, sim, ids, e)
  end },

  { "a_null_input_is_a_user_error_naming_the_op", function()
    local ok, err = pcall(ops.tanh, nil)
    assert(not ok and tostring(err):find("tanh: x is NULL", 1, true), tostring(err))
  end },

  { "adding_an_op_example_is_the_code", function()
    local list = snippets(read("docs/ARCHITECTURE.md"), "Adding an op")
    assert(#list >= 6, "the worked example has " .. #list .. " code blocks")
    for _, s in ipairs(list) do
      assert(s.path, "a code block of the worked example names no file before it")
      assert(read(s.path):find(s.code, 1, true), ("the worked example's block is not in %s:\n%s"):format(s.path, s.code))
    end
  end },
}
