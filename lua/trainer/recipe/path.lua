-- trainer.recipe.path: where recipe files are found.
--
-- A name that a recipe gives to `extends` or `require` is looked for, in order:
--   1. in the folder of the file that names it;
--   2. in each folder of TRAINER_RECIPE_PATH (colon-separated, empty entries skipped,
--      relative entries relative to the working directory), left to right;
--   3. in the built-in recipe folders: recipes/ of the working directory, then the
--      installation's recipes/.
-- A recipe named on the command line (`trainer acme/x.lua`) is the file at that path when
-- there is one, else it is looked for in the folders of 2 and 3. An absolute name is only
-- itself. The first readable file wins; a later file of the same relative name is shadowed.
-- Folders that do not exist are skipped but still named in the "searched" list of an error,
-- so that a misspelt TRAINER_RECIPE_PATH entry shows.
local native = require("trainer.native")
local sys = require("trainer.core.sys")

local M = {}

M.variable = "TRAINER_RECIPE_PATH"

-- ---------------------------------------------------------------- file names
function M.dirname(p)
  return p:match("^(.*)/[^/]*$") or "."
end

-- Collapses "a/./b" and "a/x/../b"; keeps relative paths relative.
function M.normalize(p)
  local absolute = p:sub(1, 1) == "/"
  local parts = {}
  for part in p:gmatch("[^/]+") do
    if part == ".." and #parts > 0 and parts[#parts] ~= ".." then
      parts[#parts] = nil
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  local s = table.concat(parts, "/")
  if absolute then return "/" .. s end
  return s == "" and "." or s
end

function M.join(dir, p)
  if p:sub(1, 1) == "/" then return M.normalize(p) end
  if dir == "." or dir == "" then return M.normalize(p) end
  return M.normalize(dir .. "/" .. p)
end

function M.readable(p)
  if sys.is_dir(p) then return false end
  local f = io.open(p, "r")
  if f then f:close() return true end
  return false
end

-- ---------------------------------------------------------------- the folders
-- The folders after the naming file's own: { { dir = "...", from = "TRAINER_RECIPE_PATH" |
-- "built-in" }, ... }, each folder once (the first time it appears); the working
-- directory's recipes/ only when there is one.
function M.folders()
  local list, seen = {}, {}
  local function add(dir, from)
    dir = M.normalize(dir)
    local key = sys.realpath(dir) or dir
    if seen[key] then return end
    seen[key] = true
    list[#list + 1] = { dir = dir, from = from }
  end
  for entry in (os.getenv(M.variable) or ""):gmatch("[^:]+") do add(entry, M.variable) end
  if sys.is_dir("recipes") then add("recipes", "built-in") end
  local root = native.root()
  if root then add(root .. "/recipes", "built-in") end
  return list
end

-- The folders searched for a name given inside from_file (nil: a command-line name, whose
-- first place is the working directory), as { { dir, from }, ... }.
local function search_folders(from_file)
  local first = from_file and { dir = M.dirname(from_file), from = "the recipe's folder" }
    or { dir = ".", from = "the working directory" }
  local list = { first }
  local first_key = sys.realpath(first.dir) or M.normalize(first.dir)
  for _, f in ipairs(M.folders()) do
    if (sys.realpath(f.dir) or f.dir) ~= first_key then list[#list + 1] = f end
  end
  return list
end

-- Finds the file `name` (a relative or absolute path, or a list of them tried in turn in
-- each folder) named inside from_file (or on the command line when from_file is nil).
-- Returns the file and the folder entry it was found in, or nil and the list of folders
-- searched.
function M.find(from_file, name)
  local names = type(name) == "table" and name or { name }
  if names[1]:sub(1, 1) == "/" then
    for _, n in ipairs(names) do
      if M.readable(n) then return M.normalize(n), { dir = M.dirname(n), from = "an absolute path" } end
    end
    return nil, {}
  end
  local folders = search_folders(from_file)
  for _, f in ipairs(folders) do
    for _, n in ipairs(names) do
      local c = M.join(f.dir, n)
      if M.readable(c) then return c, f end
    end
  end
  return nil, folders
end

-- What an error says after the name that was not found: "no such file" (what: "recipe
-- file", ...) and the folders searched (from M.find), one "  DIR (FROM)" line each, marking
-- those that do not exist.
function M.not_found(folders, what)
  what = what or "file"
  if #folders == 0 then return ("no such %s (an absolute path names only that file)"):format(what) end
  local lines = { ("no such %s in the folders searched, in order:"):format(what) }
  for _, f in ipairs(folders) do
    lines[#lines + 1] = ("  %s (%s%s)"):format(f.dir, f.from, sys.is_dir(f.dir) and "" or "; no such folder")
  end
  return table.concat(lines, "\n")
end

-- The sentence that ends a "not found" error: what to do about it.
M.fix = "Fix the name, or put the folder that holds it on " .. M.variable
  .. " (folders separated by ':', searched after the recipe's own folder and before the built-in recipes/)."

-- One line per extends and require of a resolved recipe (trainer.recipe's `resolved`):
--   extends "base/x.lua" in recipes/y.lua: recipes/base/x.lua (the recipe's folder)
function M.describe(resolved)
  local lines = {}
  for _, r in ipairs(resolved or {}) do
    local what = r.kind == "extends" and ("extends %q"):format(r.name) or ("require(%q)"):format(r.name)
    local where = r.file and ("%s (%s)"):format(r.file, r.folder.from) or "package.path (trainer's own modules)"
    lines[#lines + 1] = ("%s in %s: %s"):format(what, r.from, where)
  end
  return lines
end

-- ---------------------------------------------------------------- listing
-- Every .lua file under dir, as names relative to it, sorted; hidden entries are skipped,
-- and folders deeper than max_depth (a symbolic-link loop) are not entered.
local max_depth = 16
function M.files_under(dir)
  local out = {}
  local function walk(d, prefix, depth)
    if depth > max_depth then return end
    for _, n in ipairs(sys.list_dir(d) or {}) do
      if n:sub(1, 1) ~= "." then
        local full = d .. "/" .. n
        if sys.is_dir(full) then
          walk(full, prefix .. n .. "/", depth + 1)
        elseif n:match("%.lua$") then
          out[#out + 1] = prefix .. n
        end
      end
    end
  end
  walk(dir, "", 0)
  table.sort(out)
  return out
end

-- What a recipe file says it is for: its first comment line, without the leading "--" and
-- without a leading "name.lua —" (the habit of the recipes here); "" when it has none.
function M.first_comment(file)
  local f = io.open(file, "r")
  if not f then return "" end
  local found = ""
  for line in f:lines() do
    if not line:match("^#!") and line:match("%S") then
      local text = line:match("^%s*%-%-+%s*(.-)%s*$")
      if text and text:match("^%[%[") then text = text:gsub("^%[%[%s*", "") end
      found = text and text:gsub("^%S+%.lua%s+[%-\226\128\148]+%s+", "") or ""
      break
    end
  end
  f:close()
  return found
end

-- Every recipe in the folders (default: M.folders(), TRAINER_RECIPE_PATH then the built-in
-- ones): { { name, file, folder = { dir, from }, about, shadowed_by = folder entry or nil },
-- ... } in search order, folder by folder.
function M.list(folders)
  local out, first = {}, {}
  for _, folder in ipairs(folders or M.folders()) do
    for _, name in ipairs(M.files_under(folder.dir)) do
      local file = M.join(folder.dir, name)
      local entry = { name = name, file = file, folder = folder, about = M.first_comment(file),
                      shadowed_by = first[name] }
      first[name] = first[name] or folder
      out[#out + 1] = entry
    end
  end
  return out
end

return M
