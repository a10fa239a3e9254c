-- trainer.safetensors from Lua: a sharded folder through its index, dtype conversion on
-- read, a save -> load round trip with metadata and the reference writer's order, and
-- errors naming the file.
local T = require("trainer.core.tensor")
local st = require("trainer.core.safetensors")
local errors = require("trainer.core.errors")
local root = require("trainer.native").root()

return {
  { "sharded_folder_and_index", function()
    for _, path in ipairs({ root .. "/tests/data/safetensors/sharded",
                            root .. "/tests/data/safetensors/sharded/model.safetensors.index.json" }) do
      local r = st.load(path)
      assert(table.concat(r:names(), ",") == "layer.0.b,layer.0.w,layer.1.w", table.concat(r:names(), ","))
      assert(r:info("layer.1.w").shard == 1 and r:info("nope") == nil)
      local t = r:tensor("layer.1.w", { dtype = "bf16" })
      assert(t:dtype() == "bf16" and t:tag() == "weights")
      t:free()
      r:close()
      local ok, err = pcall(r.names, r)
      assert(not ok and errors.message(err):find("closed", 1, true))
    end
  end },
  { "save_load_round_trip", function()
    local path = os.tmpname()
    local a = T.from_table({ { 1, 2, 3 }, { 4, 5, 6 } })
    local b = T.from_table({ 7, 8 }, { dtype = "bf16" })
    local c = T.from_table({ 9 }, { dtype = "i64" })
    st.save(path, { a = a, b = b, c = c }, { note = "hello" })
    local r = st.load(path)
    -- the reference writer's order: wider dtypes first, then by name
    assert(table.concat(r:names(), ",") == "c,a,b", table.concat(r:names(), ","))
    assert(r:metadata().format == "pt" and r:metadata().note == "hello")
    local a2, b2, c2 = r:tensor("a"), r:tensor("b", { dtype = "f32" }), r:tensor("c")
    assert(table.concat(a2:values(), ",") == "1,2,3,4,5,6" and table.concat(a2:shape(), "x") == "2x3")
    assert(table.concat(b2:values(), ",") == "7,8" and c2:item() == 9 and c2:dtype() == "i64")
    local ok, err = pcall(r.tensor, r, "missing")
    assert(not ok and errors.message(err):find(path, 1, true), errors.message(err))
    r:close()
    for _, t in ipairs({ a, b, c, a2, b2, c2 }) do t:free() end
    os.remove(path)
  end },
  { "errors_name_the_file", function()
    local path = os.tmpname()
    local f = io.open(path, "wb")
    f:write("\16\0\0\0\0\0\0\0{\"a\":")
    f:close()
    local ok, err = pcall(st.load, path)
    assert(not ok and errors.is_user_error(err) and errors.message(err):find(path, 1, true), tostring(err))
    os.remove(path)
    ok, err = pcall(st.load, path)
    assert(not ok and errors.message(err):find(path, 1, true))
    ok, err = pcall(st.load, root .. "/tests")
    assert(not ok and errors.message(err):find("model.safetensors", 1, true), errors.message(err))
  end },
}
