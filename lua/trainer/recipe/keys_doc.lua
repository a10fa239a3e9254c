-- trainer.recipe.keys_doc: the recipe key reference as a Markdown table, generated from
-- trainer.recipe.keys. `trainer check --keys` prints it; the README embeds it between
-- <!-- keys:begin --> and <!-- keys:end --> (scripts/update_readme_keys.sh rewrites it,
-- tests/cli/test_readme_keys.sh fails when they differ).
local schema = require("trainer.recipe.schema")
local spec = require("trainer.recipe.keys")

local M = {}

local function cell(s)
  return (tostring(s):gsub("|", "\\|"):gsub("\n", " "))
end

function M.markdown()
  local out = { "| key | type | default | what it does |", "|---|---|---|---|" }
  for _, row in ipairs(schema.reference(spec)) do
    out[#out + 1] = ("| `%s` | %s | %s | %s |"):format(row.path, cell(row.type),
      row.default ~= "" and ("`" .. cell(row.default) .. "`") or "", cell(row.doc))
  end
  return table.concat(out, "\n") .. "\n"
end

return M
