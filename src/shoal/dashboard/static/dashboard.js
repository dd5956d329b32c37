// shoal dashboard: the three pages (cluster, jobs, job) drawn from the server's JSON
// endpoints, charts drawn as SVG by the small helpers below. Nothing loads from outside.
//
// Testing hooks: every node, job, PE, event and chart marker is one element with data-*
// attributes (data-pe, data-util, data-step, data-before, ...), and <body data-page=...
// data-ready=...> says which page is drawn and how many updates it has had.
"use strict";

(() => {
  const SVG = "http://www.w3.org/2000/svg";  // the SVG namespace (a name, not a download)
  const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                   "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6"];
  const OTHER = "#c9ced4", OVERHEAD = "#4a4f55";
  const TOP_METHODS = PALETTE.length;

  // -- small helpers -------------------------------------------------------------------
  function el(tag, attrs, parent, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) node.setAttribute(k, v);
    }
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function sv(tag, attrs, parent, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) node.setAttribute(k, v);
    }
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function tip(node, text) { sv("title", {}, node, text); return node; }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function num(x, digits = 3) {
    if (x === null || x === undefined || !isFinite(x)) return "–";
    return Number(x).toPrecision(digits).replace(/\.?0+(e|$)/, "$1");
  }

  function pct(x) {
    return x === null || x === undefined || !isFinite(x) ? "–" : (100 * x).toFixed(1) + "%";
  }

  function bytes(n) {
    if (n === null || n === undefined || !isFinite(n)) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let k = 0;
    while (Math.abs(n) >= 1024 && k < units.length - 1) { n /= 1024; k += 1; }
    return (k ? n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0) : String(Math.round(n))) + " " + units[k];
  }

  function rate(n) {
    if (!isFinite(n)) return "–";
    const a = Math.abs(n);
    if (a >= 1e9) return (n / 1e9).toFixed(2) + "G";
    if (a >= 1e6) return (n / 1e6).toFixed(2) + "M";
    if (a >= 1e3) return (n / 1e3).toFixed(1) + "k";
    return a >= 10 ? n.toFixed(0) : n.toFixed(1);
  }

  function duration(s) {
    if (s === null || s === undefined || !isFinite(s)) return "–";
    if (s > 0 && s < 1) return s < 0.001 ? `${(s * 1e6).toFixed(0)} µs` : `${(s * 1e3).toPrecision(3)} ms`;
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
    const m = Math.floor(s / 60), sec = Math.floor(s % 60);
    if (m < 60) return `${m} min ${String(sec).padStart(2, "0")} s`;
    const h = Math.floor(m / 60);
    if (h < 48) return `${h} h ${String(m % 60).padStart(2, "0")} min`;
    return `${Math.floor(h / 24)} d ${h % 24} h`;
  }

  function clock(t) {
    if (!t) return "–";
    const d = new Date(t * 1000);
    const same = new Date().toDateString() === d.toDateString();
    return same ? d.toLocaleTimeString() : d.toLocaleString();
  }

  function badge(text, parent) { return el("span", {class: `badge ${text}`}, parent, text); }

  function setStatus(text, error) {
    const s = document.getElementById("status");
    s.textContent = text;
    s.className = error ? "error" : "";
  }

  async function getJSON(url) {
    const r = await fetch(url, {credentials: "same-origin", cache: "no-store"});
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) throw new Error((body && body.error) || `${r.status} ${r.statusText} (${url})`);
    return body;
  }

  function markReady() {
    const b = document.body;
    b.dataset.ready = String(Number(b.dataset.ready || 0) + 1);
  }

  // poll fn every `every` ms while it returns true; errors are shown, the loop goes on
  async function poll(fn, every) {
    for (;;) {
      let again = true;
      try {
        again = await fn();
        setStatus(again ? `updated ${new Date().toLocaleTimeString()}` : "ended: post mortem");
      } catch (e) {
        setStatus(String(e.message || e), true);
        document.body.dataset.error = String(e.message || e);
      }
      markReady();
      if (again === false) return;
      await sleep(every);
    }
  }

  function table(parent, id, columns) {
    const t = el("table", {id}, parent);
    const tr = el("tr", {}, el("thead", {}, t));
    for (const c of columns) el("th", {class: c.startsWith("~") ? "text" : null}, tr,
                                c.replace(/^~/, ""));
    return el("tbody", {}, t);
  }

  function row(body, cls, data, cells) {
    const tr = el("tr", {class: cls}, body);
    for (const [k, v] of Object.entries(data)) tr.dataset[k] = v === null ? "" : String(v);
    for (const c of cells) {
      const td = el("td", {}, tr);
      if (c instanceof Node) td.appendChild(c);
      else if (c && typeof c === "object") {
        if (c.cls) td.className = c.cls;
        if (c.node) td.appendChild(c.node); else td.textContent = c.text;
      } else td.textContent = c === null || c === undefined ? "–" : String(c);
    }
    return tr;
  }

  // -- charts --------------------------------------------------------------------------
  function ticks(lo, hi, count) {
    const span = hi - lo;
    if (!(span > 0)) return [lo];
    const raw = span / (count || 5);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / mag;
    const step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      out.push(Number(v.toPrecision(12)));
    }
    return out;
  }

  function timeTicks(span) {
    // seconds since the start, on round steps of s, min or h
    const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600];
    const step = steps.find((s) => span / s <= 8) || 43200;
    const out = [];
    for (let v = 0; v <= span + 1e-9; v += step) out.push(v);
    return out;
  }

  function timeLabel(s, span) {
    if (span < 120) return `${Math.round(s)} s`;
    if (span < 7200) return `${Math.floor(s / 60)}:${String(Math.round(s % 60)).padStart(2, "0")}`;
    return `${Math.floor(s / 3600)}h${String(Math.round((s % 3600) / 60)).padStart(2, "0")}`;
  }

  // A plot area with axes: x is seconds since t0 over [0, span], y over [0, ymax].
  function frame(svg, opts) {
    const W = opts.width || 1000, H = opts.height || 260;
    const M = {l: opts.width && opts.width < 800 ? 70 : 58, r: 16, t: opts.top || 22, b: 30};
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("class", "chart");
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const pw = W - M.l - M.r, ph = H - M.t - M.b;
    const span = Math.max(opts.span || 1, 1e-9), ymax = opts.ymax || 1;
    const f = {
      svg, M, pw, ph, span, ymax,
      x: (s) => M.l + (s / span) * pw,
      y: (v) => M.t + ph - (Math.min(v, ymax) / ymax) * ph,
    };
    // where the time axis is, for a reader of the page (tests): x of 0 and of span seconds
    Object.assign(svg.dataset, {left: String(M.l), right: String(M.l + pw), span: String(span),
                                t0: String(opts.t0 ?? "")});
    const grid = sv("g", {class: "grid"}, svg), axis = sv("g", {class: "axis"}, svg);
    for (const v of ticks(0, ymax, opts.yticks || 4)) {
      sv("line", {x1: M.l, x2: M.l + pw, y1: f.y(v), y2: f.y(v)}, grid);
      sv("text", {x: M.l - 6, y: f.y(v) + 4, "text-anchor": "end"}, axis,
         (opts.yfmt || num)(v));
    }
    if (opts.xband === undefined) {
      for (const s of timeTicks(span)) {
        sv("line", {x1: f.x(s), x2: f.x(s), y1: M.t + ph, y2: M.t + ph + 4}, axis);
        sv("text", {x: f.x(s), y: M.t + ph + 16, "text-anchor": "middle"}, axis,
           timeLabel(s, span));
      }
    }
    sv("line", {x1: M.l, x2: M.l + pw, y1: M.t + ph, y2: M.t + ph}, axis);
    sv("line", {x1: M.l, x2: M.l, y1: M.t, y2: M.t + ph}, axis);
    if (opts.ylabel) {
      sv("text", {x: 12, y: M.t + ph / 2, transform: `rotate(-90 12 ${M.t + ph / 2})`,
                  "text-anchor": "middle"}, axis, opts.ylabel);
    }
    f.plot = sv("g", {class: "plot"}, svg);
    return f;
  }

  function emptyChart(svg, text, height) {
    const f = frame(svg, {span: 1, ymax: 1, height: height || 120, xband: true});
    sv("text", {x: f.M.l + f.pw / 2, y: f.M.t + f.ph / 2, "text-anchor": "middle",
                class: "empty"}, svg, text);
  }

  // vertical markers for the job's events on a time chart (labels on the first chart)
  function markers(f, events, t0, labels) {
    const g = sv("g", {class: "markers"}, f.svg);
    const ends = [];  // where each line of labels ends: a label goes on the first free line
    for (const e of [...events].sort((a, b) => a.t - b.t)) {
      const s = e.t - t0;
      if (!(s >= 0 && s <= f.span * 1.0001)) continue;
      const m = sv("g", {class: `marker ${e.kind}`}, g);
      m.dataset.kind = e.kind;
      m.dataset.t = String(e.t);
      if (e.kind === "lb") {
        m.dataset.step = String(e.step);
        m.dataset.before = e.before === null || e.before === undefined ? "" : String(e.before);
        m.dataset.after = e.after === null || e.after === undefined ? "" : String(e.after);
      }
      sv("line", {x1: f.x(s), x2: f.x(s), y1: f.M.t - 4, y2: f.M.t + f.ph}, m);
      tip(m, eventText(e, t0));
      if (labels) {
        const text = shortEvent(e), x = f.x(s) + 3;
        let line = ends.findIndex((end) => end < x);
        if (line < 0) line = ends.length;
        ends[line] = x + 6.2 * text.length;
        sv("text", {x, y: f.M.t - 7 - 12 * line}, m, text);
      }
    }
  }

  function shortEvent(e) {
    switch (e.kind) {
      case "lb": return `LB ${e.step ?? ""}` +
        (e.before != null ? ` ${num(e.before)}→${e.after != null ? num(e.after) : "?"}` : "");
      case "checkpoint": return `ckpt ${e.generation ?? ""}`;
      case "resize": return `${e.from}→${e.to} PEs`;
      default: return e.kind;
    }
  }

  function eventText(e, t0) {
    const at = `at ${duration(e.t - t0)}: `;
    switch (e.kind) {
      case "lb":
        return at + `load balancing step ${e.step} (${e.strategy || "?"}): imbalance ` +
          `${num(e.before)} before, ${num(e.after)} after (predicted ${num(e.predicted)}), ` +
          `${e.migrations ?? "?"} migrations in ${duration(e.seconds)}`;
      case "checkpoint":
        return at + `checkpoint ${e.generation ?? ""}: ${bytes(e.bytes)} in ` +
          `${duration(e.seconds)}${e.path ? " to " + e.path : ""}`;
      case "resize": return at + `resize from ${e.from} to ${e.to} PEs`;
      default:
        return at + `${e.kind}${e.pe !== null && e.pe !== undefined ? " of PE " + e.pe : ""}` +
          `${e.detail ? ": " + e.detail : ""}`;
    }
  }

  function legend(parent, methods, colors) {
    const box = el("div", {class: "legend", id: "legend"}, parent);
    for (const m of methods) {
      const item = el("span", {class: "item"}, box);
      item.dataset.method = m;
      el("span", {class: "swatch"}, item).style.background = colors.get(m);
      item.appendChild(document.createTextNode(m));
    }
    return box;
  }

  // -- cluster page ----------------------------------------------------------------------
  function nodeBar(node) {
    const svg = sv("svg", {width: 110, height: 12, class: "bar"});
    const cores = Math.max(node.cores || 1, 1);
    sv("rect", {x: 0, y: 1, width: 110, height: 10, fill: "#e8edf2", rx: 2}, svg);
    sv("rect", {x: 0, y: 1, width: 110 * Math.min(node.busy / cores, 1), height: 10,
                fill: "#8fb0d3", rx: 2}, svg);
    sv("rect", {x: 0, y: 1, width: 110 * Math.min((node.shoal || 0) / cores, 1), height: 10,
                fill: "#24466b", rx: 2}, svg);
    tip(svg, `${num(node.busy)} of ${cores} cores busy, ${num(node.shoal || 0)} by shoal jobs`);
    const box = el("span");
    box.appendChild(svg);
    el("span", {class: "busy-text"}, box, ` ${num(node.busy)}` +
       (node.shoal ? ` (shoal ${num(node.shoal)})` : ""));
    return box;
  }

  function drawGossip(main, c) {
    const d = c.daemon || {};
    const counts = {alive: 0, suspect: 0, dead: 0};
    for (const n of c.nodes) counts[n.state] = (counts[n.state] || 0) + 1;
    el("p", {class: "meta", id: "cluster-source"}, main,
       `As the gossip daemon ${d.name} (${d.addr}) sees it` +
       (d.group ? `, in group ${d.group}` : "") +
       `: ${c.nodes.length} nodes, ${counts.alive} alive, ${counts.suspect} suspect, ` +
       `${counts.dead} dead; mean age ${d.mean_age == null ? "–" : duration(d.mean_age)}` +
       (c.suspect_after ? `, suspected after ${duration(c.suspect_after)}` : "") + ".");
    const k = el("div", {class: "kpis"}, main);
    const live = c.nodes.filter((n) => n.state !== "dead");
    const sum = (f) => live.reduce((a, n) => a + (f(n) || 0), 0);
    kpi(k, "nodes alive", `${counts.alive} / ${c.nodes.length}`, "kpi-nodes");
    kpi(k, "cores busy (not dead nodes)", `${num(sum((n) => n.busy))} / ${sum((n) => n.cores)}`,
        "kpi-busy");
    kpi(k, "cores busy with shoal jobs", num(sum((n) => n.shoal)), "kpi-shoal");
    kpi(k, "free memory", bytes(sum((n) => n.free_mem)), "kpi-mem");
    kpi(k, "shoal PEs", String(sum((n) => n.pes)), "kpi-pes");
    const body = table(main, "nodes", ["~node", "~address", "~state", "age", "load 1/5/15",
                                       "~busy cores", "cores", "free memory", "jobs", "PEs",
                                       "~keys"]);
    for (const n of c.nodes) {
      row(body, "node", {name: n.name, state: n.state, age: n.age, busy: n.busy,
                         cores: n.cores, self: n.self ? 1 : 0},
          [{cls: "text", text: n.name + (n.self ? " (this node)" : "")},
           {cls: "text", text: n.addr}, {cls: "text", node: badge(n.state)},
           duration(n.age), (n.load || []).map((v) => num(v)).join(" / "),
           {cls: "text", node: nodeBar(n)}, n.cores, bytes(n.free_mem), n.jobs, n.pes,
           {cls: "text", text: Object.entries(n.keys || {}).map(([k, v]) => `${k}=${v}`)
             .join(" ")}]);
    }
    if (c.groups && c.groups.length) {
      el("h2", {}, main, `Groups (${c.groups.length})`);
      const gb = table(main, "groups", ["~group", "live nodes", "cores",
                                        "busy min / mean / max", "free memory",
                                        "least free", "oldest record", "age", "~contact"]);
      for (const g of c.groups) {
        row(gb, "group", {group: g.group, nodes: g.nodes, own: g.own ? 1 : 0},
            [{cls: "text", text: g.group + (g.own ? " (own)" : "")}, g.nodes, g.cores,
             (g.busy || []).map((v) => num(v)).join(" / "), bytes(g.free_mem),
             bytes(g.free_min), duration(g.oldest), duration(g.age),
             {cls: "text", text: g.contact}]);
      }
    }
  }

  function drawJobHosts(main, c) {
    el("p", {class: "meta", id: "cluster-source"}, main,
       "No gossip daemon here" + (c.reason ? ` (${c.reason})` : "") +
       ": the nodes of the running jobs.");
    if (!c.nodes.length) {
      el("p", {class: "empty-note"}, main, "No job is running.");
      return;
    }
    const body = table(main, "nodes", ["~node", "PEs", "~jobs"]);
    for (const n of c.nodes) {
      const links = el("span");
      for (const id of n.jobs) {
        el("a", {href: `/job/${encodeURIComponent(id)}`}, links, id);
        links.appendChild(document.createTextNode(" "));
      }
      row(body, "node", {name: n.name, pes: n.pes},
          [{cls: "text", text: n.name}, n.pes, {cls: "text", node: links}]);
    }
  }

  function clusterPage(main) {
    el("h1", {}, main, "Cluster");
    const box = el("div", {id: "cluster"}, main);
    return poll(async () => {
      const c = await getJSON("/api/cluster");
      box.replaceChildren();
      box.dataset.source = c.source;
      (c.source === "gossip" ? drawGossip : drawJobHosts)(box, c);
      return true;
    }, 2000);
  }

  // -- jobs page ---------------------------------------------------------------------------
  function jobsPage(main) {
    el("h1", {}, main, "Jobs");
    const box = el("div", {id: "jobs-box"}, main);
    return poll(async () => {
      const answer = await getJSON("/api/jobs");
      box.replaceChildren();
      if (!answer.jobs.length) {
        el("p", {class: "empty-note"}, box, "No job in the registry yet: jobs started with " +
           "`shoal run` appear here while they run and after they end.");
        return true;
      }
      const body = table(box, "jobs", ["~job", "~program", "~state", "PEs", "nodes",
                                       "started", "uptime", "~arguments"]);
      for (const j of answer.jobs) {
        const link = el("a", {href: `/job/${encodeURIComponent(j.id)}`}, null, j.id);
        row(body, "job", {id: j.id, state: j.state, npes: j.npes, nodes: j.nodes},
            [{cls: "text", node: link}, {cls: "text", text: j.name},
             {cls: "text", node: badge(j.state)}, j.npes, j.nodes, clock(j.start),
             duration(j.uptime), {cls: "argv", text: (j.argv || []).join(" ")}]);
      }
      return true;
    }, 2000);
  }

  // -- job page: data ----------------------------------------------------------------------
  function emptyJob() {
    return {job: null, pes: new Map(), events: new Map(), since: 0, fetches: 0};
  }

  function eventKey(e) {
    if (e.kind === "lb") return `lb|${e.step}`;
    if (e.kind === "checkpoint") return `checkpoint|${e.generation}|${e.t}`;
    return `${e.kind}|${e.t}|${e.pe ?? ""}`;
  }

  // add the rows and events of one answer; rows already held (t not newer) are skipped
  function merge(state, answer) {
    state.job = answer.job;
    for (const [pe, rows] of Object.entries(answer.pes || {})) {
      const key = Number(pe);
      if (!state.pes.has(key)) state.pes.set(key, []);
      const held = state.pes.get(key);
      for (const r of rows) {
        if (!held.length || r.t > held[held.length - 1].t) held.push(r);
      }
    }
    for (const e of answer.events || []) {
      const k = eventKey(e), old = state.events.get(k);
      if (!old) { state.events.set(k, e); continue; }
      for (const [field, v] of Object.entries(e)) if (v !== null && v !== undefined) old[field] = v;
    }
    // ask next time from a little before the newest row: a PE that wrote late is not missed
    let newest = 0;
    for (const rows of state.pes.values()) {
      if (rows.length) newest = Math.max(newest, rows[rows.length - 1].t);
    }
    const lag = Math.max(5, 5 * (state.job.period || 1));
    state.since = newest ? Math.max(0, newest - lag) : 0;
  }

  function busyOf(r) {
    let s = 0;
    for (const v of Object.values(r.entries || {})) s += v[1];
    return s;
  }

  // each method's seconds over every row; the TOP_METHODS largest get colours
  function methodColours(state) {
    const total = new Map();
    for (const rows of state.pes.values()) {
      for (const r of rows) {
        for (const [m, v] of Object.entries(r.entries || {})) total.set(m, (total.get(m) || 0) + v[1]);
      }
    }
    const order = [...total.entries()].sort((a, b) => b[1] - a[1]).map((x) => x[0]);
    const colours = new Map();
    order.slice(0, TOP_METHODS).forEach((m, i) => colours.set(m, PALETTE[i]));
    const shown = order.slice(0, TOP_METHODS);
    if (order.length > TOP_METHODS) { colours.set("other", OTHER); shown.push("other"); }
    colours.set("overhead", OVERHEAD);
    shown.push("overhead");
    return {colours, shown, top: new Set(order.slice(0, TOP_METHODS))};
  }

  function span(state) {
    const job = state.job;
    let t0 = job.start || Infinity, t1 = 0;
    for (const rows of state.pes.values()) {
      if (!rows.length) continue;
      t0 = Math.min(t0, rows[0].t - rows[0].dt);
      t1 = Math.max(t1, rows[rows.length - 1].t);
    }
    for (const e of state.events.values()) t1 = Math.max(t1, e.t);
    if (job.end) t1 = Math.max(t1, job.end);
    if (!isFinite(t0)) t0 = t1;
    return {t0, t1, span: Math.max(t1 - t0, 1e-6)};
  }

  // rows binned by their end time: per bin, sums over the selected PEs
  function binRows(state, sel, t0, total, nbins) {
    const width = total / nbins;
    const bins = Array.from({length: nbins}, () => ({
      dt: 0, busy: 0, methods: new Map(), overhead: 0, sent: 0, received: 0,
      bytes_sent: 0, bytes_received: 0, pes: new Set()}));
    for (const [pe, rows] of state.pes) {
      if (sel !== "all" && pe !== sel) continue;
      for (const r of rows) {
        const b = bins[Math.min(nbins - 1, Math.max(0, Math.floor((r.t - t0 - 1e-9) / width)))];
        b.dt += r.dt;
        b.pes.add(pe);
        for (const [m, v] of Object.entries(r.entries || {})) {
          b.methods.set(m, (b.methods.get(m) || 0) + v[1]);
          b.busy += v[1];
        }
        b.overhead += r.overhead || 0;
        for (const k of ["sent", "received", "bytes_sent", "bytes_received"]) b[k] += r[k] || 0;
      }
    }
    return {bins, width};
  }

  function binCount(state, total) {
    const period = state.job.period || 1;
    return Math.max(1, Math.min(200, Math.ceil(total / period - 1e-6)));
  }

  // -- job page: charts --------------------------------------------------------------------
  function drawProfile(svg, state, col, sel, t) {
    const nb = binCount(state, t.span);
    const {bins, width} = binRows(state, sel, t.t0, t.span, nb);
    const f = frame(svg, {span: t.span, ymax: 100, yfmt: (v) => `${v}%`, height: 300, top: 46,
                          t0: t.t0,
                          ylabel: sel === "all" ? "% of all PEs' time" : `% of PE ${sel}'s time`});
    const bw = Math.max(f.pw / nb, 0.5);
    bins.forEach((b, i) => {
      if (!b.dt) return;
      let y = 0;
      const g = sv("g", {class: "bin"}, f.plot);
      g.dataset.util = String(b.busy / b.dt);
      const parts = [];
      for (const m of col.shown) {
        let v = 0;
        if (m === "overhead") v = b.overhead;
        else if (m === "other") {
          for (const [name, s] of b.methods) if (!col.top.has(name)) v += s;
        } else v = b.methods.get(m) || 0;
        if (v <= 0) continue;
        const h = (100 * v) / b.dt;
        sv("rect", {x: f.M.l + i * bw, y: f.y(y + h), width: bw + 0.3,
                    height: Math.max(f.y(y) - f.y(y + h), 0), fill: col.colours.get(m)}, g);
        parts.push(`${m} ${h.toFixed(1)}%`);
        y += h;
      }
      tip(g, `${duration(i * width)}–${duration((i + 1) * width)}: ` +
             `${pct(b.busy / b.dt)} in entry methods; ${parts.join(", ")}`);
    });
    markers(f, [...state.events.values()], t.t0, true);
  }

  function perPE(state) {
    const out = [];
    for (const [pe, rows] of [...state.pes.entries()].sort((a, b) => a[0] - b[0])) {
      let dt = 0, busy = 0, overhead = 0;
      const methods = new Map();
      for (const r of rows) {
        dt += r.dt;
        overhead += r.overhead || 0;
        for (const [m, v] of Object.entries(r.entries || {})) {
          methods.set(m, (methods.get(m) || 0) + v[1]);
          busy += v[1];
        }
      }
      const last = rows[rows.length - 1] || {};
      out.push({pe, dt, busy, overhead, methods, util: dt > 0 ? busy / dt : 0,
                host: last.host || (state.job.hosts || [])[pe] || "", rows: rows.length,
                rss: last.rss, elements: last.elements, queue: last.queue});
    }
    return out;
  }

  function drawUsage(svg, state, col, sel, pes, onPick) {
    const n = Math.max(pes.length, 1);
    const f = frame(svg, {span: 1, ymax: 100, yfmt: (v) => `${v}%`, height: 240, xband: true,
                          ylabel: "% of the PE's time"});
    const bw = f.pw / n, gap = n <= 64 ? Math.min(bw * 0.2, 6) : 0;
    pes.forEach((p, i) => {
      const g = sv("g", {class: "pe" + (p.pe === sel ? " selected" : "")}, f.plot);
      Object.assign(g.dataset, {pe: String(p.pe), util: p.util.toFixed(6), host: p.host,
                                busy: String(p.busy), dt: String(p.dt), rows: String(p.rows)});
      let y = 0;
      const parts = [];
      for (const m of col.shown) {
        let v = 0;
        if (m === "overhead") v = p.overhead;
        else if (m === "other") {
          for (const [name, s] of p.methods) if (!col.top.has(name)) v += s;
        } else v = p.methods.get(m) || 0;
        if (v <= 0 || !p.dt) continue;
        const h = (100 * v) / p.dt;
        sv("rect", {x: f.M.l + i * bw + gap / 2, y: f.y(y + h), width: Math.max(bw - gap, 0.5),
                    height: Math.max(f.y(y) - f.y(y + h), 0), fill: col.colours.get(m)}, g);
        parts.push(`${m} ${h.toFixed(1)}%`);
        y += h;
      }
      sv("rect", {class: "frame", x: f.M.l + i * bw + gap / 2, y: f.M.t,
                  width: Math.max(bw - gap, 0.5), height: f.ph}, g);
      tip(g, `PE ${p.pe}${p.host ? " on " + p.host : ""}: ${pct(p.util)} in entry methods` +
             ` (${parts.join(", ")}); ${p.elements ?? "?"} elements, RSS ${bytes(p.rss)}`);
      if (i % Math.ceil(n / 32) === 0) {  // (every PE's number up to 32 PEs, else some)
        sv("text", {x: f.M.l + (i + 0.5) * bw, y: f.M.t + f.ph + 14, "text-anchor": "middle"},
           f.svg, String(p.pe));
      }
      if (n <= 48) {
        sv("text", {x: f.M.l + (i + 0.5) * bw, y: f.y(Math.min(y, 100)) - 4,
                    "text-anchor": "middle", class: "util"}, g, pct(p.util));
      }
      g.addEventListener("click", () => onPick(p.pe));
    });
  }

  // how many periods (of the selected PE, or of every PE) had each busy share, in 5% bins
  function drawHistogram(svg, state, sel) {
    const counts = new Array(20).fill(0);
    let total = 0;
    for (const [pe, rows] of state.pes) {
      if (sel !== "all" && pe !== sel) continue;
      for (const r of rows) {
        if (!(r.dt > 0)) continue;
        counts[Math.min(19, Math.max(0, Math.floor((20 * busyOf(r)) / r.dt + 1e-9)))] += 1;
        total += 1;
      }
    }
    const ymax = Math.max(1, ...counts);
    const f = frame(svg, {span: 1, ymax: ymax * 1.1, height: 220, xband: true,
                          yfmt: (v) => (Number.isInteger(v) ? String(v) : ""),
                          ylabel: sel === "all" ? "periods (all PEs)" : `periods of PE ${sel}`});
    const bw = f.pw / 20;
    counts.forEach((c, i) => {
      const g = sv("g", {class: "hist-bin"}, f.plot);
      Object.assign(g.dataset, {lo: String(i / 20), hi: String((i + 1) / 20), count: String(c)});
      if (c) {
        sv("rect", {x: f.M.l + i * bw + 1, y: f.y(c), width: bw - 2, height: f.y(0) - f.y(c),
                    fill: "#4e79a7"}, g);
      }
      tip(g, `${5 * i}–${5 * (i + 1)}% busy: ${c} of ${total} periods`);
      if (i % 2 === 0) {
        sv("text", {x: f.M.l + i * bw, y: f.M.t + f.ph + 14, "text-anchor": "middle"}, f.svg,
           `${5 * i}%`);
      }
    });
    sv("text", {x: f.M.l + f.pw, y: f.M.t + f.ph + 14, "text-anchor": "middle"}, f.svg, "100%");
  }

  function drawOverview(svg, state, pes, t) {
    const nb = Math.min(binCount(state, t.span), 120);
    const rowsH = Math.max(6, Math.min(18, 240 / Math.max(pes.length, 1)));
    const f = frame(svg, {span: t.span, ymax: 1, height: 52 + rowsH * pes.length,
                          yfmt: () => "", yticks: 1});
    const width = t.span / nb, cw = f.pw / nb;
    pes.forEach((p, k) => {
      const cells = Array.from({length: nb}, () => [0, 0]);
      for (const r of state.pes.get(p.pe)) {
        const i = Math.min(nb - 1, Math.max(0, Math.floor((r.t - t.t0 - 1e-9) / width)));
        cells[i][0] += busyOf(r);
        cells[i][1] += r.dt;
      }
      const y = f.M.t + k * rowsH;
      const g = sv("g", {class: "overview-pe"}, f.plot);
      g.dataset.pe = String(p.pe);
      cells.forEach(([busy, dt], i) => {
        if (!dt) return;
        const u = Math.min(busy / dt, 1);
        const light = Math.round(96 - 70 * u);
        tip(sv("rect", {x: f.M.l + i * cw, y, width: cw + 0.3, height: rowsH - 1,
                        fill: `hsl(212, 55%, ${light}%)`}, g),
            `PE ${p.pe}, ${duration(i * width)}: ${pct(busy / dt)}`);
      });
      if (k % Math.ceil(pes.length / 24) === 0) {
        sv("text", {x: f.M.l - 6, y: y + rowsH / 2 + 4, "text-anchor": "end"}, f.svg,
           `PE ${p.pe}`);
      }
    });
    markers(f, [...state.events.values()], t.t0, false);
  }

  // messages or bytes per second, sent and received, over the selected PEs
  function drawRates(svg, state, sel, t, kind) {
    const nb = binCount(state, t.span);
    const {bins} = binRows(state, sel, t.t0, t.span, nb);
    const keys = kind === "bytes" ? ["bytes_sent", "bytes_received"] : ["sent", "received"];
    const series = keys.map((k) => bins.map((b) => (b.dt && b.pes.size
      ? b[k] / (b.dt / b.pes.size) : null)));
    let ymax = 0;
    for (const s of series) for (const v of s) if (v !== null) ymax = Math.max(ymax, v);
    const f = frame(svg, {span: t.span, ymax: ymax > 0 ? ymax * 1.1 : 1, height: 240, width: 560,
                          yfmt: kind === "bytes" ? (v) => bytes(v) + "/s" : (v) => rate(v) + "/s",
                          ylabel: kind === "bytes" ? "bytes per second" : "messages per second"});
    const width = t.span / nb;
    ["#1f77b4", "#d62728"].forEach((colour, k) => {
      let d = "";
      series[k].forEach((v, i) => {
        if (v === null) return;
        d += `${d ? "L" : "M"}${f.x((i + 0.5) * width).toFixed(1)},${f.y(v).toFixed(1)}`;
      });
      const path = sv("path", {d, stroke: colour, class: `series ${keys[k]}`}, f.plot);
      path.dataset.series = keys[k];
      sv("text", {x: f.M.l + 8 + k * 110, y: f.M.t - 8, fill: colour}, f.svg,
         keys[k].replace("_", " "));
    });
    markers(f, [...state.events.values()], t.t0, false);
  }

  // max/avg of the PEs' busy time per bin: the imbalance the balancer acts on
  function drawImbalance(svg, state, pes, t) {
    const nb = binCount(state, t.span), width = t.span / nb;
    const loads = Array.from({length: nb}, () => new Map());
    for (const p of pes) {
      for (const r of state.pes.get(p.pe)) {
        const i = Math.min(nb - 1, Math.max(0, Math.floor((r.t - t.t0 - 1e-9) / width)));
        const m = loads[i];
        const cur = m.get(p.pe) || [0, 0];
        cur[0] += busyOf(r);
        cur[1] += r.dt;
        m.set(p.pe, cur);
      }
    }
    const values = loads.map((m) => {
      const u = [...m.values()].filter((x) => x[1] > 0).map((x) => x[0] / x[1]);
      if (u.length < 2) return null;
      const mean = u.reduce((a, b) => a + b, 0) / u.length;
      return mean > 0 ? Math.max(...u) / mean : null;
    });
    let ymax = 1;
    for (const v of values) if (v !== null) ymax = Math.max(ymax, v);
    const f = frame(svg, {span: t.span, ymax: Math.max(1.2, ymax * 1.08), height: 220, top: 46,
                          yfmt: (v) => num(v), ylabel: "max / mean busy"});
    let d = "";
    values.forEach((v, i) => {
      if (v === null) return;
      d += `${d ? "L" : "M"}${f.x((i + 0.5) * width).toFixed(1)},${f.y(v).toFixed(1)}`;
    });
    sv("path", {d, stroke: "#6a3d9a", class: "series imbalance"}, f.plot);
    markers(f, [...state.events.values()], t.t0, true);
  }

  // -- job page: the parts around the charts -----------------------------------------------
  function kpi(parent, label, value, id) {
    const box = el("div", {class: "kpi", id}, parent);
    el("div", {class: "value"}, box, value);
    el("div", {class: "label"}, box, label);
  }

  function drawHeader(view, state, pes) {
    const j = state.job;
    view.head.replaceChildren();
    const h = el("h1", {}, view.head, j.name || j.id);
    badge(j.state, h).classList.add("state");
    el("p", {class: "meta"}, view.head,
       `job ${j.id} · ${j.npes} PEs on ${j.nodes} node${j.nodes === 1 ? "" : "s"} · started ` +
       `${clock(j.start)} · ${j.state === "running" ? "up" : "ran"} ${duration(j.uptime)} · ` +
       `published every ${duration(j.period)}` +
       (j.argv && j.argv.length ? ` · ${j.argv.join(" ")}` : ""));
    const k = el("div", {class: "kpis"}, view.head);
    let busy = 0, dt = 0, sent = 0, bsent = 0, window = 0;
    for (const p of pes) { busy += p.busy; dt += p.dt; }
    const now = new Map();
    for (const [pe, rows] of state.pes) if (rows.length) now.set(pe, rows[rows.length - 1]);
    for (const r of now.values()) { sent += r.sent || 0; bsent += r.bytes_sent || 0; window = Math.max(window, r.dt); }
    const events = [...state.events.values()];
    kpi(k, "in entry methods, whole run", pct(dt ? busy / dt : 0), "kpi-util");
    kpi(k, "messages sent per second, last period", window ? rate(sent / window) : "–", "kpi-msgs");
    kpi(k, "bytes sent per second, last period", window ? bytes(bsent / window) + "/s" : "–",
        "kpi-bytes");
    kpi(k, "load balancing steps", String(events.filter((e) => e.kind === "lb").length), "kpi-lb");
    kpi(k, "checkpoints", String(events.filter((e) => e.kind === "checkpoint").length),
        "kpi-ckpt");
  }

  function drawSelect(view, state, onPick) {
    const s = view.select;
    const want = ["all", ...[...state.pes.keys()].sort((a, b) => a - b)];
    if (s.options.length !== want.length) {
      s.replaceChildren();
      for (const pe of want) el("option", {value: String(pe)}, s,
                                pe === "all" ? "all PEs" : `PE ${pe}`);
      s.onchange = () => onPick(s.value === "all" ? "all" : Number(s.value));
    }
    s.value = String(view.sel);
  }

  function drawEvents(parent, state, t0) {
    parent.replaceChildren();
    const events = [...state.events.values()].sort((a, b) => a.t - b.t);
    if (!events.length) {
      el("p", {class: "empty-note"}, parent, "No load balancing step, checkpoint, resize or " +
         "failure yet.");
      return;
    }
    const body = table(parent, "events", ["time", "~event", "imbalance before", "after",
                                          "predicted", "migrations", "took", "~detail"]);
    for (const e of events) {
      const data = {kind: e.kind, t: e.t};
      if (e.kind === "lb") Object.assign(data, {step: e.step, before: e.before ?? "",
                                                after: e.after ?? "", strategy: e.strategy});
      const lb = e.kind === "lb";
      row(body, "event", data,
          [duration(e.t - t0), {cls: "text", text: shortEvent(e)},
           lb ? num(e.before) : "", lb ? num(e.after) : "", lb ? num(e.predicted) : "",
           lb ? e.migrations : "", e.seconds != null ? duration(e.seconds) : "",
           {cls: "detail", text: eventText(e, t0).replace(/^at [^:]*: /, "")}]);
    }
  }

  function card(parent, title, note) {
    const s = el("section", {class: "card"}, parent);
    el("h2", {}, s, title);
    if (note) el("p", {class: "note"}, s, note);
    return s;
  }

  function jobPage(main, id) {
    const state = emptyJob();
    const view = {sel: "all"};
    view.head = el("div", {id: "job-head"}, main);
    const prof = card(main, "Time profile",
      "Each PE's time in entry methods per interval, stacked by method (the rest is idle); " +
      "markers: load balancing steps (with the measured imbalance before → after), " +
      "checkpoints, resizes, failures.");
    const ctl = el("div", {class: "controls"}, prof);
    el("label", {for: "pe-select"}, ctl, "show");
    view.select = el("select", {id: "pe-select"}, ctl);
    view.legend = el("div", {}, prof);
    view.profile = sv("svg", {id: "profile"}, prof);
    const usage = card(main, "Usage per PE", "Share of each PE's time in each entry method " +
                       "over the whole run (click a PE to show it in the time profile).");
    view.usage = sv("svg", {id: "usage"}, usage);
    const hist = card(main, "Usage histogram", "How many publication periods had each busy " +
                      "share (of the PE shown in the time profile, or of every PE).");
    view.histogram = sv("svg", {id: "histogram"}, hist);
    const over = card(main, "Overview", "Each PE's busy share per interval (darker: busier).");
    view.overview = sv("svg", {id: "overview"}, over);
    const imb = card(main, "Load imbalance", "Most loaded PE's busy time over the mean, per " +
                     "interval: what load balancing reduces.");
    view.imbalance = sv("svg", {id: "imbalance"}, imb);
    const two = el("div", {class: "two"}, main);
    view.messages = sv("svg", {id: "messages"}, card(two, "Messages"));
    view.bytes = sv("svg", {id: "bytes"}, card(two, "Bytes"));
    view.events = card(main, "Events");
    const evBox = el("div", {}, view.events);

    const draw = () => {
      if (!state.job) return;
      const t = span(state);
      const pes = perPE(state);
      const col = methodColours(state);
      const pick = (pe) => { view.sel = view.sel === pe ? "all" : pe; draw(); };
      drawHeader(view, state, pes);
      drawSelect(view, state, (pe) => { view.sel = pe; draw(); });
      view.legend.replaceChildren();
      legend(view.legend, col.shown, col.colours);
      if (!pes.length || !pes.some((p) => p.rows)) {
        for (const svg of [view.profile, view.usage, view.histogram, view.overview, view.imbalance,
                           view.messages, view.bytes]) emptyChart(svg, "no data yet");
      } else {
        drawProfile(view.profile, state, col, view.sel, t);
        drawUsage(view.usage, state, col, view.sel, pes, pick);
        drawHistogram(view.histogram, state, view.sel);
        drawOverview(view.overview, state, pes, t);
        drawImbalance(view.imbalance, state, pes, t);
        drawRates(view.messages, state, view.sel, t, "messages");
        drawRates(view.bytes, state, view.sel, t, "bytes");
      }
      drawEvents(evBox, state, t.t0);
      document.body.dataset.job = state.job.id;
      document.body.dataset.jobState = state.job.state;
    };

    return poll(async () => {
      const answer = await getJSON(`/api/job/${encodeURIComponent(id)}?since=${state.since}`);
      merge(state, answer);
      state.fetches += 1;
      draw();
      // a finished job is drawn once (post mortem); a running one every second
      return answer.job.state === "running" && answer.job.alive;
    }, 1000);
  }

  // -- the page's route ----------------------------------------------------------------------
  function start() {
    const main = document.getElementById("main");
    main.replaceChildren();
    const path = location.pathname;
    const job = path.match(/^\/job\/([^/]+)\/?$/);
    const page = job ? "job" : path.startsWith("/jobs") ? "jobs" : "cluster";
    document.body.dataset.page = page;
    for (const a of document.querySelectorAll("header nav a")) {
      a.classList.toggle("current", a.dataset.nav === page || (page === "job" && a.dataset.nav === "jobs"));
    }
    document.title = `shoal · ${job ? decodeURIComponent(job[1]) : page}`;
    if (job) jobPage(main, decodeURIComponent(job[1]));
    else if (page === "jobs") jobsPage(main);
    else clusterPage(main);
  }

  start();
})();
