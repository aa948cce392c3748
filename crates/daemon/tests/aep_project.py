"""Folds a JSON array of AEP Events (stdin) with the public AEP SDK's `project_state` and prints
each session's projection: whether it ended, the runs still running, and the SDK's violations."""
import json
import sys

from aep_sdk.projection import project_state

state = project_state(json.load(sys.stdin))
print(json.dumps({
    "sessions": [
        {
            "session": s["session"],
            "ended": s["ended"] is not None,
            "running": sum(1 for r in s["runs"] if r["status"] == "running"),
            "pending": len(s["pending"]),
        }
        for s in state["sessions"]
    ],
    "violations": state["violations"],
}))
