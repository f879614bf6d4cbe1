#!/usr/bin/env bash
# Sets the course up on a fresh machine and shows where the learner stands.
#   bash setup.sh            create .venv (Python >= 3.12), install the pinned packages, check, progress
#   bash setup.sh --tpu      the same, then jax[tpu] at the pinned JAX (libtpu from PyPI) into .venv
#   bash setup.sh --dry-run  print the pip commands it would run, and run nothing
# Safe to run again: an existing .venv is reused and only what is missing is installed.
set -euo pipefail
cd "$(dirname "$0")"

tpu=0
dry_run=0
for arg in "$@"; do
  case "$arg" in
    --tpu) tpu=1 ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "setup.sh: 未知选项 / unknown option: $arg (--tpu, --dry-run)" >&2; exit 2 ;;
  esac
done
# The TPU wheels follow the JAX pin of pyproject.toml; jax[tpu] pins its libtpu (0.0.50.* for 0.12.0.1).
jax_pin=$(sed -n 's/^ *"jax==\([^"]*\)",*$/\1/p' pyproject.toml)
tpu_requirement="jax[tpu]==$jax_pin"
# A libtpu of the machine's own (an older one on PYTHONPATH, or TPU_LIBRARY_PATH) must not shadow the venv's.
tpu_env=(env -u PYTHONPATH -u TPU_LIBRARY_PATH)
if [ "$dry_run" = 1 ]; then
  echo ".venv/bin/python -m pip install --quiet --disable-pip-version-check -e ."
  [ "$tpu" = 1 ] && echo "${tpu_env[*]} .venv/bin/python -m pip install --quiet --disable-pip-version-check $tpu_requirement"
  exit 0
fi

python_ok() {  # prints the interpreter's path when it is Python >= 3.12
  "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && command -v "$1"
}

find_python() {
  local candidate
  for candidate in "${JAX_KOANS_PYTHON:-}" python3.13 python3.12 python3 python; do
    [ -n "$candidate" ] && python_ok "$candidate" && return 0
  done
  # pyenv keeps versions that are not on PATH until selected.
  if command -v pyenv >/dev/null 2>&1; then
    for version in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[2-9]|[2-9][0-9])' | sort -V -r); do
      python_ok "$(pyenv root)/versions/$version/bin/python" && return 0
    done
  fi
  for candidate in "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
    [ -x "$candidate" ] && python_ok "$candidate" && return 0
  done
  return 1
}

if [ ! -x .venv/bin/python ]; then
  if ! python=$(find_python); then
    echo "需要 Python ≥ 3.12 / needs Python >= 3.12: install one (e.g. 'pyenv install 3.12') or set JAX_KOANS_PYTHON=/path/to/python3.12" >&2
    exit 1
  fi
  echo "→ Python: $python ($("$python" --version))"
  "$python" -m venv .venv
fi

echo "→ pip install -e . (jax 0.12.0.1, flax, optax, orbax, pytest …)"
# pip's "WARNING: Location … is ignored" lines (a registry mirror's missing pages) read as errors
# to a newcomer: keep pip's other words, and all of them when the install fails.
pip_log=$(mktemp)
if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check -e . 2>"$pip_log"; then
  cat "$pip_log" >&2
  rm -f "$pip_log"
  exit 1
fi
grep -v "^WARNING: Location '.*' is ignored" "$pip_log" >&2 || true
rm -f "$pip_log"

if [ "$tpu" = 1 ]; then
  echo "→ pip install $tpu_requirement (libtpu for a TPU)"
  "${tpu_env[@]}" .venv/bin/python -m pip install --quiet --disable-pip-version-check "$tpu_requirement"
  "${tpu_env[@]}" .venv/bin/python progress.py doctor
  echo
  echo "下一步 / next:  source .venv/bin/activate && pytest koans/07 --tpu   (python progress.py bench 07)"
  exit 0
fi

.venv/bin/python progress.py doctor
.venv/bin/python progress.py
echo
echo "下一步 / next:  source .venv/bin/activate && pytest koans/01"
