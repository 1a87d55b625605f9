"use strict";
// The goatherd trace viewer: plain JS over the read-only /api endpoints.
const state = { path: "", mode: "both", after: -1, records: [], byId: new Map(), seen: new Set(), view: "records", livePos: -1, repairing: null };
const $ = (id) => document.getElementById(id);

async function getJSON(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: ${response.status}`);
  return response.json();
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

const short = (id) => (id || "").replace(/^sha256:/, "").slice(0, 12);
const under = (owner) => !state.path || owner === state.path || owner.startsWith(state.path + ":");
const modeOk = (mode) => state.mode === "both" || (state.mode === "captures_only") === (mode === "capture");

function recordNode(record, fresh) {
  const parents = el("span", { class: "parents" }, "parents: ");
  if (record.parents.length === 0) parents.append("none");
  for (const parent of record.parents) {
    parents.append(el("a", { "data-id": parent, onclick: () => focusRecord(parent) }, short(parent)));
  }
  const item = el(
    "li",
    { class: `record mode-${record.mode}${fresh ? " fresh" : ""}`, "data-id": record.id, "data-owner": record.owner },
    el("div", { class: "head" },
      el("span", { class: "kind" }, record.kind),
      el("span", { class: "owner" }, `${record.owner} #${record.ordinal}`),
      el("span", { class: "schema muted" }, record.schema),
      el("span", { class: "id", title: record.id }, short(record.id))),
    parents,
    el("pre", { class: "payload" }, JSON.stringify(record.payload, null, 2)));
  return item;
}

function addRecords(records, fresh) {
  const list = $("records");
  for (const record of records) {
    state.records.push(record);
    state.byId.set(record.id, record);
    state.seen.add(`${record.owner}@${record.ordinal}`);
    list.append(recordNode(record, fresh));
  }
  $("record-count").textContent = `${state.records.length} path entries shown`;
  if (state.view === "graph") drawGraph();
}

async function loadRecords(reset) {
  if (reset) {
    state.after = -1; state.records = []; state.byId.clear(); state.seen.clear(); $("records").replaceChildren();
  }
  const params = new URLSearchParams({ path: state.path, mode: state.mode, after: state.after, limit: 500 });
  const page = await getJSON(`/api/records?${params}`);
  addRecords(page.records, false);
  if (page.next_after !== null) state.after = page.next_after;
  else if (page.records.length) state.after = Math.max(state.after, ...page.records.map((r) => r.position ?? -1));
  $("more").hidden = page.next_after === null;
}

async function focusRecord(id) {
  if (!state.byId.has(id)) {
    try {
      const found = await getJSON(`/api/records/${encodeURIComponent(id)}`);
      if (found.records.length) await selectPath(found.records[0].owner);
    } catch (error) { return; }
  }
  const node = document.querySelector(`.record[data-id="${CSS.escape(id)}"]`);
  document.querySelectorAll(".record.highlight").forEach((n) => n.classList.remove("highlight"));
  if (node) { node.classList.add("highlight"); node.scrollIntoView({ block: "center" }); }
}

async function selectPath(path) {
  state.path = path;
  $("current-path").textContent = path || "all owners";
  document.querySelectorAll("#owners a").forEach((a) => a.classList.toggle("selected", a.dataset.path === path));
  await loadRecords(true);
}

function ownerTree(owners) {
  const root = { children: new Map(), count: 0 };
  for (const { owner, count } of owners) {
    let node = root; let path = "";
    for (const part of owner.split(":")) {
      path = path ? `${path}:${part}` : part;
      if (!node.children.has(part)) node.children.set(part, { path, children: new Map(), count: 0 });
      node = node.children.get(part);
      node.count += count;
    }
  }
  return root;
}

function renderTree(node, filter) {
  const list = el("ul", { class: "tree" });
  for (const [name, child] of node.children) {
    if (filter && !child.path.includes(filter) && ![...child.children.values()].some((c) => c.path.includes(filter))) continue;
    const link = el("a", { "data-path": child.path, onclick: () => selectPath(child.path) }, name);
    const item = el("li", {}, link, el("span", { class: "count" }, String(child.count)));
    if (child.children.size) item.append(renderTree(child, filter));
    list.append(item);
  }
  return list;
}

async function loadOwners() {
  const { owners } = await getJSON("/api/owners");
  const all = el("li", {}, el("a", { "data-path": "", onclick: () => selectPath("") }, "(all owners)"));
  const tree = renderTree(ownerTree(owners), $("owner-filter").value.trim());
  $("owners").replaceChildren(all, ...tree.children);
}

async function loadScopes() {
  const { scopes } = await getJSON("/api/scopes");
  const kids = new Map();
  for (const scope of scopes) {
    const key = scope.parent_owner || "";
    if (!kids.has(key)) kids.set(key, []);
    kids.get(key).push(scope);
  }
  const render = (parent) => {
    const list = el("ul", { class: "tree" });
    for (const scope of kids.get(parent) || []) {
      const item = el("li", { class: "scope", "data-owner": scope.owner },
        el("a", { onclick: () => selectPath(scope.owner) }, scope.owner),
        el("span", { class: `state state-${scope.state}` }, scope.state));
      if (kids.has(scope.owner)) item.append(render(scope.owner));
      list.append(item);
    }
    return list;
  };
  $("scopes").replaceChildren(...render("").children);
}

function drawGraph() {
  const records = state.records.slice(-400);
  const index = new Map(records.map((r, i) => [r.id, i]));
  const owners = [...new Set(records.map((r) => r.owner))];
  const x = (r) => 40 + owners.indexOf(r.owner) * 160;
  const y = (i) => 20 + i * 22;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", 80 + owners.length * 160);
  svg.setAttribute("height", 40 + records.length * 22);
  const make = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text) node.textContent = text;
    svg.append(node);
    return node;
  };
  records.forEach((r, i) => r.parents.forEach((p) => {
    if (index.has(p)) { const j = index.get(p); make("line", { x1: x(records[j]), y1: y(j), x2: x(r), y2: y(i) }); }
  }));
  records.forEach((r, i) => {
    const dot = make("circle", { cx: x(r), cy: y(i), r: 6, class: r.mode, "data-id": r.id });
    dot.addEventListener("click", () => { showView("records"); focusRecord(r.id); });
    make("text", { x: x(r) + 9, y: y(i) + 4 }, r.kind);
  });
  $("graph").replaceChildren(svg);
}

function showView(view) {
  state.view = view;
  $("records").hidden = view !== "records";
  $("graph").hidden = view !== "graph";
  $("show-records").classList.toggle("active", view === "records");
  $("show-graph").classList.toggle("active", view === "graph");
  if (view === "graph") drawGraph();
}

// Pages still to load: live records then belong after them, so they are not
// appended out of order; "Load more" reaches them in log order.
const morePending = () => !$("more").hidden;

function onLiveRecord(record) {
  if (!morePending() && under(record.owner) && modeOk(record.mode) && !state.seen.has(`${record.owner}@${record.ordinal}`)) {
    addRecords([record], true);
    state.after = Math.max(state.after, record.position);
  }
  scheduleSideRefresh();
}

let sideTimer = null;
function scheduleSideRefresh() {
  if (sideTimer) return;
  sideTimer = setTimeout(() => { sideTimer = null; loadOwners(); loadScopes(); }, 500);
}

async function poll() {
  if (morePending()) return;
  try {
    const params = new URLSearchParams({ path: state.path, mode: state.mode, after: state.after, limit: 500 });
    const page = await getJSON(`/api/records?${params}`);
    page.records.filter((r) => r.position !== null).forEach(onLiveRecord);
  } catch (error) { /* next tick retries */ }
}

// The stream carries every log entry, so positions arrive without gaps
// unless the server dropped events for this client (it fell behind): then
// re-read what was missed from /api/records, in log order, and hold the
// stream's records until that is done.
function onStreamRecord(record) {
  if (state.repairing) { state.repairing.push(record); return; }
  const gap = state.livePos >= 0 && record.position > state.livePos + 1;
  state.livePos = Math.max(state.livePos, record.position);
  if (!gap) { onLiveRecord(record); return; }
  state.repairing = [record];
  poll().finally(() => {
    const held = state.repairing; state.repairing = null;
    held.forEach(onStreamRecord);
  });
}

function connectLive() {
  const source = new EventSource("/api/events");
  source.addEventListener("record", (event) => onStreamRecord(JSON.parse(event.data)));
  source.onopen = () => { $("live").textContent = "live"; $("live").classList.add("live"); poll(); };
  source.onerror = () => {
    source.close();
    $("live").textContent = "polling"; $("live").classList.remove("live");
    setInterval(poll, 2000);
  };
}

async function main() {
  $("mode").addEventListener("change", (e) => { state.mode = e.target.value; loadRecords(true); });
  $("more").addEventListener("click", () => loadRecords(false));
  $("show-records").addEventListener("click", () => showView("records"));
  $("show-graph").addEventListener("click", () => showView("graph"));
  $("owner-filter").addEventListener("input", loadOwners);
  const health = await getJSON("/api/health");
  $("health").textContent = `${health.records} records`;
  await Promise.all([loadOwners(), loadScopes(), loadRecords(true)]);
  if (health.bus) connectLive(); else setInterval(poll, 2000);
}

main();
