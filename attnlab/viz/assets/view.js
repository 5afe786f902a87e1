"use strict";
// attnlab view: draws the page from one JSON object (attnlab.viz.view.page_data).
// Every name and message from the network is data: it is written with textContent or as an
// SVG/canvas text value, never parsed as markup.
(function () {
  const data = JSON.parse(document.getElementById("attnlab-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);
  const byName = new Map(data.layers.map((l) => [l.name, l]));
  const nodeEls = new Map();
  const fmt = (n) => Number(n).toLocaleString("en-US");

  function h(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function s(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function row(tbody, cells, tag) {
    const tr = h("tr");
    for (const c of cells) {
      if (c instanceof Node) { const td = h(tag || "td"); td.appendChild(c); tr.appendChild(td); }
      else tr.appendChild(h(tag || "td", {}, c));
    }
    tbody.appendChild(tr);
    return tr;
  }

  // ------------------------------------------------------------------ header, totals ---
  const t = data.totals;
  $("title").textContent = data.title;
  const totalsText = `${fmt(t.layers)} layers · ${fmt(t.connections)} connections · ` +
    `${fmt(t.learnables)} learnables · ${t.errors} error(s), ${t.warnings} warning(s)`;
  $("totals").textContent = totalsText;

  // ----------------------------------------------------------------------- the graph ---
  const svg = $("graph"), viewport = $("viewport");
  const gEdges = $("edges"), gNodes = $("nodes"), gLabels = $("labels");
  const [W, H] = data.size;
  const bad = new Set(data.layers.filter((l) => l.in_cycle || l.issues.some(
    (i) => data.issues[i].severity === "error")).map((l) => l.name));

  function curve(points) {
    let d = `M${points[0][0]},${points[0][1]}`;
    for (let i = 1; i + 2 < points.length + 1; i += 3) {
      const [a, b, c] = [points[i], points[i + 1], points[i + 2]];
      if (!c) break;
      d += ` C${a[0]},${a[1]} ${b[0]},${b[1]} ${c[0]},${c[1]}`;
    }
    return d;
  }

  const edgeEls = [];
  for (const e of data.edges) {
    const p = s("path", {
      d: curve(e.points), class: "edge" + (e.in_cycle ? " cycle" : ""),
      "marker-end": e.in_cycle ? "url(#arrow-cycle)" : "url(#arrow)",
    });
    p.dataset.source = e.source;
    p.dataset.destination = e.destination;
    p.dataset.port = e.dst_port || "";
    p.appendChild(s("title", {}, `${e.source}${e.source_port ? "/" + e.source_port : ""} → ` +
      `${e.destination}${e.port ? "/" + e.port : ""}`));
    gEdges.appendChild(p);
    edgeEls.push(p);
    const end = e.points[e.points.length - 1], start = e.points[0];
    if (e.port) {
      gLabels.appendChild(s("text", { x: end[0] + 3.4, y: end[1] - 4,
        class: "port-label" + (e.in_cycle ? " cycle" : "") }, e.port));
    }
    if (e.source_port) {
      gLabels.appendChild(s("text", { x: start[0] + 3.4, y: start[1] + 10, class: "port-label out" },
        e.source_port));
    }
  }

  const connected = new Set(data.edges.map((e) => e.destination + "\u0000" + e.dst_port));
  for (const l of data.layers) {
    const g = s("g", { class: "node" + (bad.has(l.name) ? " bad" : ""), tabindex: "0",
      role: "button", transform: `translate(${l.x},${l.y})` });
    g.dataset.name = l.name;
    const cycleOrError = bad.has(l.name);
    g.appendChild(s("rect", { width: l.w, height: l.h, rx: 6.7, fill: l.face,
      stroke: cycleOrError ? "#d62728" : l.edge }));
    g.appendChild(s("text", { class: "name", x: l.w / 2, y: l.h / 2 - 7.2 }, l.name));
    g.appendChild(s("text", { class: "sub", x: l.w / 2, y: l.h / 2 + 9.6 },
      l.type + (l.sizes ? "  ·  " + l.sizes : "")));
    const tip = [l.name, l.type + (l.sizes ? " · " + l.sizes : "")];
    for (const i of l.issues) tip.push(`${data.issues[i].severity}: ${data.issues[i].message}`);
    g.appendChild(s("title", {}, tip.join("\n")));
    if (l.issues.length) {
      g.appendChild(s("circle", { class: "badge", cx: l.w - 2, cy: 2, r: 7 }));
      g.appendChild(s("text", { class: "badge-text", x: l.w - 2, y: 2.5 }, "!"));
    }
    // ports with nothing connected: a red stub above the box, labelled
    l.in_ports.forEach((p, k) => {
      if (l.type.endsWith("Input") || connected.has(l.name + "\u0000" + p)) return;
      if (!l.issues.some((i) => data.issues[i].kind === "unconnected" && data.issues[i].port === p)) return;
      const n = l.in_ports.length, x = l.w * ((k + 0.5) / n);
      g.appendChild(s("line", { class: "stub", x1: x, y1: -14, x2: x, y2: 0 }));
      g.appendChild(s("text", { class: "port-label open", x: x + 3, y: -6, "text-anchor": "start" }, p));
    });
    gNodes.appendChild(g);
    nodeEls.set(l.name, g);
  }
  // the cycles, spelled out above the graph as net.plot() does
  data.cycles.forEach((c, i) => {
    gLabels.appendChild(s("text", { class: "graph-caption", x: W / 2, y: -12 - 18 * (data.cycles.length - 1 - i) },
      "cycle: " + c.concat([c[0]]).join(" → ")));
  });

  // zoom and pan: one transform on the viewport group
  const view = { x: 0, y: 0, k: 1 };
  function apply() { viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`); }
  // fit(): the whole graph in view; fit(true), the first view: a large graph starts at its
  // top at a readable scale instead of shrunk to illegible boxes
  function fit(readable) {
    const r = svg.getBoundingClientRect();
    const top = data.cycles.length ? 20 + 18 * data.cycles.length : 0;
    let k = Math.min(r.width / W, (r.height - top) / H, 1.6);
    const small = readable === true && k < 0.5;
    if (small) k = Math.min(0.5, Math.max(r.width / W, 0.2));
    view.k = Math.max(k, 0.02);
    view.x = (r.width - W * view.k) / 2;
    view.y = small ? top + 8 : top + (r.height - top - H * view.k) / 2;
    apply();
  }
  function zoomAt(px, py, factor) {
    const k = Math.min(Math.max(view.k * factor, 0.02), 8);
    view.x = px - (px - view.x) * (k / view.k);
    view.y = py - (py - view.y) * (k / view.k);
    view.k = k;
    apply();
  }
  function centreOn(name) {
    const l = byName.get(name);
    if (!l) return;
    const r = svg.getBoundingClientRect();
    if (view.k < 0.6) view.k = 1;
    view.x = r.width / 2 - (l.x + l.w / 2) * view.k;
    view.y = r.height / 2 - (l.y + l.h / 2) * view.k;
    apply();
  }
  svg.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = svg.getBoundingClientRect();
    zoomAt(ev.clientX - r.left, ev.clientY - r.top, Math.exp(-ev.deltaY * 0.0015));
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (ev) => {
    drag = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y, moved: false,
      node: ev.target.closest ? ev.target.closest(".node") : null };
    svg.setPointerCapture(ev.pointerId);
  });
  svg.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    drag.moved = true;
    svg.classList.add("panning");
    view.x = drag.vx + dx;
    view.y = drag.vy + dy;
    apply();
  });
  svg.addEventListener("pointerup", (ev) => {
    if (drag && !drag.moved && drag.node) select(drag.node.dataset.name, false);
    drag = null;
    svg.classList.remove("panning");
  });
  svg.addEventListener("keydown", (ev) => {
    const g = ev.target.closest ? ev.target.closest(".node") : null;
    if (g && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); select(g.dataset.name, false); }
    else if (ev.key === "+" || ev.key === "=") zoomAt(svg.clientWidth / 2, svg.clientHeight / 2, 1.25);
    else if (ev.key === "-") zoomAt(svg.clientWidth / 2, svg.clientHeight / 2, 0.8);
  });
  $("fit").addEventListener("click", () => fit(false));

  // search by layer name
  let matches = [], matchAt = -1;
  $("search").addEventListener("input", () => {
    const q = $("search").value.trim().toLowerCase();
    matches = [];
    matchAt = -1;
    for (const [name, g] of nodeEls) {
      const hit = q !== "" && name.toLowerCase().includes(q);
      g.classList.toggle("match", hit);
      if (hit) matches.push(name);
    }
    svg.classList.toggle("dimmed", q !== "");
    $("search-count").textContent = q === "" ? "" : `${matches.length} match${matches.length === 1 ? "" : "es"}`;
  });
  $("search").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && matches.length) {
      matchAt = (matchAt + 1) % matches.length;
      select(matches[matchAt], true);
    } else if (ev.key === "Escape") {
      $("search").value = "";
      $("search").dispatchEvent(new Event("input"));
    }
  });

  // ------------------------------------------------------------------ issues list ---
  const list = $("issue-list");
  $("issue-heading").textContent = "Issues: " + (data.issues.length
    ? `${t.errors} error(s), ${t.warnings} warning(s)` : "none");
  $("issue-box").classList.toggle("clean", !data.issues.length);
  data.issues.forEach((i) => {
    const li = h("li", { class: i.severity }, `${i.severity}: ${i.message}`);
    if (i.layer && byName.has(i.layer)) {
      li.dataset.layer = i.layer;
      li.addEventListener("click", () => select(i.layer, true));
    }
    list.appendChild(li);
  });

  // --------------------------------------------------------------- details panel ---
  function table(parent, head, rows) {
    const tb = h("table");
    const thead = h("thead");
    row(thead, head, "th");
    tb.appendChild(thead);
    const body = h("tbody");
    for (const r of rows) row(body, r);
    tb.appendChild(body);
    parent.appendChild(tb);
    return tb;
  }
  function sizeCell(p) {          // the size, and under it what each dimension is
    const f = document.createDocumentFragment();
    f.appendChild(h("span", { class: "size" }, p.size === null ? "?" : p.size));
    if (p.labels) f.appendChild(h("span", { class: "dims" }, p.labels.join(" × ")));
    return f;
  }
  let selected = null;
  function select(name, centre) {
    const l = byName.get(name);
    if (!l) return;
    if (selected) nodeEls.get(selected).classList.remove("selected");
    selected = name;
    nodeEls.get(name).classList.add("selected");
    for (const p of edgeEls) {
      p.classList.toggle("hot", p.dataset.source === name || p.dataset.destination === name);
    }
    for (const tr of tableRows) tr.classList.toggle("selected", tr.dataset.name === name);
    if (centre) centreOn(name);
    const d = $("details");
    d.replaceChildren();
    d.dataset.layer = name;
    d.appendChild(h("h2", { id: "details-name" }, l.name));
    d.appendChild(h("p", { class: "type", id: "details-type" }, l.type));
    const opts = Object.entries(l.options);
    if (opts.length) {
      d.appendChild(h("h3", {}, "Options"));
      table(d, ["option", "value"], opts.map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)]));
    }
    if (l.inputs.length) {
      d.appendChild(h("h3", {}, "Inputs"));
      table(d, ["port", "size", "from"], l.inputs.map((p) => [p.port, sizeCell(p), p.from || "—"]))
        .id = "details-inputs";
    }
    d.appendChild(h("h3", {}, "Outputs"));
    table(d, ["port", "size", "to"], l.outputs.map((p) => [p.port, sizeCell(p),
      p.to.length ? p.to.join(", ") : "(network output)"])).id = "details-outputs";
    d.appendChild(h("h3", {}, "Learnables"));
    if (l.learnables.length) {
      const tb = table(d, ["name", "shape", "count"], l.learnables.map((p) => [p.name, p.shape.join(" × "), fmt(p.count)]));
      tb.id = "details-learnables";
      row(tb.tBodies[0], ["total", "", fmt(l.count)]);
    } else d.appendChild(h("p", { class: "muted", id: "details-learnables" }, "none"));
    d.appendChild(h("h3", {}, "Issues"));
    if (l.issues.length) {
      const ul = h("ul", { id: "details-issues" });
      for (const i of l.issues) ul.appendChild(h("li", { class: "issue" }, `${data.issues[i].severity}: ${data.issues[i].message}`));
      d.appendChild(ul);
    } else d.appendChild(h("p", { class: "muted", id: "details-issues" }, "none"));
  }

  // -------------------------------------------------------------- analysis table ---
  const cols = [
    { key: "index", label: "#", num: true, get: (l) => l.index + 1 },
    { key: "name", label: "name", get: (l) => l.name },
    { key: "type", label: "type", get: (l) => l.type },
    { key: "sizes", label: "activations", get: (l) => l.sizes || "?" },
    { key: "count", label: "learnables", num: true, get: (l) => l.count },
    { key: "issues", label: "issues", num: true, get: (l) => l.issues.length },
  ];
  const atab = $("analysis-table");
  const htr = h("tr");
  for (const c of cols) {
    const th = h("th", { scope: "col", tabindex: "0" }, c.label);
    th.dataset.key = c.key;
    th.addEventListener("click", () => sortBy(c));
    th.addEventListener("keydown", (ev) => { if (ev.key === "Enter") sortBy(c); });
    htr.appendChild(th);
  }
  atab.tHead.appendChild(htr);
  const tableRows = [];
  for (const l of data.layers.slice().sort((a, b) => a.index - b.index)) {
    const tr = h("tr", bad.has(l.name) ? { class: "bad" } : {});
    tr.dataset.name = l.name;
    for (const c of cols) {
      const v = c.get(l);
      tr.appendChild(h("td", c.num ? { class: "num" } : {}, c.key === "count" ? fmt(v) : v));
    }
    tr.addEventListener("click", () => select(l.name, true));
    atab.tBodies[0].appendChild(tr);
    tableRows.push(tr);
  }
  let sortState = { key: "index", dir: 1 };
  function sortBy(c) {
    const dir = sortState.key === c.key ? -sortState.dir : 1;
    sortState = { key: c.key, dir };
    const rows = tableRows.slice().sort((a, b) => {
      const la = byName.get(a.dataset.name), lb = byName.get(b.dataset.name);
      const va = c.get(la), vb = c.get(lb);
      const r = c.num ? va - vb : String(va).localeCompare(String(vb));
      return dir * (r || la.index - lb.index);
    });
    for (const tr of rows) atab.tBodies[0].appendChild(tr);
    for (const th of htr.children) {
      if (th.dataset.key === c.key) th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
  }
  $("analysis-totals").textContent = "total: " + totalsText;

  // -------------------------------------------------------------------- attention ---
  const maps = data.attention || [];
  if (data.attention_note) { $("attention-note").hidden = false; $("attention-note").textContent = data.attention_note; }
  if (maps.length) {
    $("attention").hidden = false;
    const sel = $("attention-layer"), headsEl = $("attention-heads"), cv = $("heatmap");
    maps.forEach((m, i) => sel.appendChild(h("option", { value: String(i) }, `${m.layer} (${m.type}, ${m.heads} head${m.heads > 1 ? "s" : ""})`)));
    let cur = { map: 0, head: 0 }, geom = null;
    const lut = data.colormap;
    function labelsFor(lab, n) { return lab || Array.from({ length: n }, (_, i) => String(i)); }
    function draw() {
      const m = maps[cur.map], w = m.weights[cur.head];
      const ql = labelsFor(m.query_labels, m.tq), kl = labelsFor(m.key_labels, m.tk);
      const cell = Math.max(2, Math.min(26, Math.floor(560 / Math.max(m.tq, m.tk))));
      const ctx = cv.getContext("2d");
      ctx.font = "11px sans-serif";
      const longest = (a) => a.reduce((x, v) => Math.max(x, ctx.measureText(v).width), 0);
      const left = 44 + Math.min(longest(ql), 120), top = 26, bottom = 34 + Math.min(longest(kl), 120);
      const barW = 70;
      cv.width = left + m.tk * cell + 20 + barW;
      cv.height = top + m.tq * cell + bottom;
      let vmax = 1e-12;
      for (const r of w) for (const v of r) if (v > vmax) vmax = v;
      const img = ctx.createImageData(m.tk * cell, m.tq * cell);
      for (let i = 0; i < m.tq; i++) for (let j = 0; j < m.tk; j++) {
        const c = lut[Math.max(0, Math.min(255, Math.round(255 * w[i][j] / vmax)))];
        for (let y = i * cell; y < (i + 1) * cell; y++) for (let x = j * cell; x < (j + 1) * cell; x++) {
          const o = 4 * (y * m.tk * cell + x);
          img.data[o] = c[0]; img.data[o + 1] = c[1]; img.data[o + 2] = c[2]; img.data[o + 3] = 255;
        }
      }
      ctx.fillStyle = "#fff";
      ctx.fillRect(0, 0, cv.width, cv.height);
      ctx.putImageData(img, left, top);
      ctx.fillStyle = "#222";
      ctx.font = "11px sans-serif";
      const step = (n) => Math.max(1, Math.ceil(n / Math.max(1, Math.floor((n * cell) / 13))));
      ctx.textAlign = "right"; ctx.textBaseline = "middle";
      for (let i = 0; i < m.tq; i += step(m.tq)) ctx.fillText(ql[i], left - 4, top + (i + 0.5) * cell);
      ctx.save();
      for (let j = 0; j < m.tk; j += step(m.tk)) {
        ctx.save();
        ctx.translate(left + (j + 0.5) * cell, top + m.tq * cell + 4);
        ctx.rotate(-Math.PI / 2);
        ctx.fillText(kl[j], 0, 0);
        ctx.restore();
      }
      ctx.restore();
      ctx.textAlign = "center"; ctx.textBaseline = "alphabetic";
      ctx.font = "bold 12px sans-serif";
      ctx.fillText(`${m.layer} · head ${cur.head}`, left + (m.tk * cell) / 2, 16);
      ctx.font = "12px sans-serif";
      ctx.fillText("key", left + (m.tk * cell) / 2, cv.height - 6);
      ctx.save();
      ctx.translate(12, top + (m.tq * cell) / 2);
      ctx.rotate(-Math.PI / 2);
      ctx.fillText("query", 0, 0);
      ctx.restore();
      // colour bar
      const bx = left + m.tk * cell + 16, bh = Math.max(60, m.tq * cell);
      for (let y = 0; y < bh; y++) {
        const c = lut[Math.round(255 * (1 - y / (bh - 1)))];
        ctx.fillStyle = `rgb(${c[0]},${c[1]},${c[2]})`;
        ctx.fillRect(bx, top + y, 12, 1);
      }
      ctx.fillStyle = "#222"; ctx.textAlign = "left"; ctx.font = "10px sans-serif";
      ctx.textBaseline = "top"; ctx.fillText(vmax.toFixed(3), bx + 15, top);
      ctx.textBaseline = "bottom"; ctx.fillText("0", bx + 15, top + bh);
      geom = { left, top, cell, m, w, ql, kl };
      cv.dataset.layer = m.layer;
      cv.dataset.head = String(cur.head);
      $("attention-caption").textContent = `${m.layer}: ${m.type}, head ${cur.head} of ${m.heads}; ` +
        `${m.tq} queries × ${m.tk} keys; rows are queries (${m.query_labels ? "tokens" : "positions"}), ` +
        `columns keys (${m.key_labels ? "tokens" : "positions"}), each row sums to 1 over the keys it may see.`;
      for (const b of headsEl.children) b.setAttribute("aria-pressed", String(Number(b.dataset.head) === cur.head));
    }
    function showMap(i) {
      cur = { map: i, head: 0 };
      headsEl.replaceChildren();
      for (let k = 0; k < maps[i].heads; k++) {
        const b = h("button", { type: "button", "aria-pressed": "false" }, `head ${k}`);
        b.dataset.head = String(k);
        b.addEventListener("click", () => { cur.head = k; draw(); });
        headsEl.appendChild(b);
      }
      draw();
    }
    sel.addEventListener("change", () => showMap(Number(sel.value)));
    cv.addEventListener("mousemove", (ev) => {
      if (!geom) return;
      const r = cv.getBoundingClientRect();
      const j = Math.floor((ev.clientX - r.left - geom.left) / geom.cell);
      const i = Math.floor((ev.clientY - r.top - geom.top) / geom.cell);
      $("heatmap-hover").textContent = (i >= 0 && j >= 0 && i < geom.m.tq && j < geom.m.tk)
        ? `query ${i} (${geom.ql[i]}) → key ${j} (${geom.kl[j]}): ${geom.w[i][j].toFixed(4)}` : "";
    });
    showMap(0);
  }

  // ----------------------------------------------------------------- explanations ---
  // colours: signed values on blue–white–red around 0, others white → red, both scaled by
  // the largest magnitude of their own table; set through the CSSOM (the CSP admits no
  // style attributes)
  function shade(v, vmax, signed) {
    if (v === null || !isFinite(v) || vmax <= 0) return "#fff";
    const x = Math.max(-1, Math.min(1, v / vmax));
    const a = Math.abs(signed ? x : Math.max(0, x));
    const [r, g, b] = x >= 0 || !signed ? [214, 39, 40] : [31, 100, 190];
    const mix = (c) => Math.round(255 + (c - 255) * a * 0.85);
    return `rgb(${mix(r)},${mix(g)},${mix(b)})`;
  }
  const absMax = (vs) => vs.reduce((m, v) => (v === null || !isFinite(v) ? m : Math.max(m, Math.abs(v))), 0);
  const num = (v) => (v === null || v === undefined ? "—" : Math.abs(v) >= 1000 || (v !== 0 && Math.abs(v) < 1e-3)
    ? Number(v).toExponential(2) : Number(v).toFixed(3));

  function attributionChips(a, vmax) {
    const box = h("div", { class: "chips" });
    a.values.forEach((v, i) => {
      const c = h("span", { class: "chip", title: `${a.labels ? a.labels[i] : i}: ${num(v)}` },
        a.labels ? a.labels[i] : String(i));
      c.dataset.value = String(v);
      c.style.background = shade(v, vmax, a.signed);
      box.appendChild(c);
    });
    return box;
  }
  function attributionBars(a, vmax) {
    const n = a.values.length, bw = Math.max(2, Math.min(14, Math.floor(900 / n)));
    const w = 50 + n * bw + 10, hgt = 150, mid = a.signed ? 70 : 120, amp = a.signed ? 60 : 110;
    const c = s("svg", { class: "attr-chart", width: w, height: hgt, viewBox: `0 0 ${w} ${hgt}`, role: "img" });
    c.appendChild(s("title", {}, `${a.title} over ${n} ${a.kind === "time" ? "time steps" : "positions"}`));
    c.appendChild(s("line", { class: "axis", x1: 48, x2: w - 8, y1: mid, y2: mid }));
    c.appendChild(s("text", { x: 44, y: mid - amp + 8, "text-anchor": "end" }, num(vmax)));
    c.appendChild(s("text", { x: 44, y: mid + 4, "text-anchor": "end" }, "0"));
    a.values.forEach((v, i) => {
      const hv = v === null || vmax <= 0 ? 0 : (Math.abs(v) / vmax) * amp;
      const r = s("rect", { class: "bar " + (v < 0 ? "neg" : "pos"), x: 50 + i * bw, width: Math.max(1, bw - 1),
        y: v < 0 ? mid : mid - hv, height: Math.max(0.5, hv) });
      r.appendChild(s("title", {}, `${a.labels ? a.labels[i] : i}: ${num(v)}`));
      c.appendChild(r);
    });
    c.appendChild(s("text", { x: 50, y: hgt - 4 }, a.labels ? a.labels[0] : "0"));
    c.appendChild(s("text", { x: w - 10, y: hgt - 4, "text-anchor": "end" }, a.labels ? a.labels[n - 1] : String(n - 1)));
    return c;
  }
  function attributionGrid(a, vmax) {
    const [rows, cols] = a.size, cell = Math.max(3, Math.min(28, Math.floor(360 / Math.max(rows, cols))));
    const cv = h("canvas", { class: "attr-grid" });
    cv.width = cols * cell; cv.height = rows * cell;
    const ctx = cv.getContext("2d");
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) {
      ctx.fillStyle = shade(a.values[i * cols + j], vmax, a.signed);
      ctx.fillRect(j * cell, i * cell, cell, cell);
    }
    return cv;
  }
  function explanations(ex) {
    $("explanations").hidden = false;
    $("explain-target").textContent = `Explaining ${ex.target.text}.`;
    const box = $("explain-attributions");
    for (const a of ex.attributions) {
      const div = h("div", { class: "attribution" });
      div.dataset.method = a.method;
      div.dataset.input = a.input;
      div.appendChild(h("h3", {}, `${a.title} · input ${a.input}`));
      const vmax = absMax(a.values);
      const sc = h("div", { class: "scroll" });        // a long sequence scrolls sideways
      sc.appendChild(a.size ? attributionGrid(a, vmax) : a.kind === "tokens" || a.values.length <= 48
        ? attributionChips(a, vmax) : attributionBars(a, vmax));
      div.appendChild(sc);
      div.appendChild(h("p", { class: "caption muted" }, a.caption));
      box.appendChild(div);
    }
    if (ex.heads) {
      const hd = ex.heads, wrap = $("explain-heads");
      wrap.appendChild(h("h3", {}, "head ablation"));
      wrap.appendChild(h("p", { class: "caption" }, `Each cell: the ${hd.metric} (baseline ${num(hd.baseline)}); ` +
        "red raises it, blue lowers it. Hover for the change of the whole output."));
      const most = Math.max(...hd.layers.map((l) => l.heads));
      const vmax = absMax(hd.layers.flatMap((l) => l.effects));
      const tb = h("table", { class: "grid-table", id: "heads-table" });
      row(tb, ["layer"].concat(Array.from({ length: most }, (_, k) => `head ${k}`)), "th");
      for (const l of hd.layers) {
        const tr = h("tr");
        tr.dataset.layer = l.layer;
        tr.appendChild(h("th", { scope: "row" }, l.layer));
        for (let k = 0; k < most; k++) {
          const v = k < l.heads ? l.effects[k] : null;
          const td = h("td", k < l.heads ? { title: `output changes by ${num(100 * l.output_change[k])} % of its size` } : {},
            k < l.heads ? num(v) : "");
          td.style.background = shade(v, vmax, true);
          tr.appendChild(td);
        }
        tb.appendChild(tr);
      }
      const sc = h("div", { class: "scroll" });
      sc.appendChild(tb);
      wrap.appendChild(sc);
    }
    if (ex.lens) {
      const ln = ex.lens, wrap = $("explain-lens");
      wrap.appendChild(h("h3", {}, "logit lens"));
      wrap.appendChild(h("p", { class: "caption" }, ln.caption));
      const tb = h("table", { class: "grid-table", id: "lens-table" });
      row(tb, ["block"].concat(ln.positions), "th");
      ln.top.forEach((cells, b) => {
        const tr = h("tr");
        tr.appendChild(h("th", { scope: "row" }, ln.blocks[b]));
        for (const c of cells) {
          const td = h("td", { class: "token", title: `p = ${num(c.p)}` }, c.token);
          td.style.background = shade(c.p, 1, false);
          tr.appendChild(td);
        }
        tb.appendChild(tr);
      });
      const sc = h("div", { class: "scroll" });
      sc.appendChild(tb);
      wrap.appendChild(sc);
    }
    for (const n of ex.notes) $("explain-notes").appendChild(h("li", {}, n));
  }
  if (data.explanations) explanations(data.explanations);

  // --------------------------------------------------------------------- training ---
  function chart(title, xs, series) {
    const w = 420, hgt = 240, m = { l: 52, r: 12, t: 22, b: 34 };
    const c = s("svg", { class: "chart", width: w, height: hgt, viewBox: `0 0 ${w} ${hgt}`, role: "img" });
    c.appendChild(s("title", {}, title));
    const all = series.flatMap((sr) => sr.ys.filter((v) => v !== null && isFinite(v)));
    const xsFinite = xs.filter((v) => v !== null);
    if (!all.length || !xsFinite.length) return null;
    let y0 = Math.min(...all), y1 = Math.max(...all);
    if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
    const x0 = Math.min(...xsFinite), x1 = Math.max(...xsFinite) === x0 ? x0 + 1 : Math.max(...xsFinite);
    const X = (v) => m.l + ((v - x0) / (x1 - x0)) * (w - m.l - m.r);
    const Y = (v) => hgt - m.b - ((v - y0) / (y1 - y0)) * (hgt - m.t - m.b);
    for (let k = 0; k <= 4; k++) {
      const v = y0 + ((y1 - y0) * k) / 4;
      c.appendChild(s("line", { class: "grid", x1: m.l, x2: w - m.r, y1: Y(v), y2: Y(v) }));
      c.appendChild(s("text", { x: m.l - 4, y: Y(v) + 4, "text-anchor": "end" }, Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3)));
    }
    c.appendChild(s("line", { class: "axis", x1: m.l, x2: w - m.r, y1: hgt - m.b, y2: hgt - m.b }));
    c.appendChild(s("line", { class: "axis", x1: m.l, x2: m.l, y1: m.t, y2: hgt - m.b }));
    c.appendChild(s("text", { x: (m.l + w - m.r) / 2, y: hgt - 6, "text-anchor": "middle" }, "epoch"));
    c.appendChild(s("text", { x: m.l, y: 14, "font-weight": "bold" }, title));
    c.appendChild(s("text", { x: m.l, y: hgt - m.b + 14, "text-anchor": "start" }, String(x0)));
    c.appendChild(s("text", { x: w - m.r, y: hgt - m.b + 14, "text-anchor": "end" }, String(x1)));
    series.forEach((sr, k) => {
      let d = "";
      sr.ys.forEach((v, i) => {
        if (v === null || !isFinite(v) || xs[i] === null) return;
        d += (d ? " L" : "M") + `${X(xs[i]).toFixed(1)},${Y(v).toFixed(1)}`;
      });
      const p = s("path", { class: "series", d, stroke: sr.color });
      p.appendChild(s("title", {}, sr.name));
      c.appendChild(p);
      c.appendChild(s("text", { x: w - m.r - 4, y: m.t + 4 + 13 * k, "text-anchor": "end", fill: sr.color }, sr.name));
    });
    return c;
  }
  const charts = $("training-charts");
  const tr = data.training;
  if (tr && tr.epochs && tr.epochs.epoch && tr.epochs.epoch.length) {
    const xs = tr.epochs.epoch;
    const metrics = Object.keys(tr.epochs).filter((k) => k !== "epoch" && !k.startsWith("val_"));
    for (const k of metrics) {
      const series = [{ name: k === "loss" ? "training loss" : "training " + k, ys: tr.epochs[k], color: "#1f77b4" }];
      if (tr.epochs["val_" + k] && tr.epochs["val_" + k].some((v) => v !== null)) {
        series.push({ name: "validation", ys: tr.epochs["val_" + k], color: "#d62728" });
      }
      const c = chart(k, xs, series);
      if (c) charts.appendChild(c);
    }
  }
  for (const im of data.images || []) {
    const fig = h("figure");
    const img = h("img", { alt: im.name });
    img.src = im.src;
    fig.appendChild(img);
    fig.appendChild(h("figcaption", { class: "muted" }, im.name));
    charts.appendChild(fig);
  }
  $("training").hidden = !charts.children.length;

  const mt = Object.entries(data.metrics || {});
  if (mt.length) {
    $("metrics").hidden = false;
    for (const [k, v] of mt) row($("metrics-table").tBodies[0], [k, typeof v === "string" ? v : JSON.stringify(v)]);
  }

  fit(true);
  window.addEventListener("resize", () => fit(true));
  window.attnlab = { data, select, fit, view, centreOn };
  window.attnlabReadyMs = performance.now();
  window.attnlabReady = true;
})();
