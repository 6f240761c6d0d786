"""The human console: everything a human member can do through the API, in the browser.

Pages are rendered on the server (Jinja2, `render.py`) from what the REST routes answer: the
console is another door to the same routes (like A2A), running each with
`api.endpoint.invoke` as the logged-in human, so a page shows and a form does exactly what the
API allows that human — the same permissions, scopes, limits, idempotency and problems. A
refusal is shown next to the form that caused it (`actions.py`). Forms work without script;
`static/console.js` adds the live parts (the task stream, copy buttons, schema forms' checks).
"""
