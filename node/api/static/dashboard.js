// crystalmesh node dashboard: polls the node's JSON API and renders it.
// No framework and no innerHTML with node data: listing names and reasons come
// from the network, so every value goes into the page as text.
"use strict";

const FAST_POLL_MS = 2000;
const SLOW_POLL_MS = 10000;
const CONFIRM_WINDOW_MS = 6000;
const MICRO = 1000000n;
const TRUST_LEVELS = ["verified", "trusted", "provisional", "untrusted", "banned", "unknown"];

const state = {
  status: null, peers: [], trust: null, listings: [], ownSkills: null, wallet: null, channels: null,
  memory: null, market: null, purchases: null, sales: null, audit: null,
  weatherDeadline: null, lastOk: 0, confirming: new Map(), buying: new Set(),
  rendered: new Map(),
};

// --- helpers ---------------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svgEl(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

function $(id) { return document.getElementById(id); }

function replace(id, ...children) { $(id).replaceChildren(...children.flat()); }

// Re-render a panel only when its data changed: keeps the DOM (and focus, and a
// browser test's element handles) stable between polls.
function changed(key, data) {
  const text = JSON.stringify(data);
  if (state.rendered.get(key) === text) return false;
  state.rendered.set(key, text);
  return true;
}

// Money is integer micro-USDC end to end; BigInt keeps display exact.
function formatUsdc(micro) {
  if (micro === null || micro === undefined || micro === "") return "–";
  let value;
  try { value = BigInt(typeof micro === "string" ? micro : Math.trunc(Number(micro))); }
  catch (_) { return String(micro); }
  const negative = value < 0n;
  if (negative) value = -value;
  let fraction = (value % MICRO).toString().padStart(6, "0").replace(/0+$/, "");
  if (fraction.length < 2) fraction = fraction.padEnd(2, "0");
  return (negative ? "-" : "") + (value / MICRO).toLocaleString("en-US") + "." + fraction;
}

function formatEth(wei) {
  if (wei === null || wei === undefined) return "–";
  try {
    const value = BigInt(String(wei));
    const whole = value / 10n ** 18n;
    const fraction = ((value % 10n ** 18n) / 10n ** 14n).toString().padStart(4, "0");
    return `${whole}.${fraction}`;
  } catch (_) {
    return (Number(wei) / 1e18).toFixed(4);
  }
}

function short(text, head = 8, tail = 6) {
  if (!text) return "–";
  const value = String(text);
  return value.length <= head + tail + 1 ? value : `${value.slice(0, head)}…${value.slice(-tail)}`;
}

function percent(rate) {
  return rate === null || rate === undefined ? "–" : `${Math.round(Number(rate) * 100)}%`;
}

function duration(ms) {
  const total = Math.max(0, Math.round(ms / 1000));
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  const two = (n) => String(n).padStart(2, "0");
  return hours ? `${hours}h ${two(minutes)}m ${two(seconds)}s` : `${minutes}m ${two(seconds)}s`;
}

function when(ms) {
  if (!ms) return "–";
  const date = new Date(Number(ms));
  const age = Date.now() - date.getTime();
  if (age >= 0 && age < 60000) return `${Math.max(1, Math.round(age / 1000))}s ago`;
  if (age >= 0 && age < 3600000) return `${Math.round(age / 60000)}m ago`;
  return date.toLocaleString();
}

function pill(text, kind) { return el("span", { class: `pill ${kind || ""}`, text }); }

function empty(columns, text) {
  return el("tr", { class: "empty" }, el("td", { colspan: columns, text }));
}

function kv(rows) {
  return rows.flatMap(([key, value, title]) => [
    el("dt", { text: key }),
    el("dd", { title: title || null }, value instanceof Node ? value : String(value ?? "–")),
  ]);
}

// --- API -------------------------------------------------------------------------------------
async function api(path, options) {
  let response;
  try {
    response = await fetch(path, { credentials: "same-origin", ...options });
  } catch (error) {
    return { ok: false, status: 0, error: "node unreachable" };
  }
  if (response.status === 401) {
    window.location.assign("/dashboard");  // token rotated or cookie gone: back to login
    return { ok: false, status: 401, error: "unauthorised" };
  }
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (!response.ok) {
    const message = (data && data.error) || `HTTP ${response.status}`;
    const missing = response.status === 404 && /^no route /.test(message);
    return { ok: false, status: response.status, error: message, missing, data };
  }
  return { ok: true, status: response.status, data };
}

// --- panels ----------------------------------------------------------------------------------
function renderIdentity() {
  const status = state.status;
  if (!status) return;
  $("node-name").textContent = status.name || "node";
  const badges = [];
  if (status.management) badges.push(pill("management", "accent"));
  replace("node-badges", badges);
  document.title = `${status.name || "node"} · crystalmesh`;
  if (!changed("identity", { ...status, uptime_s: Math.floor((status.uptime_s || 0) / 60) })) return;
  const addrs = el("div", { class: "addrs" },
    (status.listen_addrs || []).map((addr) => el("code", { text: addr })));
  replace("identity", kv([
    ["peer id", el("code", { text: short(status.peer_id, 12, 8) }), status.peer_id],
    ["public key", el("code", { text: short(status.public_key, 10, 6) }), status.public_key],
    ["listening", addrs],
    ["API port", status.api_port],
    ["uptime", duration((status.uptime_s || 0) * 1000)],
    ["peers", `${status.connected_peers} connected`],
    ["reachability", reachabilityText(status.reachability)],
    ["listings known", status.listings_known],
    ["crystals", status.crystals],
  ]));
}

function reachabilityText(reach) {
  if (!reach) return "unknown";
  const parts = [reach.status];
  if (reach.relay && reach.relay.serving) parts.push(`relaying (${reach.relay.reservations} reservations, ${reach.relay.circuits} circuits)`);
  if ((reach.reservations || []).length) parts.push(`reachable through ${reach.reservations.length} relays`);
  return parts.join(", ");
}

function renderWallet() {
  const wallet = state.wallet;
  const address = (wallet && wallet.address) || (state.status && state.status.wallet_address);
  const channels = state.channels;
  if (!changed("wallet", { wallet, address, channels })) return;
  const usdc = wallet && wallet.usdc_micro !== null && wallet.usdc_micro !== undefined
    ? `${formatUsdc(wallet.usdc_micro)} USDC` : "balance unavailable";
  $("wallet-usdc").textContent = usdc;
  const rows = [["address", el("code", { text: short(address, 10, 8) }), address]];
  if (wallet) {
    rows.push(["gas", `${formatEth(wallet.eth_wei)} ETH`]);
    if (wallet.chain_id) rows.push(["chain", wallet.chain_id]);
    if (wallet.error) rows.push(["error", el("span", { class: "error-text", text: wallet.error })]);
  }
  if (channels) {
    // Payment channels (vouchers): what this node holds at its sellers, what buyers owe it.
    const open = (channels.paying || []).filter((c) => c.state !== "closed");
    const sum = (list, key) => list.reduce((total, c) => total + Number(c[key] || 0), 0);
    if (open.length) {
      rows.push(["channels", `${open.length} · deposit ${formatUsdc(sum(open, "deposit_micro_usdc"))}` +
        ` · spent ${formatUsdc(sum(open, "spent_micro_usdc"))} · left ${formatUsdc(sum(open, "remaining_micro_usdc"))} USDC`]);
    }
    const paidBy = channels.paid_by || [];
    if (paidBy.length) {
      const withdrawing = paidBy.filter((c) => c.withdraw_requested_at_s).length;
      rows.push(["unclaimed", `${formatUsdc(channels.unclaimed_micro_usdc || 0)} USDC from ${paidBy.length} buyers` +
        (withdrawing ? ` · ${withdrawing} withdrawing` : "")]);
    }
    const claims = channels.claims || {};
    if (claims.claims) rows.push(["claims", `${claims.claims} · ${formatUsdc(claims.claimed_micro_usdc)} USDC · ${claims.gas_used} gas`]);
  }
  replace("wallet", kv(rows));
}

function renderWeather() {
  const weather = state.status && state.status.weather;
  if (!weather) return;
  state.weatherDeadline = weather.active ? Date.now() + Number(weather.remaining_ms || 0) : null;
  if (!changed("weather", { ...weather, remaining_ms: null })) { tickWeather(); return; }
  const level = Math.max(0, Math.min(1, Number(weather.level || 0)));
  const children = [
    el("div", { class: "weather-state" },
      weather.active ? pill("storm alert", "bad") : pill("clear", "good"),
      weather.halt_untrusted_ingestion ? pill("untrusted ingestion halted", "warn") : null),
    el("div", { class: "meter", title: `cortisol level ${level.toFixed(2)}` },
      el("div", { class: `meter-fill level-${level >= 0.66 ? "high" : level >= 0.33 ? "mid" : "low"}`,
                  "data-width": Math.round(level * 100) })),
    el("dl", { class: "kv" }, kv([
      ["level", level.toFixed(2)],
      ["remaining", el("span", { id: "weather-remaining", "data-testid": "weather-remaining",
                                 text: weather.active ? "…" : "–" })],
      ["reason", weather.reason || "–"],
    ])),
  ];
  replace("weather", children);
  applyWidths($("weather"));
  tickWeather();
}

function tickWeather() {
  const target = $("weather-remaining");
  if (!target) return;
  if (state.weatherDeadline === null) { target.textContent = "–"; return; }
  const left = state.weatherDeadline - Date.now();
  target.textContent = left > 0 ? duration(left) : "expiring…";
}

// CSP forbids inline style attributes in markup; widths are set through the CSSOM.
function applyWidths(root) {
  for (const node of root.querySelectorAll("[data-width]")) {
    node.style.width = `${node.getAttribute("data-width")}%`;
  }
}

function bars(counts, css) {
  const entries = Object.entries(counts || {}).sort((a, b) => b[1] - a[1]);
  if (!entries.length) return el("p", { class: "muted", text: "none" });
  const max = Math.max(...entries.map(([, count]) => count), 1);
  return el("div", { class: "bars" }, entries.map(([label, count]) =>
    el("div", { class: "bar-row" },
      el("span", { class: "bar-label", text: label }),
      el("span", { class: "bar-track" },
        el("span", { class: `bar-fill ${css}`, "data-width": Math.max(2, Math.round((count / max) * 100)) })),
      el("span", { class: "bar-value", text: count }))));
}

function renderMemory() {
  const memory = state.memory;
  if (!memory || !changed("memory", memory)) return;
  const hormones = memory.hormones || {};
  const children = [
    el("div", { class: "big", text: `${memory.total ?? 0} crystal${memory.total === 1 ? "" : "s"}` }),
    el("h3", { text: "by lifecycle" }), bars(memory.by_lifecycle, "lifecycle"),
    el("h3", { text: "by type" }), bars(memory.by_type, "type"),
    el("dl", { class: "kv spaced" }, kv([
      ["embedder", `${memory.embedder || "–"} (${memory.dim || "?"}d)`],
      ["index", memory.index ? `${memory.index.vectors} vectors, ${memory.index.state}` : "–"],
      ["hormones", ["dopamine", "cortisol", "oxytocin"]
        .filter((name) => typeof hormones[name] === "number")
        .map((name) => `${name} ${hormones[name].toFixed(2)}`).join(" · ") || "–"],
    ])),
  ];
  replace("memory", children);
  applyWidths($("memory"));
}

function trustFor(peerId, peer) {
  const entry = state.trust && state.trust.get(peerId);
  if (entry && entry.level) return entry;
  return { level: peer && peer.banned ? "banned" : "unknown" };
}

function renderPeers() {
  const peers = [...state.peers].sort((a, b) =>
    (b.connected - a.connected) || String(a.peer_id).localeCompare(String(b.peer_id)));
  const trust = state.trust ? [...state.trust.values()] : null;
  if (!changed("peers", { peers, trust })) return;
  $("peers-count").textContent = `${peers.filter((p) => p.connected).length} connected · ${peers.length} known`;
  const rows = peers.map((peer) => {
    const level = trustFor(peer.peer_id, peer);
    const flags = [
      pill(peer.connected ? "connected" : "offline", peer.connected ? "good" : "muted"),
      peer.kept ? pill("kept", "muted") : null,
      peer.banned ? pill("banned", "bad") : null,
    ];
    return el("tr", { "data-testid": "peer-row", "data-peer-id": peer.peer_id },
      el("td", { title: peer.peer_id }, el("code", { text: short(peer.peer_id, 10, 6) })),
      el("td", {}, flags),
      el("td", { title: level.last_reason || null }, pill(level.level, `trust-${level.level}`)),
      el("td", { class: "num", text: Number(peer.score || 0).toFixed(1) }),
      el("td", { class: "addr", title: (peer.addrs || []).join("\n") || null,
                 text: (peer.addrs || [])[0] || "–" }));
  });
  replace("peers", rows.length ? rows : [empty(5, "no peers yet")]);
  renderGraph(peers);
}

function renderGraph(peers) {
  const graph = $("trust-graph");
  const width = 320, height = 260, cx = width / 2, cy = height / 2;
  const shown = peers.slice(0, 24);
  const radius = shown.length > 12 ? 105 : 95;
  const nodes = [];
  shown.forEach((peer, index) => {
    // Two peers sit left and right of us; more start at the top and go clockwise.
    const start = shown.length === 2 ? 0 : -Math.PI / 2;
    const angle = start + (2 * Math.PI * index) / Math.max(1, shown.length);
    nodes.push({ peer, x: cx + radius * Math.cos(angle), y: cy + radius * Math.sin(angle) });
  });
  const children = [];
  for (const node of nodes) {
    children.push(svgEl("line", {
      x1: cx, y1: cy, x2: node.x, y2: node.y,
      class: node.peer.connected ? "edge" : "edge offline",
    }));
  }
  for (const node of nodes) {
    const level = trustFor(node.peer.peer_id, node.peer).level;
    const group = svgEl("g", { class: "peer-node", "data-testid": "graph-peer",
                               "data-peer-id": node.peer.peer_id });
    const title = svgEl("title", {});
    title.textContent = `${node.peer.peer_id}\ntrust: ${level}${node.peer.connected ? "" : " (offline)"}`;
    group.append(title,
      svgEl("circle", { cx: node.x, cy: node.y, r: 13, class: `trust-${level}` }));
    const label = svgEl("text", { x: node.x, y: node.y + 26, class: "graph-label" });
    label.textContent = String(node.peer.peer_id).slice(-6);
    group.append(label);
    children.push(group);
  }
  const self = svgEl("g", { class: "self-node" });
  const selfTitle = svgEl("title", {});
  selfTitle.textContent = `this node\n${state.status ? state.status.peer_id : ""}`;
  self.append(selfTitle, svgEl("circle", { cx, cy, r: 18, class: "self" }));
  const selfLabel = svgEl("text", { x: cx, y: cy + 4, class: "graph-self-label" });
  selfLabel.textContent = "me";
  self.append(selfLabel);
  children.push(self);
  if (peers.length > shown.length) {
    const more = svgEl("text", { x: width - 8, y: height - 8, class: "graph-more" });
    more.textContent = `+${peers.length - shown.length} more`;
    children.push(more);
  }
  graph.replaceChildren(...children);
  if (!$("trust-legend").childElementCount) {
    replace("trust-legend", TRUST_LEVELS.map((level) =>
      el("span", { class: "legend-item" }, el("span", { class: `swatch trust-${level}` }), level)));
  }
}

function boughtListings() {
  return new Set((state.purchases || [])
    .filter((purchase) => purchase.state === "completed")
    .map((purchase) => purchase.listing_id));
}

function renderListings() {
  const listings = state.listings;
  const confirming = [...state.confirming.keys()];
  const buying = [...state.buying];
  const bought = boughtListings();
  if (!changed("listings", { listings, confirming, buying, bought: [...bought] })) return;
  $("listings-count").textContent = `${listings.length} listed`;
  const rows = listings.map((listing) => {
    let action;
    if (listing.own) action = pill("yours", "accent");
    else if (bought.has(listing.listing_id) && !state.buying.has(listing.listing_id)) {
      action = pill("bought", "good");
    } else action = buyButton(listing);
    return el("tr", { "data-testid": "listing-row", "data-listing-id": listing.listing_id },
      el("td", { class: "skill", title: listing.description || null },
        el("div", { class: "skill-name", text: listing.name }),
        el("div", { class: "tags" }, (listing.tags || []).slice(0, 5).map((tag) => pill(tag, "tag")))),
      el("td", { text: listing.category || "–" }),
      el("td", { class: "num price", "data-testid": "listing-price",
                 text: formatUsdc(listing.price_micro_usdc) }),
      el("td", { class: "num", text: percent(listing.success_rate) }),
      el("td", { class: "num", text: listing.executions ?? "–" }),
      el("td", { title: listing.seller_key }, el("code", { text: short(listing.seller_key, 6, 4) })),
      el("td", { class: "action" }, action));
  });
  replace("listings", rows.length ? rows : [empty(7, "no listings known yet")]);
}

function buyButton(listing) {
  const id = listing.listing_id;
  if (state.buying.has(id)) {
    return el("button", { class: "buy", disabled: true, "data-testid": "buy-button",
                          "data-listing-id": id, text: "Buying…" });
  }
  const confirming = state.confirming.has(id);
  const button = el("button", {
    class: confirming ? "buy confirm" : "buy", "data-testid": "buy-button", "data-listing-id": id,
    text: confirming ? `Confirm ${formatUsdc(listing.price_micro_usdc)} USDC` : "Buy",
  });
  button.addEventListener("click", () => onBuy(listing));
  return button;
}

// Two clicks: "Buy" arms the button, "Confirm … USDC" pays. The confirmed price is
// sent as max_price_micro_usdc, so the node refuses if the seller raised it since.
async function onBuy(listing) {
  const id = listing.listing_id;
  if (!state.confirming.has(id)) {
    state.confirming.set(id, setTimeout(() => {
      state.confirming.delete(id);
      renderListings();
    }, CONFIRM_WINDOW_MS));
    renderListings();
    return;
  }
  clearTimeout(state.confirming.get(id));
  state.confirming.delete(id);
  state.buying.add(id);
  renderListings();
  showResult("pending", `Buying “${listing.name}” for ${formatUsdc(listing.price_micro_usdc)} USDC…`);
  const result = await api("/v1/purchases", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ listing_id: id, max_price_micro_usdc: listing.price_micro_usdc }),
  });
  state.buying.delete(id);
  if (result.ok) {
    const data = result.data || {};
    showResult("ok", `Bought “${listing.name}” for ${formatUsdc(data.price_micro_usdc)} USDC`,
      [data.tx_hash ? `tx ${short(data.tx_hash, 10, 6)}` : null,
       data.crystal_id ? `crystal ${short(data.crystal_id, 8, 4)}` : null].filter(Boolean).join(" · "));
  } else if (result.missing) {
    showResult("unavailable", "Purchases are not available on this node yet.");
  } else {
    showResult("error", `Purchase failed: ${result.error}`);
  }
  renderListings();
  pollSlow();
}

function showResult(kind, message, detail) {
  const box = $("purchase-result");
  box.setAttribute("data-state", kind);
  box.className = `result ${kind}`;
  box.replaceChildren(el("strong", { text: message }),
    detail ? el("span", { class: "detail", text: detail }) : null);
}

function earnedBySkill() {
  const earned = new Map();
  for (const skill of (state.market && state.market.top_skills) || []) {
    earned.set(skill.stable_skill_id, skill.earned);
  }
  return earned;
}

function renderOwnSkills() {
  const skills = state.ownSkills !== null ? state.ownSkills : state.listings.filter((l) => l.own);
  const earned = earnedBySkill();
  if (!changed("own", { skills, earned: [...earned] })) return;
  // Each skill is a listing (node/api/shapes.py, Listing): these fields are always there.
  const rows = skills.map((skill) => {
    const earnedMicro = earned.get(skill.stable_skill_id) ?? 0;
    return el("tr", { "data-testid": "own-skill-row" },
      el("td", { class: "skill", title: skill.description || null },
        el("div", { class: "skill-name", text: skill.name || short(skill.crystal_id) })),
      el("td", { class: "num", text: skill.skill_version ?? "–" }),
      el("td", { class: "num", text: skill.executions }),
      el("td", { class: "num", text: percent(skill.success_rate) }),
      el("td", { class: "num", text: skill.unique_buyers ?? "–" }),
      el("td", { class: "num", text: formatUsdc(skill.price_micro_usdc) }),
      el("td", { class: "num", text: formatUsdc(earnedMicro) }));
  });
  replace("own-skills", rows.length ? rows : [empty(7, "no published skills")]);
}

function renderMarket() {
  const market = state.market;
  if (!changed("market", market)) return;
  if (!market) {
    replace("market", el("p", { class: "muted", text: "market statistics not available" }));
    return;
  }
  const trend = market.trend_7d || [];
  const max = Math.max(1, ...trend.map((d) => Math.max(d.earned_micro_usdc || 0, d.spent_micro_usdc || 0)));
  const chart = svgEl("svg", { viewBox: "0 0 280 80", class: "trend", role: "img",
                               "aria-label": "earned and spent per day, last 7 days" });
  const step = 280 / Math.max(1, trend.length);
  trend.forEach((day, index) => {
    const x = index * step + 6;
    const barWidth = Math.max(4, (step - 16) / 2);
    const earnedHeight = ((day.earned_micro_usdc || 0) / max) * 62;
    const spentHeight = ((day.spent_micro_usdc || 0) / max) * 62;
    const earnedBar = svgEl("rect", { x, y: 66 - earnedHeight, width: barWidth, height: earnedHeight, class: "earned" });
    const spentBar = svgEl("rect", { x: x + barWidth + 2, y: 66 - spentHeight, width: barWidth, height: spentHeight, class: "spent" });
    const tip = svgEl("title", {});
    tip.textContent = `${day.day}: earned ${formatUsdc(day.earned_micro_usdc)}, spent ${formatUsdc(day.spent_micro_usdc)} USDC`;
    earnedBar.append(tip);
    const label = svgEl("text", { x: x + barWidth, y: 78, class: "trend-label" });
    label.textContent = String(day.day || "").slice(5);
    chart.append(earnedBar, spentBar, label);
  });
  const top = (market.top_skills || []).slice(0, 5).map((skill) =>
    el("li", {}, el("span", { text: skill.name || short(skill.stable_skill_id) }),
      el("span", { class: "num", text: `${formatUsdc(skill.earned)} · ${skill.sales} sales` })));
  replace("market",
    el("div", { class: "money-row" },
      el("div", {}, el("div", { class: "label", text: "earned" }),
        el("div", { class: "big good-text", "data-testid": "earned", text: formatUsdc(market.earned_micro_usdc) })),
      el("div", {}, el("div", { class: "label", text: "spent" }),
        el("div", { class: "big", "data-testid": "spent", text: formatUsdc(market.spent_micro_usdc) })),
      el("div", {}, el("div", { class: "label", text: "net" }),
        el("div", { class: "big", text: formatUsdc(market.net_micro_usdc) }))),
    el("h3", {}, "last 7 days ", el("span", { class: "swatch earned" }), " earned ",
      el("span", { class: "swatch spent" }), " spent"),
    chart,
    el("h3", { text: "top skills" }),
    top.length ? el("ul", { class: "top" }, top) : el("p", { class: "muted", text: "no sales yet" }));
}

function renderHistory() {
  const purchases = state.purchases, sales = state.sales;
  if (!changed("history", { purchases, sales })) return;
  if (purchases === null && sales === null) {
    replace("history", empty(6, "purchase history not available on this node"));
    return;
  }
  const names = new Map(state.listings.map((l) => [l.listing_id, l.name]));
  const items = [
    ...(purchases || []).map((p) => ({ ...p, kind: "bought", skill: p.name || names.get(p.listing_id) })),
    ...(sales || []).map((s) => ({ ...s, kind: "sold", skill: names.get(s.listing_id) })),
  ].sort((a, b) => (b.created_at_ms || 0) - (a.created_at_ms || 0)).slice(0, 20);
  const rows = items.map((item) => el("tr", { "data-testid": `history-${item.kind}` },
    el("td", { text: when(item.created_at_ms) }),
    el("td", {}, pill(item.kind, item.kind === "sold" ? "good" : "accent")),
    el("td", { text: item.skill || short(item.listing_id) }),
    el("td", { class: "num", text: formatUsdc(item.price_micro_usdc) }),
    el("td", { title: item.reason || null }, pill(item.state || "–", /fail|reject|revert|tamper|quarantin/.test(item.state || "") ? "bad" : "muted")),
    el("td", { title: item.tx_hash || null }, el("code", { text: item.tx_hash ? short(item.tx_hash, 8, 4) : "–" }))));
  replace("history", rows.length ? rows : [empty(6, "no purchases or sales yet")]);
}

// --- the operator's undo (every act lands in the node's audit log) ---------------------------
async function operatorAct(path, body, label) {
  const box = $("operator-result");
  box.setAttribute("data-state", "pending");
  box.className = "result pending";
  box.replaceChildren(el("strong", { text: `${label}…` }));
  const result = await api(path, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  const kind = result.ok ? "ok" : "error";
  box.setAttribute("data-state", kind);
  box.className = `result ${kind}`;
  box.replaceChildren(el("strong", { text: result.ok ? `${label}: done` : `${label} failed: ${result.error}` }));
  pollFast();
  pollSlow();
}

function renderAudit() {
  const entries = [...(state.audit || [])].reverse();
  if (!changed("audit", entries)) return;
  const rows = entries.map((entry) => el("tr", { "data-testid": "audit-row" },
    el("td", { text: when(entry.at_ms) }),
    el("td", {}, pill(entry.action, "muted")),
    el("td", { title: entry.target }, el("code", { text: short(String(entry.target || ""), 10, 6) })),
    el("td", { text: Object.entries(entry.detail || {}).map(([k, v]) => `${k}=${v}`).join(" ") })));
  replace("audit", rows.length ? rows : [empty(4, "no operator acts yet")]);
}

function formValue(form, name) { return (form.elements[name] && form.elements[name].value || "").trim(); }

function wireOperatorForms() {
  $("lift-form").addEventListener("submit", (event) => {
    event.preventDefault();
    operatorAct("/v1/weather/lift", { reason: formValue(event.target, "reason") }, "Weather lift");
  });
  $("ban-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const action = (event.submitter && event.submitter.dataset.action) || "ban";
    operatorAct(`/v1/trust/${action}`, { peer: formValue(event.target, "peer"),
                                         reason: formValue(event.target, "reason") },
                action === "ban" ? "Ban" : "Unban");
  });
  $("revoke-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const listing = encodeURIComponent(formValue(event.target, "listing"));
    operatorAct(`/v1/listings/${listing}/endorse/revoke`, { reason: formValue(event.target, "reason") },
                "Endorsement revocation");
  });
}

// --- polling ---------------------------------------------------------------------------------
async function pollFast() {
  const [status, peers, memory] = await Promise.all([
    api("/v1/status"), api("/v1/peers"), api("/v1/memory/status"),
  ]);
  if (status.ok) {
    state.status = status.data;
    state.lastOk = Date.now();
    renderIdentity();
    renderWeather();
  }
  if (peers.ok) { state.peers = peers.data.peers || []; renderPeers(); }
  if (memory.ok) { state.memory = memory.data; renderMemory(); }
  renderWallet();
  const live = $("live");
  const ok = status.ok && Date.now() - state.lastOk < 3 * FAST_POLL_MS;
  live.textContent = ok ? "live" : `offline: ${status.error || "no answer"}`;
  live.className = ok ? "live ok" : "live down";
  $("updated").textContent = state.lastOk ? `last update ${new Date(state.lastOk).toLocaleTimeString()}` : "never";
}

async function pollSlow() {
  const [listings, trust, wallet, market, purchases, sales, own, audit, channels] = await Promise.all([
    api("/v1/listings"), api("/v1/trust"), api("/v1/wallet"), api("/v1/market/stats"),
    api("/v1/purchases"), api("/v1/sales"), api("/v1/skills/own"), api("/v1/audit?limit=20"),
    api("/v1/wallet/channels"),
  ]);
  if (channels.ok) state.channels = channels.data;
  if (audit.ok) state.audit = audit.data.entries || [];
  if (listings.ok) state.listings = listings.data.listings || [];
  if (trust.ok) state.trust = new Map((trust.data.peers || []).map((p) => [p.peer_id, p]));
  else if (trust.missing) state.trust = null;
  if (wallet.ok) state.wallet = wallet.data;
  if (market.ok) state.market = market.data; else if (market.missing) state.market = null;
  if (purchases.ok) state.purchases = purchases.data.purchases || [];
  if (sales.ok) state.sales = sales.data.sales || [];
  if (own.ok) state.ownSkills = own.data.skills || own.data.own || [];
  renderListings();
  renderPeers();
  renderWallet();
  renderOwnSkills();
  renderMarket();
  renderHistory();
  renderAudit();
}

function loop(poll, intervalMs) {
  const run = async () => {
    if (!document.hidden) {
      try { await poll(); } catch (error) { console.error(error); }
    }
    setTimeout(run, intervalMs);
  };
  run();
}

document.addEventListener("DOMContentLoaded", () => {
  wireOperatorForms();
  loop(pollFast, FAST_POLL_MS);
  loop(pollSlow, SLOW_POLL_MS);
  setInterval(tickWeather, 500);
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) { pollFast(); pollSlow(); }
  });
});
