// whitevec search page. Every piece of server text goes into the page with textContent, never innerHTML:
// a document holding "<img onerror=...>" shows as text.
"use strict";

const $ = (id) => document.getElementById(id);

function apiKey() {
  return sessionStorage.getItem("whitevec-api-key") || "";
}

async function call(path, body) {
  const headers = { "Accept": "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const key = apiKey();
  if (key) headers["X-API-Key"] = key;
  const response = await fetch(path, {
    method: body === undefined ? "GET" : "POST",
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let payload = null;
  try {
    payload = await response.json();
  } catch (err) {
    payload = null;
  }
  if (response.status === 401) {
    $("key-row").hidden = false;
  }
  if (!response.ok) {
    const detail = payload && payload.detail ? payload.detail : response.statusText;
    throw new Error(`${response.status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  }
  return payload;
}

function describeTransform(transform) {
  if (transform === null || transform === undefined) return "none";
  if (typeof transform === "string") return transform;
  if (typeof transform === "object") {
    return transform.spec || transform.name || transform.class || JSON.stringify(transform);
  }
  return String(transform);
}

async function loadInfo() {
  const target = $("index-info");
  try {
    const info = await call("/info");
    const m = info.manifest || {};
    target.textContent = "";
    const parts = [
      ["model", m.model],
      ["pooling", m.pooling],
      ["transform", describeTransform(m.transform)],
      ["dims", m.dims !== undefined ? m.dims : m.dim],
      ["metric", m.metric],
      ["documents", info.count],
    ];
    for (const [label, value] of parts) {
      if (value === undefined || value === null) continue;
      const item = document.createElement("span");
      item.className = "fact";
      item.dataset.field = label;
      const name = document.createElement("b");
      name.textContent = label + ": ";
      const val = document.createElement("span");
      val.className = "value";
      val.textContent = String(value);
      item.append(name, val);
      target.append(item);
    }
    target.classList.remove("muted");
    showModes(info.search);
  } catch (err) {
    target.textContent = "Index information unavailable (" + err.message + ")";
  }
}

// The mode control: shown only when the index has a lexical part (a dense index searches one way), set to the
// index's own mode.
function showModes(search) {
  const row = $("mode-row");
  const modes = search && search.lexical ? search.modes : [];
  row.hidden = modes.length < 2;
  $("mode").disabled = row.hidden;
  if (!row.hidden) $("mode").value = search.default_mode;
}

// Which rankers found a hit, and where: "dense #1 · lexical #4" (a ranker that did not is left out).
function describeRankers(places) {
  return Object.entries(places)
    .map(([name, place]) => `${name} #${place.rank}`)
    .join(" · ");
}

function renderResults(result) {
  const list = $("results");
  list.textContent = "";
  result.ids.forEach((id, i) => {
    const item = document.createElement("li");
    item.className = "hit";
    const head = document.createElement("div");
    head.className = "hit-head";
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = result.scores[i].toFixed(4);
    const ident = document.createElement("span");
    ident.className = "doc-id";
    ident.textContent = "id " + id;
    head.append(score, ident);
    const places = result.rankers ? result.rankers[i] : null;
    if (places) {
      const rankers = document.createElement("span");
      rankers.className = "rankers";
      rankers.textContent = describeRankers(places);
      head.append(rankers);
    }
    const text = document.createElement("p");
    text.className = "doc-text";
    text.textContent = result.texts[i];
    item.append(head, text);
    list.append(item);
  });
}

async function search(event) {
  event.preventDefault();
  const query = $("query").value.trim();
  if (!query) return;
  const k = parseInt($("k").value, 10) || 10;
  const status = $("status");
  status.textContent = "Searching…";
  status.className = "";
  $("search-button").disabled = true;
  const started = performance.now();
  try {
    const body = { queries: [query], k };
    if (!$("mode-row").hidden) body.mode = $("mode").value;
    const data = await call("/search", body);
    const result = data.results[0];
    renderResults(result);
    const ms = Math.round(performance.now() - started);
    // A query one ranker cannot search (no token the model knows, no term left): the server says so in a note.
    status.textContent = result.note ? result.note : `${result.ids.length} results in ${ms} ms`;
    status.className = "done";
  } catch (err) {
    $("results").textContent = "";
    status.textContent = "Error " + err.message;
    status.className = "error";
  } finally {
    $("search-button").disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("search-form").addEventListener("submit", search);
  $("api-key").value = apiKey();
  $("api-key").addEventListener("change", (e) => {
    sessionStorage.setItem("whitevec-api-key", e.target.value);
    loadInfo();
  });
  loadInfo();
});
