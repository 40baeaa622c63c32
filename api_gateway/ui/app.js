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

  // A description merged from several passages is stored joined with "<SEP>": the API also sends its distinct
  // parts (`descriptions`); older gateways do not, so the page splits the joined text itself then.
  const SEP = "<SEP>";
  function parts(text, list) {
    const raw = Array.isArray(list) ? list : String(text || "").split(SEP);
    return [...new Set(raw.map((p) => p.trim()).filter(Boolean))];
  }
  function pagesText(pages) {  // [3, 4, 5, 9] -> "pp. 3-5, 9"
    const runs = [];
    pages.forEach((p) => {
      const last = runs[runs.length - 1];
      if (last && p === last[1] + 1) last[1] = p; else runs.push([p, p]);
    });
    const text = runs.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(", ");
    return (pages.length > 1 ? "pp. " : "p. ") + text;
  }

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
    $("login-help").hidden = true;
    $("session").hidden = false;
    $("tabs").hidden = false;
    $("app").hidden = false;
    loadStats().catch(() => {});
    loadLevels().catch((e) => showError(e.message));
  }
  function logout() {
    sessionStorage.removeItem(KEY);
    $("login-form").hidden = false;
    $("login-help").hidden = false;
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
    showDescription(parts(e.description, e.descriptions));
    $("neighbors").replaceChildren(...e.neighbors.map((n) => {
      const li = linkItem(n.name, guarded(() => openEntity(n.name)), { "data-neighbor": n.name });
      const said = parts(n.description, n.descriptions);
      const more = said.length > 1 ? ` (+${said.length - 1})` : "";
      li.appendChild(el("span", ` ${Math.round((n.weight || 0) * 10) / 10} - ${said[0] || ""}${more}`,
        { class: "muted", title: said.join("\n") }));
      return li;
    }));
    $("entity-communities").replaceChildren(...e.communities.map((id) =>
      linkItem(id, guarded(() => openCommunity(id)), { "data-community": id })));
    showSources(e);
    drawGraph(e);
  }

  // The first part of the description as a summary (clamped to a few lines), the other parts behind "more".
  function showDescription(said) {
    const summary = $("entity-summary"), rest = $("entity-more-parts"), toggle = $("entity-more");
    summary.textContent = said[0] || "(no description)";
    summary.classList.add("clamp");
    rest.replaceChildren(...said.slice(1).map((p) => el("li", p)));
    rest.hidden = true;
    const clamped = summary.scrollHeight > summary.clientHeight + 1;
    toggle.hidden = said.length < 2 && !clamped;
    toggle.textContent = said.length > 1 ? `more (${said.length - 1})` : "more";
    toggle.setAttribute("aria-expanded", "false");
  }
  function toggleDescription() {
    const open = $("entity-more").getAttribute("aria-expanded") !== "true";
    $("entity-summary").classList.toggle("clamp", !open);
    $("entity-more-parts").hidden = !open;
    $("entity-more").setAttribute("aria-expanded", String(open));
    const n = $("entity-more-parts").children.length;
    $("entity-more").textContent = open ? "less" : (n ? `more (${n})` : "more");
  }

  // Sources by document name (the uploaded file's, else the title or id) with the pages quoted, when known.
  function showSources(e) {
    const docs = e.source_documents ||
      (e.sources.documents || []).map((id) => ({ id: id, name: id, pages: [], chunks: 0 }));
    const items = docs.map((d) => {
      const passages = d.chunks ? ` (${d.chunks} passage${d.chunks > 1 ? "s" : ""})` : "";
      return el("li", d.name + (d.pages.length ? `, ${pagesText(d.pages)}` : "") + passages,
        { "data-document": d.id, title: d.id });
    });
    $("entity-sources").replaceChildren(...(items.length ? items : [el("li", "-", { class: "muted" })]));
  }

  // The focus and its strongest neighbours carry a (shortened) label; the others are dots on an outer ring whose
  // name shows while hovered, so labels never pile up. Labelled nodes are laid out by Cytoscape's concentric
  // layout with their labels counted as part of their size (no overlap); the dots by its circle layout outside.
  const LABELLED = 8, LABEL_CHARS = 18, FIT_PADDING = 30, MAX_FIT_ZOOM = 1.25;
  const shortLabel = (name) => (name.length > LABEL_CHARS ? name.slice(0, LABEL_CHARS - 1) + "\u2026" : name);

  function drawGraph(e) {
    const shown = e.neighbors.slice(0, 60).filter((n) => n.name !== e.name);
    const maxW = Math.max(1, ...shown.map((n) => n.weight || 1));
    const elements = [{ data: { id: e.name, label: shortLabel(e.name), full: e.name }, classes: "center labelled" }];
    shown.forEach((n, i) => {
      elements.push({ data: { id: n.name, label: shortLabel(n.name), full: n.name },
        classes: i < LABELLED ? "labelled" : "" });
      elements.push({ data: { id: `${e.name}->${n.name}`, source: e.name, target: n.name,
        width: 1 + 5 * (n.weight || 1) / maxW } });
    });
    if (gf.cy) gf.cy.destroy();
    gf.cy = window.cy = cytoscape({
      container: $("graph"), elements: elements, wheelSensitivity: 0.3, minZoom: 0.1, maxZoom: 4,
      style: [
        { selector: "node", style: { label: "", "font-size": 11, "background-color": "#6b8fb5", width: 14,
          height: 14, "text-valign": "bottom", "text-margin-y": 3 } },
        { selector: "node.labelled", style: { label: "data(label)", width: 18, height: 18 } },
        { selector: "node.center", style: { "background-color": "#c0392b", width: 30, height: 30, "font-weight": "bold" } },
        { selector: "node.hover", style: { label: "data(full)", "z-index": 10, "text-background-color": "#fff",
          "text-background-opacity": 0.9, "text-background-padding": 2 } },
        { selector: "edge", style: { width: "data(width)", "line-color": "#b8c4d0", "curve-style": "bezier" } },
      ],
      layout: { name: "preset" },
    });
    layoutGraph(gf.cy, e.name);
    gf.cy.on("tap", "node", (evt) => { if (evt.target.id() !== e.name) guarded(openEntity)(evt.target.id()); });
    gf.cy.on("mouseover", "node", (evt) => evt.target.addClass("hover"));
    gf.cy.on("mouseout", "node", (evt) => evt.target.removeClass("hover"));
  }

  function layoutGraph(cy, focus) {
    const labelled = cy.nodes(".labelled"), dots = cy.nodes().not(".labelled");
    labelled.layout({ name: "concentric", animate: false, fit: false, avoidOverlap: true,
      nodeDimensionsIncludeLabels: true, minNodeSpacing: 24, startAngle: 1.5 * Math.PI,
      concentric: (node) => (node.hasClass("center") ? 2 : 1), levelWidth: () => 1 }).run();
    if (dots.nonempty()) {
      const c = cy.getElementById(focus).position(), bb = labelled.boundingBox({ includeLabels: true });
      const r = Math.max(bb.x2 - c.x, c.x - bb.x1, bb.y2 - c.y, c.y - bb.y1) + 40;
      dots.layout({ name: "circle", animate: false, fit: false, avoidOverlap: true, radius: r,
        boundingBox: { x1: c.x - r, y1: c.y - r, w: 2 * r, h: 2 * r } }).run();
    }
    // fit the whole graph, but never blow a graph of one or two nodes up to giant discs
    cy.fit(undefined, FIT_PADDING);
    if (cy.zoom() > MAX_FIT_ZOOM) {
      cy.zoom(MAX_FIT_ZOOM);
      cy.center();
    }
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
    $("entity-more").addEventListener("click", toggleDescription);
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
