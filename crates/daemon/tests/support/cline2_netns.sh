#!/bin/bash
# One end-to-end session of the real Cline CLI 2.18 with aep-cline, run by
# crates/daemon/tests/e2e_cline2.rs INSIDE a private network namespace (`unshare -n`: loopback
# only, so 2.18's telemetry clients can reach nothing), as the project's capture of 2.18 was run.
# The fake model, the daemon, `aep-cline install-hooks` and the CLI all run in the namespace.
#
# env: CLINE2 (the 2.18 CLI), AEP (the aep-cline binary), FAKE (fake_cline2.py), SANDBOX (an
# empty folder: everything goes under it), PORT (the fake model's), RUNS ("scenario:prompt"
# lines: one CLI run each, against the fake model started with that scenario; `errorNNN` answers
# HTTP NNN), RUN_TIMEOUT (optional: seconds each run may take, 120), INSTALL (optional:
# the arguments of an `install-hooks` made before the global one).
# Leaves in SANDBOX: logs/ (the daemon's), install.out, <n>.stdout.jsonl/.stderr/.rc per run,
# home/.cline/data (Cline's own history), daemon.err, fake.err.
set -u
ip link set lo up
export HOME="$SANDBOX/home" CLINE_DIR="$SANDBOX/home/.cline" CLINE_NO_AUTO_UPDATE=1
export AEP_CLINE_STATE_DIR="$SANDBOX/state" AEP_LOG_DIR="$SANDBOX/logs"
unset XDG_CONFIG_HOME XDG_DOCUMENTS_DIR
mkdir -p "$HOME" "$SANDBOX/proj"

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Whatever way this script ends, nothing it started outlives it: an orphan holding the test's
# stdout would hang the test instead of failing it.
FPID="" DPID=""
trap 'kill $FPID $DPID 2>/dev/null' EXIT
start_fake() {
  # `error429`, `error500`: the `error` scenario answering every request with that HTTP status.
  local scenario="$1" status=500
  case "$scenario" in error[0-9]*) status="${scenario#error}" scenario=error ;; esac
  FAKE_SCENARIO="$scenario" FAKE_ERROR_STATUS="$status" FAKE_LOG="$SANDBOX/fake-requests.jsonl" \
    python3 "$FAKE" "$PORT" 2>>"$SANDBOX/fake.err" &
  FPID=$!
  # Generous: python's start on a loaded machine has taken more than 5 s.
  for _ in $(seq 1 600); do listening "$PORT" && return 0; sleep 0.1; done
  echo "the fake model did not start within 60 s: $(tail -3 "$SANDBOX/fake.err")" >&2; exit 1
}

AEP_LISTEN=127.0.0.1:0 "$AEP" daemon 2>"$SANDBOX/daemon.err" &
DPID=$!
for _ in $(seq 1 600); do [ -s "$AEP_CLINE_STATE_DIR/daemon.json" ] && break; sleep 0.1; done
[ -s "$AEP_CLINE_STATE_DIR/daemon.json" ] || { echo "the daemon did not start" >&2; exit 1; }

# Configure 2.18 as the recipe does: the OpenAI-compatible provider (`openai`), telemetry off,
# and the model's prices so that Cline's history carries a cost.
"$CLINE2" auth -p openai -k dummy-key -m fake-model -b "http://127.0.0.1:$PORT/v1" >"$SANDBOX/auth.out" 2>&1 \
  || { echo "cline auth failed: $(cat "$SANDBOX/auth.out")" >&2; exit 1; }
python3 - "$CLINE_DIR/data/globalState.json" <<'PY'
import json, sys
p = sys.argv[1]; d = json.load(open(p))
d["telemetrySetting"] = "disabled"
mi = {"maxTokens": 8192, "contextWindow": 128000, "supportsImages": False, "supportsPromptCache": True,
      "inputPrice": 3, "outputPrice": 15, "cacheReadsPrice": 0.3, "cacheWritesPrice": 3.75, "temperature": 0}
d["actModeOpenAiModelInfo"] = mi; d["planModeOpenAiModelInfo"] = mi
json.dump(d, open(p, "w"), indent=2)
PY

# The hooks, as a user installs them: no --hooks-dir, from the workspace. INSTALL (optional):
# the arguments of an `install-hooks` made first (`--project proj` is the workspace); the global
# install then runs from outside the workspace, as for a project hooked before the global hooks
# came (install-hooks leaves no second copy it can see, so both folders hold copies only so).
: >"$SANDBOX/install.out"
global_from="$SANDBOX/proj"
if [ -n "${INSTALL:-}" ]; then
  # shellcheck disable=SC2086 # INSTALL is a list of words
  (cd "$SANDBOX" && "$AEP" install-hooks $INSTALL) >>"$SANDBOX/install.out" 2>&1 \
    || { echo "install-hooks $INSTALL failed: $(cat "$SANDBOX/install.out")" >&2; exit 1; }
  global_from="$SANDBOX"
fi
(cd "$global_from" && "$AEP" install-hooks) >>"$SANDBOX/install.out" 2>&1 \
  || { echo "install-hooks failed: $(cat "$SANDBOX/install.out")" >&2; exit 1; }

n=0
while IFS= read -r run; do
  [ -n "$run" ] || continue
  n=$((n + 1))
  start_fake "${run%%:*}"
  (cd "$SANDBOX/proj" && timeout -k 10 "${RUN_TIMEOUT:-120}" "$CLINE2" task -y --json "${run#*:}" \
    >"$SANDBOX/$n.stdout.jsonl" 2>"$SANDBOX/$n.stderr" </dev/null; echo $? >"$SANDBOX/$n.rc")
  # 2.18's last hooks (TaskComplete, TaskCancel, Notification) outlive the CLI; the daemon
  # holds a TaskCancel 2 s and ends a session 3 s after its last hook once its process is gone:
  # wait until every session has ended (at most about 60 s), as `aep-cline sessions` shows it.
  for _ in $(seq 1 300); do
    "$AEP" sessions --all --json 2>/dev/null | python3 -c \
      'import json, sys; s = json.load(sys.stdin); sys.exit(0 if s and all(r["state"] == "ended" for r in s) else 1)' \
      && break
    sleep 0.1
  done
  kill "$FPID" 2>/dev/null; wait "$FPID" 2>/dev/null; FPID=""
done <<<"$RUNS"

kill -TERM "$DPID"; wait "$DPID"
echo "daemon exited $?" >>"$SANDBOX/daemon.err"
DPID=""
