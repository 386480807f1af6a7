// The front door's status panel, kept live from /readyz (no inline script: CSP-ready).
"use strict";

const REFRESH_MS = 10000;

function show(body) {
  const panel = document.getElementById("status");
  panel.dataset.ready = body.ready ? "true" : "false";
  document.getElementById("status-word").textContent = body.ready ? "ready" : "not ready";
  if (!("workers" in body)) {
    return; // PRODUCTION: /readyz tells only operators the detail; the page keeps what it showed
  }
  document.getElementById("status-database").textContent = body.database ? "answers" : "does not answer";
  document.getElementById("status-layer").textContent = body.channel_layer ? "answers" : "does not answer";
  for (const row of panel.querySelectorAll("[data-kind]")) {
    const kind = row.dataset.kind;
    const names = (body.engines || {})[kind] || [];
    const count = (body.workers || {})[kind] || 0;
    row.querySelector(".engine-names").textContent = names.length ? names.join(", ") : "no engine loaded";
    row.querySelector(".worker-count").textContent = `${count} worker${count === 1 ? "" : "s"}`;
  }
}

async function refresh() {
  try {
    const response = await fetch("/readyz", { cache: "no-store" });
    show(await response.json()); // 503 carries the same body
  } catch {
    document.getElementById("status").dataset.ready = "false";
    document.getElementById("status-word").textContent = "unreachable";
  }
}

if (document.getElementById("status")) {
  setInterval(refresh, REFRESH_MS);
}
