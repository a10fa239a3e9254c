-- The REPL's pieces that need no terminal: Tab completion, the short traceback, the
-- printing of results, and the module summary tostring gives.
local repl = require("trainer.cli.repl")

local function env()
  return setmetatable({ trainer = require("trainer"), mine = { alpha = 1, beta = 2, _hidden = 3 } },
    { __index = _G })
end

local function has(list, word)
  for _, w in ipairs(list) do if w == word then return true end end
  return false
end

return {
  { "completes_fields_that_load_lazily", function()
    -- trainer.memory loads on first use: completion lists it before it is loaded
    local got = repl.completions(env(), "trainer.mem")
    assert(#got == 1 and got[1] == "trainer.memory", table.concat(got, " "))
    assert(has(repl.completions(env(), "trainer.memory.rep"), "trainer.memory.report"))
  end },
  { "completes_globals_and_keywords", function()
    local e = env()
    assert(has(repl.completions(e, "pri"), "print"))
    assert(has(repl.completions(e, "mi"), "mine"))
    assert(has(repl.completions(e, "func"), "function"))
    assert(#repl.completions(e, "no_such_name_anywhere") == 0)
  end },
  { "completes_methods_through_metatables", function()
    local e = env()
    e.s = "text"
    assert(has(repl.completions(e, "s:up"), "s:upper"))
    local m = require("trainer").load_model(require("trainer.native").root() .. "/tests/data/tiny_bert")
    e.m = m
    local methods = repl.completions(e, "m:para")
    assert(has(methods, "m:parameters") and has(methods, "m:parameter_list"), table.concat(methods, " "))
    assert(has(repl.completions(e, "m.be"), "m.bert"))
    -- ':' offers functions only
    assert(not has(repl.completions(e, "m:"), "m:bert"))
    m:free()
  end },
  { "hides_underscore_names_unless_typed", function()
    local e = env()
    local all = repl.completions(e, "mine.")
    assert(has(all, "mine.alpha") and has(all, "mine.beta") and not has(all, "mine._hidden"))
    assert(has(repl.completions(e, "mine._"), "mine._hidden"))
  end },
  { "completion_never_raises", function()
    local e = env()
    assert(#repl.completions(e, "undefined_global.x") == 0)   -- strict _G raises; none
    assert(#repl.completions(e, "mine.alpha.x") == 0)          -- a number has no fields
    assert(#repl.completions(e, "a b") == 0)
  end },
  { "short_traceback_keeps_user_frames", function()
    local msg = table.concat({
      "stdin:2: deep", "stack traceback:",
      "\t[C]: in function 'error'",
      "\tstdin:2: in function 'f'",
      "\t(tail call): ?",
      "\tstdin:1: in main chunk",
      "\t[C]: in function 'icall'",
      "\t/x/lua/trainer/cli/repl.lua:290: in function 'run'",
      "\t/x/lua/trainer/cli.lua:131: in function </x/lua/trainer/cli.lua:129>",
    }, "\n")
    local s = repl.short_traceback(msg)
    assert(s == "stdin:2: deep\nstack traceback:\n\tstdin:2: in function 'f'\n\tstdin:1: in main chunk", s)
    assert(repl.short_traceback("no trace") == "no trace")
  end },
  { "short_traceback_limits_frames", function()
    local lines = { "stdin:1: bottom", "stack traceback:" }
    for _ = 1, 20 do lines[#lines + 1] = "\tstdin:1: in function 'g'" end
    lines[#lines + 1] = "\tstdin:1: in main chunk"
    local s = repl.short_traceback(table.concat(lines, "\n"))
    local frames = 0
    for line in s:gmatch("\n\t([^\n]*)") do frames = frames + 1; assert(line ~= "") end
    assert(frames == repl.max_frames, s)
    assert(s:find("\t...\n", 1, true) and s:find("in main chunk$"), s)
  end },
  { "multi_line_strings_print_as_text", function()
    assert(repl.format_results({ n = 1, "a\nb\n" }) == "a\nb")
    assert(repl.format_results({ n = 1, "one" }) == '"one"')
    assert(repl.format_results({ n = 2, "x\ny", 3 }) == "x\ny\t3")
  end },
  { "module_tostring_is_a_summary", function()
    local m = require("trainer").load_model(require("trainer.native").root() .. "/tests/data/tiny_bert")
    local s = tostring(m)
    assert(s:match("^SentenceEncoder: 24,032 parameters %(24%.0 K%), all trainable, f32 on cpu"), s)
    assert(s:find("\n      (layer.0-1) 2 x BertLayer: 8,544 each\n", 1, true), s)
    assert(s:find("(LayerNorm) LayerNorm(eps=1e-12): weight [32], bias [32]", 1, true), s)
    assert(s:find("(dropout) Dropout(p=0.1)", 1, true), s)
    assert(not s:find("_children", 1, true))
    m.bert.embeddings:set_trainable(false)
    assert(tostring(m):find("(embeddings) BertEmbeddings: 5,888 frozen", 1, true), tostring(m))
    assert(tostring(m):find("18,144 trainable", 1, true), tostring(m))
    m:free()
  end },
}
