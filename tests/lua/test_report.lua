-- `trainer report`: the SVG's structure on a synthetic LoRA-like run. Every panel has a
-- y-axis label (the memory one with its unit), the memory panel has one series per tag and
-- draws the small tags (grads, optimizer, workspace) away from the zero line and from each
-- other, evaluation points are markers, legend samples carry their series' dash and marker,
-- and the page's per-tag peaks are the figures the chart prints; its table gives evaluation
-- scores to 4 significant digits and the run's wall time.
local report = require("trainer.cli.commands.report")
local json = require("trainer.core.json")
local MIB = 1048576

local made = {}

local function fixture()
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. dir)
  made[#made + 1] = dir
  local f = assert(io.open(dir .. "/metrics.jsonl", "w"))
  for step = 1, 40 do
    local row = {
      step = step, epoch = 0, loss = 2 - step * 0.03 + (step % 3) * 0.05, lr = 1e-4 * (1 - step / 40),
      tokens_per_s = 900, mem_allocated = 120 * MIB, mem_reserved = 160 * MIB, mem_peak = 300 * MIB,
      mem_by_tag = { weights = 87 * MIB, grads = 0.6 * MIB, optimizer = 1.2 * MIB, activations = 0, workspace = 0 },
      mem_peak_by_tag = { weights = 87 * MIB, grads = 0.6 * MIB, optimizer = 1.2 * MIB,
                          activations = 200 * MIB, workspace = 0.05 * MIB },
    }
    if step == 20 then row.eval = { spearman = 0.7, pearson = 0.72 } end
    if step == 40 then row.eval = { spearman = 0.8, pearson = 0.79 } end
    f:write(json.encode(row), "\n")
  end
  f:close()
  -- the run's weights peak (loading and saving included) exceeds what the steps show
  local summary = { steps = 40, final_loss = 0.9, tokens_per_s = 900, peak_allocated = 310 * MIB,
    peak_reserved = 400 * MIB, eval_start = { spearman = 0.5, pearson = 0.55 }, eval = { spearman = 0.86772, pearson = 0.79 },
    wall_time_s = 63.25,
    peak_by_tag = { weights = 130 * MIB, grads = 0.6 * MIB, optimizer = 1.2 * MIB, activations = 200 * MIB,
                    workspace = 0.05 * MIB } }
  f = assert(io.open(dir .. "/summary.json", "w"))
  f:write(json.encode(summary))
  f:close()
  f = assert(io.open(dir .. "/resolved_recipe.lua", "w"))
  f:write('return { loss = { name = "cosent" }, steps = 40 }\n')
  f:close()
  return dir
end

-- The panels' texts, each from its <g class="panel"> to the next (or to </svg>).
local function panels(svg)
  local out, starts = {}, {}
  for pos in svg:gmatch('()<g class="panel"') do starts[#starts + 1] = pos end
  for i, pos in ipairs(starts) do out[i] = svg:sub(pos, (starts[i + 1] or #svg + 1) - 1) end
  return out
end

-- The text of the panel whose title starts with `title`.
local function panel_of(svg, title)
  for _, g in ipairs(panels(svg)) do
    if g:match('data%-title="([^"]*)"'):sub(1, #title) == title then return g end
  end
  error("no panel titled " .. title)
end

local function series_of(panel, name)
  local g = panel:match('<g class="series" data%-name="' .. name:gsub("%p", "%%%0") .. '".-</g>')
  assert(g, "no series " .. name)
  return g
end

local function ys(series)
  local pts = series:match('<polyline[^>]* points="([^"]*)"')
  assert(pts, "series has no line: " .. series:sub(1, 120))
  local out = {}
  for y in pts:gmatch("[%d.]+,([%d.]+)") do out[#out + 1] = tonumber(y) end
  return out
end

local function count(s, pattern)
  local n = 0
  for _ in s:gmatch(pattern) do n = n + 1 end
  return n
end

return {
  { "every_panel_has_a_y_label_and_the_memory_one_a_unit", function()
    local svg = report.svg(fixture())
    local n = 0
    for _, g in ipairs(panels(svg)) do
      n = n + 1
      local label = g:match('<text class="ylabel"[^>]*>([^<]+)</text>')
      assert(label and #label > 0, "a panel without a y-axis label: " .. g:sub(1, 100))
    end
    assert(n == 4, "expected 4 panels, got " .. n)
    assert(panel_of(svg, "memory"):match('class="ylabel"[^>]*>[^<]*MiB'), "the memory axis names no unit")
    assert(panel_of(svg, "training loss"):match('class="ylabel"[^>]*>loss %(cosent%)<'), "the loss axis names no loss")
  end },

  { "memory_panel_has_one_series_per_tag_each_legible", function()
    local mem = panel_of(report.svg(fixture()), "memory")
    for _, tag in ipairs({ "weights", "grads", "optimizer", "activations", "workspace" }) do
      assert(count(mem, '<g class="series" data%-name="' .. tag .. '"') == 1, "not exactly one series for " .. tag)
    end
    -- the panel's bottom edge: rect y + height
    local top, height = mem:match('<rect x="%d+" y="(%d+)" width="%d+" height="(%d+)"')
    local bottom = tonumber(top) + tonumber(height)
    local level = {}
    for _, tag in ipairs({ "weights", "grads", "optimizer", "workspace" }) do
      level[tag] = ys(series_of(mem, tag))[1]
      assert(bottom - level[tag] > 10, ("%s sits on the zero line (y %.1f, bottom %d)"):format(tag, level[tag], bottom))
    end
    local tags = { "weights", "grads", "optimizer", "workspace" }
    for i = 1, #tags do
      for j = i + 1, #tags do
        assert(math.abs(level[tags[i]] - level[tags[j]]) > 10, tags[i] .. " and " .. tags[j] .. " overlap")
      end
    end
  end },

  { "evaluation_points_are_markers", function()
    local ev = panel_of(report.svg(fixture()), "evaluation")
    for _, name in ipairs({ "spearman", "pearson" }) do
      -- eval_start (step 0), step 20, step 40
      assert(count(series_of(ev, name), 'class="marker"') == 3, name .. ": expected 3 markers")
    end
  end },

  { "legend_samples_match_their_series", function()
    local svg = report.svg(fixture())
    local mem = panel_of(svg, "memory")
    local total_line = series_of(mem, "total allocated"):match("<polyline[^>]*>")
    local total_legend = mem:match('<g class="legend" data%-name="total allocated">.-</g>')
    assert(total_line:match('stroke%-dasharray="6,4"') and total_legend:match('stroke%-dasharray="6,4"'),
      "the dashed total line has a solid legend sample")
    local weights_legend = mem:match('<g class="legend" data%-name="weights">.-</g>')
    assert(not weights_legend:match("dasharray"), "a solid line with a dashed legend sample")
    local ev = panel_of(svg, "evaluation")
    assert(ev:match('<g class="legend" data%-name="spearman">.-class="marker".-</g>'), "eval legend has no marker")
  end },

  { "table_and_chart_give_the_same_weights_peak", function()
    local dir = fixture()
    local svg, summary, rows = report.svg(dir)
    local html = report.html(dir, svg, summary, rows)
    local mem = panel_of(svg, "memory")
    -- the chart marks the run's peak (130 MiB) and the steps' peak (87 MiB); the table gives both
    assert(mem:match("weights: 87%.0 MiB") and mem:match("run peak 130%.0 MiB"), "chart legend lacks the weights peaks")
    assert(count(series_of(mem, "weights"), "<path class=\"marker\"") == 1, "no marker at the run's weights peak")
    local row = html:match("<tr><th>peak weights</th><td>([^<]*)</td></tr>")
    assert(row and row:find("130.0 MiB", 1, true) and row:find("87.0 MiB", 1, true), "table row: " .. tostring(row))
    local grads = require("trainer.train.progress").bytes(0.6 * MIB)
    assert(mem:find("grads: " .. grads, 1, true), "chart legend lacks the grads peak")
    assert(html:find("<tr><th>peak grads</th><td>" .. grads .. "</td></tr>", 1, true), "grads row differs from the chart")
  end },

  { "table_gives_eval_to_4_digits_and_wall_time", function()
    local dir = fixture()
    local svg, summary, rows = report.svg(dir)
    local html = report.html(dir, svg, summary, rows)
    local row = html:match("<tr><th>eval %(end%) spearman</th><td>([^<]*)</td></tr>")
    assert(row == "0.8677", "eval (end) spearman row: " .. tostring(row))
    row = html:match("<tr><th>eval %(start%) pearson</th><td>([^<]*)</td></tr>")
    assert(row == "0.55", "eval (start) pearson row: " .. tostring(row))
    row = html:match("<tr><th>wall time</th><td>([^<]*)</td></tr>")
    assert(row == "63.2 s" or row == "63.3 s", "wall time row: " .. tostring(row))
  end },

  { "cleanup", function()
    for _, dir in ipairs(made) do os.execute("rm -rf '" .. dir .. "'") end
  end },
}
