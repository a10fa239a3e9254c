#!/usr/bin/env bash
# `trainer encode` sorts each window of texts by length, batches them (padded to the batch's
# longest; the encoder skips the padding rows, trainer.nn.packing) and writes the rows back
# in input order: every line must equal the same text encoded alone (--batch 1: no padding,
# nothing packed) within 1e-6, on a generated tiny folder and on all-MiniLM-L6-v2 when
# models/ has it (else a SKIP line).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

# texts of very different lengths, deliberately not in length order
cat >"$TMP/texts.txt" <<'TXT'
a
the quick brown fox jumps over the lazy dog and runs far away into the woods
two words
one two three four five six seven
x y
a much longer sentence that is here to make every batch of this file padded a lot
short
the same line twice
the same line twice
TXT

compare() { # name, model dir
  local name=$1 model=$2
  run_trainer encode "$model" "$TMP/texts.txt" --batch 4
  expect_rc "${name}_batched_rc" 0
  echo "$OUT" >"$TMP/batched"
  run_trainer encode "$model" "$TMP/texts.txt" --batch 1
  expect_rc "${name}_alone_rc" 0
  echo "$OUT" >"$TMP/alone"
  if "$TRAINER" run /dev/stdin "$TMP/batched" "$TMP/alone" >"$TMP/cmp" 2>&1 <<'LUA'; then pass "${name}_rows_in_input_order_equal_alone"; else fail "${name}_rows_in_input_order_equal_alone" "$(head -3 "$TMP/cmp")"; fi
local json = require("trainer.core.json")
local function rows(path)
  local out = {}
  for line in io.lines(path) do out[#out + 1] = json.decode(line) end
  return out
end
local a, b = rows(arg[1]), rows(arg[2])
assert(#a == 9 and #b == 9, ("%d and %d rows, want 9"):format(#a, #b))
for i = 1, #a do
  assert(#a[i] == #b[i] and #a[i] > 0, "row " .. i .. ": widths differ")
  for c = 1, #a[i] do
    local d = math.abs(a[i][c] - b[i][c])
    assert(d <= 1e-6, ("row %d element %d: batched %.9g, alone %.9g"):format(i, c, a[i][c], b[i][c]))
  end
end
-- distinct texts give distinct rows (not one row written everywhere)
assert(math.abs(a[1][1] - a[2][1]) > 1e-4, "rows 1 and 2 are equal")
return 0
LUA
}

"$TRAINER" run /dev/stdin >/dev/null 2>"$TMP/gen_err" <<LUA
trainer.models.tiny_folder("$TMP/tiny", { seed = 5, normalize = true })
LUA
RC=$?; expect_rc tiny_folder_generated 0
compare tiny "$TMP/tiny"
if [ -f models/all-MiniLM-L6-v2/config.json ]; then compare minilm models/all-MiniLM-L6-v2
else echo "SKIP minilm_rows_in_input_order_equal_alone: models/all-MiniLM-L6-v2 is missing (make fetch-models)"; fi
finish
