-- The type descriptions that `trainer check --keys`, the README's key table and the
-- recipe errors print: plurals of lists and maps put the "s" on the noun, never on the
-- end of the phrase ("a list of number >= 0s").
local schema = require("trainer.recipe.schema")

local function eq(got, want) assert(got == want, ("expected %q, got %q"):format(want, got)) end

return {
  { "list_plurals_pluralise_the_noun", function()
    eq(schema.describe(schema.list { of = schema.number { min = 0 } }), "a list of numbers >= 0")
    eq(schema.describe(schema.list { of = schema.number { min = 0, lt = 1 } }), "a list of numbers >= 0 and < 1")
    eq(schema.describe(schema.list { of = schema.integer { gt = 0 } }), "a list of positive integers")
    eq(schema.describe(schema.list { of = schema.string {} }), "a list of strings")
    eq(schema.describe(schema.list { of = schema.string { enum = { "a", "b" } } }), 'a list of values among "a" or "b"')
  end },
  { "map_of_alternatives_reads_as_english", function()
    eq(schema.describe(schema.map { of = schema.oneof { alternatives = { schema.number {}, schema.string {} } } }),
      "a table whose values are numbers or strings")
  end },
  { "key_reference_has_no_glued_plural", function()
    local text = require("trainer.recipe.keys_doc").markdown()
    for line in text:gmatch("[^\n]+") do
      local typ = line:match("^| `[^`]+` | ([^|]*) |")
      if typ then
        assert(not typ:match("%ds ") and not typ:match("%ds$") and not typ:match("[%a)]ss "), "bad plural: " .. line)
        assert(not typ:match("a list of an? "), "bad article: " .. line)
      end
    end
  end },
}
