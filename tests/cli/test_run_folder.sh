#!/usr/bin/env bash
# A run folder belongs to one run:
#   * a run holds out/.trainer.lock for its whole life: a second run into the folder while
#     the first is running exits 1 naming the first's pid and command, and writes nothing;
#   * kill -9 of the holder leaves no lock behind: the next run into the folder starts (the
#     killed run had saved nothing to continue, so its files are replaced);
#   * a new run into a folder that holds a finished run's outputs is refused (exit 1) with
#     both ways on (trainer resume DIR, overwrite=true), and changes nothing;
#   * overwrite = true removes the earlier run's outputs first (no old checkpoint is left
#     beside the new run's), once the new run has started (one that cannot start removes
#     nothing), and leaves the user's own files alone; a resume is unaffected.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_fixtures.sh"
cd "$ROOT"

fingerprint() { (cd "$1" && find . -type f ! -name .trainer.lock | sort | xargs md5sum) 2>/dev/null | md5sum; }

# A run that holds the folder until told to go on: at step 1 its hook writes $TMP/started
# and waits for $TMP/go (at most 60 s).
cat >"$TMP/hold.lua" <<EOF
return {
  extends = "$TMP/plain.lua", out = "$TMP/runs/held", steps = 3,
  hooks = { on_step = function(t)
    if t.step ~= 1 then return end
    io.open("$TMP/started", "w"):close()
    for _ = 1, 600 do
      local f = io.open("$TMP/go")
      if f then f:close() return end
      os.execute("sleep 0.1")
    end
  end },
}
EOF
wait_started() { for _ in $(seq 1 300); do [ -e "$TMP/started" ] && return 0; sleep 0.1; done; return 1; }

# ---- two runs at once: the second is refused, naming the first
rm -f "$TMP/started" "$TMP/go"
"$TRAINER" "$TMP/hold.lua" --quiet >"$TMP/first.out" 2>"$TMP/first.err" </dev/null &
first=$!
if wait_started; then pass first_run_started; else fail first_run_started "$(cat "$TMP/first.err")"; fi
held_before=$(fingerprint "$TMP/runs/held")
run_trainer "$TMP/plain.lua" out="$TMP/runs/held" steps=2 --quiet
expect_rc second_run_refused_rc 1
expect_err second_run_names_pid "process $first ("
expect_err second_run_names_command "$TMP/hold.lua --quiet)"
expect_err second_run_says_why "is in use by another run"
if [ "$(fingerprint "$TMP/runs/held")" = "$held_before" ]; then pass second_run_wrote_nothing; else fail second_run_wrote_nothing "the folder changed"; fi
# a resume into the held folder is refused the same way
run_trainer "$TMP/plain.lua" out="$TMP/runs/held" resume=latest --quiet
expect_rc resume_into_held_refused_rc 1
expect_err resume_into_held_names_pid "process $first ("
touch "$TMP/go"
wait "$first"; RC=$?
expect_rc first_run_finished_rc 0

# ---- kill -9 of the holder leaves no lock: the next run starts
rm -f "$TMP/started" "$TMP/go"
"$TRAINER" "$TMP/hold.lua" out="$TMP/runs/killed" --quiet >/dev/null 2>&1 </dev/null &
victim=$!
wait_started || fail victim_started "no start"
kill -9 "$victim"; wait "$victim" 2>/dev/null
if [ -e "$TMP/runs/killed/.trainer.lock" ]; then pass lock_file_left_as_is; else fail lock_file_left_as_is "no lock file"; fi
run_trainer "$TMP/plain.lua" out="$TMP/runs/killed" steps=2 --quiet
expect_rc run_after_kill9_starts_rc 0
if grep -q "is in use" "$TMP/err"; then fail no_stale_lock "$ERR"; else pass no_stale_lock; fi

# ---- a new run into a finished run's folder: refused, nothing changed
run_trainer "$TMP/plain.lua" steps=6 out="$TMP/runs/done" --quiet
expect_rc finished_run_rc 0
echo "my notes" >"$TMP/runs/done/notes.txt"
done_before=$(fingerprint "$TMP/runs/done")
run_trainer "$TMP/plain.lua" steps=2 out="$TMP/runs/done" --quiet
expect_rc new_run_refused_rc 1
expect_err new_run_refused_says "$TMP/runs/done already holds a finished run's outputs"
expect_err new_run_refused_resume_hint "To continue that run: trainer resume $TMP/runs/done."
expect_err new_run_refused_overwrite_hint "trainer $TMP/plain.lua steps=2 out=$TMP/runs/done overwrite=true."
if [ "$(fingerprint "$TMP/runs/done")" = "$done_before" ]; then pass refused_run_changed_nothing; else fail refused_run_changed_nothing "changed"; fi

# ---- overwrite = true on a run that cannot start (no such data file): nothing is removed
run_trainer "$TMP/plain.lua" steps=2 out="$TMP/runs/done" overwrite=true data.train="$TMP/nope.jsonl" --quiet
expect_rc overwrite_failed_start_rc 1
if [ "$(fingerprint "$TMP/runs/done")" = "$done_before" ]; then pass overwrite_failed_start_removes_nothing; else fail overwrite_failed_start_removes_nothing "changed"; fi

# ---- overwrite = true: the old outputs go first, the user's file stays
run_trainer "$TMP/plain.lua" steps=2 out="$TMP/runs/done" overwrite=true --quiet
expect_rc overwrite_rc 0
ls "$TMP/runs/done" >"$TMP/after_overwrite"
if [ "$(tr '\n' ' ' <"$TMP/after_overwrite")" = "checkpoint-2 metrics.jsonl notes.txt resolved_recipe.lua summary.json tb " ]; then
  pass overwrite_removed_old_outputs
else
  fail overwrite_removed_old_outputs "$(tr '\n' ' ' <"$TMP/after_overwrite")"
fi
if [ "$(wc -l <"$TMP/runs/done/metrics.jsonl")" = 2 ]; then pass overwrite_metrics_new_run_only; else fail overwrite_metrics_new_run_only "$(wc -l <"$TMP/runs/done/metrics.jsonl") lines"; fi
# `trainer resume` of that run (its recipe says overwrite = true) continues it, removing nothing
run_trainer resume "$TMP/runs/done" steps=3 --quiet
expect_rc resume_of_overwrite_run_rc 0
if [ -d "$TMP/runs/done/checkpoint-2" ] && [ -d "$TMP/runs/done/checkpoint-3" ] && [ "$(wc -l <"$TMP/runs/done/metrics.jsonl")" = 3 ]; then
  pass resume_keeps_outputs
else
  fail resume_keeps_outputs "$(ls "$TMP/runs/done" | tr '\n' ' ')"
fi
finish
