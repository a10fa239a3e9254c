#!/usr/bin/env bash
# tests/cudacpu/train_resume.sh — exact resume on device = "cuda": a run stopped part way and
# continued with `trainer resume RUN_DIR` writes the losses of the unbroken run, bit for bit
# (weights, AdamW moments, the RNG counter, the data cursor and, under fp16, the device loss
# scale restored from the checkpoint; the kernels are deterministic, so the same inputs give
# the same bits). Against the unbroken cuda run, exactly (train_compare.lua, tolerance 0):
#   train_resume_sigint        fp32, 6 steps, SIGINT sent by an on_step hook at step 3 (the
#                              run saves and exits 130), then resumed: loss, clip norm, lr;
#   train_resume_fp16_steps    fp16 with the loss scale on the device (initial scale 2^20,
#                              growth_interval 2: skips and growths on both sides of the stop),
#                              10 steps; run with steps=5 and resumed with steps=10 (both
#                              through train_run.lua, which gives the scaler's options; a
#                              constant lr, which does not depend on the planned steps): loss,
#                              loss_scale, skipped, clip norm, lr;
#   train_repeat_order         the unbroken fp32 run again with the emulator's threads in reverse
#                              warp order (CUDACPU_SCHEDULE=warprev; on a GPU it is ignored and
#                              this is a plain repeat): the same bits. Exact resume needs a run
#                              to repeat itself; a race between threads shows up here.
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_resume_sigint train_resume_fp16_steps train_repeat_order"
need_cuda
fixture

cat >"$FX/stop.lua" <<LUA
return { extends = "mnrl.lua", save = { every = 3, keep = 5 }, hooks = { on_step = function(t)
  if t.step == tonumber(os.getenv("STOP_AT") or "") then
    local ffi = require("ffi")
    pcall(ffi.cdef, "int kill(int pid, int sig); int getpid(void);")
    ffi.C.kill(ffi.C.getpid(), 2)
  end
end } }
LUA
train whole "$FX/stop.lua" device=cuda; aw=$?
STOP_AT=3 train split "$FX/stop.lua" device=cuda; s=$?
"$TRAINER" resume "$W/runs/split" --quiet >"$W/runs/split_resume.log" 2>&1; b=$?
rows=$(grep -c . "$W/runs/split/metrics.jsonl" 2>/dev/null)
if [ "$s" != 130 ]; then fail train_resume_sigint "the stopped run exited $s, not 130 (SIGINT): $(tail -n 2 "$W/runs/split.log")"
else judge train_resume_sigint split $b whole $aw "loss:0,grad_norm:0,lr:0,tokens:0" "stopped at step 3, resumed"; fi

S="--init-scale 1048576 --growth-interval 2"
drive f16_whole $S "$FX/nli.lua" device=cuda precision=fp16 steps=10 save.every=5 schedule.name=constant; a=$?
drive f16_split $S "$FX/nli.lua" device=cuda precision=fp16 steps=5 save.every=5 schedule.name=constant; s=$?
"$TRAINER" run tests/cudacpu/train_run.lua $S --resume "$W/runs/f16_split" steps=10 >"$W/runs/f16_resume.log" 2>&1; b=$?
if [ "$s" != 0 ]; then fail train_resume_fp16_steps "the 5-step run failed (rc $s): $(tail -n 2 "$W/runs/f16_split.log")"
else judge train_resume_fp16_steps f16_split $b f16_whole $a "loss:0,loss_scale:0,skipped:0,grad_norm:0,lr:0" \
  "5 steps, resumed to 10"; fi

CUDACPU_SCHEDULE=warprev train whole_warprev "$FX/stop.lua" device=cuda; b=$?
judge train_repeat_order whole_warprev $b whole $aw "loss:0,grad_norm:0" "threads in reverse warp order"
finish
