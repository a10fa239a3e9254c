#!/usr/bin/env bash
# Folder names with a space and a single quote: folders are made, listed
# and removed through trainer.core.sys (mkdir_p, list_dir, remove_tree), never through a
# shell, so a run saves into "it's a dir/run 'one'", keeps only its newest checkpoint
# (the older ones removed), resumes from it with `trainer resume` (the checkpoints listed), and
# a tiny model folder is made under such a name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_fixtures.sh"
cd "$ROOT"

D="$TMP/it's a dir"
RUN="$D/run 'one'"

# ---- a model folder (models.tiny_folder makes NAME/1_Pooling)
cat >"$TMP/mk.lua" <<'EOF'
require("trainer.models").tiny_folder(arg[1], { seed = 1 })
EOF
run_trainer run "$TMP/mk.lua" "$D/tiny model"
expect_rc tiny_folder_rc 0
if [ -f "$D/tiny model/1_Pooling/config.json" ] && [ -f "$D/tiny model/model.safetensors" ]; then
  pass tiny_folder_written
else fail tiny_folder_written "no model files under '$D/tiny model'"; fi

# ---- a run saved there: checkpoints at 3 and 6, keep = 1 removes checkpoint-3
run_trainer "$TMP/sts.lua" steps=6 save.keep=1 out="$RUN" --quiet
expect_rc run_rc 0
if [ -f "$RUN/checkpoint-6/model.safetensors" ] && [ -f "$RUN/metrics.jsonl" ]; then pass run_saved
else fail run_saved "no checkpoint-6 under '$RUN'"; show; fi
if [ ! -e "$RUN/checkpoint-3" ]; then pass old_checkpoint_removed
else fail old_checkpoint_removed "'$RUN/checkpoint-3' is still there with save.keep = 1"; fi
if [ -d "$D" ] && [ "$(ls -A "$TMP" | grep -c "^it$")" = 0 ]; then pass no_split_name
else fail no_split_name "a folder named after part of the name was made"; fi

# ---- `trainer resume RUN steps=9` finds checkpoint-6 in it (the checkpoints listed) and goes on
run_trainer resume "$RUN" steps=9 --quiet
expect_rc resume_rc 0
if [ -f "$RUN/checkpoint-9/model.safetensors" ] && [ ! -e "$RUN/checkpoint-6" ]; then pass resumed_from_checkpoint_6
else fail resumed_from_checkpoint_6 "no checkpoint-9 (or checkpoint-6 kept) under '$RUN'"; show; fi

finish
