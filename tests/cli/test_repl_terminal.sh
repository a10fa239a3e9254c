#!/usr/bin/env bash
# The REPL in a real terminal (a tmux pane): keys typed through libedit.
#   - UTF-8 input survives under the C locale ("Hej världen 😀", #"å" == 2): the REPL sets
#     LC_CTYPE before libedit starts and falls back to C.UTF-8;
#   - Tab completes table fields (trainer.mem -> trainer.memory) and globals (pri -> print).
# The REPL writes what it read to a file, so nothing depends on how the pane renders.
# Needs tmux (scripts/deps.sh installs it); without it the test prints a SKIP line.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

if ! command -v tmux >/dev/null 2>&1; then
  echo "SKIP test_repl_terminal: tmux is not installed (scripts/deps.sh installs it)"
  exit 0
fi

SOCK="trainer-test-$$"
tmx() { tmux -L "$SOCK" -f /dev/null "$@"; }
trap 'tmx kill-server >/dev/null 2>&1; rm -rf "$TMP"' EXIT

# Waits (at most ~20 s) until the pane shows the prompt again or file $1 exists.
wait_for_file() { local i; for i in $(seq 200); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }
wait_for_prompt() {
  local i; for i in $(seq 200); do tmx capture-pane -p -t repl 2>/dev/null | grep -q '^>' && return 0; sleep 0.1; done
  return 1
}
type_line() { tmx send-keys -t repl -l "$1"; tmx send-keys -t repl Enter; }

# HOME is the test's folder: the history file goes there, not into the user's home.
tmx new-session -d -s repl -x 120 -y 40 \
  "env -u LANG -u LC_CTYPE LC_ALL=C HOME='$TMP' '$TRAINER' repl 2>'$TMP/stderr'"
if ! wait_for_prompt; then
  fail repl_terminal_starts "no prompt in the tmux pane"
  tmx capture-pane -p -t repl 2>/dev/null | head -20; cat "$TMP/stderr" 2>/dev/null
  finish; exit
fi
pass repl_terminal_starts

type_line 'x, g = false, false'   # defined, so the last line runs even when completion fails
type_line 's = "Hej världen 😀"'
# Tab after "trainer.mem" and after ".rep"; then a global: "pri" Tab is "print".
tmx send-keys -t repl -l 'x = trainer.mem'; tmx send-keys -t repl Tab
tmx send-keys -t repl -l '.rep'; tmx send-keys -t repl Tab; tmx send-keys -t repl Enter
tmx send-keys -t repl -l 'g = pri'; tmx send-keys -t repl Tab; tmx send-keys -t repl Enter
type_line "local p = os.getenv('HOME') .. '/result' local f = io.open(p .. '.tmp', 'w') f:write(s, '|', #'å', '|', tostring(x == trainer.memory.report), '|', tostring(g == print)) f:close() os.rename(p .. '.tmp', p)"

if wait_for_file "$TMP/result"; then
  got=$(cat "$TMP/result")
else
  got="(no result: the REPL did not run the last line)"
  tmx capture-pane -p -t repl | head -20; cat "$TMP/stderr"
fi
IFS='|' read -r text len field global <<<"$got"
if [ "$text" = "Hej världen 😀" ]; then pass repl_utf8_input; else fail repl_utf8_input "read '$text'"; fi
if [ "$len" = "2" ]; then pass repl_utf8_length; else fail repl_utf8_length "#\"å\" = '$len', expected 2"; fi
if [ "$field" = "true" ]; then pass repl_tab_completes_fields; else fail repl_tab_completes_fields "trainer.mem<Tab>.rep<Tab> did not give trainer.memory.report"; fi
if [ "$global" = "true" ]; then pass repl_tab_completes_globals; else fail repl_tab_completes_globals "pri<Tab> did not give print"; fi
if [ "$text" != "Hej världen 😀" ] || [ "$field" != "true" ]; then tmx capture-pane -p -t repl | head -12; fi

finish
