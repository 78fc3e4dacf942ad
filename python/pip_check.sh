#!/usr/bin/env bash
# `pip install .` in a clean venv, then the package and its console script are used as a user
# would: gpt2-small simulated on dgx-a100 from Python, `ddpscope` on the venv's PATH.
# Usage: python/pip_check.sh VENV_DIR [PYTHON]   (needs PyPI for the build requirements:
# scikit-build-core, pybind11; and a C++20 compiler, CMake >= 3.25, nlohmann-json3-dev)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:?usage: python/pip_check.sh VENV_DIR [PYTHON]}"
python="${2:-python3}"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet .
cd "$venv"  # not the checkout: the installed package must be what imports
bin/python - <<'PY'
import ddpscope
r = ddpscope.simulate("gpt2-small", cluster="dgx-a100", nodes=4, bucket_cap_mb=50)
print(r)
assert r.step_time_ms > 0 and ddpscope.__file__.find("site-packages") > 0, ddpscope.__file__
PY
bin/ddpscope simulate --model gpt2-small --cluster dgx-a100 --nodes 4 --bucket-cap-mb 50 |
  head -3
echo "pip_check: ok"
