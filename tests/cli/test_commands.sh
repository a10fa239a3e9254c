#!/usr/bin/env bash
# End-to-end tests of the command line: subcommands, exit codes, recipe errors.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

run_trainer --version
expect_rc version_rc 0
expect_out version_text "trainer "

run_trainer --help
expect_rc help_rc 0
expect_out help_lists_check "trainer check RECIPE.lua"

run_trainer frobnicate
expect_rc unknown_subcommand_rc 1
expect_err unknown_subcommand_usage "usage: trainer"

run_trainer chek recipes/scandi_lora.lua
expect_err unknown_subcommand_suggests "did you mean 'check'?"

run_trainer --frobnicate
expect_rc unknown_flag_rc 1
expect_err unknown_flag_usage "usage: trainer"

run_trainer check recipes/scandi_lora.lua --bogus
expect_rc unknown_check_flag_rc 1

# ---- the flagship recipe
run_trainer check recipes/scandi_lora.lua
expect_rc flagship_check_rc 0
expect_out flagship_lora_r "r = 8,"
expect_out flagship_targets 'targets = { "query", "value" }'
expect_out flagship_precision 'precision = "bf16"'
expect_out flagship_lr "lr = 2e-05"
expect_out flagship_checkpoint 'checkpoint = "auto"'
expect_out flagship_batch "size = 16"
expect_out flagship_max_length "max_length = 512"
expect_out flagship_extends_chain "extends recipes/base/lora_bf16.lua <- recipes/base/embedding.lua"
expect_err flagship_download_hint "huggingface-cli download alexandrainst/scandi-nli-large --local-dir models/scandi-nli-large"

run_trainer check recipes/scandi_lora.lua optim.lr=1e-4
expect_rc override_rc 0
expect_out override_lr "lr = 0.0001"

run_trainer check recipes/scandi_lora.lua 'lora.targets={"query","key"}' batch.size=8 precision=fp16
expect_out override_list 'targets = { "query", "key" }'
expect_out override_int "size = 8,"
expect_out override_bare_string 'precision = "fp16"'

run_trainer check recipes/scandi_lora.lua lora=false
expect_rc override_disable_rc 0
expect_out override_disable "lora = false"

run_trainer check recipes/scandi_lora.lua resume=nil checkpoint=nil
expect_out override_delete_default "checkpoint = false"

run_trainer check recipes/scandi_lora.lua optim.lrr=1e-4
expect_rc override_unknown_rc 1
expect_err override_unknown_named "unknown key 'optim.lrr' (did you mean 'optim.lr'?)"

run_trainer check recipes/scandi_lora.lua optim.lr=fast
expect_rc override_bad_value_rc 1
expect_err override_bad_value 'command line (optim.lr=fast): optim.lr: expected a positive number, got "fast"'

# running a recipe: validated, then (without the model folder) exit 1 naming it and the download
run_trainer recipes/scandi_lora.lua
expect_rc train_without_model_rc 1
expect_err train_without_model "models/scandi-nli-large: no such model folder"

# ---- the memory plan (no model download needed with a preset shape)
run_trainer plan recipes/scandi_lora.lua model.from=nil model.arch=bert model.config=bert-large model.init=random --json --budget 8GiB
expect_rc plan_json_rc 0
expect_out plan_json_total '"total_bytes":'
expect_out plan_json_fits '"fits": true'
expect_out plan_json_tags '"activations":'
run_trainer plan recipes/scandi_lora.lua model.from=nil model.arch=bert model.config=bert-large model.init=random --budget 1GiB
expect_rc plan_table_rc 2
expect_out plan_table_not_fit "does NOT fit the budget of 1.00 GiB"
run_trainer plan recipes/scandi_lora.lua --budget lots
expect_rc plan_bad_budget_rc 1

# ---- bad recipes: exit 1, the file, key or chain named, never a crash
R=tests/recipes
run_trainer check $R/bad_syntax.lua
expect_rc syntax_rc 1
expect_err syntax_names_line "$R/bad_syntax.lua:3:"

run_trainer check $R/bad_no_table.lua
expect_rc no_table_rc 1
expect_err no_table_msg "$R/bad_no_table.lua: the recipe returned nothing"

run_trainer check $R/bad_types.lua
expect_rc types_rc 1
expect_err types_lr "$R/bad_types.lua: optim.lr: expected a positive number, got \"fast\""
expect_err types_enum_suggest "got \"adam\" (did you mean 'adamw'?)"
expect_err types_batch "batch.size: expected a positive integer, got 0"
expect_err types_precision "precision: expected one of \"fp32\", \"bf16\" or \"fp16\", got \"bf32\""
expect_err types_lorra "unknown key 'lorra' (did you mean 'lora'?)"
expect_err types_hook "hooks.on_step: expected a function, got 5"
expect_err types_nested_unknown "checkpoint: unknown key 'segmnts' (did you mean 'segments'?)"
expect_err types_all_in_one_pass "has 7 problems"

run_trainer check $R/bad_global.lua
expect_rc global_rc 1
expect_err global_named "$R/bad_global.lua:3: undefined global 'batch_size'"

run_trainer check $R/cycle_a.lua
expect_rc cycle_rc 1
expect_err cycle_chain "extends cycle: $R/cycle_a.lua -> $R/cycle_b.lua -> $R/cycle_a.lua"

run_trainer check $R/bad_parent.lua
expect_rc parent_rc 1
expect_err parent_named "extends = \"base/does_not_exist.lua\": no such file in the folders searched"
expect_err parent_searched_own_folder "  $R (the recipe's folder)"

run_trainer check $R/nope.lua
expect_rc missing_recipe_rc 1
expect_err missing_recipe "$R/nope.lua: no such recipe file"

run_trainer check $R/child_override.lua
expect_rc child_rc 0
expect_out child_list_replaced 'targets = { "query", "key", "value" }'
expect_out child_kept_parent "r = 8,"
expect_out child_function "on_step = <function $R/child_override.lua:7>"
expect_out child_nested_override "lr = 5e-05"

# ---- the key reference
run_trainer check --keys
expect_rc keys_rc 0
expect_out keys_lora_r '| `lora.r` |'
expect_out keys_optim_lr '| `optim.lr` |'

# ---- run: scripts with the trainer API, exit status from the script
printf 'assert(trainer.version)\nreturn 3\n' > "$TMP/s.lua"
run_trainer run "$TMP/s.lua"
expect_rc run_returns_status 3
printf 'print(select("#", ...), arg[1])\n' > "$TMP/args.lua"
run_trainer run "$TMP/args.lua" hello
expect_out run_passes_args "1	hello"
printf 'error("script failed on purpose")\n' > "$TMP/e.lua"
run_trainer run "$TMP/e.lua"
expect_rc run_error_rc 1
expect_err run_error_msg "script failed on purpose"

# ---- a script that ends with live tensors and a model exits cleanly (no finalizer-order crash)
printf 'keep = {}\nfor i = 1, 300 do keep[i] = trainer.tensor.zeros({ 100 + i }) end\nlocal d = os.tmpname(); os.remove(d)\ntrainer.models.tiny_folder(d, { seed = 1 })\nkept_model = trainer.load_model(d)\nkept_view = keep[1]:reshape({ 101 })\n' > "$TMP/live.lua"
bad=0
for i in 1 2 3 4 5 6; do "$TRAINER" run "$TMP/live.lua" >/dev/null 2>&1 || bad=$((bad + 1)); done
RC=$bad; expect_rc exit_with_live_tensors 0

# ---- the binary finds its Lua tree from any working directory
(cd "$TMP" && "$TRAINER" check "$ROOT/recipes/scandi_lora.lua" >/dev/null 2>&1)
RC=$?; expect_rc runs_from_other_dir 0

# ---- make install puts binary and Lua tree together
make -s install PREFIX="$TMP/prefix" >/dev/null 2>&1
(cd "$TMP" && "$TMP/prefix/bin/trainer" check "$TMP/prefix/share/trainer/recipes/scandi_lora.lua" >/dev/null 2>&1)
RC=$?; expect_rc installed_binary_works 0

finish
