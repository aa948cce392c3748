#!/usr/bin/env bash
# Installs the official OpenTelemetry protobuf bindings for Python (PyPI `opentelemetry-proto`,
# pinned) into a virtual environment under target/ once, and prints its python. The OTLP tests
# decode what the exporter sends with them, beside opentelemetry-proto's Rust types.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.39.1
dir=target/otlp-py
python="$dir/bin/python"
if ! "$python" - "$version" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
import opentelemetry.proto.collector.logs.v1.logs_service_pb2  # noqa: F401
sys.exit(version("opentelemetry-proto") != sys.argv[1])
PY
then
  python3 -m venv "$dir" >&2
  "$dir/bin/pip" install -q --disable-pip-version-check "opentelemetry-proto==$version" >&2
fi
echo "$(cd "$dir" && pwd)/bin/python"
