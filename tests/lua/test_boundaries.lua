-- One place for each piece of knowledge, and the FFI boundary:
--   * trainer.core.sys's folder helpers (mkdir_p, list_dir, copy_tree, remove_tree) handle a
--     name with a space and a single quote, and report failures as nil, "PATH: reason"
--     (its file calls too, with the reason alone third); a held lock answers "locked";
--   * no module of lua/trainer but trainer.core.ffi declares C (ffi.cdef) or shells out
--     (os.execute, io.popen), and none reads the never-set param.half;
--   * the RNG site ids of trainer.core.rng_sites are the numbers resumed runs were drawn with;
--   * the planner segments as training does (trainer.train.grad_checkpoint.segments) and counts the
--     Linear layers the model builds; tensor.random is the old uniform init, bit for bit.
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local tmpdir, write, read = lib.tmpdir, lib.write, lib.read
local native = require("trainer.native")
local sys = require("trainer.core.sys")
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local T = require("trainer.core.tensor")




local function same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- Every .lua file under dir (recursively), through sys.list_dir.
local function lua_files(dir, out)
  out = out or {}
  for _, name in ipairs(assert(sys.list_dir(dir))) do
    local p = dir .. "/" .. name
    if sys.is_dir(p) then lua_files(p, out)
    elseif name:match("%.lua$") then out[#out + 1] = p end
  end
  return out
end

return {
  { "folders_with_a_quote_and_a_space", function()
    local base = tmpdir()
    local d = base .. "/it's a dir/sub 'two'"
    assert(sys.mkdir_p(d))
    assert(sys.mkdir_p(d), "mkdir_p of an existing folder is success")
    assert(sys.is_dir(d))
    write(d .. "/b file", "B")
    write(d .. "/a'file", "A")
    assert(sys.mkdir_p(d .. "/inner dir"))
    write(d .. "/inner dir/x", "X")
    assert(same_list(assert(sys.list_dir(d)), { "a'file", "b file", "inner dir" }))
    -- copy_tree copies files and folders, following a symbolic link to its content
    -- (a Hugging Face cache snapshot links its files to ../../blobs: copies must be real files)
    write(base .. "/blob", "L")
    local copy = base .. "/copy of 'it'"
    assert(sys.copy_tree(d, copy))
    assert(read(copy .. "/a'file") == "A" and read(copy .. "/b file") == "B" and read(copy .. "/inner dir/x") == "X")
    assert(same_list(assert(sys.list_dir(copy)), { "a'file", "b file", "inner dir" }))
    local linked = base .. "/linked"
    assert(sys.mkdir_p(linked))
    local rc = os.execute("ln -s ../blob " .. linked .. "/to_blob")
    assert(rc == 0 or rc == true, "made a symbolic link")
    assert(sys.copy_tree(linked, base .. "/linked copy"))
    assert(read(base .. "/linked copy/to_blob") == "L")
    assert(sys.remove_tree(linked))
    assert(read(base .. "/blob") == "L", "remove_tree removes a link, not its target")
    assert(sys.remove_tree(base .. "/it's a dir"))
    assert(not sys.is_dir(base .. "/it's a dir"))
    assert(sys.remove_tree(base .. "/it's a dir"), "removing a missing path is success")
    assert(sys.is_dir(copy), "remove_tree removed only its own tree")
    assert(sys.remove_tree(base))
    assert(not sys.is_dir(base))
  end },

  { "folder_helpers_return_nil_and_a_message", function()
    local base = tmpdir()
    write(base .. "/plain", "x")
    local ok, err = sys.mkdir_p(base .. "/plain/below")
    assert(ok == nil and err:find(base .. "/plain", 1, true) and err:find("Not a directory"), tostring(err))
    local list, lerr = sys.list_dir(base .. "/missing")
    assert(list == nil and lerr:find(base .. "/missing", 1, true) and lerr:find("No such file"), tostring(lerr))
    local cok, cerr = sys.copy_tree(base .. "/plain", base .. "/to")
    assert(cok == nil and cerr:find("Not a directory"), tostring(cerr))
    -- a file call's failure: the message names the file, the third value is the reason alone
    local wok, werr, why = sys.write_file(base .. "/missing/f", "x")
    assert(wok == nil and werr == base .. "/missing/f: " .. why and why:find("No such file"), tostring(werr))
    -- a held lock answers "locked" and the holder's text, until it is released
    local fd = assert(sys.lock_file(base .. "/.lock", "pid 1\n"))
    local none, locked, holder = sys.lock_file(base .. "/.lock", "pid 2\n")
    assert(none == nil and locked == "locked" and holder == "pid 1\n", tostring(locked))
    assert(sys.unlock_file(fd))
    assert(not pcall(sys.remove_tree, "/"), "remove_tree refuses /")
    assert(not pcall(sys.remove_tree, ""), "remove_tree refuses an empty path")
    assert(sys.remove_tree(base))
  end },

  { "one_ffi_boundary_no_shell_no_half_reads", function()
    local root = native.root() .. "/lua/trainer"
    local files = lua_files(root)
    assert(#files > 40, "found the Lua tree")
    local bad = {}
    for _, path in ipairs(files) do
      local text = read(path)
      local rel = path:sub(#root + 2)
      if rel ~= "core/ffi.lua" and text:find("ffi.cdef", 1, true) then bad[#bad + 1] = rel .. ": ffi.cdef" end
      if text:find("os.execute(", 1, true) then bad[#bad + 1] = rel .. ": os.execute" end
      if text:find("io.popen(", 1, true) then bad[#bad + 1] = rel .. ": io.popen" end
      if text:find("%.half[^%w_]") then bad[#bad + 1] = rel .. ": .half" end
      if text:find("not part of this build", 1, true) then bad[#bad + 1] = rel .. ": not part of this build" end
    end
    assert(#bad == 0, table.concat(bad, "; "))
    -- the system block of trainer.core.ffi declares what outputs, trainer_state and run call
    assert(C.gzopen ~= nil and C.gzread ~= nil and C.gzwrite ~= nil and C.gzclose ~= nil)
    local run = require("trainer.train.run")
    local t0 = run.now()
    local t1 = run.now()
    assert(t0 > 0 and t1 >= t0, "the monotonic clock runs forward")
  end },

  { "rng_site_ids_unchanged", function()
    local s = require("trainer.core.rng_sites")
    assert(s.dropout.embeddings == 0 and s.dropout.attention_probs == 1 and s.dropout.attention_output == 2)
    assert(s.dropout.feedforward_output == 3 and s.dropout.head == 4 and s.dropout.lora == 7)
    assert(s.head_layer(6) == 7 and s.lora_layer(3) == 10003 and s.lora_layer(nil) == 10000)
    assert(s.bert_param(5) == 1005 and s.lora_A(2) == 5004 and s.lora_A(nil) == 5000)
    assert(s.softmax_weight == 0x50f7 and s.softmax_bias == 0x50f8)
    assert(s.shuffle.rows == 1 and s.shuffle.batches == 2 and s.shuffle.nli == 3)
  end },

  { "random_uniform_is_the_old_init_bit_for_bit", function()
    local n, bound = 37, 1 / math.sqrt(13)
    local buf = ffi.new("float[?]", n)
    local key = ffi.new("tr_rng_key")
    key.seed, key.op = 5, 5002
    C.tr_rng_uniform(buf, n, key, 0)
    for i = 0, n - 1 do buf[i] = (2 * buf[i] - 1) * bound end
    local t = T.random({ n }, { dist = "uniform", bound = bound, seed = 5, stream = 5002, tag = "weights" })
    local v = t:values()
    for i = 1, n do assert(v[i] == tonumber(buf[i - 1]), ("value %d differs"):format(i)) end
    assert(t:tag() == "weights")
    t:free()
    -- randn keeps its own stream counter semantics: an explicit stream draws the same values
    local a, b = T.randn({ 5 }, { seed = 3, stream = 9 }), T.random({ 5 }, { seed = 3, stream = 9 })
    assert(same_list(a:values(), b:values()))
    a:free(); b:free()
  end },

  { "planner_follows_the_model_and_the_training_segments", function()
    local plan = require("trainer.plan")
    local checkpoint = require("trainer.train.grad_checkpoint")
    local BertLayer = require("trainer.models.bert.layer")
    local shape = { hidden_size = 32, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 64,
                    vocab_size = 100, max_position_embeddings = 64 }
    local function est(ck)
      return plan.estimate({
        model = { arch = "bert", config = shape, task = "classification", num_labels = 2, max_length = 16 },
        batch = { size = 4, accumulate = 1 }, precision = "fp32", checkpoint = ck, lora = false,
        optim = { name = "adamw" }, loss = { name = "cross_entropy" }, device = "cpu",
      }).by_tag.activations
    end
    -- { every = 3 } over 4 layers trains as segments of 3 and 1: 3 layers kept at once, more
    -- than the 2 of { segments = 2 } (the planner's own rule used to say 2 for both)
    assert(same_list(checkpoint.segments(4, { every = 3 }), { 3, 1 }))
    assert(est({ every = 3 }) > est({ segments = 2 }), "every = 3 keeps three layers")
    assert(est({ segments = 2 }) == est({ every = 2 }))
    -- "auto" is the least of the even segmentations for the shape (trainer.train.grad_checkpoint)
    for n = 1, 4 do assert(est("auto") <= est({ segments = n }), "auto above segments = " .. n) end
    -- the planner's Linear list is the one a built layer has
    local cfg = require("trainer.models.bert").config(shape, "test")
    local layer = BertLayer.new(cfg, { seed = 0, step = 0 }, 1)
    local built = {}
    for name, m in layer:named_modules() do
      if m.__name == "Linear" then built[#built + 1] = ("%s %d %d"):format(name, m.in_features, m.out_features) end
    end
    local listed = {}
    for _, l in ipairs(BertLayer.linears(cfg)) do listed[#listed + 1] = ("%s %d %d"):format(l[1], l[2], l[3]) end
    assert(#built == 6 and same_list(built, listed), table.concat(built, ", ") .. " vs " .. table.concat(listed, ", "))
    layer:free()
  end },
  { "every_trainer_module_the_tree_requires_is_a_file_or_built_in", function()
    local root = native.root() .. "/lua/trainer"
    local bad = {}
    for _, path in ipairs(lua_files(root)) do
      local rel = path:sub(#root + 2)
      for name in read(path):gmatch('require%(%s*"(trainer[%w_.]*)"%s*%)') do
        if not package.preload[name] and not package.loaded[name] and not package.searchpath(name, package.path) then
          bad[#bad + 1] = rel .. ": " .. name
        end
      end
    end
    assert(#bad == 0, "required modules with no file: " .. table.concat(bad, ", "))
    assert(not pcall(require, "trainer.tensor"), "trainer.tensor is not a module name (trainer.core.tensor is)")
  end },
}
