#!/usr/bin/env bash
# Data-parallel training under mpirun, on the CPU with 2 ranks and a tiny model:
#   * the 2-rank losses equal, step by step, one process's with the doubled batch (printed
#     side by side; within the rounding of the all-reduce), for a full fine-tune and LoRA;
#   * only rank 0 writes: one metrics line per step, checkpoints once;
#   * buckets start while backward runs (DDP's overlap), only on a step's last micro-batch,
#     with the same losses as without the overlap, checkpointed or not;
#   * a 2-rank run resumed with 2 ranks gives the unbroken run's losses exactly; resumed
#     with another number of ranks it is refused with a message that says what works;
#   * a killed rank and a hung rank end the run with an error naming rank 1, well within
#     the bound (never a silent hang); Ctrl-C on mpirun saves one checkpoint.
# Without mpirun, or in a build without MPI, it prints SKIP.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP distributed: mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev, then make)"; exit 0
fi
cat >"$TMP/have_mpi.lua" <<'EOF'
io.write(require("trainer.core.ffi").tr_dist_have_mpi() == 1 and "yes" or "no")
EOF
have_mpi=$("$TRAINER" run "$TMP/have_mpi.lua" 2>/dev/null)
source "$(dirname "$0")/tiny_fixtures.sh"
if [ "$have_mpi" != yes ]; then
  # a build without MPI: a recipe with `distributed` stops at once, saying so
  run_trainer "$TMP/sts.lua" distributed.timeout=5 --quiet
  expect_rc no_mpi_build_refuses_rc 1
  expect_err no_mpi_build_says_so "this build of trainer has no MPI"
  echo "SKIP distributed: this build of trainer has no MPI (install libopenmpi-dev and rebuild)"; finish; exit
fi

# CI runs as root; one thread per rank (2 ranks share the cores)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

MPIRUN=(timeout 60 mpirun -np 2 --oversubscribe)
run_mpi() { "${MPIRUN[@]}" "$TRAINER" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null; RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err"); }

# cosine (MSE) decomposes over the rows of a batch, and dropout is off, so the global
# batch split over 2 ranks computes the same step as one process
cat >"$TMP/dist.lua" <<EOF
return {
  model = { from = "$TMP/tiny", dropout = 0 },
  data = { train = "$TMP/train.jsonl", columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosine" }, optim = { lr = 1e-3 }, batch = { size = 4 }, steps = 6,
  save = { every = 3, keep = 10 }, log = { every = 1 }, device = "cpu", eval = { at_start = false },
  out = "$TMP/runs/dist", distributed = { timeout = 20 },
  hooks = { on_step = function(t)
    local fault = os.getenv("FAULT")
    if not (fault and t.dist and t.step == 2) then return end
    local ffi = require("ffi")
    pcall(ffi.cdef, "int kill(int pid, int sig); int getppid(void); unsigned int sleep(unsigned int);")
    if fault == "kill" and t.dist.rank == 1 then os.execute("kill -KILL \$PPID") end   -- the shell's parent: rank 1
    if fault == "hang" and t.dist.rank == 1 then ffi.C.sleep(60) end
    if fault == "ctrl-c" and t.dist.rank == 0 then ffi.C.kill(ffi.C.getppid(), 2) end   -- SIGINT to mpirun
  end },
}
EOF
cat >"$TMP/lora.lua" <<EOF
return { extends = "$TMP/dist.lua", optim = { lr = 1e-2 },
         lora = { r = 4, alpha = 8, dropout = 0, targets = { "query", "value" } } }
EOF
# Prints "step  one-process  2-ranks  |diff|" for two metrics.jsonl; fails when a step
# differs by more than 1e-6 relative (the all-reduce's rounding), or the steps differ.
cat >"$TMP/side.lua" <<'EOF'
local json = require("trainer.core.json")
local function losses(p) local t = {} for l in io.lines(p) do t[#t + 1] = json.decode(l).loss end return t end
local a, b = losses(arg[1]), losses(arg[2])
local ok = #a == #b and #a > 0
print(("  %-5s %-16s %-16s %s"):format("step", "1 process, 2B", "2 ranks, B each", "|diff|"))
for i = 1, math.max(#a, #b) do
  local x, y = a[i] or 0 / 0, b[i] or 0 / 0
  local d = math.abs(x - y)
  if not (d <= 1e-6 * math.max(1, math.abs(x))) then ok = false end
  print(("  %-5d %-16.9g %-16.9g %.2e"):format(i, x, y, d))
end
os.exit(ok and 0 or 1)
EOF
steps_losses() {
  cat >"$TMP/sl.lua" <<EOF
for line in io.lines("$1") do local m = require("trainer.core.json").decode(line) print(m.step, m.loss) end
EOF
  "$TRAINER" run "$TMP/sl.lua"
}

# 2 ranks x batch 4 against 1 process x batch 8 on a recipe: runs/PREFIXone and runs/PREFIXtwo,
# checked as PREFIXone_process_rc, PREFIXtwo_ranks_rc and PREFIXtwo_ranks_equal_doubled_batch.
two_ranks_against_one() { # recipe, prefix ("" or lora_), what the side-by-side losses are of
  run_trainer "$1" batch.size=8 out="$TMP/runs/${2}one" --quiet
  expect_rc "${2}one_process_rc" 0
  run_mpi "$1" out="$TMP/runs/${2}two" --quiet
  expect_rc "${2}two_ranks_rc" 0
  echo "$3, losses side by side:"
  if "$TRAINER" run "$TMP/side.lua" "$TMP/runs/${2}one/metrics.jsonl" "$TMP/runs/${2}two/metrics.jsonl"; then
    pass "${2}two_ranks_equal_doubled_batch"
  else
    fail "${2}two_ranks_equal_doubled_batch" "the losses differ beyond the all-reduce's rounding"
  fi
}

# ---- full fine-tune: 2 ranks x batch 4 against 1 process x batch 8
two_ranks_against_one "$TMP/dist.lua" "" "full fine-tune"

# ---- adaptive_layer over cosine (several backwards per micro-batch: the all-reduce waits for
# the last one): every earlier layer each step, so both runs compute the same terms
cat >"$TMP/adaptive.lua" <<EOF
return { extends = "$TMP/dist.lua", save = { every = 6, keep = 1 },
         loss = { name = "adaptive_layer", inner = "cosine", n_layers_per_step = -1 } }
EOF
two_ranks_against_one "$TMP/adaptive.lua" "adaptive_" "adaptive_layer over cosine"
if [ "$(wc -l <"$TMP/runs/two/metrics.jsonl")" = 6 ]; then pass only_rank0_writes_metrics
else fail only_rank0_writes_metrics "$(wc -l <"$TMP/runs/two/metrics.jsonl") lines for 6 steps"; fi
if [ -d "$TMP/runs/two/checkpoint-3" ] && [ -d "$TMP/runs/two/checkpoint-6" ] && [ -f "$TMP/runs/two/summary.json" ] \
   && ! ls -a "$TMP/runs/two" | grep -q tmp; then pass rank0_checkpoints_and_summary
else fail rank0_checkpoints_and_summary "$(ls -a "$TMP/runs/two" | tr '\n' ' ')"; fi
if gzip -dc "$TMP/runs/two/checkpoint-3/trainer_state" | grep -aq 'world_size[^0-9]*2'; then pass checkpoint_records_world_size
else fail checkpoint_records_world_size "no world_size 2 in trainer_state"; fi

# ---- the ledger: every rank's peak in summary.json, the bucket buffers in the plan
cat >"$TMP/ledger.lua" <<'EOF'
local json = require("trainer.core.json")
local d = json.read(arg[1]).distributed
assert(d and d.world_size == 2 and d.backend == "mpi" and #d.ranks == 2, "summary.json: distributed")
for _, r in ipairs(d.ranks) do assert(r.peak_allocated > 0 and r.peak_reserved >= r.peak_allocated, "rank peaks") end
assert(d.collective_buffer_bytes > 0 and d.allreduce_bytes > 0 and d.buckets >= 6, "all-reduce figures")
print("ok")
EOF
if [ "$("$TRAINER" run "$TMP/ledger.lua" "$TMP/runs/two/summary.json" 2>&1)" = ok ]; then pass summary_per_rank_ledger
else fail summary_per_rank_ledger "$("$TRAINER" run "$TMP/ledger.lua" "$TMP/runs/two/summary.json" 2>&1)"; fi
run_trainer plan "$TMP/dist.lua" --json
expect_out plan_counts_collective_buffers '"collective_bytes":'
expect_out plan_is_per_rank '"per_rank": true'

# ---- LoRA
two_ranks_against_one "$TMP/lora.lua" lora_ "LoRA"

# ---- DDP's overlap: with buckets smaller than the gradients, buckets start while backward
# still runs (after encoder layers' backward, on the last micro-batch only), and the run is
# the same, bit for bit, as with every bucket after backward (distributed.overlap = false),
# with checkpointing too (its recompute runs inside backward); LoRA's tensors are one bucket
ovl=(batch.accumulate=2 steps=3 distributed.bucket=16KiB save.every=100)
run_mpi "$TMP/dist.lua" "${ovl[@]}" out="$TMP/runs/ovl_on" --quiet
expect_rc overlap_on_rc 0
run_mpi "$TMP/dist.lua" "${ovl[@]}" distributed.overlap=false out="$TMP/runs/ovl_off" --quiet
expect_rc overlap_off_rc 0
run_mpi "$TMP/dist.lua" "${ovl[@]}" checkpoint.segments=2 out="$TMP/runs/ovl_ckpt" --quiet
expect_rc overlap_checkpointed_rc 0
cat >"$TMP/overlap.lua" <<'EOF'
local json = require("trainer.core.json")
local function d(run) return json.read(arg[1] .. "/" .. run .. "/summary.json").distributed end
local on, off, ck, lora = d("ovl_on"), d("ovl_off"), d("ovl_ckpt"), d("lora_two")
local steps = 3
local function check(ok, what) if not ok then print(what) os.exit(1) end end
check(on.buckets > steps and on.buckets % steps == 0, ("several buckets a step: %d"):format(on.buckets))
check(on.allreduce_calls == steps,
  ("one all-reduce a step, none on accumulation micro-steps: %d calls"):format(on.allreduce_calls))
check(on.buckets_overlapped and on.buckets_overlapped > 0,
  "no bucket was issued before backward finished (buckets_overlapped = " .. tostring(on.buckets_overlapped) .. ")")
check(on.buckets_overlapped < on.buckets, "the embeddings' bucket can only start once backward has ended")
check(ck.buckets_overlapped == on.buckets_overlapped, "checkpointed: " .. ck.buckets_overlapped .. " buckets overlapped")
check(off.buckets_overlapped == 0 and off.buckets == on.buckets and off.overlap == false, "overlap = false")
check(lora.buckets == 6, "LoRA: " .. lora.buckets .. " buckets for 6 steps, not one a step")
print(("ok: %d of %d buckets issued while backward ran"):format(on.buckets_overlapped, on.buckets))
EOF
out=$("$TRAINER" run "$TMP/overlap.lua" "$TMP/runs" 2>&1)
echo "$out"
case "$out" in ok:*) pass buckets_start_during_backward ;; *) fail buckets_start_during_backward "$out" ;; esac
on_losses=$(steps_losses "$TMP/runs/ovl_on/metrics.jsonl")
if [ -n "$on_losses" ] && [ "$on_losses" = "$(steps_losses "$TMP/runs/ovl_off/metrics.jsonl")" ] &&
   [ "$on_losses" = "$(steps_losses "$TMP/runs/ovl_ckpt/metrics.jsonl")" ]; then
  pass overlap_same_losses
else
  fail overlap_same_losses "overlapped: $(echo $on_losses); not: $(echo $(steps_losses "$TMP/runs/ovl_off/metrics.jsonl"))"
fi

# ---- resume of a 2-rank run with 2 ranks: the unbroken run's losses, exactly
cp -r "$TMP/runs/two" "$TMP/runs/resumed"
rm -rf "$TMP/runs/resumed/checkpoint-6" "$TMP/runs/resumed/summary.json"
run_mpi resume "$TMP/runs/resumed" --quiet
expect_rc resume_two_ranks_rc 0
if [ "$(steps_losses "$TMP/runs/resumed/metrics.jsonl")" = "$(steps_losses "$TMP/runs/two/metrics.jsonl")" ]; then
  pass resume_two_ranks_exact
else
  fail resume_two_ranks_exact "$(steps_losses "$TMP/runs/resumed/metrics.jsonl" | tr '\n' ' ')"
fi

# ---- resume with another number of ranks: refused, saying what works
run_trainer resume "$TMP/runs/two" steps=8 --quiet
expect_rc other_n_refused_rc 1
expect_err other_n_refused_message "was saved by a run of 2 ranks, and this run has one process"
expect_err other_n_says_what_works "mpirun -np 2 trainer resume $TMP/runs/two"

# ---- a non-finite step from one rank's rows (a score of 1e39 in row 6: rank 1's shard of
# the first, unshuffled global batch): every rank stops at step 1 with the message
head -5 "$TMP/train.jsonl" >"$TMP/bad.jsonl"
echo '{"sentence1": "the cat", "sentence2": "a dog", "score": 1e39}' >>"$TMP/bad.jsonl"
sed -n 7,16p "$TMP/train.jsonl" >>"$TMP/bad.jsonl"
run_mpi "$TMP/dist.lua" data.train="$TMP/bad.jsonl" data.shuffle=false out="$TMP/runs/bad" --quiet
if [ "$RC" != 0 ] && [ "$RC" != 124 ]; then pass nonfinite_step_ends_run; else fail nonfinite_step_ends_run "exit $RC"; show; fi
if [ "$(grep -o 'trainer: step 1: the [a-z ]* is nan' "$TMP/err" | wc -l)" = 2 ]; then pass nonfinite_every_rank_same_step
else fail nonfinite_every_rank_same_step "$(grep '^trainer:' "$TMP/err")"; fi

# ---- a killed rank: the job ends (mpirun names the rank), no hang
FAULT=kill run_mpi "$TMP/dist.lua" out="$TMP/runs/kill" --quiet
if [ "$RC" != 0 ] && [ "$RC" != 124 ]; then pass killed_rank_ends_run; else fail killed_rank_ends_run "exit $RC"; show; fi
if grep -q "rank 1" "$TMP/out" "$TMP/err"; then pass killed_rank_named; else fail killed_rank_named "no 'rank 1'"; show; fi

# ---- a hung rank: the others stop after distributed.timeout, naming it
FAULT=hang run_mpi "$TMP/dist.lua" out="$TMP/runs/hang" distributed.timeout=3 --quiet
if [ "$RC" != 0 ] && [ "$RC" != 124 ]; then pass hung_rank_ends_run; else fail hung_rank_ends_run "exit $RC"; show; fi
expect_err hung_rank_named "rank 1 did not reach the gradient all-reduce within 3 s"

# ---- Ctrl-C on mpirun (SIGINT to it at step 2): Open MPI sends the ranks SIGCONT, then
# SIGTERM odls_base_sigkill_timeout seconds later, then SIGKILL as long again; the ranks
# agree on the step to stop after, and rank 0 saves one checkpoint in that window
# (started with --allow-run-as-root, which the printed resume line must repeat)
MPIRUN=(timeout 60 mpirun --allow-run-as-root -np 2 --oversubscribe)
FAULT=ctrl-c OMPI_MCA_odls_base_sigkill_timeout=3 run_mpi "$TMP/dist.lua" out="$TMP/runs/ctrlc" steps=100000 \
  save.every=100000 --quiet
expect_err ctrl_c_stops "trainer: stopped by SIGTERM after step"
expect_err ctrl_c_saves "saved $TMP/runs/ctrlc/checkpoint-"
expect_err ctrl_c_resume_line "Resume with: mpirun --allow-run-as-root -np 2 --oversubscribe trainer resume $TMP/runs/ctrlc"
n=$(ls -d "$TMP/runs/ctrlc"/checkpoint-* 2>/dev/null | wc -l)
if [ "$n" = 1 ]; then pass ctrl_c_one_checkpoint; else fail ctrl_c_one_checkpoint "$n checkpoints"; fi
finish
