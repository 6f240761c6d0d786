// The tasks pages. A task's page: its message stream, live. The page shows the latest attempt's first messages;
// this polls the REST list (`afterSeq`, the session cookie) and appends what is new. With no
// attempt yet it polls the attempts until an executor claims the task, then follows that one.
// An ended task's page does not poll: no message can be added to it any more.
"use strict";

// a field the browser refuses may sit in a closed <details> (optional input, more options):
// open it, so the refusal can be shown and the field reached
document.addEventListener("invalid", (event) => {
  const section = event.target.closest("details");
  if (section) section.open = true;
}, true);

(() => {
  const stream = document.querySelector("[data-stream]");
  if (!stream || stream.dataset.live !== "yes") return;
  const list = stream.querySelector("ol");
  const task = stream.dataset.task;
  let attempt = Number(stream.dataset.attempt || 0);
  let after = Number(stream.dataset.after || 0);

  const when = (iso) => new Date(iso).toISOString().slice(0, 16).replace("T", " ") + " UTC";
  const item = (message) => {
    const li = document.createElement("li");
    li.dataset.seq = String(message.seq);
    const kind = document.createElement("span");
    kind.className = "tag";
    kind.textContent = message.kind;
    const time = document.createElement("time");
    time.dateTime = message.timestamp;
    time.textContent = when(message.timestamp);
    const payload = document.createElement("span");
    payload.className = "payload";
    payload.textContent = typeof message.payload === "string" ? message.payload : JSON.stringify(message.payload, null, 2);
    li.append(kind, " ", time, " ", payload);
    return li;
  };

  const url = () => attempt
    ? `/tasks/${task}/attempts/${attempt}/messages?afterSeq=${after}`
    : `/tasks/${task}/attempts`;

  window.cairn.poll(url, 1500, (data) => {
    if (!attempt) {
      if (data.items.length) attempt = data.items[data.items.length - 1].attemptN;
      return;
    }
    for (const message of data.items) {
      if (message.seq <= after) continue;
      stream.querySelector("[data-empty]")?.remove();
      list.append(item(message));
      after = message.seq;
    }
  });
})();
