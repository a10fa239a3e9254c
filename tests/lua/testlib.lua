-- tests/lua/testlib.lua — what the Lua test files share (not a test: run.lua loads only
-- test_*.lua): a fresh temporary folder, whole-file write and read, a seeded sentence
-- source and the tiny training fixture (a random BERT folder and a JSONL file of sentence
-- pairs with scores), comparisons of value lists, gradients and raw tensor bytes, the
-- golden files' model input, the user-error check, and the case runner of the suites that
-- run as their own script (tests/gpu, tests/cudacpu).
--   local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local sys = require("trainer.core.sys")

local M = {}

-- A new empty folder under /tmp.
function M.tmpdir()
  local name = os.tmpname() -- a fresh file; the folder goes beside it
  os.remove(name)
  assert(sys.mkdir_p(name))
  return name
end

function M.write(path, text)
  assert(sys.write_file(path, text))
end

function M.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- The words of the fixtures' random sentences.
M.words = { "the", "cat", "dog", "sat", "on", "mat", "and", "is", "not", "good", "bad", "house", "bird" }

-- A seeded source of fixture text: rnd(n), a number in 1..n from a linear congruential
-- generator started at seed, and sent(), a sentence of min + rnd(extra) words drawn from
-- words with it (one stream: the same seed and calls give the same text on every machine).
function M.sentences(seed, words, min, extra)
  local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % n + 1 end
  local function sent()
    local t = {}
    for i = 1, min + rnd(extra) do t[i] = words[rnd(#words)] end
    return table.concat(t, " ")
  end
  return rnd, sent
end

-- get, release for a suite's fixture: get() returns make()'s value, made on the first call
-- only; release(free) calls free(value) when it was made, and forgets it.
function M.once(make)
  local value
  local function get()
    if value == nil then value = make() end
    return value
  end
  local function release(free)
    if value ~= nil then free(value) end
    value = nil
  end
  return get, release
end

-- A folder holding tiny/ (models.tiny_folder with model_seed) and train.jsonl: `rows`
-- pairs of 3 to 2 + max_extra random words and a score from score(rnd), all drawn from a
-- linear congruential generator seeded with text_seed (so a test's data never changes).
function M.tiny_pairs(opts)
  local dir = M.tmpdir()
  require("trainer.models").tiny_folder(dir .. "/tiny", { seed = opts.model_seed })
  local rnd, sent = M.sentences(opts.text_seed, M.words, 2, opts.max_extra)
  local lines = {}
  for i = 1, opts.rows do
    lines[i] = ('{"sentence1": "%s", "sentence2": "%s", "score": ' .. opts.score_format .. '}\n'):format(sent(), sent(),
      opts.score(rnd))
  end
  M.write(dir .. "/train.jsonl", table.concat(lines))
  return dir
end

-- { dir, tok }: a new folder holding emb/ (a tiny random sentence encoder, seed 3) and cls/
-- (a tiny classifier, seed 4), and emb's tokenizer: the step and batch-feed tests' models.
function M.tiny_models()
  local models = require("trainer.models")
  local dir = M.tmpdir()
  models.tiny_folder(dir .. "/emb", { seed = 3 })
  models.tiny_folder(dir .. "/cls", { seed = 4, task = "classification" })
  return { dir = dir, tok = require("trainer.core.tokenizer").load(dir .. "/emb") }
end
function M.free_tiny_models(f)
  f.tok:free()
  os.execute("rm -rf '" .. f.dir .. "'")
end

-- get, cleanup for a suite's tiny_pairs(opts) folder: get() returns { dir = the folder },
-- made on the first call; cleanup() removes the folder when it was made.
function M.tiny_pairs_once(opts)
  local get, release = M.once(function() return { dir = M.tiny_pairs(opts) } end)
  return get, function() release(function(f) require("trainer.train.outputs").remove_tree(f.dir) end) end
end

-- Writes dir/name.lua, a recipe over a tiny_pairs folder dir: body with the words MODEL,
-- TRAIN and OUT standing for the quoted paths dir/tiny, dir/train.jsonl and dir/name (the
-- run's folder). Returns its path.
function M.tiny_recipe(dir, name, body)
  local paths = { MODEL = dir .. "/tiny", TRAIN = dir .. "/train.jsonl", OUT = dir .. "/" .. name }
  local path = ("%s/%s.lua"):format(dir, name)
  M.write(path, (body:gsub("%f[%w_](%u+)%f[^%w_]", function(w) return paths[w] and ("%q"):format(paths[w]) end)))
  return path
end

-- n deterministic data rows for step and loss tests: row i holds ntexts texts of 3 to 8 words
-- (text c drawn with salt 11 c), then target(i) when target is given. The same rows in every
-- test that uses them, so their figures never depend on which test wrote the generator.
local row_words = { "the", "cat", "dog", "sat", "on", "mat", "and", "is", "a", "not", "good", "bad", "house", "bird",
  "very", "this", "that", "with" }
function M.text(i, salt)
  local out, n = {}, 3 + (i * 5 + salt) % 6
  for k = 1, n do out[k] = row_words[(i * 7 + k * (salt + 3) + salt) % #row_words + 1] end
  return table.concat(out, " ")
end
function M.rows_of(n, ntexts, target)
  local rows = {}
  for i = 1, n do
    local r = {}
    for c = 1, ntexts do r[c] = M.text(i, c * 11) end
    if target then r[#r + 1] = target(i) end
    rows[i] = r
  end
  return rows
end

-- max |a[i] - b[i]| / max |b[i]| (the error relative to the reference b's scale; NaN gives
-- NaN, a missing a[i] counts as 0), and max |a[i] - b[i]|.
function M.rel_err(a, b)
  local num, den = 0, 1e-30
  for i = 1, #b do
    local d = math.abs((a[i] or 0) - b[i])
    if d > num or d ~= d then num = d end
    den = math.max(den, math.abs(b[i]))
  end
  return num / den, num
end

-- sum of a[i] * b[i] over a (a loss = sum(output * weight) from their value lists).
M.dot = require("trainer.losses.host").dot

-- name -> the values of model's gradient, for each parameter that has one.
function M.grads_of(model)
  local out = {}
  for name, p in model:parameters() do if p.grad then out[name] = p.grad:values() end end
  return out
end

-- Raises unless |a[i] - b[i]| <= tol * max(max |a|, 1e-3) for every i (what names the values).
function M.close_to_scale(a, b, tol, what)
  assert(#a == #b, what .. ": sizes differ")
  local scale = 0
  for i = 1, #a do scale = math.max(scale, math.abs(a[i])) end
  for i = 1, #a do
    if math.abs(a[i] - b[i]) > tol * math.max(scale, 1e-3) then
      error(("%s: element %d: %.9g vs %.9g (scale %.3g)"):format(what, i, a[i], b[i], scale), 0)
    end
  end
end

-- One training pass of model over input x at rng step 4 (dropout on): loss = sum(output * w),
-- the gradients (grads_of) and the peak of `activations` above the start; raises when the
-- backward leaves an activation allocated. check(y), when given, runs on the output first.
function M.loss_grads_peak(model, x, w, what, check)
  local memory = require("trainer.core.memory")
  M.clear_grads(model)
  model:train()
  model.rng.step = 4
  memory.reset_peak()
  local a0 = memory.stats().by_tag.activations
  local y = model:forward(x)
  if check then check(y) end
  local loss = M.dot(y:values(), w:values())
  model:backward(w)
  y:free()
  local st = memory.stats()
  assert(st.by_tag.activations == a0, ("%s: %d activation bytes left after backward"):format(what,
    st.by_tag.activations - a0))
  return loss, M.grads_of(model), st.peak_by_tag.activations - a0
end

-- Two passes' losses within 1e-5 and every gradient of the first (at least min_n of them)
-- within 1e-4 of its scale in the second; what names the second pass.
function M.same_loss_and_grads(l0, g0, l1, g1, what, min_n)
  assert(math.abs(l1 - l0) <= 1e-5 * math.max(1, math.abs(l0)), ("%s: loss %.9g vs %.9g"):format(what, l1, l0))
  local n = 0
  for name, g in pairs(g0) do
    assert(g1[name], what .. ": " .. name .. ": no gradient")
    M.close_to_scale(g, g1[name], 1e-4, what .. ": " .. name)
    n = n + 1
  end
  assert(n >= (min_n or 1), what .. ": " .. n .. " gradients compared")
end

-- One step.micro of the loss spec (made with { dim = 32, seed = 1 }) over rows on the
-- committed tiny BERT (tests/data/tiny_bert) in eval mode with gradients on: the loss value
-- and the gradients (grads_of). micro: more step.micro fields (cached, mini_batch);
-- check(model), when given, runs after the step, before the model is freed.
function M.tiny_bert_step(spec, rows, micro, check)
  local dir = require("trainer.native").root() .. "/tests/data/tiny_bert"
  local model = require("trainer.models").load_model(dir, { on_warning = function() end })
  model:eval():set_grad_enabled(true)
  local tok = require("trainer.core.tokenizer").load(dir)
  local loss = require("trainer.losses").new(spec, { dim = 32, seed = 1 })
  local ctx = { model = model, loss = loss, tokenizer = tok, batch = rows, max_length = 64 }
  for k, v in pairs(micro or {}) do ctx[k] = v end
  local v = require("trainer.train.step").micro(ctx)
  local grads = M.grads_of(model)
  if check then check(model) end
  if loss.teacher then loss.teacher:free() end
  loss:free()
  model:free()
  return v, grads
end

-- Frees and drops every parameter's gradient.
function M.clear_grads(model)
  for _, p in model:parameters() do if p.grad then p.grad:free(); p.grad = nil end end
end

-- The raw bytes of a tensor on any device (tr_tensor_read: a device read waits for the
-- stream), for bitwise comparison of tensors too big for :values().
function M.bytes(t)
  local ffi = require("ffi")
  local runtime = require("trainer.core.runtime")
  local n = t:nbytes()
  local buf = ffi.new("uint8_t[?]", math.max(n, 1))
  runtime.check(require("trainer.core.ffi").tr_tensor_read(runtime.ctx, t:ptr(), buf, n), "bytes")
  return ffi.string(buf, n)
end

-- An i32 [rows, cols] tensor from a flat list of integers.
function M.int_matrix(values, rows, cols)
  local flat = require("trainer.core.tensor").from_table(values, { dtype = "i32" })
  local t = flat:reshape({ rows, cols })
  flat:free()
  return t
end

-- A batch of B rows of S token ids over a vocabulary of 200 (ids 3..192), rows padded at their
-- ends by 0, 2 or 4 positions: { input_ids, attention_mask }, [B, S] i32 each.
function M.padded_batch(B, S)
  local ids, mask = {}, {}
  for i = 1, B * S do
    ids[i] = 3 + (i * 37) % 190
    mask[i] = ((i - 1) % S) < S - (i % 3) * 2 and 1 or 0
  end
  return { input_ids = M.int_matrix(ids, B, S), attention_mask = M.int_matrix(mask, B, S) }
end

-- A small model m made ready to train as spec says (precision, checkpoint: every layer), its
-- dropout keyed at seed 42, step 3, and one forward over padded_batch(B, S) with the peak reset
-- before it: returns the output, the activation bytes kept beside it, and the input.
function M.forward_counting_kept(m, spec, B, S)
  require("trainer.train.amp").prepare(m, spec.precision or "fp32")
  if spec.checkpoint then require("trainer.train.grad_checkpoint").apply(m, { every = 1 }) end
  m:train()
  m.rng.seed, m.rng.step = 42, 3
  local memory = require("trainer.core.memory")
  local input = M.padded_batch(B, S)
  -- an earlier test's unreferenced tensor, collected inside the window, would move the count
  collectgarbage()
  collectgarbage()
  memory.reset_peak()
  local before = memory.stats().by_tag.activations
  local y = m:forward(input)
  return y, memory.stats().by_tag.activations - before - y:nbytes(), input, before
end

-- The model input of a golden file (tests/ref): its input_ids, attention_mask and
-- token_type_ids as tensors tagged "activations"; free_input frees such a table.
function M.golden_input(g)
  return { input_ids = g:tensor("input_ids", { tag = "activations" }),
           attention_mask = g:tensor("attention_mask", { tag = "activations" }),
           token_type_ids = g:tensor("token_type_ids", { tag = "activations" }) }
end
function M.free_input(x) for _, t in pairs(x) do t:free() end end

-- The golden file g's input through model m in eval mode with gradients on: the output, the
-- input (free it with free_input) and the activation bytes allocated before the forward.
function M.golden_forward(m, g)
  local x = M.golden_input(g)
  m:eval():set_grad_enabled(true)
  local a0 = require("trainer.core.memory").stats().by_tag.activations
  return m:forward(x), x, a0
end

-- The on_warning of a load that must warn of nothing: a warning fails the test.
function M.no_warning(w) error("unexpected warning: " .. w) end

-- A classifier m's logits (of a forward after which the activations were a0 before it)
-- against golden file g's prefix .. "logits" (max abs error <= tol), the cross-entropy of its
-- prefix .. "labels" against its prefix .. "loss" (within tol), then m's backward of that
-- loss; what this made is freed, and the activations must be back at a0.
function M.classifier_loss_backward(m, g, logits, a0, tol, prefix)
  prefix = prefix or ""
  local ops = require("trainer.core.ops")
  local lref = g:tensor(prefix .. "logits")
  local _, abs = M.rel_err(logits:values(), lref:values())
  assert(abs <= tol, ("logits max abs error %g"):format(abs))
  local labels = g:tensor(prefix .. "labels", { tag = "activations" })
  local loss, lse = ops.cross_entropy(logits, labels)
  local ref_loss = g:tensor(prefix .. "loss")
  assert(math.abs(loss:item() - ref_loss:item()) <= tol, ("loss %g vs %g"):format(loss:item(), ref_loss:item()))
  local dl = ops.cross_entropy_backward(logits, lse, labels)
  m:backward(dl)
  for _, t in ipairs({ logits, lref, labels, loss, lse, ref_loss, dl }) do t:free() end
  assert(require("trainer.core.memory").stats().by_tag.activations == a0, "activations left after backward")
end

-- ---------------------------------------------------------------- parity with transformers
-- What the model-family suites share against the golden files of tests/ref/make_tiny_*.py:
-- a golden tensor's values, its token ids and mask as tensors, each row's worst cosine, and
-- the checks of an embedder's and a classifier's forward and every parameter's gradient.

-- The values of golden file g's tensor name.
function M.golden_values(g, name)
  local t = g:tensor(name)
  local v = t:values()
  t:free()
  return v
end

-- input_ids and attention_mask of golden file g (named prefix .. "input_ids", ... when a
-- golden holds several inputs), for families without token types.
function M.golden_ids(g, prefix)
  prefix = prefix or ""
  return { input_ids = g:tensor(prefix .. "input_ids", { tag = "activations" }),
           attention_mask = g:tensor(prefix .. "attention_mask", { tag = "activations" }) }
end

-- The smallest cosine between row r of a and of b (flat [rows, cols] value lists).
function M.cosine_rows(a, b, rows, cols)
  local worst = 1
  require("trainer.train.evaluate").row_products(a, b, rows, cols, function(dot, na, nb)
    worst = math.min(worst, dot / math.sqrt(na * nb))
  end)
  return worst
end

-- Every parameter's gradient against g's grad.<name> (relative error <= 1e-3); a parameter
-- whose name matches a pattern of `absolute` (the attention key biases, zero in exact
-- arithmetic) within 1e-5 absolute. Returns the number of parameters.
function M.check_grads(model, g, absolute)
  local n = 0
  for name, p in model:parameters() do
    n = n + 1
    local r = M.golden_values(g, "grad." .. name)
    local v = p.grad and p.grad:values()
    if not v then v = {} for i = 1, #r do v[i] = 0 end end
    local abs = false
    for _, pat in ipairs(absolute or {}) do abs = abs or name:match(pat) ~= nil end
    if abs then
      for i = 1, #r do assert(math.abs(v[i] - r[i]) <= 1e-5, ("%s[%d]: %g vs %g"):format(name, i, v[i], r[i])) end
    else
      local rel = M.rel_err(v, r)
      assert(rel <= 1e-3, ("%s: gradient relative error %g > 1e-3"):format(name, rel))
    end
  end
  return n
end

-- m's forward, in eval mode with gradients on, on golden file g's token ids: the input x,
-- the output, and g's golden values of name beside the output's.
local function golden_ids_forward(m, g, name)
  local x = M.golden_ids(g)
  m:eval():set_grad_enabled(true)
  local out = m:forward(x)
  return x, out, M.golden_values(g, name), out:values()
end

-- An embedding model m against golden file g: the embedding (each row's cosine >= 0.99999,
-- relative error <= 1e-5), then the gradient of loss = sum(embedding * loss_weight), whose
-- seed is loss_weight, for every parameter (check_grads). Returns the number of parameters.
function M.embedder_parity(m, g, absolute)
  local x, e, want, got = golden_ids_forward(m, g, "embedding")
  local shape = e:shape()
  local cos = M.cosine_rows(got, want, shape[1], shape[2])
  assert(cos >= 0.99999, "cosine " .. cos)
  local rel = M.rel_err(got, want)
  assert(rel <= 1e-5, "embedding relative error " .. rel)
  local lw = g:tensor("loss_weight", { tag = "activations" })
  m:backward(lw)
  local n = M.check_grads(m, g, absolute)
  e:free(); lw:free()
  M.free_input(x)
  return n
end

-- A classifier m against golden file g: logits within 1e-4, the cross-entropy of g's labels
-- within 1e-5, and every parameter's gradient of it (check_grads). Returns the count.
function M.classifier_parity(m, g, absolute)
  local ops = require("trainer.core.ops")
  local x, logits, want, got = golden_ids_forward(m, g, "logits")
  for i = 1, #want do
    assert(math.abs(got[i] - want[i]) <= 1e-4, ("logits[%d]: %.7g vs %.7g"):format(i, got[i], want[i]))
  end
  local labels = g:tensor("labels", { tag = "activations" })
  local loss, lse = ops.cross_entropy(logits, labels)
  local l = loss:values()[1]
  assert(math.abs(l - M.golden_values(g, "loss")[1]) <= 1e-5, ("loss %.7g"):format(l))
  local dl = ops.cross_entropy_backward(logits, lse, labels)
  m:backward(dl)
  local n = M.check_grads(m, g, absolute)
  for _, t in ipairs({ logits, labels, loss, lse, dl }) do t:free() end
  M.free_input(x)
  return n
end

-- The model folder dir saves under transformers' names: the names of its family's
-- state_list are the folder's model.safetensors', and has_head says whether it is a
-- classifier.
function M.saves_transformers_names(dir)
  local st = require("trainer.core.safetensors")
  local registry = require("trainer.models.registry")
  local m = trainer.load_model(dir, { on_warning = M.no_warning })
  local r = st.load(dir .. "/model.safetensors")
  local fam = registry.of_model(m)
  local ours = {}
  for i, e in ipairs(fam.state_list(m)) do ours[i] = e[1] end
  local theirs, count = {}, 0
  for _, n in ipairs(r:names()) do theirs[n] = true count = count + 1 end
  for _, n in ipairs(ours) do assert(theirs[n], dir .. ": saves " .. n .. ", which transformers does not have") end
  assert(count == #ours, ("%s: %d names, transformers %d"):format(dir, #ours, count))
  assert(fam.has_head(r) == (m.task == "classification"), dir)
  r:close()
  m:free()
end

-- tok's ids of the lines of texts_file padded to max_length equal golden file g's
-- input_ids where its mask is set, at g's padded length. Returns g's ids (a flat list).
function M.tokens_match_golden(tok, g, texts_file, max_length)
  local ids, mask = g:tensor("input_ids"), g:tensor("attention_mask")
  local texts = {}
  for line in io.lines(texts_file) do texts[#texts + 1] = line end
  local b = tok:batch(texts, { max_length = max_length })
  local want, wm, got = ids:values(), mask:values(), b.input_ids:values()
  assert(b.input_ids:shape()[2] == ids:shape()[2], "padded length")
  for i = 1, #want do
    if wm[i] ~= 0 then assert(got[i] == want[i], ("token %d: %d vs %d"):format(i, got[i], want[i])) end
  end
  local T = require("trainer.core.tensor")
  for _, t in pairs(b) do if T.is_tensor(t) then t:free() end end
  ids:free(); mask:free()
  return want
end

-- The tokenizer of model folder dir against its golden file (tokens_match_golden with the
-- golden's texts_file and max_length). Returns the golden's ids and the tokenizer.
function M.tokenizer_matches_golden(dir, golden, texts_file, max_length)
  local tok = require("trainer.core.tokenizer").load(dir)
  local g = require("trainer.core.safetensors").load(golden)
  local want = M.tokens_match_golden(tok, g, texts_file, max_length)
  g:close()
  return want, tok
end

-- A fake embedder for the evaluators' tests: each text "x,y,z" is the row { x, y, z } of the
-- [#texts, C] f32 tensor it returns.
function M.embed_numbers(texts)
  local rows = {}
  for i, t in ipairs(texts) do
    local r = {}
    for v in t:gmatch("[^,]+") do r[#r + 1] = tonumber(v) end
    rows[i] = r
  end
  return require("trainer.core.tensor").from_table(rows)
end

-- A new list: list's items, then more's (more may be nil).
function M.concat(list, more)
  local out = { unpack(list) }
  for _, v in ipairs(more or {}) do out[#out + 1] = v end
  return out
end

-- Whether a file or folder is there.
M.exists = require("trainer.core.fs").exists

-- Whether the model folder dir holds its weights; prints suite's SKIP line when it does not.
function M.model_present(dir, suite)
  if M.exists(dir .. "/model.safetensors") then return true end
  print("SKIP " .. suite .. ": " .. dir .. " is absent (run `make fetch-models`)")
  return false
end

-- The message of the user error that fn(...) raises; fails when it raises none or another kind.
function M.user_error(fn, ...)
  local errors = require("trainer.core.errors")
  local ok, e = pcall(fn, ...)
  assert(not ok, "expected an error")
  assert(errors.is_user_error(e), "expected a user error, got: " .. tostring(e))
  return e.msg
end

-- Runs a suite that is its own script (`trainer run FILE`): each { name, fn } case of cases
-- whose name holds `only` (all when only is nil), with opts.before(case) first when given;
-- prints "PASS suite.name" or "FAIL suite.name: message", then "N passed, N failed".
-- Returns the script's exit status: 0 when every case passed.
function M.run_cases(suite, cases, only, opts)
  local errors = require("trainer.core.errors")
  local passed, failed = 0, 0
  for _, case in ipairs(cases) do
    if not only or case[1]:find(only, 1, true) then
      if opts and opts.before then opts.before(case) end
      local ok, err = xpcall(case[2], debug.traceback)
      if ok then
        passed = passed + 1
        print("PASS " .. suite .. "." .. case[1])
      else
        failed = failed + 1
        print(("FAIL %s.%s: %s"):format(suite, case[1], tostring(errors.message(err)):gsub("\n", "\n    ")))
      end
    end
  end
  if opts and opts.after then opts.after() end
  print(("%d passed, %d failed"):format(passed, failed))
  return failed == 0 and 0 or 1
end

-- The test list with a last case, "cleanup", that runs fn (removing the suite's fixture).
function M.with_cleanup(tests, fn)
  tests[#tests + 1] = { "cleanup", fn }
  return tests
end

return M
