#!/usr/bin/env bash
# Recipes are someone else's code: reading one (check, plan, check --diff, the loading
# before a run) happens in a sandbox of plain Lua, whatever the recipe, its parents and the
# command-line overrides call; an endless loop or a huge string stops with the file and
# line; bytecode is refused. Hooks and loops may run commands and write files only for a
# trusted recipe (named on the command line, in recipes/, on TRAINER_TRUSTED_RECIPES, or
# with --trust). Every refusal leaves the marker file unwritten.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
M="$TMP/marker"
printf 'local f = io.open("%s", "w") f:write("x") f:close()\nos.execute("touch %s")\nreturn 1\n' "$M" "$M" >"$TMP/evil.lua"
MODEL='model = { arch = "bert", config = "tiny", init = "random" }'
printf 'return { %s }\n' "$MODEL" >"$TMP/ok.lua"

no_marker() { # name
  if [ -e "$M" ]; then fail "$1_no_marker" "the marker file was written"; rm -f "$M"; else pass "$1_no_marker"; fi
}

# name, a Lua expression that reaches a denied function, the function named in the refusal
denied=(
  "os_execute|os.execute(\"touch $M\")|os.execute"
  "io_popen|io.popen(\"touch $M\")|io.popen"
  "io_open_write|io.open(\"$M\", \"w\"):write(\"x\")|io.open (writing)"
  "loadfile|loadfile(\"$TMP/evil.lua\")()|loadfile"
  "dofile|dofile(\"$TMP/evil.lua\")|dofile"
  "ffi|require(\"ffi\").C.system(\"touch $M\")|require(\"ffi\")"
  "c_module|require(\"trainer.core.ffi\")|require(\"trainer.core.ffi\")"
  "debug|debug.getregistry()|debug"
  "package_loadlib|package.loadlib(\"libc.so.6\", \"system\")|package"
  "getfenv|getfenv(0).os.execute(\"touch $M\")|getfenv"
  "pcall_swallowed|pcall(os.execute, \"touch $M\")|os.execute"
  "bytecode_load|load(string.dump(function() end), \"x\", \"b\")|load of a binary (bytecode) chunk"
)
for entry in "${denied[@]}"; do
  IFS='|' read -r name expr what <<<"$entry"
  # the recipe itself: line 2
  printf 'local x = 1\nlocal v = %s\nreturn { %s }\n' "$expr" "$MODEL" >"$TMP/r_$name.lua"
  run_trainer check "$TMP/r_$name.lua"
  expect_rc "recipe_${name}_rc" 1
  expect_err "recipe_${name}_names_line" "$TMP/r_$name.lua:2: $what is refused while a recipe is being read"
  no_marker "recipe_$name"
  # an extended parent: line 1 of the parent, named as such
  printf 'local v = %s\nreturn {}\n' "$expr" >"$TMP/p_$name.lua"
  printf 'return { extends = "p_%s.lua", %s }\n' "$name" "$MODEL" >"$TMP/c_$name.lua"
  run_trainer check "$TMP/c_$name.lua"
  expect_rc "extends_${name}_rc" 1
  expect_err "extends_${name}_names_line" "$TMP/p_$name.lua:1: $what is refused"
  no_marker "extends_$name"
  # an override on the command line
  run_trainer plan "$TMP/ok.lua" "name=$expr"
  expect_rc "override_${name}_rc" 1
  expect_err "override_${name}_names_it" "command line (name=$expr):1: $what is refused"
  no_marker "override_$name"
done

# a required module, and check --diff: the same sandbox
printf 'os.execute("touch %s")\nreturn {}\n' "$M" >"$TMP/evil_mod.lua"
printf 'local m = require("evil_mod")\nreturn { %s }\n' "$MODEL" >"$TMP/req.lua"
run_trainer check --diff "$TMP/ok.lua" "$TMP/req.lua"
expect_rc require_rc 1
expect_err require_names_line "$TMP/evil_mod.lua:1: os.execute is refused"
no_marker require

# bytecode recipes are refused, as files and through load
"$TRAINER" run <(printf 'local f = io.open("%s", "wb") f:write(string.dump(loadfile("%s"))) f:close()\n' "$TMP/bc.lua" "$TMP/ok.lua")
run_trainer check "$TMP/bc.lua"
expect_rc bytecode_rc 1
expect_err bytecode_named "$TMP/bc.lua: is a compiled (bytecode) chunk"
printf 'return { extends = "bc.lua" }\n' >"$TMP/bc_child.lua"
run_trainer check "$TMP/bc_child.lua"
expect_err bytecode_extends_named "$TMP/bc.lua: is a compiled (bytecode) chunk"

# limits: an endless loop, a 10 GB string, a string that doubles
printf 'local n = 0\nwhile true do n = n + 1 end\nreturn {}\n' >"$TMP/loop.lua"
start=$(date +%s)
RC=0; timeout 60 "$TRAINER" check "$TMP/loop.lua" >"$TMP/out" 2>"$TMP/err" || RC=$?
expect_rc loop_rc 1
expect_err loop_names_line "$TMP/loop.lua:2: the recipe was still running after 10 million Lua instructions"
echo "  (the endless loop stopped after $(( $(date +%s) - start )) s)"
printf 'local ok = true\nwhile ok do ok = pcall(function() while true do end end) ok = true end\nreturn {}\n' >"$TMP/loop_pcall.lua"
RC=0; timeout 60 "$TRAINER" check "$TMP/loop_pcall.lua" >"$TMP/out" 2>"$TMP/err" || RC=$?
expect_rc loop_pcall_rc 1
expect_err loop_pcall_stops "the recipe was still running after"
printf 'local x = 1\nlocal s = string.rep("x", 10 * 1024 ^ 3)\nreturn {}\n' >"$TMP/big.lua"
run_trainer check "$TMP/big.lua"
expect_rc big_string_rc 1
expect_err big_string_names "$TMP/big.lua:2: string.rep would make a string of 10.00 GiB"
printf 'local x = 1\nlocal s = ("x"):rep(1024 ^ 3):rep(10)\nreturn {}\n' >"$TMP/big_method.lua"
run_trainer check "$TMP/big_method.lua"
expect_rc big_method_rc 1
expect_err big_method_names "$TMP/big_method.lua:2: string.rep would make a string of"
printf 'local s = "0123456789"\nfor i = 1, 40 do s = s .. s end\nreturn {}\n' >"$TMP/doubling.lua"
run_trainer check "$TMP/doubling.lua"
expect_rc doubling_rc 1
expect_err doubling_names "$TMP/doubling.lua:2: the recipe holds more than 512.00 MiB of memory"
run_trainer check "$TMP/ok.lua" 'name=("x"):rep(1024^3):rep(10)'
expect_rc override_big_rc 1
expect_err override_big_names "command line (name=(\"x\"):rep(1024^3):rep(10)):1: string.rep would make a string of 1.00 GiB"

# plain Lua still works while reading: string, table, math, os.getenv, load of text, trainer helpers
cat >"$TMP/plain_lua.lua" <<EOF
local parts = {}
for w in ("a b c"):gmatch("%a") do parts[#parts + 1] = w:upper() end
local f = load("return 2 * 3")
return { $MODEL, name = table.concat(parts) .. f() .. (os.getenv("NO_SUCH_VARIABLE_X") or ""),
         batch = { size = math.max(2, 4) }, memory = { limit = trainer.bytes("1GiB") } }
EOF
run_trainer check "$TMP/plain_lua.lua"
expect_rc plain_lua_rc 0
expect_out plain_lua_value 'name = "ABC6"'

# ---- hooks: trusted or not
source "$(dirname "$0")/tiny_fixtures.sh"
TEAM="$TMP/team"; mkdir -p "$TEAM/acme"
cat >"$TEAM/acme/hooked.lua" <<EOF
-- a team recipe whose hook writes a file and runs a command
return { extends = "$TMP/plain.lua", steps = 2, out = "$TMP/runs/hooked", overwrite = true,
  hooks = { on_step = function(t)
    local f = io.open("$M", "w")
    f:write("step ", t.step) f:close()
    os.execute("true")
  end } }
EOF
export TRAINER_RECIPE_PATH="$TEAM"
run_trainer check acme/hooked.lua
expect_rc check_hooked_rc 0
expect_out check_lists_uses "uses what the sandbox denies: io.open (line 4), os.execute (line 6); not trusted (found through TRAINER_RECIPE_PATH"
expect_err check_warns_untrusted "a hook or loop that calls one will stop the run"
run_trainer acme/hooked.lua --quiet
expect_rc untrusted_hook_rc 1
expect_err untrusted_hook_names "$TEAM/acme/hooked.lua:4: io.open (writing) is refused: $TEAM/acme/hooked.lua is not a trusted recipe"
expect_err untrusted_hook_fix "run again with --trust, or add its folder to TRAINER_TRUSTED_RECIPES"
if grep -q "internal error" "$TMP/err"; then fail untrusted_hook_not_internal "$ERR"; else pass untrusted_hook_not_internal; fi
no_marker untrusted_hook
# a recipe of one's own that extends the team's: the team's hook is still not trusted
printf 'return { extends = "acme/hooked.lua", steps = 1 }\n' >"$TMP/mine.lua"
run_trainer "$TMP/mine.lua" --quiet
expect_rc extended_hook_rc 1
expect_err extended_hook_names "$TEAM/acme/hooked.lua:4: io.open (writing) is refused"
no_marker extended_hook
run_trainer acme/hooked.lua --quiet --trust
expect_rc trust_flag_rc 0
if [ "$(cat "$M" 2>/dev/null)" = "step 2" ]; then pass trust_flag_hook_ran; else fail trust_flag_hook_ran "no marker"; fi
rm -f "$M"
TRAINER_TRUSTED_RECIPES="/nowhere:$TEAM" run_trainer acme/hooked.lua --quiet
expect_rc trusted_folder_rc 0
if [ "$(cat "$M" 2>/dev/null)" = "step 2" ]; then pass trusted_folder_hook_ran; else fail trusted_folder_hook_ran "no marker"; fi
rm -f "$M"
TRAINER_TRUSTED_RECIPES="$TEAM" run_trainer check acme/hooked.lua
expect_out check_says_trusted "; trusted (under $TEAM, on TRAINER_TRUSTED_RECIPES): its hooks and loop may call them"
unset TRAINER_RECIPE_PATH
# a file named on the command line is trusted
sed 's/-- a team recipe/-- my own recipe/' "$TEAM/acme/hooked.lua" >"$TMP/own_hooked.lua"
run_trainer "$TMP/own_hooked.lua" --quiet
expect_rc direct_file_rc 0
if [ -e "$M" ]; then pass direct_file_hook_ran; else fail direct_file_hook_ran "no marker"; fi
rm -f "$M"
# ... but reading it still may not write, even with --trust
printf 'local f = io.open("%s", "w")\nreturn { extends = "%s" }\n' "$M" "$TMP/plain.lua" >"$TMP/own_top.lua"
run_trainer "$TMP/own_top.lua" --quiet --trust
expect_rc trusted_read_rc 1
expect_err trusted_read_names "$TMP/own_top.lua:1: io.open (writing) is refused while a recipe is being read"
no_marker trusted_read

finish
