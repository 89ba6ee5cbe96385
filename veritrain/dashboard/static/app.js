// veritrain dashboard: renders the page's JSON (/api/...) and re-renders it on each new block
// (server-sent events from /api/stream). Chain data is put in text nodes only, never parsed as HTML.
"use strict";

const body = document.body;
const page = body.dataset.page;
const key = body.dataset.key;
const main = document.getElementById("main");
let charts = [];
let busy = false;
let again = false;
let shown = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "href" && !/^\/(job|multiparty|address)\//.test(value) && value !== "/" && !value.startsWith("/?")) continue;
    node.setAttribute(name, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const ZERO = "0x0000000000000000000000000000000000000000";
const short = (a) => (a && a !== ZERO ? a.slice(0, 8) + ".." + a.slice(-4) : "-");
const addr = (a) => (a && a !== ZERO ? el("a", { href: "/address/" + a, title: a, class: "addr" }, short(a)) : "-");
const jobLink = (id) => el("a", { href: "/job/" + id }, "#" + id);
const multipartyLink = (id) => el("a", { href: "/multiparty/" + id }, "#" + id);
const when = (t) => (t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "-");
const section = (title, ...content) => el("section", {}, el("h2", {}, title), ...content);

function table(headers, rows, attrs) {
  return el("table", attrs || {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", r.attrs || {}, (r.cells || r).map((c) => el("td", {}, c))))));
}

function plot(title, xs, series, target) {
  const width = Math.min(900, main.clientWidth - 20);
  const colors = ["#2b6cb0", "#c05621", "#2f855a", "#805ad5"];
  const own = !!series.ownAxes; // each line on its own scale, labelled: the first on the left, the second on the right
  const opts = {
    title, width, height: 240,
    scales: { x: { time: false } },
    series: [{ label: series.xLabel || "x" }, ...series.lines.map((s, i) => ({ label: s.label, stroke: colors[i % 4], width: 2, ...(own ? { scale: s.label } : {}), ...(series.stepped ? { paths: uPlot.paths.stepped({ align: 1 }) } : {}) }))],
  };
  if (own) {
    opts.axes = [{ label: series.xLabel || "x" }, ...series.lines.slice(0, 2).map((s, i) => ({ scale: s.label, label: s.label, side: i ? 1 : 3, stroke: colors[i], grid: { show: i === 0 } }))];
  }
  charts.push(new uPlot(opts, [xs, ...series.lines.map((s) => s.values)], target));
}

function kv(pairs) {
  return el("dl", {}, pairs.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function renderNetwork(d) {
  const states = Object.entries(d.counts).sort();
  const filter = el("p", { class: "filters" }, el("a", { href: "/" }, "all (" + d.total_jobs + ")"),
    states.map(([s, n]) => [" ", el("a", { href: "/?state=" + s }, s + " (" + n + ")")]));
  const jobs = table(["job", "state", "reward (VERI)", "submitter", "solver", "posted at block"],
    d.jobs.map((j) => ({ attrs: { "data-job": j.id, "data-state": j.state }, cells: [jobLink(j.id), el("span", { class: "state " + j.state }, j.state), j.reward, addr(j.submitter), addr(j.solver), j.posted_block] })),
    { id: "jobs" });
  const actors = Object.entries(d.actors).map(([role, list]) => el("div", { class: "actors" }, el("h3", {}, role + "s (" + list.length + ")"),
    table(["address", "staked", "locked"], list.map((a) => [addr(a.address), a.staked, a.locked]))));
  const slashes = d.slashes.length
    ? table(["block", "time", "account", "role", "amount (VERI)", "to"], d.slashes.map((s) => ({ attrs: { class: "slash" }, cells: [s.block, when(s.time), addr(s.account), s.role, s.amount, addr(s.recipient)] })), { id: "slashes" })
    : el("p", { id: "slashes" }, "none yet");
  return [
    section("Network", kv([["jobs on chain", el("span", { id: "total-jobs" }, d.total_jobs)], ["jackpot", el("span", { id: "jackpot" }, d.jackpot + " VERI")]]),
      el("p", { id: "counts" }, states.map(([s, n]) => el("span", { class: "count state " + s, "data-state": s }, s + " " + n)))),
    section(d.filter ? "Jobs " + d.filter + " (latest " + d.jobs.length + ")" : "Latest jobs (" + d.jobs.length + " of " + d.total_jobs + ")", filter, jobs),
    section("Multi-party jobs (" + d.multiparty.length + " of " + d.total_multiparty + ")", d.multiparty.length
      ? table(["job", "phase", "round", "parties", "submitter", "funds left (VERI)"],
        d.multiparty.map((j) => ({ attrs: { "data-multiparty": j.id, "data-phase": j.phase }, cells: [multipartyLink(j.id), j.phase, j.round + " of " + j.rounds, j.parties, addr(j.submitter), j.funds] })),
        { id: "multiparty" })
      : el("p", { id: "multiparty" }, "none yet")),
    section("Staked", el("div", { class: "grid" }, actors)),
    section("Recent slashes", slashes),
  ];
}

function args(a) {
  return Object.entries(a || {}).map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v)).join(", ");
}

function renderJob(d) {
  const out = [section("Job #" + d.id, kv([
    ["state", el("span", { id: "job-state", class: "state " + d.state }, d.state)],
    ["submitter", addr(d.submitter)], ["solver", addr(d.solver)], ["verifier", addr(d.verifier)],
    ["reward / verifier fee", d.reward + " / " + d.fee + " VERI"],
  ]))];
  out.push(section("Timeline", table(["block", "time", "event", "by", "gas", "details"],
    d.timeline.map((e) => ({ attrs: { "data-event": e.event }, cells: [e.block, when(e.timestamp), e.event, addr(e.from), e.gas_used.toLocaleString("en"), args(e.args)] })), { id: "timeline" })));
  if (d.spec) {
    out.push(section("Spec", el("p", {}, "CID ", el("code", {}, d.spec.cid)),
      d.spec.error ? el("p", { class: "error" }, d.spec.error) : [
        el("p", { id: "spec-size" }, d.spec.kind + ", " + d.spec.size.parameters.toLocaleString("en") + " parameters, " + d.spec.size.steps.toLocaleString("en") + " steps in " +
          d.spec.size.segments + " segments, " + d.spec.size.examples_per_step.toLocaleString("en") + " examples per step, about " + (d.spec.size.train_flop / 1e9).toFixed(1) + " GFLOP of training"),
        el("p", { id: "spec-guarantee", class: d.spec.weaker ? "error" : "" }, "guarantee: " + d.spec.guarantee),
        el("pre", { id: "spec" }, JSON.stringify(d.spec.fields, null, 2))]));
  }
  if (d.curve) {
    const target = el("div", { id: "curve" });
    const checked = d.curve.replay_checked ? "committed, replay-checked by the verifier" : "committed, not yet replay-checked";
    const held = d.curve.held_out_loss == null ? null
      : el("p", { id: "held-out" }, "held-out loss of the final model: " + d.curve.held_out_loss.toPrecision(6) + (d.curve.replay_checked ? " (replay-checked)" : " (claimed, not yet checked)"));
    out.push(section("Training curve per segment (" + checked + ")", el("p", {}, "manifest ", el("code", {}, d.curve.cid)), held, d.curve.error ? el("p", { class: "error" }, d.curve.error) : target));
    if (!d.curve.error) {
      const n = d.curve.segments;
      const xs = Array.from({ length: n }, (_, i) => (i + 1) * d.curve.checkpoint_interval);
      const lines = Object.entries(d.curve.series).map(([label, values]) => ({ label, values }));
      out.later = () => plot("per segment (x: step at the segment's end)", xs, { xLabel: "step", lines, ownAxes: true }, target);
    }
  }
  if (d.verification) {
    const v = d.verification;
    out.push(section("Verification", el("p", { id: "verdict", class: v.passed ? "pass" : "fail" }, (v.passed ? "PASSED" : "FAILED") + " by ", addr(v.verifier), ": " + (v.summary || v.error || "")),
      v.verdicts && v.verdicts.length ? table(["segment replayed", "passed", "reason"], v.verdicts.map((s) => [s.segment, String(s.passed), s.reason || ""])) : null));
  }
  for (const g of d.games) {
    out.push(section("Dispute game " + g.id + (g.on_report ? " (on the report)" : ""),
      kv([["status", el("span", { class: "game-status", "data-status": g.status }, g.status)], ["segment / steps", g.segment + " / " + g.steps],
        ["position lo..hi", g.lo + ".." + g.hi + " after " + g.moves_made + " moves"], ["defender", addr(g.defender)], ["challenger", addr(g.challenger)],
        ["clocks left (defender / challenger)", g.clocks.defender + " s / " + g.clocks.challenger + " s"], ["referees", g.referees.length ? g.referees.map((a, i) => [i ? ", " : "", addr(a)]) : "-"],
        ["winner / payout", g.winner ? el("span", { class: "game-winner" }, addr(g.winner), " / " + g.payout + " VERI") : "-"]]),
      table(["block", "time", "move", "by", "gas", "details"], g.moves.map((e) => [e.block, when(e.timestamp), e.event, addr(e.from), e.gas_used.toLocaleString("en"), args(e.args)]), { class: "moves" })));
  }
  if (d.model) {
    out.push(section("Model", el("p", { id: "model" }, el("code", {}, d.model.cid), d.model.final ? (d.model.fetchable ? " (fetchable: veritrain submit fetch " + d.id + ")" : " (not in this store)") : " (once finalized)")));
  }
  return out;
}

function renderMultiparty(d) {
  const t = d.terms;
  const out = [section("Multi-party job #" + d.job_id, kv([
    ["phase", el("span", { id: "multiparty-phase" }, d.phase)], ["round", d.round + " of " + d.rounds],
    ["parties (quorum)", d.parties + " (" + d.quorum + ")"], ["submitter", addr(d.submitter)], ["global model", el("code", {}, d.global_cid)],
    ["funds left", d.funds + " VERI"],
    ["pay", "each accepted contribution " + t.contribution_reward + ", each inner job " + t.inner_reward + " (verifier " + t.inner_fee + "), each round's aggregator " +
      t.aggregator_fee + " VERI; slot bond " + t.slot_bond + " VERI"],
  ]))];
  out.push(section("Rounds", table(["round", "aggregator", "paid slots", "cut out", "state hash"],
    d.history.map((r) => ({ attrs: { "data-round": r.round }, cells: [r.round, r.final ? addr(r.aggregator) : "-", r.paid.join(", ") || "-", r.cut_out.join(", ") || "-",
      r.state_hash ? el("code", { title: r.state_hash }, r.state_hash.slice(0, 18)) : "(not final)"] })), { id: "rounds" }),
    d.rounds_not_shown ? el("p", {}, "rounds 0 to " + (d.rounds_not_shown - 1) + " not listed (the totals count them)") : null));
  const rows = d.history.flatMap((r) => r.slots.filter((s) => s.party || s.inner_job).map((s) => {
    const verdict = s.included ? "paid" : s.cut_out ? "cut out" : "-";
    const curve = s.curve && s.curve.points.length
      ? s.curve.points[0].loss.toPrecision(5) + " .. " + s.curve.points[s.curve.points.length - 1].loss.toPrecision(5) + (s.curve.replay_checked ? " (replay-checked)" : " (not yet checked)")
      : s.curve_error || "-";
    return { attrs: { "data-round": r.round, "data-slot": s.slot, "data-verdict": verdict }, cells: [r.round, s.slot, addr(s.party),
      s.inner_job ? [jobLink(s.inner_job), s.inner_state ? " " + s.inner_state : ""] : "-", s.contribution ? el("code", {}, s.contribution) : "-",
      el("span", { class: "verdict " + (s.included ? "pass" : s.cut_out ? "fail" : "") }, verdict),
      s.games.length ? s.games.map((g, i) => [i ? ", " : "", "game " + g.game + " (" + g.side + "): " + g.outcome]) : "-", s.pay, curve] };
  }));
  out.push(section("Contributions", table(["round", "slot", "party", "inner job", "contribution", "aggregate", "games on its trace", "pay (VERI)", "committed curve (first .. last segment)"],
    rows, { id: "contributions" })));
  out.push(section("Parties, every round", table(["party", "slots", "contributions", "accepted", "games won", "games lost", "earned (VERI)", "slashed (VERI)"],
    d.totals.map((p) => ({ attrs: { "data-party": p.party }, cells: [addr(p.party), p.slots.join(", "), p.contributions, p.accepted, p.games_won, p.games_lost, p.earned, p.slashed] })),
    { id: "parties" })));
  const parties = Object.entries(d.curve.parties);
  if (parties.length) {
    const target = el("div", { id: "multiparty-curve" });
    const points = [...parties.flatMap(([, ps]) => ps), ...d.curve.mean];
    const checked = points.every((p) => p[2]) ? "every value replay-checked" : "some values not yet replay-checked";
    out.push(section("Training curve per round (x: round x H + step)", el("p", { id: "multiparty-checked" }, "each inner trace's committed mean loss per segment, and each round's mean over its included parties: " + checked), target));
    const xs = [...new Set(points.map((p) => p[0]))].sort((a, b) => a - b);
    const line = (ps) => { const at = new Map(ps.map((p) => [p[0], p[1]])); return xs.map((x) => (at.has(x) ? at.get(x) : null)); };
    const lines = [...parties.map(([party, ps]) => ({ label: short(party), values: line(ps) })), ...(d.curve.mean.length ? [{ label: "mean of the included", values: line(d.curve.mean) }] : [])];
    out.later = () => plot("committed mean loss per segment", xs, { xLabel: "global step", lines }, target);
  }
  out.push(section("Slots now", table(["slot", "party"], d.slots.map((s) => [s.slot, s.party ? addr(s.party) : "vacant"]))));
  return out;
}

function renderAddress(d) {
  const out = [section("Account " + d.address, kv([
    ["VERI in the wallet", d.veri],
    ...Object.entries(d.stakes).map(([role, s]) => [role + " stake", s.staked + " staked, " + s.locked + " locked, " + s.unbonding + " unbonding"]),
    ["net earnings", el("span", { id: "net" }, d.net + " VERI")],
  ]))];
  const target = el("div", { id: "earnings-plot" });
  out.push(section("Earnings and slashes over time", target,
    table(["block", "time", "job", "game", "what", "amount (VERI)"], d.earnings.map((e) => ({ attrs: { class: e.sign < 0 ? "loss" : "gain" }, cells: [e.block, when(e.time), e.job === null ? "-" : jobLink(e.job), e.game === null ? "-" : e.game, e.what, (e.sign < 0 ? "-" : "+") + e.amount] })), { id: "earnings" })));
  const xs = [d.since, ...d.earnings.map((e) => e.block), d.head];
  const net = [0, ...d.earnings.map((e) => e.net)];
  out.later = () => plot("net earnings (VERI) by block", xs, { xLabel: "block", stepped: true, lines: [{ label: "net VERI", values: [...net, net[net.length - 1]] }] }, target);
  out.push(section("Jobs", kv(Object.entries(d.jobs).map(([k, ids]) => [k, ids.length ? ids.map((i) => [jobLink(i), " "]) : "-"]))));
  out.push(section("Games played", d.games.length ? table(["game", "job", "as"], d.games.map((g) => [g.game, jobLink(g.job), g.as.join(", ")])) : el("p", {}, "none")));
  return out;
}

const api = { network: () => "/api/network" + location.search, job: () => "/api/job/" + key, multiparty: () => "/api/multiparty/" + key, address: () => "/api/address/" + key };
const render = { network: renderNetwork, job: renderJob, multiparty: renderMultiparty, address: renderAddress };

async function refresh() {
  if (busy) { again = true; return; }
  busy = true;
  try {
    const reply = await fetch(api[page](), { cache: "no-store" });
    if (!reply.ok) { main.replaceChildren(el("p", { class: "error" }, await reply.text())); return; }
    const data = await reply.json();
    const same = JSON.stringify({ ...data, head: 0 });
    if (same !== shown) { // a new block that changed nothing on this page keeps the DOM (and the reader's place)
      shown = same;
      charts.forEach((c) => c.destroy());
      charts = [];
      const parts = render[page](data);
      main.replaceChildren(...parts);
      if (parts.later) parts.later();
    }
    document.getElementById("head").textContent = "block " + data.head;
    body.dataset.head = data.head;
  } catch (e) {
    main.prepend(el("p", { class: "error" }, "update failed: " + e));
  } finally {
    busy = false;
    if (again) { again = false; refresh(); }
  }
}

const live = document.getElementById("live");
const stream = new EventSource("/api/stream");
stream.onmessage = () => { live.className = "on"; refresh(); };
stream.onerror = () => { live.className = "off"; };
refresh();
