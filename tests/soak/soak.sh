#!/usr/bin/env bash
# tests/soak/soak.sh [STEPS] — `make soak`: a tiny model trains STEPS steps (default 5000) on
# the CPU, evaluating and saving every 100 steps, and a hook samples, at every evaluation,
# the process's resident memory (VmRSS), its open file descriptors (/proc/self/fd) and the
# allocator's reserved bytes (the step's mem_reserved). Checks, after a warm-up of a tenth
# of the run:
#   - resident memory grows by at most SOAK_RSS_MIB (default 16 MiB) over the rest of the run;
#   - reserved bytes do not grow at all (the caching allocator reuses its blocks);
#   - as many descriptors are open at the end as after the warm-up, never more (no leak);
#   - every checkpoint loads (trainer.load_model), and the run resumes from the last one.
# With build/cudacpu/trainer (make cudacpu) the same runs on emulated CUDA for STEPS/20
# steps, every 50 (SOAK_CPU=0: that one alone). Prints the figures and one PASS/FAIL line per
# check.
source "$(dirname "$0")/../cli/lib.sh"
cd "$ROOT"
STEPS=${1:-5000}

# $TMP/tiny, 256 train and 16 dev rows of up to 9 words (tests/cli/sts_fixture.lua)
"$TRAINER" run tests/cli/sts_fixture.lua "$TMP" 256 6 || { echo "FAIL soak_fixtures: could not make the tiny model"; exit 1; }

soak() { # name, binary, device, steps, every
  local name=$1 bin=$2 device=$3 steps=$4 every=$5
  local out="$TMP/runs/$name" samples="$TMP/$name.samples"
  cat >"$TMP/$name.lua" <<EOF
-- the soak recipe: named on the command line, so its hooks may read /proc
local function rss_kib()
  local f = io.open("/proc/self/status") local kib
  for line in f:lines() do kib = kib or tonumber(line:match("^VmRSS:%s*(%d+)")) end
  f:close() return kib
end
local reserved = -1
return {
  model = { from = "$TMP/tiny" },
  data = { train = "$TMP/train.jsonl", eval = "$TMP/dev.jsonl", columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosent" }, optim = { lr = 1e-4 }, batch = { size = 4 }, steps = $steps,
  eval = { every = $every, at_start = false }, save = { every = $every, keep = 1000 },
  log = { every = $every }, device = "$device", out = "$out", overwrite = true,
  hooks = {
    on_step = function(_, m) if m and m.mem_reserved then reserved = m.mem_reserved end end,
    on_eval = function(t)
      collectgarbage()
      local f = io.open("$samples", "a")
      local fds = #require("trainer.core.sys").list_dir("/proc/self/fd")
      f:write(("%d %d %d %d\n"):format(t.step, rss_kib(), fds, reserved))
      f:close()
    end,
  },
}
EOF
  local start; start=$(date +%s)
  "$bin" "$TMP/$name.lua" --quiet >"$TMP/$name.out" 2>&1
  local rc=$? took=$(( $(date +%s) - start ))
  if [ $rc -ne 0 ]; then fail "${name}_run" "exit $rc: $(tail -5 "$TMP/$name.out")"; return; fi
  pass "${name}_run"
  echo "  $name: $steps steps on $device in ${took} s"
  # the checks, on the samples "step rss_kib fds reserved_bytes"
  awk -v name="$name" -v steps="$steps" -v rss_mib="${SOAK_RSS_MIB:-16}" '
    { step[NR] = $1; rss[NR] = $2; fd[NR] = $3; res[NR] = $4 }
    END {
      w = 1; for (i = 1; i <= NR; i++) if (step[i] <= steps / 10) w = i
      maxrss = rss[w]; maxres = res[w]; maxfd = fd[w]
      for (i = w; i <= NR; i++) { if (rss[i] > maxrss) maxrss = rss[i]; if (res[i] > maxres) maxres = res[i]; if (fd[i] > maxfd) maxfd = fd[i] }
      printf "  %s: %d samples; first %.1f MiB RSS at step %d; after warm-up (step %d): RSS %.1f MiB -> max %.1f, last %.1f MiB; reserved %d -> max %d bytes; fds %d -> max %d, last %d\n", \
        name, NR, rss[1] / 1024, step[1], step[w], rss[w] / 1024, maxrss / 1024, rss[NR] / 1024, res[w], maxres, fd[w], maxfd, fd[NR]
      ok = 1
      if ((maxrss - rss[w]) / 1024 > rss_mib) { printf "FAIL %s_rss_bounded: grew %.1f MiB after warm-up\n", name, (maxrss - rss[w]) / 1024; ok = 0 } else print "PASS " name "_rss_bounded"
      if (maxres > res[w]) { print "FAIL " name "_reserved_flat: grew by " maxres - res[w] " bytes"; ok = 0 } else print "PASS " name "_reserved_flat"
      if (fd[NR] != fd[w] || maxfd > fd[w]) { print "FAIL " name "_no_fd_left_open: " fd[w] " -> " fd[NR] " (max " maxfd ")"; ok = 0 } else print "PASS " name "_no_fd_left_open"
      exit !ok
    }' "$samples" || failures=$((failures + 1))
  # every checkpoint loads
  cat >"$TMP/$name.load.lua" <<EOF
local outputs = require("trainer.train.outputs")
local n, bad = 0, {}
for _, c in ipairs(outputs.checkpoints("$out")) do
  local ok, e = pcall(trainer.load_model, c.dir, { task = "embedding" })
  if ok then n = n + 1 else bad[#bad + 1] = c.dir .. ": " .. tostring(type(e) == "table" and e.msg or e) end
end
io.write(n, "\t", table.concat(bad, "; "), "\n")
EOF
  local res; res=$("$bin" run "$TMP/$name.load.lua" 2>&1)
  local n=${res%%$'\t'*} bad=${res#*$'\t'}
  # one checkpoint every `every` steps, and the run's last step saves one when it is not on that grid
  if [ "$n" = "$(( (steps + every - 1) / every ))" ] && [ -z "$bad" ]; then pass "${name}_checkpoints_load"; echo "  $name: $n checkpoints loaded"
  else fail "${name}_checkpoints_load" "$res"; fi
  if "$bin" resume "$out" steps=$(( steps + 10 )) --quiet >"$TMP/$name.resume" 2>&1; then pass "${name}_last_checkpoint_resumes"
  else fail "${name}_last_checkpoint_resumes" "$(tail -3 "$TMP/$name.resume")"; fi
}

if [ "${SOAK_CPU:-1}" != 0 ]; then soak soak_cpu "$TRAINER" cpu "$STEPS" 100; fi
if [ -x build/cudacpu/trainer ]; then
  soak soak_cuda build/cudacpu/trainer cuda $(( STEPS / 20 )) 50
else
  echo "SKIP soak_cuda: build/cudacpu/trainer is not built (make cudacpu)"
fi
finish
