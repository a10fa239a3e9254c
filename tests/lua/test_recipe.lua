-- Unit tests of recipe loading: merging, overrides, schema checks, defaults, origins.
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local tmpdir, write = lib.tmpdir, lib.write
local recipe = require("trainer.recipe")
local schema = require("trainer.recipe.schema")
local spec = require("trainer.recipe.keys")
local errors = require("trainer.core.errors")



local function expect_user_error(fn, needle)
  local ok, e = pcall(fn)
  assert(not ok, "expected an error")
  assert(errors.is_user_error(e), "expected a user error, got " .. tostring(e))
  assert(e.msg:find(needle, 1, true), ("message %q lacks %q"):format(e.msg, needle))
  return e.msg
end

local minimal = 'model = { arch = "bert", config = "tiny", init = "random" }'

-- The resolved recipe (recipe.resolve) of a recipe file holding text, in a new folder.
local function resolve_text(text)
  local d = tmpdir()
  write(d .. "/r.lua", text)
  return recipe.resolve(d .. "/r.lua")
end

return {
  { "merge_tables_key_by_key_lists_replace", function()
    local m = recipe.merge({ a = { x = 1, y = 2 }, l = { 1, 2, 3 }, s = "p" },
                           { a = { y = 20, z = 30 }, l = { 9 }, s = "c" })
    assert(m.a.x == 1 and m.a.y == 20 and m.a.z == 30)
    assert(#m.l == 1 and m.l[1] == 9)
    assert(m.s == "c")
  end },
  { "merge_does_not_alias_inputs", function()
    local parent = { a = { x = 1 } }
    local m = recipe.merge(parent, { b = 1 })
    m.a.x = 99
    assert(parent.a.x == 1)
  end },
  { "normalize_paths", function()
    assert(recipe.normalize("a/./b/../c.lua") == "a/c.lua")
    assert(recipe.normalize("../x/./y") == "../x/y")
    assert(recipe.normalize("/a/b/../c") == "/a/c")
  end },
  { "defaults_filled", function()
    local d = tmpdir()
    write(d .. "/r.lua", "return { " .. minimal .. " }")
    local r = recipe.load(d .. "/r.lua").recipe
    assert(r.optim.name == "adamw" and r.optim.lr == 2e-5)
    assert(r.batch.size == 16 and r.batch.accumulate == 1)
    assert(r.precision == "fp32" and r.device == "auto" and r.seed == 42)
    assert(r.lora == false and r.checkpoint == false)
    assert(r.name == "r" and r.out == "runs/r")
  end },
  { "extends_chain_and_origins", function()
    local d = tmpdir()
    os.execute("mkdir -p " .. d .. "/base")
    write(d .. "/base/p.lua", "return { optim = { lr = 1e-3, weight_decay = 0.5 }, batch = { size = 4 } }")
    write(d .. "/c.lua", 'return { extends = "base/p.lua", ' .. minimal .. ', optim = { lr = 1e-4 }, batch = { size = "x" } }')
    local r = recipe.resolve(d .. "/c.lua")
    assert(#r.files == 2)
    assert(r.recipe.optim.lr == 1e-4 and r.recipe.optim.weight_decay == 0.5)
    assert(#r.errors == 1, "errors: " .. #r.errors)
    assert(r.errors[1]:find(d .. "/c.lua: batch.size: expected a positive integer", 1, true), r.errors[1])
  end },
  { "error_names_parent_file_for_parent_key", function()
    local d = tmpdir()
    write(d .. "/p.lua", 'return { optim = { lr = -1 } }')
    write(d .. "/c.lua", 'return { extends = "p.lua", ' .. minimal .. ' }')
    local r = recipe.resolve(d .. "/c.lua")
    assert(r.errors[1]:find(d .. "/p.lua: optim.lr", 1, true), r.errors[1])
  end },
  { "overrides_parse_literals", function()
    local d = tmpdir()
    write(d .. "/r.lua", "return { " .. minimal .. " }")
    local r = recipe.load(d .. "/r.lua", { "optim.lr=3e-4", "precision=bf16", "data.shuffle=false",
      'lora={targets={"query"}, r=4}', "name=\"a b\"" }).recipe
    assert(r.optim.lr == 3e-4)
    assert(r.precision == "bf16")
    assert(r.data.shuffle == false)
    assert(r.lora.r == 4 and r.lora.targets[1] == "query" and r.lora.alpha == 16)
    assert(r.name == "a b")
  end },
  { "override_nil_deletes", function()
    local d = tmpdir()
    write(d .. "/r.lua", "return { " .. minimal .. ", resume = \"latest\" }")
    local r = recipe.load(d .. "/r.lua", { "resume=nil" }).recipe
    assert(r.resume == nil)
  end },
  { "override_unknown_suggests", function()
    local d = tmpdir()
    write(d .. "/r.lua", "return { " .. minimal .. " }")
    expect_user_error(function() recipe.load(d .. "/r.lua", { "bach.size=3" }) end,
      "unknown key 'bach.size' (did you mean 'batch'?)")
  end },
  { "all_errors_in_one_pass", function()
    local r = resolve_text("return { " .. minimal .. ", optim = { lr = 0 }, epochs = -1, seed = 1.5 }")
    assert(#r.errors == 3, table.concat(r.errors, "\n"))
  end },
  { "model_needs_from_or_arch", function()
    local r = resolve_text("return { model = {} }")
    assert(r.errors[1]:find("give model.from", 1, true), r.errors[1])
  end },
  { "model_is_required", function()
    local r = resolve_text("return {}")
    assert(r.errors[1]:find("model: is required", 1, true), r.errors[1])
  end },
  { "require_next_to_recipe", function()
    local d = tmpdir()
    write(d .. "/shared_bits.lua", "return { lr = 7e-5 }")
    write(d .. "/r.lua", 'local b = require("shared_bits")\nreturn { ' .. minimal .. ', optim = { lr = b.lr } }')
    assert(recipe.load(d .. "/r.lua").recipe.optim.lr == 7e-5)
  end },
  { "require_missing_names_paths", function()
    local d = tmpdir()
    write(d .. "/r.lua", 'local b = require("nowhere_module")\nreturn {}')
    local msg = expect_user_error(function() recipe.load(d .. "/r.lua") end,
      "require(\"nowhere_module\"): no such file nowhere_module.lua or nowhere_module/init.lua in the folders searched")
    assert(msg:find("  " .. d .. " (the recipe's folder)", 1, true), msg)
  end },
  { "hooks_type_checked", function()
    local r = resolve_text("return { " .. minimal .. ", hooks = { on_step = function() end, on_stpe = 1 }, loop = 3 }")
    local all = table.concat(r.errors, "\n")
    assert(all:find("unknown key 'on_stpe' (did you mean 'on_step'?)", 1, true), all)
    assert(all:find("loop: expected a function, got 3", 1, true), all)
  end },
  { "sizes_parse", function()
    assert(schema.parse_size("8GiB") == 8 * 2 ^ 30)
    assert(schema.parse_size("512 MiB") == 512 * 2 ^ 20)
    assert(schema.parse_size("1.5GB") == 1.5e9)
    assert(schema.parse_size(4096) == 4096)
    assert(schema.parse_size("lots") == nil)
    local r = resolve_text("return { " .. minimal .. ", memory = { limit = \"eight\" } }")
    assert(r.errors[1]:find("memory.limit: expected a size", 1, true), r.errors[1])
  end },
  { "schema_lookup", function()
    assert(schema.lookup(spec, "optim.lr").kind == "number")
    assert(schema.lookup(spec, "lora.targets").kind == "list")
    assert(schema.lookup(spec, "checkpoint.segments").kind == "number")
    assert(schema.lookup(spec, "model.config.hidden_size") ~= nil)   -- open map
    assert(schema.lookup(spec, "optim.nope") == nil)
  end },
  { "device_pattern_checked", function()
    -- "gpu" and "cuda:x" fail `trainer check`, not only the run
    local d = tmpdir()
    write(d .. "/r.lua", "return { " .. minimal .. " }")
    for _, good in ipairs({ "auto", "cpu", "cuda", "cuda:0", "cuda:12" }) do
      local r = recipe.resolve(d .. "/r.lua", { "device=" .. good })
      assert(#r.errors == 0, good .. ": " .. table.concat(r.errors, "\n"))
    end
    local want = {
      gpu = "(a GPU is \"cuda\")", ["gpu:1"] = "\"cuda:1\"", ["cuda:x"] = "N is the GPU's number",
      ["cuda:"] = "N is the GPU's number", ["cuda:0x"] = "N is the GPU's number", CPU = "(did you mean 'cpu'?)",
      ["cuda0"] = "expected \"auto\", \"cpu\", \"cuda\" or \"cuda:N\", got \"cuda0\"",
    }
    for bad, needle in pairs(want) do
      local r = recipe.resolve(d .. "/r.lua", { "device=" .. bad })
      assert(#r.errors == 1 and r.errors[1]:find("device: expected", 1, true) and r.errors[1]:find(needle, 1, true),
        bad .. ": " .. table.concat(r.errors, "\n"))
    end
  end },
  { "nested_typo_suggests_sibling", function()
    local d = tmpdir()
    write(d .. "/r.lua", "return { " .. minimal .. ", optim = { lrate = 1e-4 }, schedule = { warmup = 0.1 } }")
    local all = table.concat(recipe.resolve(d .. "/r.lua").errors, "\n")
    assert(all:find("optim: unknown key 'lrate' (did you mean 'lr'?)", 1, true), all)
    assert(all:find("schedule: unknown key 'warmup' (did you mean 'warmup_ratio'?)", 1, true), all)
    expect_user_error(function() recipe.load(d .. "/r.lua", { "optim.lrate=3" }) end,
      "unknown key 'optim.lrate' (did you mean 'optim.lr'?)")
  end },
  { "key_at_wrong_level_suggests_its_place", function()
    local d = tmpdir()
    write(d .. "/r.lua", 'return { model = { arch = "bert", config = "tiny", init = "random", lora = { r = 4 } }, '
      .. "lr = 1e-3, segments = 2, optim = { size = 8 } }")
    local all = table.concat(recipe.resolve(d .. "/r.lua").errors, "\n")
    assert(all:find("unknown key 'lr' (did you mean 'optim.lr'?)", 1, true), all)
    assert(all:find("model: unknown key 'lora' (did you mean the top-level key 'lora'?)", 1, true), all)
    assert(all:find("unknown key 'segments' (did you mean 'checkpoint.segments'?)", 1, true), all)
    assert(all:find("optim: unknown key 'size' (did you mean 'batch.size'?)", 1, true), all)
    write(d .. "/ok.lua", "return { " .. minimal .. " }")
    expect_user_error(function() recipe.load(d .. "/ok.lua", { "lr=1e-3" }) end,
      "unknown key 'lr' (did you mean 'optim.lr'?)")
    expect_user_error(function() recipe.load(d .. "/ok.lua", { "model.lora=false" }) end,
      "unknown key 'model.lora' (did you mean the top-level key 'lora'?)")
  end },
  { "hugging_face_names_suggest_ours", function()
    local r = resolve_text("return { " .. minimal .. ", learning_rate = 1e-4, num_train_epochs = 2, "
      .. "optim = { learning_rate = 1e-4 }, lora = { targets = { \"query\" }, lora_alpha = 16 } }")
    local all = table.concat(r.errors, "\n")
    assert(all:find("unknown key 'learning_rate' (did you mean 'optim.lr'?)", 1, true), all)
    assert(all:find("optim: unknown key 'learning_rate' (did you mean 'lr'?)", 1, true), all)
    assert(all:find("unknown key 'num_train_epochs' (did you mean 'epochs'?)", 1, true), all)
    assert(all:find("lora: unknown key 'lora_alpha' (did you mean 'alpha'?)", 1, true), all)
  end },
  { "every_key_documented", function()
    for _, row in ipairs(schema.reference(spec)) do
      assert(row.doc ~= "", "no doc for " .. row.path)
    end
  end },
  -- a module handed part of a recipe by a script (losses.new, lora.apply, amp, step) gets the
  -- schema's defaults and the schema's messages: the keys are written in one place
  { "parts_resolve_through_the_schema", function()
    local l = spec.resolve("loss", { name = "cosent" })
    assert(l.scale == 20 and l.mini_batch == 32 and l.symmetric == false, "loss defaults")
    assert(spec.resolve("loss", {}).name == "mnrl")
    local lr = require("trainer.train.lora").normalize({ targets = "query" })
    assert(lr.r == 8 and lr.alpha == 16 and lr.dropout == 0 and lr.bias == "none" and lr.targets[1] == "query")
    assert(spec.value("precision", nil) == "fp32" and spec.value("loss.mini_batch", nil) == 32)
    expect_user_error(function() spec.resolve("lora", { r = 0, targets = { "query" } }) end,
      "lora.r: expected a positive integer, got 0")
    expect_user_error(function() spec.resolve("loss", { scael = 20 }) end, "unknown key 'scael' (did you mean 'scale'?)")
    expect_user_error(function() spec.value("precision", "fp8", "amp.prepare") end, 'amp.prepare: precision: expected one of')
    local msg = expect_user_error(function() spec.resolve("loss", { name = "softmax", scale = -1 }) end, "loss has 2 problems")
    assert(msg:find("num_labels: is required", 1, true) and msg:find("loss.scale:", 1, true), msg)
    -- a resolved part is a copy: the caller's table is unchanged
    local mine = { name = "mnrl" }
    spec.resolve("loss", mine)
    assert(mine.scale == nil)
  end },
}
