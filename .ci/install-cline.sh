#!/usr/bin/env bash
# Installs the real Cline CLI, pinned, into a cache folder for the end-to-end tests
# (crates/daemon/tests/e2e_*.rs), and prints the path of the CLI binary on stdout.
# It also installs the other generation, cline@2.18.0 (crates/daemon/tests/e2e_cline2.rs), into
# its own cache; its path goes to stderr only, stdout stays the 3.x binary.
#
# Idempotent: when the pinned versions are already installed it only prints the path.
# Environment:
#   AEP_CLINE_VERSION version to install (default 3.0.65, the version this project was built against)
#   AEP_CLINE_CACHE   cache folder (default <repo>/target/cline-cli)
#   AEP_CLINE2_VERSION the 2.x version (default 2.18.0); AEP_CLINE2_CACHE its cache folder
#                     (default <repo>/target/cline2-cli), where node_modules/.bin/cline is the CLI
#   AEP_CLINE_SDK_VERSION, AEP_CLINE_SDK_NODE, AEP_CLINE_SDK_CACHE: Cline's SDK (@cline/core,
#                     default 0.0.86), the Node.js it runs on (default 22.23.3) and their cache
#                     (default <repo>/target/cline-sdk), for the test of an app other than the CLI
#
# Notes on what npm does here (npm 11, Node 20):
# - EBADENGINE warnings ("node >= 22 wanted") are harmless, the CLI being a Bun single-file binary;
#   --loglevel=error keeps them out of the CI log.
# - npm 11 skips the cline postinstall script; that does not matter. `cline/bin/cline` is a Node
#   launcher that finds the platform package, and `node_modules/.bin/cline` turned out to be a
#   symlink straight to the platform binary (both packages declare a `cline` bin). We print the
#   platform binary (`@cline/cli-<os>-<arch>/bin/cline`) so the tests run it without Node.
set -euo pipefail

version="${AEP_CLINE_VERSION:-3.0.65}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
cache="${AEP_CLINE_CACHE:-$repo/target/cline-cli}"

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform_pkg="@cline/cli-linux-x64" ;;
  Linux-aarch64) platform_pkg="@cline/cli-linux-arm64" ;;
  Darwin-arm64) platform_pkg="@cline/cli-darwin-arm64" ;;
  Darwin-x86_64) platform_pkg="@cline/cli-darwin-x64" ;;
  *) echo "install-cline: unsupported platform $(uname -s)-$(uname -m); install cline@$version by hand and set AEP_CLINE_TEST_CLI to its binary" >&2; exit 1 ;;
esac
bin="$cache/node_modules/$platform_pkg/bin/cline"

# Cline 2.x: a Node program (`dist/cli.mjs`, Node >= 20), no platform package.
version2="${AEP_CLINE2_VERSION:-2.18.0}"
cache2="${AEP_CLINE2_CACHE:-$repo/target/cline2-cli}"
installed_version2() {
  node -e 'try { process.stdout.write(require(process.argv[1]).version) } catch { }' \
    "$cache2/node_modules/cline/package.json" 2>/dev/null || true
}
if [[ ! -x "$cache2/node_modules/.bin/cline" || "$(installed_version2)" != "$version2" ]]; then
  command -v npm >/dev/null || { echo "install-cline: npm not found; install Node.js (>= 20) and npm first" >&2; exit 1; }
  mkdir -p "$cache2"
  if [[ ! -f "$cache2/package.json" ]]; then
    printf '{"name":"aep-cline-e2e-cli2","private":true}\n' >"$cache2/package.json"
  fi
  echo "install-cline: installing cline@$version2 into $cache2" >&2
  npm install --prefix "$cache2" --no-audit --no-fund --loglevel=error --save-exact "cline@$version2" >&2
  got2="$(installed_version2)"
  if [[ "$got2" != "$version2" || ! -x "$cache2/node_modules/.bin/cline" ]]; then
    echo "install-cline: expected cline@$version2 in $cache2, found '$got2'" >&2
    exit 1
  fi
fi
echo "install-cline: cline@$version2 is $cache2/node_modules/.bin/cline" >&2

# An app on Cline's SDK other than the CLI (crates/daemon/tests/e2e_sdk_host.rs): the SDK the
# CLI, VS Code 4.x, JetBrains and the desktop app share, `@cline/core`, wants Node >= 22.5, and
# the npm registry carries Node itself (package `node`, which brings the platform binary). Both
# pinned, into their own cache; the test's host is crates/daemon/tests/support/sdk_host.mjs.
sdk_core="${AEP_CLINE_SDK_VERSION:-0.0.86}"
sdk_node="${AEP_CLINE_SDK_NODE:-22.23.3}"
sdk_cache="${AEP_CLINE_SDK_CACHE:-$repo/target/cline-sdk}"
installed_sdk() {
  node -e 'try { const r = (p) => require(p).version; process.stdout.write(r(process.argv[1]) + " " + r(process.argv[2])) } catch { }' \
    "$sdk_cache/node_modules/@cline/core/package.json" "$sdk_cache/node_modules/node/package.json" 2>/dev/null || true
}
if [[ ! -x "$sdk_cache/node_modules/node/bin/node" || "$(installed_sdk)" != "$sdk_core $sdk_node" ]]; then
  command -v npm >/dev/null || { echo "install-cline: npm not found; install Node.js (>= 20) and npm first" >&2; exit 1; }
  mkdir -p "$sdk_cache"
  if [[ ! -f "$sdk_cache/package.json" ]]; then
    printf '{"name":"aep-cline-e2e-sdk","private":true}\n' >"$sdk_cache/package.json"
  fi
  echo "install-cline: installing @cline/core@$sdk_core and node@$sdk_node into $sdk_cache" >&2
  npm install --prefix "$sdk_cache" --no-audit --no-fund --loglevel=error --save-exact \
    "@cline/core@$sdk_core" "node@$sdk_node" >&2
  got_sdk="$(installed_sdk)"
  if [[ "$got_sdk" != "$sdk_core $sdk_node" || ! -x "$sdk_cache/node_modules/node/bin/node" ]]; then
    echo "install-cline: expected @cline/core@$sdk_core and node@$sdk_node in $sdk_cache, found '$got_sdk'" >&2
    exit 1
  fi
fi
echo "install-cline: the SDK host runs on $sdk_cache/node_modules/node/bin/node ($("$sdk_cache/node_modules/node/bin/node" --version))" >&2

installed_version() {
  # The platform package's own package.json carries the CLI version.
  node -e 'try { process.stdout.write(require(process.argv[1]).version) } catch { }' \
    "$cache/node_modules/$platform_pkg/package.json" 2>/dev/null || true
}

if [[ -x "$bin" && "$(installed_version)" == "$version" ]]; then
  echo "$bin"
  exit 0
fi

command -v npm >/dev/null || { echo "install-cline: npm not found; install Node.js (>= 20) and npm first" >&2; exit 1; }

mkdir -p "$cache"
# A private package.json keeps npm from walking up into any other project.
if [[ ! -f "$cache/package.json" ]]; then
  printf '{"name":"aep-cline-e2e-cli","private":true}\n' >"$cache/package.json"
fi
echo "install-cline: installing cline@$version into $cache" >&2
# npm's output goes to stderr so that stdout is only the binary path.
npm install --prefix "$cache" --no-audit --no-fund --loglevel=error --save-exact "cline@$version" >&2

if [[ ! -x "$bin" ]]; then
  echo "install-cline: cline@$version installed but $bin is missing; did npm skip the optional platform package $platform_pkg?" >&2
  exit 1
fi
got="$(installed_version)"
if [[ "$got" != "$version" ]]; then
  echo "install-cline: expected $platform_pkg@$version, found '$got' in $cache" >&2
  exit 1
fi
echo "$bin"
