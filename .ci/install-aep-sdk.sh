#!/usr/bin/env bash
# Installs the public AEP SDK for Python (PyPI `agenteventprotocol-sdk`, pinned) into a virtual
# environment under target/ once, and prints its python. Tests fold the daemon's logs with its
# `project_state`, as any AEP consumer would, beside the spec's own rules.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.1.0.dev1
dir=target/aep-sdk-py
python="$dir/bin/python"
if ! "$python" - "$version" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
from aep_sdk.projection import project_state  # noqa: F401
sys.exit(version("agenteventprotocol-sdk") != sys.argv[1])
PY
then
  python3 -m venv "$dir" >&2
  "$dir/bin/pip" install -q --disable-pip-version-check "agenteventprotocol-sdk==$version" >&2
fi
echo "$(cd "$dir" && pwd)/bin/python"
