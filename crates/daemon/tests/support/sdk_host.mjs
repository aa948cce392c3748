/**
 * A minimal app on Cline's SDK (`@cline/core` 0.0.86), for tests only.
 *
 * Why: Cline 3.x's CLI, the VS Code extension 4.x, JetBrains and the desktop app all run their
 * sessions through this SDK and differ in the session's `source` (`cli`, `vscode`, ...), which the
 * SDK writes into the session file `sessions/<id>/<id>.json`. Only the CLI can run here, so this
 * host stands in for "another app": ONE non-interactive session with the given `source`, through
 * `ClineCore` (the apps' entry point) and otherwise the SDK's defaults. Those defaults find Cline's
 * hook files themselves (~/Documents/Cline/Hooks, $CLINE_DIR/hooks, <cwd>/.clinerules/hooks,
 * <cwd>/.cline/hooks; the host passes no hooks option) and write the store under
 * CLINE_SESSION_DATA_DIR / CLINE_DATA_DIR / $CLINE_DIR/data. A test thus sees what our hook shim
 * and the store get from an app that is not the CLI.
 *
 *   node22 sdk_host.mjs --source vscode --base-url http://127.0.0.1:PORT/v1 --model fake-model \
 *        [--api-key K] [--cwd DIR] "prompt"
 *
 * Needs Node >= 22.5 (node:sqlite) and @cline/core 0.0.86, found through NODE_PATH (a
 * node_modules folder outside the repository). The environment is used as given; the backend is
 * CLINE_SESSION_BACKEND_MODE, default "local" (in-process). "hub" needs a running hub (start
 * `@cline/core/dist/hub/daemon/entry.js` yourself: the SDK's own detached start looks for a
 * `dist/entry.js` the npm package lacks); hooks then run in the hub and the manifest's `pid` is the
 * hub's. Tools are auto-approved. No telemetry service is given (the SDK then uses no-op telemetry
 * and feature flags; the only connections are to --base-url). Prints one JSON line
 * {"sessionId","status","source","finishReason","messagesPath"} and exits 0 if the session
 * completed (1 if not; 1 with a message on stderr if it could not run).
 */
import { existsSync, readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";
import { parseArgs } from "node:util";

const { values: opt, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    source: { type: "string", default: "vscode" },
    "base-url": { type: "string" },
    model: { type: "string", default: "fake-model" },
    "api-key": { type: "string", default: "dummy-key" },
    cwd: { type: "string", default: process.cwd() },
  },
});

function fail(msg) {
  process.stderr.write(`sdk_host: ${msg}\n`);
  process.exit(1);
}

const prompt = positionals.join(" ").trim();
if (!prompt) fail("a prompt argument is required");
if (!opt["base-url"]) fail("--base-url is required");

// Find @cline/core in NODE_PATH's folders (ES modules ignore NODE_PATH), else normal resolution:
// the package is installed outside the repository.
async function loadCore() {
  for (const dir of (process.env.NODE_PATH || "").split(path.delimiter).filter(Boolean)) {
    const pkg = path.join(path.resolve(dir), "@cline", "core");
    if (!existsSync(path.join(pkg, "package.json"))) continue;
    const main = JSON.parse(readFileSync(path.join(pkg, "package.json"), "utf8")).exports["."].import;
    return await import(pathToFileURL(path.join(pkg, main)).href);
  }
  return await import("@cline/core");
}

let core;
try {
  core = await loadCore();
} catch (e) {
  fail(`cannot import @cline/core (set NODE_PATH to its node_modules): ${e?.message ?? e}`);
}
const { ClineCore } = core;
globalThis.AI_SDK_LOG_WARNINGS = false; // the AI SDK's deprecation chatter on stderr

const cwd = path.resolve(opt.cwd);
let cline;
try {
  cline = await ClineCore.create({
    clientName: `aep-sdk-host-${opt.source}`,
    backendMode: process.env.CLINE_SESSION_BACKEND_MODE?.trim() || "local",
  });
} catch (e) {
  fail(`cannot create the SDK host: ${e?.message ?? e}`);
}
let code = 0;
try {
  const started = await cline.start({
    source: opt.source,
    interactive: false,
    prompt,
    config: {
      providerId: "openai-compatible",
      modelId: opt.model,
      apiKey: opt["api-key"],
      baseUrl: opt["base-url"],
      cwd,
      workspaceRoot: cwd,
      systemPrompt: "", // empty: the SDK builds Cline's own system prompt
      mode: "act",
      enableTools: true,
      enableSpawnAgent: false,
      enableAgentTeams: false,
    },
    toolPolicies: { "*": { autoApprove: true } },
  });
  // In-process, start() runs the prompt to its end; a hub only creates the session, so send it.
  const result = started.result ?? (await cline.send({ sessionId: started.sessionId, prompt }));
  const record = await cline.get(started.sessionId);
  process.stdout.write(
    JSON.stringify({
      sessionId: started.sessionId,
      status: record?.status ?? "unknown",
      source: record?.source ?? opt.source,
      finishReason: result?.finishReason,
      messagesPath: record?.messagesPath,
    }) + "\n",
  );
  if (record?.status !== "completed") code = 1;
} catch (e) {
  process.stderr.write(`sdk_host: session failed: ${e?.stack ?? e}\n`);
  code = 1;
} finally {
  await cline.dispose("sdk_host done").catch(() => {});
}
process.exit(code);
