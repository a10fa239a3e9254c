-- `trainer report RUN_DIR`: draws a run's metrics.jsonl (and summary.json) into
-- RUN_DIR/report.svg — four panels over the optimizer steps: training loss, learning rate,
-- evaluation scores, memory per tag — and RUN_DIR/report.html, a page that embeds the SVG
-- with the summary figures. Both are written atomically. Hand-written SVG (no plotting
-- library): lines, axes with round ticks and a labelled y axis, a legend per panel drawn
-- with each series' own stroke and marker.
--
-- The memory panel uses a log axis: with LoRA the weights are ~100x the gradients and the
-- optimizer state, and on a linear axis the small tags all sit on the zero line. The SVG
-- carries class names (`panel`, `ylabel`, `series` with data-name, `marker`, `legend`) so
-- tests can check its structure.
local usage = "trainer report RUN_DIR [--out FILE.svg]   draw loss, lr, eval scores and memory into an SVG + HTML page"

local W, H = 960, 300          -- one panel
local ML, MR, MT, MB = 86, 230, 34, 40
local COLORS = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf" }
local TAGS = { "weights", "grads", "optimizer", "activations", "workspace" }
local MIB = 1048576

local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

local function num(x)
  if x == 0 then return "0" end
  local a = math.abs(x)
  if a >= 1e6 or a < 1e-3 then return ("%.2g"):format(x) end
  if a >= 100 then return ("%.0f"):format(x) end
  return (("%.3f"):format(x):gsub("0+$", ""):gsub("%.$", ""))
end

-- An evaluation score to 4 significant digits (0.8672 and 0.8677 read apart).
local function score(x)
  return ("%.4g"):format(x)
end

local function bytes(n)
  return require("trainer.train.progress").bytes(n)
end

local function finite(y) return type(y) == "number" and y == y and math.abs(y) ~= math.huge end

-- Round tick values covering [lo, hi].
local function ticks(lo, hi, n)
  if hi <= lo then hi = lo + 1 end
  local raw = (hi - lo) / (n or 5)
  local mag = 10 ^ math.floor(math.log10(raw))
  local step = mag
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    if raw <= m * mag then step = m * mag break end
  end
  local out = {}
  local v = math.ceil(lo / step) * step
  while v <= hi + step * 1e-9 do out[#out + 1] = v v = v + step end
  return out
end

-- Ticks of a log axis over [lo, hi] (both > 0): 1, 10, 100 ..., with 2 and 5 between when
-- the range spans few decades.
local function log_ticks(lo, hi)
  local out = {}
  local d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
  local mults = (d1 - d0) <= 2 and { 1, 2, 5 } or { 1 }
  for d = d0, d1 do
    for _, m in ipairs(mults) do
      local v = m * 10 ^ d
      if v >= lo * 0.999 and v <= hi * 1.001 then out[#out + 1] = v end
    end
  end
  return out
end

-- The stroke attributes of a series, shared by its line and its legend sample.
local function stroke(s, color)
  return ('stroke="%s" stroke-width="%s"%s'):format(color, s.width or 2,
    s.dash and (' stroke-dasharray="%s"'):format(s.dash) or "")
end

local function marker(svg, x, y, color, s)
  if s.marker == "diamond" then
    svg[#svg + 1] = ('<path class="marker" d="M%.1f %.1fl5 5l-5 5l-5 -5z" fill="white" stroke="%s" stroke-width="2"/>')
      :format(x, y - 5, color)
  else
    svg[#svg + 1] = ('<circle class="marker" cx="%.1f" cy="%.1f" r="%s" fill="%s"/>'):format(x, y, s.r or 3.5, color)
  end
end

-- One panel. p = { title, ylabel, series = { { name, points = { {x, y}, ... }, dash, markers,
-- marker, width, legend, extra = { {x, y}, ... } drawn as hollow markers }, ... }, xmax, fmt,
-- log }. A series with markers = true draws a marker at every point (evaluations); others
-- draw markers only when they have few points.
local function panel(svg, y0, p)
  local series, fmt = p.series, p.fmt or num
  local function usable(y) return finite(y) and (not p.log or y > 0) end
  local ymin, ymax = math.huge, -math.huge
  for _, s in ipairs(series) do
    for _, list in ipairs({ s.points, s.extra or {} }) do
      for _, pt in ipairs(list) do
        if usable(pt[2]) then ymin, ymax = math.min(ymin, pt[2]), math.max(ymax, pt[2]) end
      end
    end
  end
  svg[#svg + 1] = ('<g class="panel" data-title="%s" transform="translate(0,%d)">'):format(esc(p.title), y0)
  svg[#svg + 1] = ('<text x="%d" y="20" font-size="16" font-weight="bold">%s</text>'):format(ML, esc(p.title))
  local pw, ph = W - ML - MR, H - MT - MB
  svg[#svg + 1] = ('<rect x="%d" y="%d" width="%d" height="%d" fill="#fafafa" stroke="#888"/>'):format(ML, MT, pw, ph)
  svg[#svg + 1] = ('<text class="ylabel" x="%d" y="%.1f" font-size="12" text-anchor="middle" transform="rotate(-90 %d %.1f)">%s</text>')
    :format(16, MT + ph / 2, 16, MT + ph / 2, esc(p.ylabel))
  svg[#svg + 1] = ('<text class="xlabel" x="%d" y="%d" font-size="12" text-anchor="middle">optimizer step</text>')
    :format(ML + pw / 2, MT + ph + 34)
  if ymin == math.huge then
    svg[#svg + 1] = ('<text x="%d" y="%d" fill="#888" font-size="14">no data</text>'):format(ML + 20, MT + ph / 2)
    svg[#svg + 1] = "</g>"
    return
  end
  local T, tick_values
  if p.log then
    ymin, ymax = ymin / 2, ymax * 2
    T = math.log10
    tick_values = log_ticks(ymin, ymax)
  else
    if ymax == ymin then ymin, ymax = ymin - (math.abs(ymin) * 0.1 + 1e-9), ymax + (math.abs(ymax) * 0.1 + 1e-9) end
    local pad = (ymax - ymin) * 0.05
    ymin, ymax = ymin - pad, ymax + pad
    T = function(v) return v end
    tick_values = ticks(ymin, ymax, 5)
  end
  local xmax = math.max(p.xmax, 1)
  local function X(x) return ML + x / xmax * pw end
  local function Y(y) return MT + ph - (T(y) - T(ymin)) / (T(ymax) - T(ymin)) * ph end
  for _, v in ipairs(tick_values) do
    svg[#svg + 1] = ('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'):format(ML, ML + pw, Y(v), Y(v))
    svg[#svg + 1] = ('<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>'):format(ML - 6, Y(v) + 4, esc(fmt(v)))
  end
  for _, v in ipairs(ticks(0, xmax, 8)) do
    if v == math.floor(v) then
      svg[#svg + 1] = ('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#888"/>'):format(X(v), X(v), MT + ph, MT + ph + 4)
      svg[#svg + 1] = ('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%d</text>'):format(X(v), MT + ph + 17, v)
    end
  end
  local ly = MT + 10
  for i, s in ipairs(series) do
    local color = s.color or COLORS[(i - 1) % #COLORS + 1]
    local pts = {}
    for _, pt in ipairs(s.points) do
      if usable(pt[2]) then pts[#pts + 1] = { X(pt[1]), Y(pt[2]) } end
    end
    local with_markers = s.markers or (#pts <= 30 and s.markers ~= false)
    svg[#svg + 1] = ('<g class="series" data-name="%s" data-points="%d">'):format(esc(s.name), #pts)
    if #pts > 1 then
      local text = {}
      for j, xy in ipairs(pts) do text[j] = ("%.1f,%.1f"):format(xy[1], xy[2]) end
      svg[#svg + 1] = ('<polyline fill="none" %s points="%s"/>'):format(stroke(s, color), table.concat(text, " "))
    end
    if with_markers then
      for _, xy in ipairs(pts) do marker(svg, xy[1], xy[2], color, s) end
    end
    for _, pt in ipairs(s.extra or {}) do
      if usable(pt[2]) then marker(svg, X(pt[1]), Y(pt[2]), color, { marker = "diamond" }) end
    end
    svg[#svg + 1] = "</g>"
    -- the legend sample: the same stroke, and the same marker when the line has markers
    local lx = ML + pw + 12
    svg[#svg + 1] = ('<g class="legend" data-name="%s">'):format(esc(s.name))
    if #pts > 1 or not with_markers then
      svg[#svg + 1] = ('<line x1="%d" x2="%d" y1="%d" y2="%d" %s/>'):format(lx, lx + 24, ly, ly, stroke(s, color))
    end
    if with_markers then marker(svg, lx + 12, ly, color, s) end
    local lines = type(s.legend) == "table" and s.legend or { s.legend or s.name }
    for j, line in ipairs(lines) do
      svg[#svg + 1] = ('<text x="%d" y="%d" font-size="12"%s>%s</text>'):format(lx + 30, ly + 4 + (j - 1) * 14,
        j > 1 and ' fill="#555"' or "", esc(line))
    end
    -- the second legend line of a series with extra points names them: show their marker
    if s.extra and #lines > 1 then marker(svg, lx + 12, ly + 14, color, { marker = "diamond" }) end
    svg[#svg + 1] = "</g>"
    ly = ly + 6 + 14 * #lines
  end
  if p.note then
    svg[#svg + 1] = ('<text x="%d" y="%d" font-size="11" fill="#555">%s</text>'):format(ML + pw + 12, ly + 8, esc(p.note))
  end
  svg[#svg + 1] = "</g>"
end

local M = { usage = usage }

-- The memory panel's series: one line per tag (that step's peak, MiB), and the total peak.
-- A tag whose whole-run peak (summary.json: it also covers loading, evaluation and saving,
-- between the steps) exceeds what the steps show gets a hollow marker at the end with that
-- value, so the chart shows the figure the table prints.
local function memory_series(rows, summary, xmax)
  local series, lookup = {}, {}
  for _, t in ipairs(TAGS) do
    lookup[t] = { name = t, points = {}, max = 0 }
    series[#series + 1] = lookup[t]
  end
  local total = { name = "total allocated", points = {}, max = 0, color = "#000000", width = 1.5, dash = "6,4",
                  markers = false }
  for _, r in ipairs(rows) do
    local by_tag = type(r.mem_peak_by_tag) == "table" and r.mem_peak_by_tag or r.mem_by_tag
    if type(by_tag) == "table" then
      for _, t in ipairs(TAGS) do
        local v = tonumber(by_tag[t]) or 0
        table.insert(lookup[t].points, { r.step or 0, v / MIB })
        lookup[t].max = math.max(lookup[t].max, v)
      end
    end
    if type(r.mem_peak) == "number" then
      table.insert(total.points, { r.step or 0, r.mem_peak / MIB })
      total.max = math.max(total.max, r.mem_peak)
    end
  end
  local run_peaks = summary and type(summary.peak_by_tag) == "table" and summary.peak_by_tag or {}
  for _, s in ipairs(series) do
    s.markers = false
    local run_peak = tonumber(run_peaks[s.name])
    if run_peak and run_peak > s.max * 1.01 then
      s.extra = { { xmax, run_peak / MIB } }
      s.legend = { ("%s: %s"):format(s.name, bytes(s.max)), ("  run peak %s"):format(bytes(run_peak)) }
    elseif s.max == 0 then
      s.legend = { ("%s: 0 B (not drawn)"):format(s.name) }
    else
      s.legend = ("%s: %s"):format(s.name, bytes(s.max))
    end
  end
  total.legend = ("total: %s"):format(bytes(total.max))
  series[#series + 1] = total
  return series
end

-- The loss's name from the run's resolved_recipe.lua (a data-only table), for the y label;
-- nil when the file is absent or unreadable (the label then says just "loss").
local function recipe_loss_name(dir)
  local r = require("trainer.recipe.sandbox").read_data(dir .. "/resolved_recipe.lua", {})
  if type(r) == "table" and type(r.loss) == "table" and type(r.loss.name) == "string" then return r.loss.name end
  return nil
end

-- Builds the SVG text of a run folder; returns svg, summary (or nil), the metrics rows.
function M.svg(dir)
  local fs = require("trainer.core.fs")
  local outputs = require("trainer.train.outputs")
  local json = require("trainer.core.json")
  local errors = require("trainer.core.errors")
  if not fs.exists(dir .. "/metrics.jsonl") then
    errors.user("%s/metrics.jsonl: missing; give the out folder of a run (e.g. runs/minilm_sts_lora)", dir)
  end
  local rows = outputs.read_metrics(dir)
  local summary = fs.exists(dir .. "/summary.json") and json.read(dir .. "/summary.json") or nil
  local loss, lr, xmax = { name = "loss", points = {}, width = 1, color = "#9ab8d8" }, { name = "lr", points = {} }, 0
  local evals, eval_names = {}, {}
  local function eval_point(k, s, v)
    if type(v) ~= "number" then return end
    if not evals[k] then evals[k] = { name = k, points = {}, markers = true } eval_names[#eval_names + 1] = k end
    table.insert(evals[k].points, { s, v })
  end
  if summary and type(summary.eval_start) == "table" then
    for k, v in pairs(summary.eval_start) do eval_point(k, 0, v) end
  end
  for _, r in ipairs(rows) do
    local s = r.step or 0
    xmax = math.max(xmax, s)
    if type(r.loss) == "number" then table.insert(loss.points, { s, r.loss }) end
    if type(r.lr) == "number" then table.insert(lr.points, { s, r.lr }) end
    if type(r.eval) == "table" then
      for k, v in pairs(r.eval) do eval_point(k, s, v) end
    end
  end
  table.sort(eval_names)
  local eval_series = {}
  for _, k in ipairs(eval_names) do eval_series[#eval_series + 1] = evals[k] end
  local total_h = 4 * H + 20
  local svg = { ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
    .. 'viewBox="0 0 %d %d">'):format(W, total_h, W, total_h),
    ('<rect width="%d" height="%d" fill="white"/>'):format(W, total_h) }
  -- a trailing mean over ~1/20 of the run (at least 5 steps): batch noise hides the trend
  local smooth = { name = "moving mean", points = {}, color = "#1f77b4", width = 2.5, markers = false }
  local win = math.max(5, math.floor(#loss.points / 20))
  if #loss.points >= 2 * win then
    local sum = 0
    for i, pt in ipairs(loss.points) do
      sum = sum + pt[2]
      if i > win then sum = sum - loss.points[i - win][2] end
      if i >= win then smooth.points[#smooth.points + 1] = { pt[1], sum / win } end
    end
    smooth.legend = { "moving mean", ("  of %d steps"):format(win) }
  end
  loss.legend = "loss of each step"
  local loss_name = recipe_loss_name(dir)
  panel(svg, 0, { title = "training loss", ylabel = loss_name and ("loss (" .. loss_name .. ")") or "loss",
    series = #smooth.points > 0 and { loss, smooth } or { loss }, xmax = xmax })
  panel(svg, H, { title = "learning rate", ylabel = "learning rate", series = { lr }, xmax = xmax })
  panel(svg, 2 * H, { title = "evaluation (each marker is one evaluation)", ylabel = "score (correlation or accuracy)",
    series = eval_series, xmax = xmax })
  panel(svg, 3 * H, { title = "memory per tag, peak within each step", ylabel = "MiB (log scale)",
    series = memory_series(rows, summary, xmax), xmax = xmax, log = true,
    fmt = function(v) return num(v) end })
  svg[#svg + 1] = "</svg>"
  return table.concat(svg, "\n") .. "\n", summary, rows
end

-- The largest per-step peak of each tag in metrics.jsonl (what the memory chart draws).
local function step_peaks(rows)
  local out = {}
  for _, r in ipairs(rows or {}) do
    local by_tag = type(r.mem_peak_by_tag) == "table" and r.mem_peak_by_tag or r.mem_by_tag
    if type(by_tag) == "table" then
      for _, t in ipairs(TAGS) do out[t] = math.max(out[t] or 0, tonumber(by_tag[t]) or 0) end
    end
  end
  return out
end

function M.html(dir, svg, summary, rows)
  local out = {}
  local function add(k, v) out[#out + 1] = ("<tr><th>%s</th><td>%s</td></tr>"):format(esc(k), esc(v)) end
  if summary then
    add("steps", summary.steps)
    add("final loss", type(summary.final_loss) == "number" and num(summary.final_loss) or "-")
    add("tokens/s", type(summary.tokens_per_s) == "number" and ("%.0f"):format(summary.tokens_per_s) or "-")
    if type(summary.wall_time_s) == "number" then add("wall time", ("%.1f s"):format(summary.wall_time_s)) end
    add("peak allocated", bytes(summary.peak_allocated))
    add("peak reserved", bytes(summary.peak_reserved))
    for _, which in ipairs({ "eval_start", "eval" }) do
      if type(summary[which]) == "table" then
        local keys = {}
        for k in pairs(summary[which]) do keys[#keys + 1] = k end
        table.sort(keys)
        for _, k in ipairs(keys) do add((which == "eval" and "eval (end) " or "eval (start) ") .. k, score(summary[which][k])) end
      end
    end
    if type(summary.peak_by_tag) == "table" then
      -- the chart draws the steps' peaks; the run's peak also covers loading, evaluation
      -- and saving. Both figures are given where they differ, so table and chart agree.
      local in_steps = step_peaks(rows)
      for _, t in ipairs(TAGS) do
        local run_peak, step_peak = tonumber(summary.peak_by_tag[t]) or 0, in_steps[t]
        if step_peak and run_peak > step_peak * 1.01 then
          add("peak " .. t, ("%s (in the training steps, as charted: %s)"):format(bytes(run_peak), bytes(step_peak)))
        else
          add("peak " .. t, bytes(run_peak))
        end
      end
    end
  end
  return ([[<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>trainer report: %s</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}th,td{padding:2px 12px;text-align:left;border-bottom:1px solid #ddd}</style>
</head><body>
<h1>trainer report: %s</h1>
<table>%s</table>
%s</body></html>
]]):format(esc(dir), esc(dir), table.concat(out, "\n"), svg)
end

function M.run(args)
  local cl = require("trainer.cli.model_args")
  local errors = require("trainer.core.errors")
  local outputs = require("trainer.train.outputs")
  local pos, flags = cl.parse(args, { out = "value" }, usage)
  if #pos ~= 1 then errors.user("report needs a run folder\nusage: %s", usage) end
  local dir = pos[1]:gsub("/+$", "")
  local svg, summary, rows = M.svg(dir)
  local svg_path = flags.out or (dir .. "/report.svg")
  local html_path = svg_path:gsub("%.svg$", "") .. ".html"
  outputs.write_atomic(svg_path, svg)
  outputs.write_atomic(html_path, M.html(dir, svg, summary, rows))
  io.write(svg_path, "\n", html_path, "\n")
  return 0
end

return M
