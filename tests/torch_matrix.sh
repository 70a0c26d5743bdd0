#!/usr/bin/env bash
# The RPC agreement tests against one torch release, in a fresh venv that is removed afterwards.
#
#   tests/torch_matrix.sh VERSION [PYTEST ARGS...]
#
# Installs torch==VERSION (and numpy) first, then the checkout with its test extras, checks that
# pip kept that torch, runs `distviz run design_note`, then the internals distviz reaches in
# torch (test_torch_internals.py) and the agreement tests: every shipped
# scenario and PyTorch-suite scenario (test_rpc_agreement.py), a fixed-seed fuzz run and the
# programs fuzzing found (test_fuzz_runner.py), and `distviz trace` of the unchanged programs in
# tests/programs (test_trace_cmd.py). Extra arguments go to pytest (e.g. `-k design_note`).
# pip's own settings apply (PIP_FIND_LINKS, PIP_CONFIG_FILE, ...). The last line says
# `torch VERSION: ...` with pytest's result; the exit status is pytest's.
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 VERSION [PYTEST ARGS...]  (e.g. $0 2.14.1)" >&2; exit 2; }
version="$1"
shift
cd "$(dirname "$0")/.."

# fuzz (fixed seed), the found programs and the shipped scenarios; the planted disagreement
# test checks the shrinker, not PyTorch, and stays with the main suite
TESTS=(tests/pure/runner/test_torch_internals.py tests/e2e/test_rpc_agreement.py tests/e2e/test_trace_cmd.py
       "tests/e2e/test_fuzz_runner.py::test_fixed_seed_fuzz_of_20_programs_agrees_with_pytorch"
       "tests/e2e/test_fuzz_runner.py::test_programs_found_by_fuzzing_agree")

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
python3 -m venv "$scratch/venv"
py="$scratch/venv/bin/python"
start=$SECONDS
"$py" -m pip install -q "torch==$version" numpy
"$py" -m pip install -q -e ".[test]"
found="$("$py" -c 'import torch; print(torch.__version__)')"
if [[ "${found%%+*}" != "$version" ]]; then
    echo "torch $version: pip replaced it with $found when installing the checkout" >&2
    exit 1
fi
echo "torch $found installed with the checkout in $((SECONDS - start)) s"
"$scratch/venv/bin/distviz" run design_note -o "$scratch/dn.trace.json" --no-log >/dev/null
echo "torch $found: distviz run design_note agrees"
set +e
"$py" -m pytest -q -p no:cacheprovider "${TESTS[@]}" "$@" | tee "$scratch/pytest.log"
status=${PIPESTATUS[0]}
set -e
echo "torch $version: $(tail -n 1 "$scratch/pytest.log" | tr -d '=' | xargs)"
exit "$status"
