-- Run outputs (trainer.outputs, trainer.train.resume, trainer.train.user_code), without a full run:
-- a metrics.jsonl append that fails half-way is cut back to its last whole line and
-- raises a user error naming the file and the free space (and says so when the cut-back
-- fails too); write_atomic to a folder that
-- cannot take it leaves nothing; the "-- command:" line of resolved_recipe.lua reads back;
-- resume command lines survive the shell; recipe differences name the key; an error in
-- recipe code is a user error naming file:line, one in trainer's code is not.
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local tmpdir, read = lib.tmpdir, lib.read
local outputs = require("trainer.train.outputs")
local fs = require("trainer.core.fs")
local resume = require("trainer.train.resume")
local user_code = require("trainer.train.user_code")
local errors = require("trainer.core.errors")
local user_error_of = lib.user_error

return {
  { "metrics_failed_append_is_cut_back", function()
    local dir = tmpdir()
    local m = outputs.open_metrics(dir)
    m:write({ step = 1, loss = 1.5 })
    m:write({ step = 2, loss = 1.25 })
    local whole = read(dir .. "/metrics.jsonl")
    -- a file that takes half the line, then fails as a full disk does
    local real = m.append
    m.append = function(path, s) real(path, s:sub(1, 7)) return nil, "No space left on device" end
    local msg = user_error_of(function() m:write({ step = 3, loss = 1.0 }) end)
    assert(msg:find(dir .. "/metrics.jsonl: cannot write (No space left on device)", 1, true), msg)
    assert(msg:find("free on the file system of " .. dir, 1, true), msg)
    assert(read(dir .. "/metrics.jsonl") == whole, "the half line was not cut off: " .. read(dir .. "/metrics.jsonl"))
    os.execute("rm -rf '" .. dir .. "'")
  end },

  -- when even the cut-back fails (here: the file is gone), the message says the last line
  -- may be cut off instead of promising that nothing half-written was left
  { "metrics_failed_cut_back_is_reported", function()
    local dir = tmpdir()
    local m = outputs.open_metrics(dir)
    m:write({ step = 1, loss = 1.5 })
    os.remove(dir .. "/metrics.jsonl")
    local msg = user_error_of(function() m:write({ step = 2, loss = 1.25 }) end)
    assert(msg:find(dir .. "/metrics.jsonl: cannot write (No such file or directory)", 1, true), msg)
    assert(msg:find("Cutting it back to its last whole line failed too (truncate: No such file", 1, true), msg)
    assert(not msg:find("Nothing half-written", 1, true), msg)
    os.execute("rm -rf '" .. dir .. "'")
  end },

  -- the size metrics.jsonl is cut back to is the file's own, not a running sum
  { "metrics_size_follows_the_file", function()
    local dir = tmpdir()
    local m = outputs.open_metrics(dir)
    for i = 1, 300 do m:write({ step = i, loss = 1.5 }) end
    assert(m.size == #read(dir .. "/metrics.jsonl"), m.size)
    m:close()
    local ok, e = pcall(m.write, m, { step = 301 })
    assert(not ok and tostring(e):find("written after it was closed", 1, true), tostring(e))
    os.execute("rm -rf '" .. dir .. "'")
  end },

  { "write_atomic_failure_leaves_nothing", function()
    local dir = tmpdir()
    outputs.write_atomic(dir .. "/a.json", "{}\n")
    assert(read(dir .. "/a.json") == "{}\n")
    assert(not fs.exists(dir .. "/a.json.tmp"))
    local msg = user_error_of(function() outputs.write_atomic(dir .. "/no/such/b.json", "x") end)
    assert(msg:find(dir .. "/no/such/b.json: cannot write", 1, true), msg)
    assert(not fs.exists(dir .. "/no/such/b.json"))
    os.execute("rm -rf '" .. dir .. "'")
  end },

  { "recipe_text_records_the_command", function()
    local cmd = { "recipes/minilm_sts_lora.lua", "steps=30", "out=runs/try30", 'lora.targets={"query","key"}' }
    local text = outputs.recipe_text({ steps = 30, out = "runs/try30" }, cmd[1], cmd)
    local back = resume.read_command(text)
    assert(back and #back == 4, text)
    for i = 1, 4 do assert(back[i] == cmd[i], back[i]) end
    assert(resume.shell_line(cmd) == [[trainer recipes/minilm_sts_lora.lua steps=30 out=runs/try30 ]]
      .. [['lora.targets={"query","key"}']], resume.shell_line(cmd))
    assert(resume.shell_word("it's") == [['it'\''s']])
  end },

  { "long_form_replaces_resume", function()
    local line = resume.long_form({ path = "r.lua", overrides = { "resume=latest", "steps=3" } }, "runs/r/checkpoint-2")
    assert(line == "trainer r.lua steps=3 resume=runs/r/checkpoint-2", line)
  end },

  { "differences_name_the_key", function()
    local a = { steps = 30, optim = { lr = 1e-3, name = "adamw" }, log = { every = 1 }, targets = { "q" } }
    local b = { steps = 120, optim = { lr = 1e-3, name = "adamw" }, log = { every = 9 }, targets = { "q", "v" } }
    local d = resume.differences(resume.identity(a), resume.identity(b))
    assert(#d == 2, table.concat(d, "; "))
    assert(d[1] == "steps: 30 -> 120", d[1])
    assert(d[2] == 'targets: { "q" } -> { "q", "v" }', d[2])
  end },

  { "recipe_code_error_is_the_recipes", function()
    local fn = assert(loadstring("return function(t)\n  local x = nil\n  return x.y + 1\nend", "@/tmp/some_recipe.lua"))()
    local msg = user_error_of(function() user_code.call("hooks.on_step", fn, {}) end)
    assert(msg:find("/tmp/some_recipe.lua:3: attempt to index local 'x'", 1, true), msg)
    assert(msg:find("hooks.on_step", 1, true), msg)
    -- results pass through
    assert(select(2, user_code.call("loop", function() return 1, 2 end)) == 2)
    -- a user error from trainer's API passes through unchanged
    local m2 = user_error_of(function() user_code.call("loop", function() errors.user("bad key x") end) end)
    assert(m2 == "bad key x", m2)
  end },

  { "trainer_code_error_stays_internal", function()
    local ok, e = pcall(user_code.call, "loop", function() return outputs.read(nil) end)
    assert(not ok)
    assert(not errors.is_user_error(e), "an error inside trainer's own code must stay internal: " .. tostring(e))
  end },
}
