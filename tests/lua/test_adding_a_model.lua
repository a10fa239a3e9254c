-- docs/ARCHITECTURE.md's "Adding a model" against the code: every registered family has every
-- field of the interface table, of its kind; code outside the family files uses no field the
-- table does not list; the registry lines the section shows are the registry's code.
local native = require("trainer.native")
local registry = require("trainer.models.registry")

local root = native.root()

local function read(path)
  local f = assert(io.open(root .. "/" .. path, "r"), "cannot read " .. path)
  local s = f:read("*a")
  f:close()
  return s
end

local function section()
  local s = read("docs/ARCHITECTURE.md"):match("\n## Adding a model\n(.-)\n## ")
  assert(s, "docs/ARCHITECTURE.md has no section \"Adding a model\"")
  return s
end

-- The interface table's rows: { field = kind }, and the fields in their order.
local function interface()
  local kinds, order = {}, {}
  for name, kind in section():gmatch("\n| `([%w_]+)` | (%a+) |") do
    assert(kinds[name] == nil, "the table lists " .. name .. " twice")
    kinds[name] = kind
    order[#order + 1] = name
  end
  assert(#order >= 17, "the interface table has " .. #order .. " fields")
  return kinds, order
end

-- Every Lua file of lua/trainer/ but the family files the registry names.
local function generic_files()
  local family_file = {}
  for _, t in ipairs(registry.model_types()) do
    family_file["lua/" .. registry.module_name(t):gsub("%.", "/") .. ".lua"] = true
  end
  local out = {}
  local p = io.popen('find "' .. root .. '/lua/trainer" -name "*.lua" | sort')
  for f in p:lines() do
    if not family_file[f:sub(#root + 2)] then out[#out + 1] = f end
  end
  p:close()
  assert(#out > 50, "found only " .. #out .. " Lua files")
  return out
end

return {
  { "every_family_has_the_interface", function()
    local kinds, order = interface()
    local fams = registry.families()
    assert(#fams >= 2, "the registry has " .. #fams .. " families")
    for _, fam in ipairs(fams) do
      for _, field in ipairs(order) do
        local kind = kinds[field]
        assert(type(fam[field]) == kind, ("family %s: %s is %s, the interface says %s"):format(tostring(fam.name), field,
          type(fam[field]), kind))
      end
    end
  end },

  { "code_uses_only_the_listed_fields", function()
    local kinds = interface()
    local used, bad = {}, {}
    for _, path in ipairs(generic_files()) do
      local n = 0
      for line in io.lines(path) do
        n = n + 1
        local code = line:gsub("%-%-.*$", "")
        for field in code:gmatch("%f[%w_]family%.([%a_][%w_]*)") do
          used[field] = true
          if not kinds[field] then bad[#bad + 1] = ("%s:%d: family.%s"):format(path:sub(#root + 2), n, field) end
        end
      end
    end
    assert(#bad == 0, "fields of a family that the interface table does not list:\n" .. table.concat(bad, "\n"))
    -- the run, the plan, the feed, checkpointing, DDP and the loader do reach the families this way
    for _, field in ipairs({ "config", "build", "load_weights", "state_list", "has_head", "is_head_param",
        "max_positions", "position_ids", "layer_stacks", "layers", "set_dropout", "plan_terms" }) do
      assert(used[field], "no code outside the family files uses family." .. field)
    end
  end },

  { "the_registry_lines_are_the_code", function()
    local s = section()
    local path, code = s:match("In `([%w_/%.]+%.lua)`:\n```lua\n(.-)\n```")
    assert(path == "lua/trainer/models/registry.lua", "the section shows no registry code: " .. tostring(path))
    assert(read(path):find(code, 1, true), "the section's registry lines are not in " .. path .. ":\n" .. code)
    local names = {}
    for t in code:gmatch('{ "([%w%-]+)", "trainer%.models%.[%w_]+" }') do names[#names + 1] = t end
    assert(table.concat(names, ",") == table.concat(registry.model_types(), ","),
      "the section's model_types differ from the registry's: " .. table.concat(names, ","))
  end },
}
