#!/usr/bin/env bash
# Builds the Debian package and checks it as a user would get it: its contents (`dpkg-deb -c`:
# the binary in /usr/bin, the systemd user unit, the README, the operations guide, the
# copyright), its control fields (Depends: libc6 for a dynamically linked binary, nothing for the
# static one), then extracted into a scratch root (`dpkg-deb -x`) where the binary must run and
# the unit must be the one in the source.
#
#   bash .ci/check-deb.sh          # the package that ships: `tools/release.sh deb`, static (fat LTO: minutes)
#   bash .ci/check-deb.sh --quick  # the debug binary the tests already built (tests/package.rs)
#
# cargo-deb is not part of the toolchain: without it, .ci/install-cargo-deb.sh installs the
# pinned one under target/tools (once); the check never skips.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo deb --version >/dev/null 2>&1; then
  PATH="$(bash .ci/install-cargo-deb.sh):$PATH"
  export PATH
  cargo deb --version >/dev/null || { echo "FAILED: cargo-deb could not be installed"; exit 1; }
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [[ "${1:-}" == "--quick" ]]; then
  # The binary as the tests built it, not built again: a `cargo build` here would build it with
  # other features than `cargo test` does, and the two would rebuild each other's every time.
  # cargo-deb warns that a dev profile is for checks, not releases: this is one.
  [[ -x target/debug/aep-cline ]] || cargo build -p aep-cline --bin aep-cline --locked
  cargo deb -p aep-cline --locked --fast --quiet --profile dev --no-build -o "$out/" >"$out/build.log" 2>&1 ||
    { cat "$out/build.log"; echo "FAILED: cargo deb"; exit 1; }
  deb=$(ls "$out"/aep-cline_*.deb)
else
  deb=$(bash tools/release.sh deb "$out" 2>"$out/build.log") ||
    { cat "$out/build.log"; echo "FAILED: tools/release.sh deb"; exit 1; }
fi
fail() { echo "FAILED: $*"; exit 1; }

contents=$(dpkg-deb -c "$deb")
for path in ./usr/bin/aep-cline ./usr/lib/systemd/user/aep-cline.service \
  ./usr/share/doc/aep-cline/README.md ./usr/share/doc/aep-cline/operations.md \
  ./usr/share/doc/aep-cline/copyright; do
  grep -q " $path\$" <<<"$contents" || fail "$path is not in the package: $contents"
done
grep -q -- '-rwxr-xr-x .* ./usr/bin/aep-cline$' <<<"$contents" || fail "/usr/bin/aep-cline is not executable"

version=$(cargo metadata --format-version 1 --no-deps | python3 -c \
  'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "aep-cline"))')
[[ $(dpkg-deb -f "$deb" Package) == aep-cline ]] || fail "Package: $(dpkg-deb -f "$deb" Package)"
[[ $(dpkg-deb -f "$deb" Version) == "$version-1" ]] || fail "Version: $(dpkg-deb -f "$deb" Version)"
# Not `| head -1`: under pipefail, dpkg-deb killed by SIGPIPE when head leaves early fails the check.
description=$(dpkg-deb -f "$deb" Description)
summary=${description%%$'\n'*}
((${#summary} <= 80)) || fail "the summary is longer than 80 characters: $summary"

root="$out/root"
dpkg-deb -x "$deb" "$root"
# The binary's linking decides its dependencies: a dynamic one needs libc6, a static one nothing.
depends=$(dpkg-deb -f "$deb" Depends)
headers=$(LC_ALL=C readelf -lW "$root/usr/bin/aep-cline")
if [[ "$headers" == *"Requesting program interpreter"* ]]; then
  [[ "$depends" == *libc6* ]] || fail "a dynamically linked binary without libc6 in Depends: $depends"
  linking=dynamic
else
  [[ -z "$depends" ]] || fail "a statically linked binary that depends on: $depends"
  linking=static
fi
said=$("$root/usr/bin/aep-cline" --version)
[[ "$said" == "aep-cline $version" ]] || fail "--version says: $said"
cmp -s "$root/usr/lib/systemd/user/aep-cline.service" crates/daemon/packaging/aep-cline.service ||
  fail "the packaged unit is not crates/daemon/packaging/aep-cline.service"
grep -q '^License: Apache-2.0$' "$root/usr/share/doc/aep-cline/copyright" || fail "no licence in the copyright file"
echo "ok: $(basename "$deb"): $(grep -c . <<<"$contents") entries; $said, linked $linking"
