#!/usr/bin/env bash
# Installs cargo-deb (pinned) into target/tools once, for .ci/check-deb.sh and tests/package.rs:
# it is not part of the toolchain, and a package test that skipped without it could not fail.
# Prints the folder of its binary. The first install builds it from crates.io (a few minutes);
# later runs find it under target/ and return at once.
set -euo pipefail
cd "$(dirname "$0")/.."
version=3.8.0
root=target/tools
if [[ "$("$root/bin/cargo-deb" --version 2>/dev/null || true)" != *"$version"* ]]; then
  cargo install cargo-deb --version "$version" --locked --root "$root" --quiet >&2
fi
echo "$(cd "$root/bin" && pwd)"
