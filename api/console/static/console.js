// The console's progressive enhancement: every form works without it. It adds copy buttons,
// JSON fields checked before sending, one send per form, and `cairn.poll` for the live parts.
"use strict";

document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  try {
    await navigator.clipboard.writeText(source.textContent.trim());
    button.textContent = "Copied";
  } catch {
    const range = document.createRange();
    range.selectNodeContents(source);
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    button.textContent = "Selected: press Ctrl+C";
  }
});

document.addEventListener("submit", (event) => {
  const form = event.target;
  for (const area of form.querySelectorAll("textarea[data-json]")) {
    area.setCustomValidity("");
    if (area.value.trim() === "" && !area.required) continue;
    try {
      JSON.parse(area.value);
    } catch (error) {
      area.setCustomValidity(`Not valid JSON: ${error.message}`);
    }
  }
  if (!form.checkValidity()) {
    event.preventDefault();
    form.reportValidity();
    return;
  }
  // one send per form: a second click while the first is on its way does nothing
  if (form.dataset.sent) event.preventDefault();
  form.dataset.sent = "1";
}, true);

// a JSON field once refused is checked again at the next submit: the browser would not even
// fire that submit while the old refusal stands
document.addEventListener("input", (event) => {
  if (event.target.matches("textarea[data-json]")) event.target.setCustomValidity("");
});

window.cairn = {
  // poll `url` (same origin, the session cookie) every `everyMs`; `onData(json)` renders
  poll(url, everyMs, onData) {
    let stopped = false;
    const tick = async () => {
      if (stopped) return;
      try {
        const response = await fetch(url(), { credentials: "same-origin", headers: { Accept: "application/json" } });
        if (response.ok) stopped = (await onData(await response.json())) === false;
      } catch { /* the next tick retries */ }
      if (!stopped) setTimeout(tick, everyMs);
    };
    tick();
    return () => { stopped = true; };
  },
};
