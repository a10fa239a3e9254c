-- What users read when something goes wrong: no trainer function names
-- in user errors ("tensor.full: ..."), invalid UTF-8 found by the UTF-8 checker, and a
-- class label out of range named by the data file and line it came from, not its
-- position in the batch.
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local tmpdir, write = lib.tmpdir, lib.write
local T = require("trainer.core.tensor")
local errors = require("trainer.core.errors")
local memory = require("trainer.core.memory")
local utf8 = require("trainer.core.utf8")

local user_error_of = lib.user_error

return {
  { "no_internal_names_in_device_errors", function()
    -- cuda:7: no GPU here, or fewer than 8 on a GPU machine; either way a user error
    local msg = user_error_of(T.zeros, { 2, 2 }, { device = "cuda:7" })
    assert(not msg:find("tensor.", 1, true), msg)
    assert(msg:find("^cuda:7 "), msg)
  end },
  { "no_internal_names_in_out_of_memory", function()
    memory.set_limit("1MiB")
    local ok, e = pcall(T.ones, { 1024, 1024 }, { tag = "activations" })
    memory.set_limit(nil)
    assert(not ok and errors.is_user_error(e) and e.kind == "oom", tostring(e))
    assert(e.msg:find("^out of memory"), e.msg)
    assert(not e.msg:find("tensor.", 1, true), e.msg)
  end },
  { "no_c_function_names_in_user_errors", function()
    local x = T.zeros({ 2, 2 })
    local msg = user_error_of(x.reshape, x, { 3 })
    x:free()
    assert(msg:find("^shape %[3%] has 3 elements"), msg)
    assert(not msg:find("tr_", 1, true), msg)
  end },
  { "utf8_checker", function()
    assert(utf8.invalid_at("plain ascii") == nil)
    assert(utf8.invalid_at("Hej världen 😀 æøå") == nil)
    assert(utf8.invalid_at("ok \255 bad") == 4)
    assert(utf8.invalid_at("caf\195") == 4)                 -- cut-off sequence
    assert(utf8.invalid_at("\192\175") == 1)                -- overlong "/"
    assert(utf8.invalid_at("\237\160\128") == 1)            -- surrogate U+D800
    assert(utf8.invalid_at("\244\144\128\128") == 1)        -- above U+10FFFF
    assert(utf8.invalid_at("a\226\130\172b") == nil)        -- euro sign
    assert(utf8.where("ok \255", 4) == "byte 4, 0xFF")
  end },
  { "invalid_utf8_data_names_file_and_line", function()
    local d = tmpdir()
    write(d .. "/train.tsv", "sentence1\tsentence2\tscore\na cat\ta dog\t1.5\nthe \255 bird\ta mat\t2\n")
    local msg = user_error_of(require("trainer.train.data").open, d .. "/train.tsv", {})
    assert(msg:find(d .. "/train.tsv: line 3: field 'sentence1' is not valid UTF-8 (byte 5, 0xFF", 1, true), msg)
    os.execute("rm -rf '" .. d .. "'")
  end },
  { "label_out_of_range_names_file_and_line", function()
    local models = require("trainer.models")
    local d = tmpdir()
    models.tiny_folder(d .. "/cls", { seed = 4, task = "classification" })
    local model = models.load_model(d .. "/cls", { on_warning = function() end })
    local tok = require("trainer.core.tokenizer").load(d .. "/cls")
    write(d .. "/nli.tsv", "premise\thypothesis\tlabel\nthe cat\ta dog\t0\nthe mat\ta bird\t1\n"
      .. "a house\tthe cat\t7\nthe dog\ta cat\t2\n")
    local data = require("trainer.train.data")
    local ds = data.open(d .. "/nli.tsv", {})
    local ld = ds:loader { batch_size = 4, seed = 1, shuffle = false }
    local batch = ld:next()
    local loss = require("trainer.losses").new({ name = "cross_entropy" })
    local msg = user_error_of(require("trainer.train.step").micro,
      { model = model, loss = loss, tokenizer = tok, batch = batch })
    assert(msg:find(d .. "/nli.tsv: line 4: cross_entropy loss: label 7 is not a class id 0..", 1, true), msg)
    assert(not msg:find("row %d"), msg)
    -- without a file behind the rows, the message names the row of the batch
    local rows = { { "the cat", "a dog", 0 }, { "a house", "the cat", -3 } }
    msg = user_error_of(require("trainer.train.step").micro, { model = model, loss = loss, tokenizer = tok, batch = rows })
    assert(msg:find("label -3 is not a class id", 1, true) and msg:find("(row 2 of the batch)", 1, true), msg)
    ld:close(); ds:close(); loss:free(); tok:free(); model:free()
    os.execute("rm -rf '" .. d .. "'")
  end },
}
