#!/usr/bin/env bash
# Recipes shared between teams: a team folder on TRAINER_RECIPE_PATH (extends and require
# across folders, a recipe named by its name on the path), `trainer recipes` and shadowing,
# `trainer check --diff`, the `requires` version pin, and the folders an unresolved name
# lists. Nothing trains; everything is written under $TMP, and the commands run from an
# empty working folder there, so the built-in recipes are the installation's.
source "$(dirname "$0")/lib.sh"
R=$ROOT/recipes
TEAM=$TMP/team
OTHER=$TMP/other
mkdir -p "$TEAM/acme" "$OTHER/acme" "$TMP/work"
cd "$TMP/work"
VERSION=$("$TRAINER" --version | sed 's/^trainer //')

cat >"$TEAM/acme/sizes.lua" <<'EOF'
-- acme's agreed sizes (a module the team's recipes require)
return { max_length = 256, batch = 16 }
EOF
cat >"$TEAM/acme/base.lua" <<'EOF'
-- acme's defaults: the built-in embedding profile on a tiny random BERT
return {
  extends = "base/embedding.lua",
  model = { arch = "bert", config = "tiny", init = "random" },
  device = "cpu",
}
EOF
cat >"$TEAM/acme/scandi_lora.lua" <<'EOF'
-- acme's LoRA run: extends the team's base, sizes from the team's module
local sizes = require("acme.sizes")
return {
  extends = "acme/base.lua",
  name = "scandi",
  model = { max_length = sizes.max_length },
  batch = { size = sizes.batch },
  lora = { r = 8, targets = { "query", "value" } },
}
EOF
cat >"$TEAM/acme/scandi_lora_big.lua" <<'EOF'
-- the same run with a bigger batch, a higher lr and one more LoRA target
return {
  extends = "scandi_lora.lua",
  batch = { size = 32 },
  optim = { lr = 1e-4 },
  lora = { targets = { "query", "key", "value" } },
}
EOF
# shadows: the same names in a later folder, and a built-in name in the team folder
cat >"$OTHER/acme/base.lua" <<'EOF'
-- another team's acme/base.lua, found only after the team folder
return { model = { arch = "bert", config = "tiny", init = "random" }, seed = 7 }
EOF
cat >"$TEAM/scandi_lora.lua" <<'EOF'
-- the team's own flagship, in front of the built-in one
return { extends = "acme/scandi_lora.lua" }
EOF
export TRAINER_RECIPE_PATH="$TEAM:$OTHER"

# ---- extends across folders, require from the team folder, a name found on the path
run_trainer check acme/scandi_lora.lua
expect_rc path_check_rc 0
expect_out path_found_by_name "-- $TEAM/acme/scandi_lora.lua resolved (extends $TEAM/acme/base.lua <- $R/base/embedding.lua)"
expect_out path_extends_team "-- extends \"acme/base.lua\" in $TEAM/acme/scandi_lora.lua: $TEAM/acme/base.lua (TRAINER_RECIPE_PATH)"
expect_out path_extends_builtin "-- extends \"base/embedding.lua\" in $TEAM/acme/base.lua: $R/base/embedding.lua (built-in)"
expect_out path_require_team "-- require(\"acme.sizes\") in $TEAM/acme/scandi_lora.lua: $TEAM/acme/sizes.lua (TRAINER_RECIPE_PATH)"
expect_out path_value_from_module "max_length = 256"
expect_out path_value_from_builtin 'name = "mnrl"'
expect_no_out path_earlier_folder_wins "seed = 7"
run_trainer check acme/scandi_lora_big.lua
expect_out path_own_folder_first "-- extends \"scandi_lora.lua\" in $TEAM/acme/scandi_lora_big.lua: $TEAM/acme/scandi_lora.lua (the recipe's folder)"
run_trainer plan acme/scandi_lora.lua
expect_rc path_plan_by_name_rc 0
# the train command finds it too: it gets as far as the missing data (nothing trains)
run_trainer acme/scandi_lora.lua out="$TMP/runs/by_name"
expect_rc path_train_by_name_rc 1
expect_err path_train_by_name_reaches_data "data.train: no training file given"
# relative entries are relative to the working folder
TRAINER_RECIPE_PATH=../team run_trainer check --quiet acme/scandi_lora.lua
expect_rc path_relative_entry_rc 0

# ---- trainer recipes: every file, its folder, its first comment, shadowing
run_trainer recipes
expect_rc recipes_rc 0
recipes_line() { grep -E "^$1 +$2 " "$TMP/out"; }
if recipes_line acme/scandi_lora.lua "$TEAM \(TRAINER_RECIPE_PATH\)" | grep -qF "acme's LoRA run: extends the team's base"; then
  pass recipes_lists_team_recipe
else fail recipes_lists_team_recipe "$OUT"; fi
if recipes_line acme/base.lua "$OTHER \(TRAINER_RECIPE_PATH\)" | grep -qF "(shadowed by $TEAM) another team's"; then
  pass recipes_marks_shadowed_team_name
else fail recipes_marks_shadowed_team_name "$OUT"; fi
if recipes_line acme/base.lua "$TEAM \(TRAINER_RECIPE_PATH\)" | grep -qvF "shadowed"; then
  pass recipes_first_not_shadowed
else fail recipes_first_not_shadowed "$OUT"; fi
if recipes_line scandi_lora.lua "$R \(built-in\)" | grep -qF "(shadowed by $TEAM) the flagship job"; then
  pass recipes_marks_shadowed_builtin
else fail recipes_marks_shadowed_builtin "$OUT"; fi
if recipes_line base/embedding.lua "$R \(built-in\)" | grep -qF "a team's defaults"; then
  pass recipes_lists_builtin
else fail recipes_lists_builtin "$OUT"; fi
TRAINER_RECIPE_PATH="$TEAM:$TMP/missing" run_trainer recipes
expect_err recipes_warns_missing_folder "warning: TRAINER_RECIPE_PATH: $TMP/missing: no such folder"

# ---- check --diff: exactly the keys whose resolved values differ
run_trainer check --diff acme/scandi_lora.lua acme/scandi_lora_big.lua
expect_rc diff_rc 0
expected='batch.size: 16 -> 32
lora.targets: { "query", "value" } -> { "query", "key", "value" }
optim.lr: 2e-05 -> 0.0001'
if [ "$OUT" = "$expected" ]; then pass diff_exact_keys; else fail diff_exact_keys "got: $OUT"; fi
expect_err diff_summary "3 keys differ"
run_trainer check --diff acme/scandi_lora.lua acme/scandi_lora_big.lua batch.size=8 'lora.targets={"query"}'
expected='optim.lr: 2e-05 -> 0.0001'
if [ "$OUT" = "$expected" ]; then pass diff_overrides_apply_to_both; else fail diff_overrides_apply_to_both "got: $OUT"; fi
run_trainer check --diff acme/scandi_lora.lua "$TEAM/scandi_lora.lua"
expect_rc diff_same_rc 0
if [ -z "$OUT" ]; then pass diff_same_prints_nothing; else fail diff_same_prints_nothing "got: $OUT"; fi
expect_err diff_same_says "resolve to the same recipe"
run_trainer check --diff acme/scandi_lora.lua
expect_rc diff_needs_two_rc 1
expect_err diff_needs_two "check --diff needs two recipes"
run_trainer check --diff acme/scandi_lora.lua acme/scandi_lora_big.lua optim.lrr=1
expect_rc diff_bad_override_rc 1
expect_err diff_bad_override "unknown key 'optim.lrr'"

# ---- the version pin: refused before the unknown key of a newer trainer, accepted in range
pin() { # file, pin, extra keys
  printf 'return { requires = %s, model = { arch = "bert", config = "tiny", init = "random" }, %s }\n' "$2" "$3" >"$1"
}
pin "$TMP/pin_new.lua" '">= 99.1"' 'key_of_trainer_99 = true'
run_trainer check "$TMP/pin_new.lua"
expect_rc pin_refuses_rc 1
expect_err pin_refuses_says "$TMP/pin_new.lua: this recipe needs trainer >= 99.1; this is $VERSION."
if grep -q "unknown key" "$TMP/err"; then fail pin_before_unknown_key "$ERR"; else pass pin_before_unknown_key; fi
# a recipe that fails while it is read, on an API of the newer trainer, still gets the pin
printf 'local x = trainer.api_of_trainer_99()\nreturn { requires = ">= 99.1", model = {} }\n' >"$TMP/pin_api.lua"
run_trainer check "$TMP/pin_api.lua"
expect_rc pin_before_failing_code_rc 1
expect_err pin_before_failing_code "$TMP/pin_api.lua: this recipe needs trainer >= 99.1; this is $VERSION."
pin "$TMP/pin_old.lua" '"< 0.0.1"' ''
run_trainer check "$TMP/pin_old.lua"
expect_rc pin_refuses_upper_rc 1
expect_err pin_refuses_upper "needs trainer < 0.0.1; this is $VERSION"
pin "$TMP/pin_range.lua" '">= 0.0.1, < 99"' ''
run_trainer check --quiet "$TMP/pin_range.lua"
expect_rc pin_range_accepts_rc 0
pin "$TMP/pin_exact.lua" "\"= $VERSION\"" ''
run_trainer check --quiet "$TMP/pin_exact.lua"
expect_rc pin_exact_accepts_rc 0
pin "$TMP/pin_gt.lua" "\"> $VERSION\"" ''
run_trainer check --quiet "$TMP/pin_gt.lua"
expect_rc pin_gt_refuses_rc 1
cat >"$TEAM/acme/pinned_child.lua" <<EOF
return { extends = "../../pin_new.lua" }
EOF
run_trainer check acme/pinned_child.lua
expect_rc pin_in_parent_rc 1
expect_err pin_in_parent_names_parent "pin_new.lua: this recipe needs trainer >= 99.1"
pin "$TMP/pin_bad.lua" '"~> 0.4"' ''
run_trainer check "$TMP/pin_bad.lua"
expect_rc pin_malformed_rc 1
expect_err pin_malformed_names_file "$TMP/pin_bad.lua: requires = \"~> 0.4\": \"~> 0.4\" is not a version range"
pin "$TMP/pin_bad_version.lua" '">= 0.4.x"' ''
run_trainer check "$TMP/pin_bad_version.lua"
expect_rc pin_malformed_version_rc 1
expect_err pin_malformed_version "\"0.4.x\" is not a version"
pin "$TMP/pin_number.lua" '0.4' ''
run_trainer check "$TMP/pin_number.lua"
expect_rc pin_not_string_rc 1
expect_err pin_not_string "$TMP/pin_number.lua: requires = 0.4: expected a version range"

# ---- a name that is nowhere lists the folders searched, in order
cat >"$TEAM/acme/bad_parent.lua" <<'EOF'
return { extends = "acme/nothere.lua" }
EOF
TRAINER_RECIPE_PATH="$TEAM:$TMP/missing" run_trainer check acme/bad_parent.lua
expect_rc missing_extends_rc 1
expected="  $TEAM/acme (the recipe's folder)
  $TEAM (TRAINER_RECIPE_PATH)
  $TMP/missing (TRAINER_RECIPE_PATH; no such folder)
  $R (built-in)"
if grep -qF "extends = \"acme/nothere.lua\": no such file in the folders searched, in order:" "$TMP/err" \
   && grep -A4 -F "in order:" "$TMP/err" | tail -n 4 | diff -q - <(echo "$expected") >/dev/null; then
  pass missing_extends_lists_folders
else fail missing_extends_lists_folders "$ERR"; fi
expect_err missing_extends_fix "put the folder that holds it on TRAINER_RECIPE_PATH"
cat >"$TEAM/acme/bad_require.lua" <<'EOF'
local s = require("acme.nosuch")
return { model = { arch = "bert", config = "tiny", init = "random" } }
EOF
run_trainer check acme/bad_require.lua
expect_rc missing_require_rc 1
expect_err missing_require_names "require(\"acme.nosuch\"): no such file acme/nosuch.lua or acme/nosuch/init.lua in the folders searched"
expect_err missing_require_lists "  $OTHER (TRAINER_RECIPE_PATH)"
run_trainer acme/nosuch_recipe.lua
expect_rc missing_recipe_rc 1
expect_err missing_recipe_names "acme/nosuch_recipe.lua: no such recipe file in the folders searched"
expect_err missing_recipe_cwd "  . (the working directory)"
expect_err missing_recipe_path "  $TEAM (TRAINER_RECIPE_PATH)"
if grep -qE "traceback|internal error" "$TMP/err"; then fail missing_no_traceback "$ERR"; else pass missing_no_traceback; fi

if [ -z "$(ls -A "$TMP/work")" ]; then pass writes_nothing_in_cwd; else fail writes_nothing_in_cwd "$(ls -A "$TMP/work")"; fi
finish
