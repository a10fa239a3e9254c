#!/usr/bin/env bash
# The README's key reference is generated from the schema: one source of truth.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
awk '/<!-- keys:end -->/{p=0} p{print} /<!-- keys:begin -->/{p=1}' README.md >"$TMP/readme_keys"
"$TRAINER" check --keys >"$TMP/schema_keys"
if diff -u "$TMP/schema_keys" "$TMP/readme_keys" >"$TMP/diff"; then
  pass readme_keys_match_schema
else
  fail readme_keys_match_schema "README.md key reference differs from 'trainer check --keys'; run scripts/update_readme_keys.sh"
  head -20 "$TMP/diff"
fi
if [ -s "$TMP/readme_keys" ]; then pass readme_has_keys; else fail readme_has_keys "no keys between the markers"; fi
finish
