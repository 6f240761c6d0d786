// The app side of the MCP Apps protocol (io.modelcontextprotocol/ui): JSON-RPC 2.0 over
// postMessage with the host window. Inlined into each app page when it is served; nothing is
// fetched at run time. The app asks the host to call server tools (`tools/call`) and to open
// links (`ui/open-link`); the host pushes the opener's arguments and result.
const Bridge = (() => {
  const PROTOCOL_VERSION = "2026-01-26";
  const pending = new Map();
  const handlers = {};
  let nextId = 1;
  const send = (message) => window.parent.postMessage({ jsonrpc: "2.0", ...message }, "*");
  const request = (method, params) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      send({ id, method, params });
    });
  const notify = (method, params) => send({ method, params });
  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) return;
    const message = event.data;
    if (!message || message.jsonrpc !== "2.0") return;
    if (!message.method && message.id !== undefined) {
      const waiting = pending.get(message.id);
      if (!waiting) return;
      pending.delete(message.id);
      if (message.error) waiting.reject(new Error(message.error.message || "host error"));
      else waiting.resolve(message.result);
      return;
    }
    const handler = handlers[message.method];
    if (message.id === undefined) {
      if (handler) handler(message.params || {});
      return;
    }
    if (!handler && message.method !== "ui/resource-teardown") {
      send({ id: message.id, error: { code: -32601, message: "Method not found" } });
      return;
    }
    Promise.resolve(handler ? handler(message.params || {}) : {}).then((result) =>
      send({ id: message.id, result: result || {} }),
    );
  });
  class ToolError extends Error {
    constructor(problem) {
      super(`${problem.status || ""} ${problem.code || "error"}: ${problem.detail || ""}`.trim());
      this.problem = problem;
    }
  }
  return {
    ToolError,
    on(method, handler) {
      handlers[method] = handler;
    },
    async connect(name) {
      const result = await request("ui/initialize", {
        protocolVersion: PROTOCOL_VERSION,
        appInfo: { name, version: "1" },
        appCapabilities: {},
      });
      notify("ui/notifications/initialized", {});
      return result;
    },
    async callTool(name, args) {
      const result = await request("tools/call", { name, arguments: args });
      if (result.isError) {
        const text = (result.content || []).map((c) => c.text || "").join(" ");
        throw new ToolError(result.structuredContent || { detail: text });
      }
      return result.structuredContent || {};
    },
    openLink(url) {
      return request("ui/open-link", { url });
    },
    resized() {
      notify("ui/notifications/size-changed", {
        width: document.documentElement.scrollWidth,
        height: document.documentElement.scrollHeight,
      });
    },
  };
})();
