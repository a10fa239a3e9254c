-- `trainer report RUN_DIR`: draws a run's metrics.jsonl (and summary.json) into
-- RUN_DIR/report.svg — four panels over the optimizer steps: training loss, learning rate,
-- evaluation scores, memory allocated per tag — and RUN_DIR/report.html, a page that
-- embeds the SVG with the summary figures. Both are written atomically. Hand-written SVG
-- (no plotting library): lines, axes with a few round ticks, a legend per panel.
local usage = "trainer report RUN_DIR [--out FILE.svg]   draw loss, lr, eval scores and memory into an SVG + HTML page"

local W, H = 960, 300          -- one panel
local ML, MR, MT, MB = 78, 180, 34, 40
local COLORS = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf" }

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

local function bytes(n)
  return require("trainer.progress").bytes(n)
end

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

-- One panel: series = { { name, points = { {x, y}, ... } }, ... }; fmt formats y ticks.
local function panel(svg, y0, title, series, xmax, fmt)
  local ymin, ymax = math.huge, -math.huge
  for _, s in ipairs(series) do
    for _, p in ipairs(s.points) do
      if p[2] == p[2] and math.abs(p[2]) ~= math.huge then ymin, ymax = math.min(ymin, p[2]), math.max(ymax, p[2]) end
    end
  end
  svg[#svg + 1] = ('<g transform="translate(0,%d)">'):format(y0)
  svg[#svg + 1] = ('<text x="%d" y="20" font-size="16" font-weight="bold">%s</text>'):format(ML, esc(title))
  local pw, ph = W - ML - MR, H - MT - MB
  svg[#svg + 1] = ('<rect x="%d" y="%d" width="%d" height="%d" fill="#fafafa" stroke="#888"/>'):format(ML, MT, pw, ph)
  if ymin == math.huge then
    svg[#svg + 1] = ('<text x="%d" y="%d" fill="#888" font-size="14">no data</text>'):format(ML + 20, MT + ph / 2)
    svg[#svg + 1] = "</g>"
    return
  end
  if ymax == ymin then ymin, ymax = ymin - (math.abs(ymin) * 0.1 + 1e-9), ymax + (math.abs(ymax) * 0.1 + 1e-9) end
  local pad = (ymax - ymin) * 0.05
  ymin, ymax = ymin - pad, ymax + pad
  xmax = math.max(xmax, 1)
  local function X(x) return ML + x / xmax * pw end
  local function Y(y) return MT + ph - (y - ymin) / (ymax - ymin) * ph end
  for _, v in ipairs(ticks(ymin, ymax, 5)) do
    svg[#svg + 1] = ('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'):format(ML, ML + pw, Y(v), Y(v))
    svg[#svg + 1] = ('<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>'):format(ML - 6, Y(v) + 4, esc(fmt(v)))
  end
  for _, v in ipairs(ticks(0, xmax, 8)) do
    if v == math.floor(v) then
      svg[#svg + 1] = ('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#888"/>'):format(X(v), X(v), MT + ph, MT + ph + 4)
      svg[#svg + 1] = ('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%d</text>'):format(X(v), MT + ph + 17, v)
    end
  end
  svg[#svg + 1] = ('<text x="%d" y="%d" font-size="11" text-anchor="middle">step</text>'):format(ML + pw / 2, MT + ph + 33)
  for i, s in ipairs(series) do
    local color = COLORS[(i - 1) % #COLORS + 1]
    local pts = {}
    for _, p in ipairs(s.points) do
      if p[2] == p[2] and math.abs(p[2]) ~= math.huge then pts[#pts + 1] = ("%.1f,%.1f"):format(X(p[1]), Y(p[2])) end
    end
    if #pts > 1 then
      svg[#svg + 1] = ('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>'):format(color,
        s.dash and ' stroke-dasharray="6,4"' or "", table.concat(pts, " "))
    end
    if #pts <= 30 then
      for _, xy in ipairs(pts) do
        local x, y = xy:match("([^,]+),(.+)")
        svg[#svg + 1] = ('<circle cx="%s" cy="%s" r="3" fill="%s"/>'):format(x, y, color)
      end
    end
    local ly = MT + 10 + (i - 1) * 18
    svg[#svg + 1] = ('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/>'):format(ML + pw + 12,
      ML + pw + 32, ly, ly, color)
    svg[#svg + 1] = ('<text x="%d" y="%d" font-size="12">%s</text>'):format(ML + pw + 38, ly + 4, esc(s.name))
  end
  svg[#svg + 1] = "</g>"
end

local M = { usage = usage }

-- Builds the SVG text of a run folder; returns svg, summary (or nil).
function M.svg(dir)
  local outputs = require("trainer.outputs")
  local json = require("trainer.json")
  local errors = require("trainer.errors")
  if not outputs.exists(dir .. "/metrics.jsonl") then
    errors.user("%s/metrics.jsonl: missing; give the out folder of a run (e.g. runs/minilm_sts_lora)", dir)
  end
  local rows = outputs.read_metrics(dir)
  local summary = outputs.exists(dir .. "/summary.json") and json.read(dir .. "/summary.json") or nil
  local loss, lr, xmax = { name = "loss", points = {} }, { name = "lr", points = {} }, 0
  local evals, eval_names, mem = {}, {}, {}
  local tags = { "weights", "grads", "optimizer", "activations", "workspace" }
  for _, t in ipairs(tags) do mem[t] = { name = t, points = {} } end
  mem.weights.dash = true   -- weights and grads are often the same size: keep both visible
  local peak = { name = "peak (total)", points = {} }
  if summary and type(summary.eval_start) == "table" then
    for k, v in pairs(summary.eval_start) do
      if not evals[k] then evals[k] = { name = k, points = {} } eval_names[#eval_names + 1] = k end
      table.insert(evals[k].points, { 0, v })
    end
  end
  for _, r in ipairs(rows) do
    local s = r.step or 0
    xmax = math.max(xmax, s)
    if type(r.loss) == "number" then table.insert(loss.points, { s, r.loss }) end
    if type(r.lr) == "number" then table.insert(lr.points, { s, r.lr }) end
    if type(r.eval) == "table" then
      for k, v in pairs(r.eval) do
        if not evals[k] then evals[k] = { name = k, points = {} } eval_names[#eval_names + 1] = k end
        table.insert(evals[k].points, { s, v })
      end
    end
    local by_tag = type(r.mem_peak_by_tag) == "table" and r.mem_peak_by_tag or r.mem_by_tag
    if type(by_tag) == "table" then
      for _, t in ipairs(tags) do table.insert(mem[t].points, { s, (by_tag[t] or 0) / 1048576 }) end
    end
    if type(r.mem_peak) == "number" then table.insert(peak.points, { s, r.mem_peak / 1048576 }) end
  end
  table.sort(eval_names)
  local eval_series = {}
  for _, k in ipairs(eval_names) do eval_series[#eval_series + 1] = evals[k] end
  local mem_series = {}
  for _, t in ipairs(tags) do mem_series[#mem_series + 1] = mem[t] end
  mem_series[#mem_series + 1] = peak
  local svg = { ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
    .. 'viewBox="0 0 %d %d">'):format(W, 4 * H + 20, W, 4 * H + 20),
    ('<rect width="%d" height="%d" fill="white"/>'):format(W, 4 * H + 20) }
  -- a trailing mean over ~1/20 of the run (at least 5 steps): batch noise hides the trend
  local smooth = { name = "loss, moving mean", points = {} }
  local win = math.max(5, math.floor(#loss.points / 20))
  if #loss.points >= 2 * win then
    local sum = 0
    for i, p in ipairs(loss.points) do
      sum = sum + p[2]
      if i > win then sum = sum - loss.points[i - win][2] end
      if i >= win then smooth.points[#smooth.points + 1] = { p[1], sum / win } end
    end
  end
  panel(svg, 0, "training loss", #smooth.points > 0 and { loss, smooth } or { loss }, xmax, num)
  panel(svg, H, "learning rate", { lr }, xmax, num)
  panel(svg, 2 * H, "evaluation", eval_series, xmax, num)
  panel(svg, 3 * H, "memory per tag, peak within each step (MiB)", mem_series, xmax, num)
  svg[#svg + 1] = "</svg>"
  return table.concat(svg, "\n") .. "\n", summary
end

function M.html(dir, svg, summary)
  local rows = {}
  local function add(k, v) rows[#rows + 1] = ("<tr><th>%s</th><td>%s</td></tr>"):format(esc(k), esc(v)) end
  if summary then
    add("steps", summary.steps)
    add("final loss", type(summary.final_loss) == "number" and num(summary.final_loss) or "-")
    add("tokens/s", type(summary.tokens_per_s) == "number" and ("%.0f"):format(summary.tokens_per_s) or "-")
    add("peak allocated", bytes(summary.peak_allocated))
    add("peak reserved", bytes(summary.peak_reserved))
    for _, which in ipairs({ "eval_start", "eval" }) do
      if type(summary[which]) == "table" then
        local keys = {}
        for k in pairs(summary[which]) do keys[#keys + 1] = k end
        table.sort(keys)
        for _, k in ipairs(keys) do add((which == "eval" and "eval (end) " or "eval (start) ") .. k, num(summary[which][k])) end
      end
    end
    if type(summary.peak_by_tag) == "table" then
      for _, t in ipairs({ "weights", "grads", "optimizer", "activations", "workspace" }) do
        add("peak " .. t, bytes(summary.peak_by_tag[t]))
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
]]):format(esc(dir), esc(dir), table.concat(rows, "\n"), svg)
end

function M.run(args)
  local cl = require("trainer.command_line")
  local errors = require("trainer.errors")
  local outputs = require("trainer.outputs")
  local pos, flags = cl.parse(args, { out = "value" }, usage)
  if #pos ~= 1 then errors.user("report needs a run folder\nusage: %s", usage) end
  local dir = pos[1]:gsub("/+$", "")
  local svg, summary = M.svg(dir)
  local svg_path = flags.out or (dir .. "/report.svg")
  local html_path = svg_path:gsub("%.svg$", "") .. ".html"
  outputs.write_atomic(svg_path, svg)
  outputs.write_atomic(html_path, M.html(dir, svg, summary))
  io.write(svg_path, "\n", html_path, "\n")
  return 0
end

return M
