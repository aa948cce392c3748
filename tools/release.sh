#!/usr/bin/env bash
# Builds the release `aep-cline` as it ships, and prints the binary's path; `install` also puts
# it in Cargo's bin folder (as `cargo install` would); `deb` packages it (cargo-deb, installed
# under target/tools when missing) and prints the package's path.
#
#   bash tools/release.sh            # build; prints target/<host>/release/aep-cline
#   bash tools/release.sh install    # build and install into ${CARGO_HOME:-~/.cargo}/bin
#   bash tools/release.sh deb [DIR]  # build and package into DIR (target/debian-release): aep-cline_<v>-1_<arch>.deb
#
# On Linux with glibc the binary is linked statically (`crt-static`, not position-independent):
# Cline runs the hook shim twice per tool call, and a static binary starts without the dynamic
# loader (no libraries mapped, no symbol lookups) and without libgcc_s's start-up CPU probe, which
# costs `cpuid` instructions that trap to the hypervisor on a VM. The shim per firing went from
# 1.44x to 1.22x of `cat` (docs/benchmarks.md, "Against the cat floor"). Host names still resolve
# (glibc's `files` and `dns` sources are built in; other NSS modules are not loaded). Cargo
# applies these flags to the target only when `--target` is given (never to proc-macros, which
# cannot be static), hence the explicit host triple. Elsewhere: a plain release build.
set -euo pipefail
cd "$(dirname "$0")/.."
host="$(rustc -vV | sed -n 's/^host: //p')"
args=(--release --locked -p aep-cline)
deb_args=(-p aep-cline --locked --no-build)
case "$host" in
  *-linux-gnu)
    export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C relocation-model=static"
    args+=(--target "$host")
    # cargo-deb reads the binary from target/<host>/release (its assets' target/release/ moved).
    deb_args+=(--target "$host")
    bin="target/$host/release/aep-cline"
    ;;
  *) bin="target/release/aep-cline" ;;
esac
case "${1:-build}" in
  build)
    cargo build -q "${args[@]}" >&2
    echo "$PWD/$bin"
    ;;
  install)
    cargo build -q "${args[@]}" >&2
    dest="${CARGO_HOME:-$HOME/.cargo}/bin"
    mkdir -p "$dest"
    install -m 0755 "$bin" "$dest/aep-cline"
    echo "$dest/aep-cline"
    ;;
  deb)
    cargo build -q "${args[@]}" >&2
    if ! cargo deb --version >/dev/null 2>&1; then
      PATH="$(bash .ci/install-cargo-deb.sh):$PATH"
    fi
    out="${2:-target/debian-release}"
    mkdir -p "$out"
    rm -f "$out"/aep-cline_*.deb
    cargo deb "${deb_args[@]}" --quiet -o "$out/" >&2
    (cd "$out" && ls "$PWD"/aep-cline_*.deb)
    ;;
  *)
    echo "usage: bash tools/release.sh [build|install|deb [FOLDER]]" >&2
    exit 2
    ;;
esac
