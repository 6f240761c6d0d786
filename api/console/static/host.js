// The console as an MCP Apps host (the queue and map pages): it answers the app's JSON-RPC over
// postMessage, and its `tools/call` requests with REST calls made as the logged-in human (the
// session cookie stays with this page; the app runs in a sandboxed frame with an opaque origin).
"use strict";
const config = JSON.parse(document.getElementById("config").textContent);
const frame = document.getElementById("app");
const TEAM = "x-service-team-id";

class Problem extends Error {
  constructor(status, body) {
    super(body.detail || `HTTP ${status}`);
    this.body = { status, code: body.code || "error", detail: body.detail || "", ...body };
  }
}

async function rest(method, path, { query, body, team, raw } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, String(value));
  }
  const headers = {};
  if (team) headers[TEAM] = team;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Problem(response.status, await response.json().catch(() => ({})));
  return raw ? response : response.json();
}

const base64 = (buffer) => {
  let binary = "";
  const bytes = new Uint8Array(buffer);
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
};

// The tools the two apps call, each answered as the MCP server would (same structured JSON).
const TOOLS = {
  tasks_app_counts: (a) => rest("GET", "/task-counts", { query: { taskType: a.task_type, projectId: a.project_id }, team: a.team_id }),
  tasks_list: (a) => rest("GET", "/tasks", {
    query: { status: a.status, taskType: a.task_type, projectId: a.project_id, limit: a.limit, cursor: a.cursor }, team: a.team_id,
  }),
  tasks_get: (a) => rest("GET", `/tasks/${a.id}`, { team: a.team_id }),
  tasks_attempts_list: (a) => rest("GET", `/tasks/${a.id}/attempts`, { team: a.team_id }),
  tasks_messages_list: (a) => rest("GET", `/tasks/${a.task_id}/attempts/${a.attempt_n}/messages`, {
    query: { afterSeq: a.after_seq, limit: a.limit }, team: a.team_id,
  }),
  tasks_artifacts_list: (a) => rest("GET", `/tasks/${a.task_id}/artifacts`, { query: { limit: a.limit, cursor: a.cursor }, team: a.team_id }),
  tasks_artifacts_download: async (a) => {
    const path = a.attempt_n ? `/tasks/${a.task_id}/attempts/${a.attempt_n}/artifacts/${a.cid}/content` : `/tasks/${a.task_id}/artifacts/${a.cid}/content`;
    const response = await rest("GET", path, { team: a.team_id, raw: true });
    const content = await response.arrayBuffer();
    return {
      cid: a.cid, contentType: response.headers.get("content-type") || "application/octet-stream",
      sizeBytes: content.byteLength, contentBase64: base64(content),
    };
  },
  tasks_console_link: async (a) => {
    const task = await rest("GET", `/tasks/${a.id}`, { team: a.team_id });
    const url = `${config.temporalUiUrl}/namespaces/${encodeURIComponent(config.temporalNamespace)}/workflows/${encodeURIComponent(task.workflowId)}`;
    return { taskId: task.id, workflowId: task.workflowId, url };
  },
  entries_map_points: (a) => rest("GET", `/diaries/${a.diary_id}/map`),
  entries_search: (a) => rest("POST", "/diary/search", { body: { query: a.query, diaryId: a.diary_id, limit: a.limit } }),
  packs_create: (a) => rest("POST", `/diaries/${a.diary_id}/packs`, {
    body: {
      packType: "custom", params: a.params || {}, entries: a.entries.map((e) => ({ entryId: e.entry_id, rank: e.rank })),
      force: Boolean(a.force), pinned: Boolean(a.pinned),
    },
  }),
};

// What the opener would have returned: the app needs the ids, and the diary's name.
const OPENERS = {
  // and, the console's own: where a task's page is, so a row of the queue opens it
  tasks_app_open: async (a) => ({ app: "tasks", teamId: a.team_id, filters: {}, tasks: [], taskPage: config.taskPage }),
  entries_map_open: async (a) => ({ app: "entries_map", diary: await rest("GET", `/diaries/${a.diary_id}`) }),
};

// The console knows which data the app asks for first (the map's points): it starts that call
// while the app's frame is still loading, and answers the app's identical call with it.
let prefetched = null;
if (config.prefetch) {
  const { name, arguments: args } = config.prefetch;
  prefetched = { name, key: JSON.stringify(args), result: TOOLS[name](args) };
  prefetched.result.catch(() => {}); // a failure is reported when the app asks
}

async function callTool(name, args) {
  if (prefetched && prefetched.name === name && prefetched.key === JSON.stringify(args || {})) {
    const { result } = prefetched;
    prefetched = null;
    return answer(name, () => result);
  }
  return answer(name, TOOLS[name] && (() => TOOLS[name](args || {})));
}

async function answer(name, run) {
  if (!run) return { isError: true, content: [{ type: "text", text: `Unknown tool ${name}` }], structuredContent: { status: 404, code: "unknown-tool", detail: `Unknown tool ${name}` } };
  try {
    const structured = await run();
    return { content: [{ type: "text", text: `${name}: done` }], structuredContent: structured };
  } catch (error) {
    const problem = error instanceof Problem ? error.body : { status: 502, code: "api-unreachable", detail: String(error) };
    return { isError: true, content: [{ type: "text", text: `Error ${problem.status} ${problem.code}: ${problem.detail}` }], structuredContent: problem };
  }
}

const post = (message) => frame.contentWindow.postMessage({ jsonrpc: "2.0", ...message }, "*");

async function opened() {
  post({ method: "ui/notifications/tool-input", params: { arguments: config.toolInput } });
  try {
    const structured = await OPENERS[config.toolName](config.toolInput);
    post({ method: "ui/notifications/tool-result", params: { content: [], structuredContent: structured } });
  } catch (error) {
    const problem = error instanceof Problem ? error.body : { detail: String(error) };
    post({ method: "ui/notifications/tool-result", params: { isError: true, content: [{ type: "text", text: problem.detail }], structuredContent: problem } });
  }
}

// A page of this console (a task's, from the queue) opens in place of the host page, as any
// link of the console does; anything else (the Temporal UI) in a new tab.
function openLink(target) {
  const url = new URL(target, window.location.href);
  if (url.origin === window.location.origin && url.pathname.startsWith("/console/")) window.location.assign(url.href);
  else window.open(url.href, "_blank", "noopener,noreferrer");
}

window.addEventListener("message", async (event) => {
  if (event.source !== frame.contentWindow) return;
  const message = event.data;
  if (!message || message.jsonrpc !== "2.0" || !message.method) return;
  const { id, method, params } = message;
  if (method === "ui/initialize") {
    post({ id, result: {
      protocolVersion: params.protocolVersion,
      hostInfo: { name: "cairn-console", version: config.version },
      hostCapabilities: { serverTools: {}, openLinks: {} },
      hostContext: { theme: "light", displayMode: "inline", platform: "web" },
    } });
  } else if (method === "ui/notifications/initialized") {
    opened();
  } else if (method === "tools/call") {
    post({ id, result: await callTool(params.name, params.arguments) });
  } else if (method === "ui/open-link") {
    openLink(params.url);
    post({ id, result: {} });
  } else if (method === "ui/notifications/size-changed") {
    // the console gives the app the whole window
  } else if (id !== undefined) {
    post({ id, error: { code: -32601, message: `Method not found: ${method}` } });
  }
});
frame.src = config.appUrl;

// A diary's page shows its hygiene report beside the title (GET /diaries/{id}/hygiene).
const HYGIENE_COUNTS = [
  ["entries", "entries"], ["duplicatesRefused", "duplicates refused"], ["openProposals", "open proposals"],
  ["superseded", "superseded"], ["injectionFlagged", "injection-flagged"],
];
async function showHygiene(diaryId) {
  const panel = document.getElementById("hygiene");
  try {
    const report = await rest("GET", `/diaries/${diaryId}/hygiene`);
    const counts = [...HYGIENE_COUNTS, ["unretrieved", `unretrieved in ${report.unretrievedDays} days`]];
    panel.replaceChildren("· hygiene: ");
    counts.forEach(([field, label], i) => {
      const item = document.createElement("span");
      item.dataset.field = field;
      const value = document.createElement("b");
      value.textContent = String(report[field]);
      item.append(value, ` ${label}`);
      panel.append(...(i ? [", ", item] : [item]));
    });
  } catch (error) {
    panel.textContent = `· hygiene unavailable (${error.message})`;
  }
  panel.hidden = false;
}
if (config.hygieneDiaryId) showHygiene(config.hygieneDiaryId);
