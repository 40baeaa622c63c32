/* graphfleet explorer: plain JS over the public API, authenticated with the tenant's API key (X-API-Key),
   kept in sessionStorage for this tab only. No build step, no network access beyond this gateway. */
"use strict";
(function () {
  const KEY = "graphfleet.apiKey";
  const TERMINAL = ["succeeded", "failed", "canceled"];
  const $ = (id) => document.getElementById(id);
  const gf = (window.graphfleet = { cy: null, entity: null, community: null, query: null, jobs: {}, extraJobs: {} });

  function el(tag, text, attrs) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
    return node;
  }
  function linkItem(text, onClick, attrs) {
    const li = el("li"), b = el("button", text, Object.assign({ type: "button" }, attrs || {}));
    b.addEventListener("click", onClick);
    li.appendChild(b);
    return li;
  }
  function showError(message) {
    $("error").textContent = message || "";
    $("error").hidden = !message;
  }
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  async function api(path, options) {
    const opts = Object.assign({}, options || {});
    opts.headers = Object.assign({ "X-API-Key": sessionStorage.getItem(KEY) || "" }, opts.headers || {});
    const response = await fetch(path, opts);
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) {
      const err = (body && body.error) || {};
      if (response.status === 401) logout();
      throw new Error(`${response.status} ${err.code || ""}: ${err.message || response.statusText}`);
    }
    return { status: response.status, body: body, headers: response.headers };
  }
  function guarded(fn) {
    return async function (...args) {
      try { showError(""); return await fn.apply(this, args); } catch (e) { showError(e.message); }
    };
  }

  // ------------------------------------------------------------------ session
  async function login(key) {
    sessionStorage.setItem(KEY, key);
    let me;
    try { me = (await api("/v1/tenant")).body; } catch (e) { sessionStorage.removeItem(KEY); throw e; }
    $("tenant-name").textContent = me.id || me.tenant || "";
    $("login-form").hidden = true;
    $("session").hidden = false;
    $("tabs").hidden = false;
    $("app").hidden = false;
    loadStats().catch(() => {});
    loadLevels().catch((e) => showError(e.message));
  }
  function logout() {
    sessionStorage.removeItem(KEY);
    $("login-form").hidden = false;
    $("session").hidden = true;
    $("tabs").hidden = true;
    $("app").hidden = true;
  }
  async function loadStats() {
    const s = (await api("/v1/graph/stats")).body;
    $("stats").textContent = `${s.documents} documents, ${s.entities} entities, ${s.relations} relations, ` +
      `${s.reports} reports`;
  }
  function showTab(name) {
    document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
    document.querySelectorAll(".tab").forEach((t) => { t.hidden = t.id !== "tab-" + name; });
    if (name === "explore" && gf.cy) gf.cy.resize();
    if (name === "jobs") guarded(refreshJobs)();
  }

  // ------------------------------------------------------------------ entities
  async function search(q) {
    const body = (await api(`/v1/graph/entities?q=${encodeURIComponent(q)}&limit=50`)).body;
    $("search-total").textContent = `${body.total} match(es)` + (body.total > body.items.length ? `, ${body.items.length} shown` : "");
    const list = $("search-results");
    list.replaceChildren(...body.items.map((hit) =>
      linkItem(`${hit.name} (${hit.type || "?"}, ${hit.degree})`, guarded(() => openEntity(hit.name)),
        { "data-entity": hit.name })));
    if (body.items.length && body.items[0].name.toUpperCase() === q.trim().toUpperCase()) await openEntity(body.items[0].name);
  }

  async function openEntity(name) {
    const e = (await api(`/v1/graph/entities/${encodeURIComponent(name)}`)).body;
    gf.entity = e;
    showTab("explore");
    $("entity").hidden = false;
    $("entity-name").textContent = e.name;
    $("entity-type").textContent = `${e.type || "?"}, degree ${e.degree}`;
    $("entity-description").textContent = e.description;
    $("neighbors").replaceChildren(...e.neighbors.map((n) => {
      const li = linkItem(n.name, guarded(() => openEntity(n.name)), { "data-neighbor": n.name });
      li.appendChild(el("span", ` ${n.weight} - ${n.description || ""}`, { class: "muted" }));
      return li;
    }));
    $("entity-communities").replaceChildren(...e.communities.map((id) =>
      linkItem(id, guarded(() => openCommunity(id)), { "data-community": id })));
    const chunks = e.sources.chunks || [], docs = e.sources.documents || [];
    $("entity-sources").textContent = `documents: ${docs.join(", ") || "-"}; chunks (${chunks.length}): ` +
      chunks.slice(0, 20).join(", ") + (chunks.length > 20 ? ", ..." : "");
    drawGraph(e);
  }

  function drawGraph(e) {
    const shown = e.neighbors.slice(0, 60);
    const maxW = Math.max(1, ...shown.map((n) => n.weight || 1));
    const elements = [{ data: { id: e.name, label: e.name }, classes: "center" }];
    shown.forEach((n) => {
      if (n.name === e.name) return;
      elements.push({ data: { id: n.name, label: n.name } });
      elements.push({ data: { id: `${e.name}->${n.name}`, source: e.name, target: n.name,
        width: 1 + 5 * (n.weight || 1) / maxW, label: n.description || "" } });
    });
    if (gf.cy) gf.cy.destroy();
    gf.cy = window.cy = cytoscape({
      container: $("graph"), elements: elements, wheelSensitivity: 0.3,
      style: [
        { selector: "node", style: { label: "data(label)", "font-size": 10, "background-color": "#6b8fb5",
          width: 18, height: 18 } },
        { selector: "node.center", style: { "background-color": "#c0392b", width: 30, height: 30, "font-weight": "bold" } },
        { selector: "edge", style: { width: "data(width)", "line-color": "#b8c4d0", "curve-style": "bezier" } },
      ],
      layout: { name: shown.length > 12 ? "concentric" : "cose", animate: false,
        concentric: (node) => (node.hasClass("center") ? 2 : 1), levelWidth: () => 1 },
    });
    gf.cy.on("tap", "node", (evt) => { if (evt.target.id() !== e.name) guarded(openEntity)(evt.target.id()); });
  }

  // ------------------------------------------------------------------ communities
  async function loadLevels() {
    const body = (await api("/v1/graph/communities?level=0&limit=1")).body;
    const select = $("community-level"), levels = Object.keys(body.levels).sort((a, b) => a - b);
    select.replaceChildren(...(levels.length ? levels : ["0"]).map((lv) =>
      el("option", `${lv} (${body.levels[lv] || 0})`, { value: lv })));
    await loadCommunities(select.value || "0");
  }
  async function loadCommunities(level) {
    const body = (await api(`/v1/graph/communities?level=${encodeURIComponent(level)}&limit=500`)).body;
    $("communities-total").textContent = `${body.total} communities at level ${body.level}`;
    $("communities").replaceChildren(...body.items.map((c) =>
      linkItem(`${c.id}: ${c.title || "(no report yet)"} [${c.size}]`, guarded(() => openCommunity(c.id)),
        { "data-community": c.id })));
  }
  async function openCommunity(id) {
    const c = (await api(`/v1/graph/communities/${encodeURIComponent(id)}`)).body;
    gf.community = c;
    showTab("communities");
    $("community").hidden = false;
    $("community-title").textContent = c.report ? `${c.id}: ${c.report.title}` : c.id;
    $("community-meta").textContent = `level ${c.level}, ${c.nodes.length} members` +
      (c.parent ? `, parent ${c.parent}` : "") + (c.children.length ? `, children ${c.children.join(", ")}` : "") +
      (c.report ? `, rating ${c.report.rating} (${c.report.generated_by})` : "");
    const report = $("community-report");
    report.replaceChildren();
    if (!c.report) {
      report.appendChild(el("p", "No report for this community yet.", { class: "muted" }));
    } else {
      report.appendChild(el("p", c.report.summary, { class: "pre", id: "community-summary" }));
      const ul = el("ul");
      c.report.findings.forEach((f) => {
        const li = el("li");
        li.appendChild(el("strong", f.summary));
        if (f.explanation) li.appendChild(el("div", f.explanation, { class: "pre" }));
        ul.appendChild(li);
      });
      report.appendChild(ul);
    }
    $("community-members").replaceChildren(...c.nodes.map((n) =>
      linkItem(n, guarded(() => openEntity(n)), { "data-entity": n })));
  }

  // ------------------------------------------------------------------ queries
  async function runQuery(mode, text) {
    $("query-result").hidden = true;
    $("query-status").textContent = `running ${mode} query...`;
    let r = await api("/v1/queries?wait=30", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ mode: mode, query: text, include_context: true }) });
    const location = r.headers.get("Location") || (r.body && r.body.location);
    while (!TERMINAL.includes(r.body.status)) {
      $("query-status").textContent = `${r.body.query_id}: ${r.body.status}...`;
      await sleep(1000 * Math.min(5, Number(r.headers.get("Retry-After") || 1)));
      r = await api(location);
    }
    showQuery(r.body);
  }
  function showQuery(q) {
    gf.query = q;
    $("query-status").textContent = `${q.query_id}: ${q.status}` + (q.answer_kind ? ` (${q.answer_kind} answer)` : "") +
      (q.partial ? `, partial: ${q.partial_reason || ""}` : "") + (q.error ? `, error: ${q.error}` : "");
    $("query-result").hidden = false;
    $("query-answer").textContent = q.answer || "";
    const b = q.budget || {};
    $("query-budget").textContent = `${b.total_tokens || 0} context tokens of ${b.total_allowed || 0} allowed ` +
      `(model ${b.model || "?"}, limit ${b.model_limit || 0})` +
      ((b.truncated_sections || []).length ? `; truncated: ${b.truncated_sections.join(", ")}` : "");
    $("query-sections").tBodies[0].replaceChildren(...(b.sections || []).map((s) => {
      const tr = el("tr", undefined, { "data-section": s.name });
      [s.name, s.candidates, s.kept, s.tokens_used, s.tokens_allowed, s.cut_by || ""].forEach((v) =>
        tr.appendChild(el("td", v)));
      return tr;
    }));
    const ctx = q.context;
    $("query-context").textContent = typeof ctx === "string" ? ctx : JSON.stringify(ctx, null, 2) || "";
  }

  // ------------------------------------------------------------------ jobs
  // The tenant's recent ingest/delete jobs (GET /v1/jobs), refreshed while the Jobs tab is open and any job
  // runs; a job id typed in is watched too (any kind, e.g. a query).
  let jobsTimer = null;
  async function refreshJobs() {
    const body = (await api("/v1/jobs?kind=ingest&kind=delete&limit=25")).body;
    const watched = Object.keys(gf.extraJobs);
    const extra = await Promise.all(watched.filter((id) => !body.items.some((j) => j.job_id === id))
      .map((id) => api(`/v1/jobs/${encodeURIComponent(id)}`).then((r) => r.body).catch(() => null)));
    const all = [...extra.filter(Boolean), ...body.items];
    gf.jobs = Object.fromEntries(all.map((j) => [j.job_id, j]));
    $("jobs-total").textContent = `${body.total} job(s) on record (ingestion, deletion and queries)`;
    $("jobs").tBodies[0].replaceChildren(...all.map(jobRow));
    clearTimeout(jobsTimer);
    const running = all.some((j) => !TERMINAL.includes(j.status));
    if (running && !$("tab-jobs").hidden && sessionStorage.getItem(KEY)) {
      jobsTimer = setTimeout(guarded(refreshJobs), 2000);
    }
  }
  function jobRow(j) {
    const p = j.progress || {};
    const progress = p.chunks_total !== undefined ? `${p.chunks_done}/${p.chunks_total} chunks` +
      (p.chunks_failed ? ` (${p.chunks_failed} failed)` : "") : JSON.stringify(p);
    const row = el("tr", undefined, { "data-job": j.job_id });
    const when = (j.timestamps || {}).created_at;
    [j.job_id, j.kind, j.status + (j.error ? `: ${j.error}` : ""), j.stage || "", progress,
      (j.failures || []).length, (j.usage || {}).calls || 0, when ? new Date(when * 1000).toLocaleString() : ""]
      .forEach((v) => row.appendChild(el("td", v)));
    return row;
  }

  // ------------------------------------------------------------------ wiring
  document.addEventListener("DOMContentLoaded", () => {
    $("login-form").addEventListener("submit", guarded(async (ev) => {
      ev.preventDefault();
      await login($("api-key").value.trim());
      $("api-key").value = "";
    }));
    $("logout").addEventListener("click", () => { logout(); showError(""); });
    document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => showTab(b.dataset.tab)));
    $("search-form").addEventListener("submit", guarded(async (ev) => {
      ev.preventDefault();
      const q = $("search-q").value.trim();
      if (q) await search(q);
    }));
    $("jobs-refresh").addEventListener("click", guarded(refreshJobs));
    $("community-level").addEventListener("change", guarded(() => loadCommunities($("community-level").value)));
    $("query-form").addEventListener("submit", guarded(async (ev) => {
      ev.preventDefault();
      const text = $("query-text").value.trim();
      if (text) await runQuery($("query-mode").value, text);
    }));
    $("job-form").addEventListener("submit", guarded(async (ev) => {
      ev.preventDefault();
      const id = $("job-id").value.trim();
      if (id) {
        await api(`/v1/jobs/${encodeURIComponent(id)}`);  // unknown id: the error banner, nothing added
        $("job-id").value = "";
        gf.extraJobs[id] = true;
        await refreshJobs();
      }
    }));
    if (sessionStorage.getItem(KEY)) guarded(login)(sessionStorage.getItem(KEY));
  });
})();
