#!/usr/bin/env bash
# The usage text names every command: the short one printed with errors (M.usage) and the
# one `trainer --help` prints (with each command's own options), once each; and the README's
# command-line block lists them too.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
commands="resume check plan report tokenize encode classify merge keys repl run"
for c in $(ls lua/trainer/cli/commands | sed -n 's/\.lua$//p'); do
  case " $commands " in *" $c "*) ;; *) commands="$commands $c" ;; esac
done

run_trainer --help
expect_rc help_rc 0
for c in $commands; do
  n=$(grep -c "^\(usage:\|      \) trainer $c\b" "$TMP/out")
  if [ "$n" -ge 1 ]; then pass "help_lists_$c"; else fail "help_lists_$c" "trainer --help does not list 'trainer $c'"; fi
done
# a command module's line replaces the short one: no command is listed twice
for c in tokenize encode classify merge report keys; do
  n=$(grep -c "^       trainer $c\b" "$TMP/out")
  if [ "$n" = 1 ]; then pass "help_lists_${c}_once"; else fail "help_lists_${c}_once" "'trainer $c' listed $n times"; fi
done

run_trainer nosuchcommand
expect_rc unknown_rc 1
run_trainer recipes/minilm_sts_lora.lua --nosuchflag
for c in $commands; do
  if grep -q "^\(usage:\|      \) trainer $c\b" "$TMP/err"; then pass "error_usage_lists_$c"
  else fail "error_usage_lists_$c" "the usage printed with an error does not list 'trainer $c'"; show; fi
done

block=$(awk '/^## The command line/{p=1} /^Exit status/{p=0} p' README.md)
for c in $commands; do
  [ "$c" = keys ] && continue   # an alias of `trainer check --keys`, which the block lists
  if echo "$block" | grep -q "^    trainer $c\b"; then pass "readme_lists_$c"
  else fail "readme_lists_$c" "README's command-line block does not list 'trainer $c'"; fi
done
if grep -q "DESIGN.md" README.md; then fail readme_stands_alone "README.md cites DESIGN.md, which is not in the repository"
else pass readme_stands_alone; fi
for f in $(grep -o '(docs/[A-Za-z_]*\.md)' README.md | tr -d '()'); do
  if [ -f "$f" ]; then pass "readme_link_$f"; else fail "readme_link_$f" "README links $f, which does not exist"; fi
done
if grep -q "docs/ARCHITECTURE.md" README.md; then pass readme_links_architecture; else fail readme_links_architecture "no link"; fi
if grep -q "^## The op table" docs/ARCHITECTURE.md; then pass architecture_has_op_table; else fail architecture_has_op_table "missing section"; fi
finish
