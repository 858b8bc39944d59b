// wsched monitor: one EventSource on /v1/monitor/events, no polling.
"use strict";
(function () {
  const HOUR = 3600 * 1000;
  const state = { gpus: null, jobs: new Map(), status: null, history: new Map() };
  const $ = (sel) => document.querySelector(sel);

  function fmtBytes(b) {
    if (b == null) return "–";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0, v = Math.abs(b);
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (b < 0 ? "-" : "") + (i === 0 ? v : v.toFixed(v >= 100 ? 0 : 1)) + " " + u[i];
  }
  function fmtAge(t) {
    const s = Math.max(0, Math.round((Date.now() - new Date(t).getTime()) / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  }
  // jobNote is a queued job's expected start (length-aware order), or nothing.
  function jobNote(j) {
    if (j.state !== "pending" || !j.expected_start) return "";
    const s = Math.round((new Date(j.expected_start).getTime() - Date.now()) / 1000);
    return el("small", { class: "eta", title: "expected start " + j.expected_start }, s > 0 ? ` starts in ${fmtAge(Date.now() - s * 1000)}` : " starts now");
  }
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "style") e.style.cssText = v; else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return e;
  }

  // The accounting formula's terms, in bar order; "reserved" is what the
  // formula keeps back (reserved memory and the safety factor's margin).
  function terms(g) {
    const a = g.accounting, held = g.held_bytes || 0;
    const avail = Math.max(0, a.available_bytes);
    const t = {
      foreign: a.foreign_bytes, attributed: a.attributed_bytes, unrealized: a.unrealized_bytes,
      held: Math.min(held, avail), available: Math.max(0, avail - held),
    };
    t.driver = Math.max(0, a.total_bytes - t.foreign - t.attributed - t.unrealized - avail);
    return t;
  }

  function record(gpus) {
    const now = Date.now();
    for (const g of gpus.gpus) {
      let h = state.history.get(g.uuid);
      if (!h) { h = []; state.history.set(g.uuid, h); }
      h.push({ t: now, used: g.used_bytes, leased: g.accounting.leased_bytes, total: g.total_bytes });
      while (h.length && h[0].t < now - HOUR) h.shift();
      if (h.length > 4000) h.splice(0, h.length - 4000);
    }
  }

  function drawChart(canvas, g) {
    const h = state.history.get(g.uuid) || [];
    const w = canvas.clientWidth || 280, ht = canvas.clientHeight || 40;
    canvas.width = w; canvas.height = ht;
    const c = canvas.getContext("2d");
    c.clearRect(0, 0, w, ht);
    c.fillStyle = "#68707a"; c.font = "10px system-ui, sans-serif"; c.fillText("last hour", 4, 11);
    if (!h.length) return;
    const now = Date.now(), x = (t) => w - ((now - t) / HOUR) * w, y = (b) => ht - (b / g.total_bytes) * ht;
    const line = (key, color, fill) => {
      c.beginPath();
      c.moveTo(Math.max(0, x(h[0].t) - 2), y(h[0][key]));
      for (const p of h) c.lineTo(x(p.t), y(p[key]));
      c.lineTo(w, y(h[h.length - 1][key]));
      if (fill) { c.lineTo(w, ht); c.lineTo(x(h[0].t), ht); c.fillStyle = color; c.fill(); }
      else { c.strokeStyle = color; c.lineWidth = 1.5; c.stroke(); }
    };
    line("leased", "rgba(47,111,179,0.25)", true);
    line("used", "#2f6fb3", false);
  }

  // enforcement: how the GPU's leases are held to their size (issue 27),
  // the tier and, in smaller print, why the daemon chose it at start.
  function enforcement(e) {
    if (!e) return "";
    return el("div", { class: "enforcement", "data-tier": e.tier, title: e.reason || "" },
      el("b", {}, "enforcement " + e.tier), e.reason ? el("span", { class: "reason" }, " · " + e.reason) : "");
  }

  function renderGPU(g) {
    const t = terms(g), a = g.accounting;
    const bar = el("div", { class: "bar", title: "total " + fmtBytes(a.total_bytes) });
    for (const k of ["foreign", "driver", "attributed", "unrealized", "held", "available"]) {
      const pct = a.total_bytes ? (100 * t[k]) / a.total_bytes : 0;
      bar.append(el("div", { class: "seg " + k, "data-bytes": t[k], style: "width:" + pct.toFixed(3) + "%", title: k + " " + fmtBytes(t[k]) }));
    }
    const list = el("ul");
    for (const l of g.leases) {
      list.append(el("li", { class: "lease", "data-lease": l.id },
        `${l.id} ${fmtBytes(l.memory_bytes)} (uses ${fmtBytes(l.used_bytes)}) ${l.holder.name || ""} pid ${l.holder.pid} ${l.priority}`));
    }
    for (const p of g.processes || []) list.append(el("li", {}, `pid ${p.pid} ${p.name || ""} ${fmtBytes(p.used_bytes)}`));
    const canvas = el("canvas", { "aria-label": "memory over the last hour" });
    const card = el("div", { class: "gpu", id: "gpu-" + g.index },
      el("div", { class: "title" }, el("b", {}, `GPU ${g.index} · ${g.name}`),
        el("span", { class: "nums" }, `${fmtBytes(Math.max(0, a.available_bytes))} available of ${fmtBytes(a.total_bytes)}`)),
      bar,
      el("div", { class: "nums" }, `leased ${fmtBytes(a.leased_bytes)} · foreign ${fmtBytes(a.foreign_bytes)}` +
        (g.held_bytes ? ` · held ${fmtBytes(g.held_bytes)}` : "") +
        (g.utilization_pct != null ? ` · ${g.utilization_pct}% util` : "") + (g.temperature_c != null ? ` · ${g.temperature_c}°C` : "")),
      a.placeable ? "" : el("div", { class: "bad" }, a.reason || "not placeable"),
      enforcement(g.enforcement),
      canvas, list);
    return [card, canvas];
  }

  // allowedOn: may a request for device (auto, cuda, cuda:N, GPU-<uuid>) run on g?
  function allowedOn(device, g) {
    const m = /^cuda:(\d+)$/.exec(device || "");
    if (m) return g.index === Number(m[1]);
    if ((device || "").startsWith("GPU-")) return g.uuid === device;
    return true;
  }

  function why(q, gpus) {
    const held = (gpus.held || []).find((h) => h.lease_id === q.id);
    if (held) return `${fmtBytes(held.bytes)} held for it on GPU ${held.gpu_index} until it fits (waited past backfill_window)`;
    let best = null;
    for (const g of gpus.gpus) {
      if (!g.accounting.placeable || !allowedOn(q.device, g)) continue;
      const free = Math.max(0, g.accounting.available_bytes - (g.held_bytes || 0));
      if (!best || free > best.free) best = { free, index: g.index };
    }
    const need = `needs ${fmtBytes(q.memory_bytes)} on ${q.device}`;
    return best ? `${need}; most available: ${fmtBytes(best.free)} on GPU ${best.index}` : `${need}; no placeable GPU`;
  }

  function renderGPUs() {
    const gpus = state.gpus;
    if (!gpus) return;
    const box = $("#gpus"), charts = [];
    box.replaceChildren();
    for (const g of gpus.gpus) { const [card, canvas] = renderGPU(g); box.append(card); charts.push([canvas, g]); }
    if (!gpus.gpus.length) box.append(el("p", { class: "empty" }, `no GPUs (${gpus.provider})`));
    for (const [canvas, g] of charts) drawChart(canvas, g);
    const body = $("#queue tbody");
    body.replaceChildren();
    gpus.queue.forEach((q, i) => body.append(el("tr", { "data-lease": q.id }, el("td", {}, i + 1), el("td", {}, q.id),
      el("td", {}, fmtBytes(q.memory_bytes)), el("td", {}, q.priority), el("td", {}, fmtAge(q.created)), el("td", { class: "why" }, why(q, gpus)))));
    if (!gpus.queue.length) body.append(el("tr", {}, el("td", { colspan: 6, class: "empty" }, "nothing waits")));
    const leases = gpus.gpus.reduce((n, g) => n + g.leases.length, 0) + gpus.cpu_leases.length;
    $("#summary").textContent = `${gpus.provider} · policy ${gpus.policy} · ${gpus.gpus.length} GPUs · ${leases} leases · ${gpus.queue.length} queued` +
      (state.status ? ` · wsched ${state.status.version}` : "");
  }

  function renderJobs() {
    const body = $("#jobs tbody");
    body.replaceChildren();
    const jobs = [...state.jobs.values()].sort((a, b) => new Date(b.created) - new Date(a.created)).slice(0, 100);
    for (const j of jobs) {
      const pct = Math.round(j.progress || 0);
      body.append(el("tr", { "data-job": j.id }, el("td", {}, j.id),
        el("td", { title: j.error || "" }, el("span", { class: "state state-" + j.state }, j.state), jobNote(j)),
        el("td", { class: "progress-cell" }, el("span", { class: "progress" }, el("i", { style: `width:${pct}%` })), pct + "%",
          j.chunks ? el("small", { class: "chunks" }, ` ${j.chunks.done}/${j.chunks.total} chunks`) : ""),
        el("td", {}, j.spec.model), el("td", {}, j.gpu_uuid ? "GPU " + j.gpu_index : j.backend ? "CPU" : "–"),
        el("td", {}, j.attempts), el("td", {}, fmtAge(j.created))));
    }
    if (!jobs.length) body.append(el("tr", {}, el("td", { colspan: 7, class: "empty" }, "no jobs")));
  }

  // applyEvent applies a placement event's lease (the stream's delta): a
  // queued request joins the queue, a granted lease its GPU (or the CPU
  // list), an ended one leaves; any other change replaces it where it is.
  function applyEvent(gpus, ev) {
    const l = ev.lease;
    let from = null, at = -1;
    for (const ls of [...gpus.gpus.map((g) => g.leases), gpus.cpu_leases, gpus.queue]) {
      const i = ls.findIndex((x) => x.id === l.id);
      if (i >= 0) { from = ls; at = i; break; }
    }
    let to = null;
    if (l.state === "queued") to = gpus.queue;
    else if (l.state === "granted") {
      const g = gpus.gpus.find((x) => l.gpu_uuid && x.uuid === l.gpu_uuid);
      to = g ? g.leases : gpus.cpu_leases;
    }
    if (from) from.splice(at, 1);
    if (to && to === from) to.splice(at, 0, l); else if (to) to.push(l);
  }

  // applyGPUs adopts per-GPU fields (accounting; with a reading, the
  // reading and held memory) of an "accounts" or "readings" frame.
  function applyGPUs(gpus, list, whole) {
    for (const n of list) {
      const i = gpus.gpus.findIndex((x) => x.uuid === n.uuid);
      if (i < 0) continue;
      const g = gpus.gpus[i];
      // A reading carries neither the leases nor the tier (chosen at start).
      gpus.gpus[i] = whole ? Object.assign({}, n, { leases: g.leases, enforcement: g.enforcement }) : Object.assign(g, n);
    }
  }

  // Frames can come faster than the page can draw: one render per frame of
  // the display.
  let pending = false;
  function renderSoon() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; renderGPUs(); });
  }

  function connect() {
    const es = new EventSource("/v1/monitor/events");
    const on = (type, f) => es.addEventListener(type, (e) => { f(JSON.parse(e.data)); });
    on("snapshot", (s) => {
      state.status = s.status;
      state.jobs = new Map(s.jobs.map((j) => [j.id, j]));
      state.gpus = s.gpus; record(s.gpus);
      renderGPUs(); renderJobs();
      $("#conn").classList.add("live");
    });
    on("placement", (p) => { if (state.gpus) { applyEvent(state.gpus, p.event); renderSoon(); } });
    on("accounts", (a) => {
      if (!state.gpus) return;
      applyGPUs(state.gpus, a.accounts.map((acc) => ({ uuid: acc.uuid, accounting: acc })), false);
      record(state.gpus); renderSoon();
    });
    on("readings", (r) => {
      if (!state.gpus) return;
      state.gpus.taken = r.taken; state.gpus.held = r.held; state.gpus.uids = r.uids;
      applyGPUs(state.gpus, r.gpus, true);
      record(state.gpus); renderSoon();
    });
    on("gpus", (g) => { state.gpus = g; record(g); renderSoon(); });
    on("job", (ev) => { state.jobs.set(ev.job.id, ev.job); renderJobs(); });
    on("lagged", () => { es.close(); $("#conn").classList.remove("live"); connect(); });
    es.onerror = () => $("#conn").classList.remove("live");
  }
  connect();
})();
