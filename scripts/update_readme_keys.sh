#!/usr/bin/env bash
# Rewrites the recipe key reference in README.md (between <!-- keys:begin --> and
# <!-- keys:end -->) from the schema, through `trainer check --keys`.
set -euo pipefail
cd "$(dirname "$0")/.."
keys=$(mktemp); out=$(mktemp); trap 'rm -f "$keys" "$out"' EXIT
./trainer check --keys >"$keys"
awk -v keys="$keys" '
  /<!-- keys:begin -->/ { print; while ((getline line < keys) > 0) print line; skip = 1; next }
  /<!-- keys:end -->/ { skip = 0 }
  !skip { print }
' README.md >"$out"
mv "$out" README.md
