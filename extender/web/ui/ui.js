// The status page: fetch /ui/state.json, draw it, and again every REFRESH_MS.
// Data enters the DOM only as Text nodes and attribute values, never parsed as markup:
// pod names, GPU labels and messages come from users. The Content-Security-Policy
// allows no inline script anyway.
"use strict";

const REFRESH_MS = 3000;

// An element with attributes and children; a string child becomes a Text node, never HTML.
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) {
    node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

const whole = (x) => (x === null || x === undefined ? "?" : String(Math.round(x)));
const utc = (epochS) => new Date(epochS * 1000).toISOString().replace("T", " ").slice(0, 19);

// A table row of [text, class] cells.
function row(attrs, cells, tag = "td") {
  return el("tr", attrs, ...cells.map(([text, cls]) => el(tag, cls ? { class: cls } : {}, text)));
}

const QUEUE_COLUMNS = [["pod"], ["model"], ["task"], ["state"], ["reserved MiB", "num"],
  ["predicted s", "num"], ["remaining s", "num"]];

// A job's reserved MiB, with the part grown beside an OOM kill (RedisStore.grow_beside).
function reserved(job) {
  const mib = whole(job.reserved_mib);
  return job.grown_mib ? `${mib} (+${whole(job.grown_mib)} beside an OOM kill)` : mib;
}

// A job's predicted seconds, with the learned correction they include (time_bias.correct).
function predicted(job) {
  const s = whole(job.predicted_s);
  return job.time_correction
    ? `${s} (x${job.time_factor.toFixed(2)} learned: ${job.time_correction})` : s;
}

function gpuBlock(nodeName, gpu) {
  const share = gpu.capacity_mib ? gpu.reserved_mib / gpu.capacity_mib : 0;
  const fill = el("div", { class: share > 1 ? "fill over" : "fill" });
  fill.style.width = `${(Math.min(share, 1) * 100).toFixed(1)}%`;  // CSSOM: allowed by the CSP
  const block = el("div", { class: "gpu", "data-gpu": `${nodeName}/${gpu.index}` },
    el("div", { class: "gpu-head" },
      el("span", { class: "gpu-name" }, `GPU ${gpu.index}`),
      el("div", { class: "bar", "data-role": "bar" }, fill),
      el("span", { "data-role": "memory" },
        `${whole(gpu.reserved_mib)} / ${whole(gpu.capacity_mib)} MiB`),
      el("span", { "data-role": "jobs" }, `${gpu.jobs}/${gpu.limit ?? "?"} jobs`),
      el("span", { "data-role": "delay" }, `new job waits ${whole(gpu.queue_delay_s)} s`)));
  if (gpu.queue.length) {
    block.appendChild(el("table", { class: "queue" },
      el("thead", {}, row({}, QUEUE_COLUMNS, "th")),
      el("tbody", {}, ...gpu.queue.map((job) => row({ "data-pod": job.pod, "data-uid": job.uid }, [
        [job.pod], [job.model], [job.task], [job.state], [reserved(job), "num"],
        [predicted(job), "num"], [whole(job.remaining_s), "num"]])))));
  }
  return block;
}

function nodeBlock(node) {
  const layout = node.layout;
  const summary = layout
    ? `${layout.count} × ${layout.gpu_type || layout.product} (${layout.memory_mib} MiB)`
    : "layout unknown";
  const block = el("article", { class: "node", "data-node": node.node },
    el("h2", {}, node.node, " ", el("span", { class: "layout" }, summary)));
  if (layout && layout.problem) block.appendChild(el("p", { class: "problem" }, layout.problem));
  node.gpus.forEach((gpu) => block.appendChild(gpuBlock(node.node, gpu)));
  return block;
}

function needs(pod) {
  return el("td", {}, ...Object.entries(pod.needs).map(([type, need]) =>
    el("span", { class: "need", "data-type": type },
      `${type}: ${whole(need.padded_mib)} MiB, ${whole(need.predicted_s)} s`)));
}

function empty(columns, text) {
  return el("tr", { class: "empty" }, el("td", { colspan: String(columns) }, text));
}

function render(state) {
  const gpus = state.nodes.flatMap((node) => node.gpus);
  const sum = (key) => gpus.reduce((total, gpu) => total + (gpu[key] || 0), 0);
  // A job on k GPUs is in each of their queues: one job (one reservation), k GPU slots.
  const jobs = new Set(gpus.flatMap((gpu) => gpu.queue.map((job) => job.uid))).size;
  document.getElementById("as-of").textContent = `data of ${utc(state.now)} UTC`;
  // A GPU whose node layout is unknown (no node watcher yet) has no size: not "of 0 MiB".
  const unsized = gpus.filter((gpu) => gpu.capacity_mib == null).length;
  const of = unsized === gpus.length ? "" : ` of ${whole(sum("capacity_mib"))}`;
  const sizes = unsized ? ` (${unsized} GPUs of unknown size: no node layout yet)` : "";
  document.getElementById("totals").textContent =
    `${state.nodes.length} nodes · ${gpus.length} GPUs · ${whole(sum("reserved_mib"))}${of} ` +
    `MiB reserved${sizes} · ${jobs} jobs holding ${sum("jobs")} GPU slots · ` +
    `${state.waiting.length} waiting`;

  const nodes = document.getElementById("nodes");
  nodes.replaceChildren(...state.nodes.map(nodeBlock));
  if (!state.nodes.length) {
    nodes.appendChild(el("p", {}, "no nodes and no reservations in the store"));
  }

  const waiting = document.querySelector("#waiting tbody");
  waiting.replaceChildren(...state.waiting.map((pod) => {
    const line = row({ "data-pod": pod.pod || pod.uid, "data-uid": pod.uid },
      [[pod.pod || pod.uid], [whole(pod.waiting_s), "num"]]);
    line.appendChild(needs(pod));
    return line;
  }));
  if (!state.waiting.length) waiting.appendChild(empty(3, "no pod is waiting"));

  const decisions = document.querySelector("#decisions tbody");
  decisions.replaceChildren(...state.decisions.map((d) =>
    row({ "data-kind": d.kind, "data-pod": d.pod, "data-uid": d.uid },
      [[utc(Number(d.at)).slice(11)], [d.kind], [d.pod], [d.node], [d.message]])));
  if (!state.decisions.length) decisions.appendChild(empty(5, "no decisions yet"));
}

function showError(text) {
  const banner = document.getElementById("error");
  banner.textContent = text;
  banner.hidden = !text;
}

async function refresh() {
  try {
    // From the origin: a page opened as http://user:token@host/ui may not fetch a URL
    // relative to its own (credentials in it); the browser re-sends what it cached.
    const response = await fetch(`${location.origin}/ui/state.json`, { cache: "no-store" });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
    render(body);
    showError("");
    document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  } catch (err) {
    showError(`could not refresh: ${err.message}`);
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

refresh();
