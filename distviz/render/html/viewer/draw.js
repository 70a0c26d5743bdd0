// @ts-check
// -- camera and drawing ----------------------------------------------------------------------------
var cv = /** @type {HTMLCanvasElement} */ (document.getElementById("canvas")), ctx = cv.getContext("2d");
var cam = {x: 0, y: 0, s: 1}, follow = true, hits = [], hitAt = -1, selected = -1;
var CW = 0, CH = 0, DPR = 1;
function resize() {
  var r = cv.parentElement.getBoundingClientRect();
  DPR = window.devicePixelRatio || 1;
  CW = Math.max(100, r.width | 0); CH = Math.max(100, r.height | 0);
  cv.width = CW * DPR; cv.height = CH * DPR;
  cv.style.width = CW + "px"; cv.style.height = CH + "px";
}
function fitView() {
  var s = Math.min(CW / (L.width + 40), CH / (L.height + 40));
  if (s >= 0.7 || L.summary) { cam.s = Math.min(s, 1.2); cam.x = (L.width - CW / cam.s) / 2; cam.y = -20; return; }
  cam.s = 1;   // too big to read whole: 100 % zoom, where the step (or the first root) is
  var c = focusItem();
  centerOn(c >= 0 ? c : 0);
}
function focusItem() {
  var n = cur >= 0 ? D.en[cur] : -1;
  if (n < 0 && D.roots.length && D.roots[0].length) n = D.roots[0][0];
  return n >= 0 ? L.itemOf[n] : -1;
}
function centerOn(it) {
  if (it < 0) return;
  cam.x = L.X[it] + L.W[it] / 2 - CW / cam.s / 2;
  cam.y = L.Y[it] + L.H[it] / 2 - CH / cam.s / 2;
}
function inView(it) {
  var x = L.X[it] - cam.x, y = L.Y[it] - cam.y;
  return x + L.W[it] > 0 && y + L.H[it] > 0 && x < CW / cam.s && y < CH / cam.s;
}
function visible(it) {
  var sx = (L.X[it] - cam.x) * cam.s, sy = (L.Y[it] - cam.y) * cam.s;
  return sx > 0 && sy > 0 && sx + L.W[it] * cam.s < CW && sy + L.H[it] * cam.s < CH;
}
var KFILL = ["#ffffff", "#ffd8a8", "#b2f2bb", "#add8e6"], KLINE = ["#333333", "#d9480f", "#2b8a3e", "#1864ab"];
var SFILL = [null, "#ffffff", "#fff176", "#bdbdbd", "#ff8a80", "#e5dbff"];
var URGENT = [0, 2, 3, 1, 5, 4];   // draw order of states in a collapsed box: blocked first
function itemStates() {
  var M = L.M, agg = new Uint8Array(M), allDone = new Uint8Array(M).fill(1);
  for (var n = 0; n < N; n++) {
    var it = L.itemOf[n];
    if (it < 0 || !L.items[it].t) continue;
    var s = st[n];
    if (s !== 3) allDone[it] = 0;
    if (URGENT[s] > URGENT[agg[it]]) agg[it] = s;
  }
  for (var k = 0; k < M; k++) if (L.items[k].t && allDone[k]) agg[k] = 3;
  return agg;
}
function fillOf(it, agg) {
  var item = L.items[it], s = item.t ? agg[it] : st[item.n];
  if (s) return SFILL[s];
  return item.t ? "#f1f3f5" : KFILL[KIND[item.n]];
}
function boxLabel(it) {
  var item = L.items[it];
  if (item.t === 2) return workerLines(item.w, item.m);
  if (item.t === 1) return [D.groups[item.g][0], item.m.toLocaleString("en") + " nodes on " + D.workers[item.w]];
  var n = item.n, lines = [title(n)];
  if (NOTE[n] !== undefined) lines.push(NOTE[n]);
  var d = init[n] >= 0 ? init[n] : (cur < 0 || D.ep[cur] === 0 ? D.deps0[n] : -1);
  var dl = d < 0 ? "not reached" : "deps " + d + (deps[n] > 0 ? " (" + deps[n] + " left)" : "");
  if (st[n] === 5) dl += " · never runs";
  lines.push(dl);
  return lines;
}
var WSTATS = {};
D.summary.workers.forEach(function (ws) { WSTATS[ws.worker] = ws; });
function count(n, noun, many) { return n.toLocaleString("en") + " " + (n === 1 ? noun : (many || noun + "s")); }
function ms(us) { return us < 1000 ? Math.round(us) + " µs" : us < 1e6 ? (us / 1000).toPrecision(3) + " ms" : (us / 1e6).toPrecision(3) + " s"; }
function workerLines(w, members) {
  var ws = WSTATS[D.workers[w]], lines = [D.workers[w] + " (rank " + w + ")" + (w === D.initiator ? " · initiator" : "")];
  lines.push(count(ws.nodes, "node") + ": " + count(ws.ops, "op") + ", " + count(ws.sends, "send") + ", " +
             count(ws.recvs, "recv") + ", " + count(ws.leaves, "leaf", "leaves"));
  var calls = [];
  if (ws.calls_made) calls.push("made " + count(ws.calls_made, "RPC call"));
  if (ws.calls_served) calls.push("served " + count(ws.calls_served, "RPC call"));
  if (calls.length) lines.push(calls.join(", "));
  if (ws.busy_us !== null) lines.push("real run: busy " + ms(ws.busy_us) + ", waiting " + ms(ws.waiting_us || 0));
  var wst = workerStates()[w];
  lines.push(cur >= 0 ? count(wst.pending.length, "node") + " waiting, " + wst.executed.toLocaleString("en") + " executed" : "");
  if (members !== ws.nodes) lines.push(members.toLocaleString("en") + " in this view");
  lines.push("(click to expand)");
  return lines;
}
var LINKS = {};
D.summary.links.forEach(function (lk) { LINKS[lk.from + ">" + lk.to] = lk; });
function bytes(n) { return n < 1000 ? n + " B" : n < 1e6 ? (n / 1e3).toPrecision(3) + " kB" : n < 1e9 ? (n / 1e6).toPrecision(3) + " MB" : (n / 1e9).toPrecision(3) + " GB"; }
function linkLabels() {
  var s = cam.s;
  if (s < 0.3) return;
  ctx.font = "11px system-ui, sans-serif"; ctx.fillStyle = "#c2255c"; ctx.textBaseline = "middle";
  for (var e = 0; e < L.E; e++) {
    var a = L.ES[e], b = L.ED[e];
    if (L.ET[e] !== 1 || L.items[a].t !== 2 || L.items[b].t !== 2) continue;
    var lk = LINKS[D.workers[L.items[a].w] + ">" + D.workers[L.items[b].w]];
    if (!lk) continue;
    var p = anchors(a, b), mx = p[0] + (p[2] - p[0]) * 0.3, my = p[1] + (p[3] - p[1]) * 0.3 + (p[0] < p[2] ? -10 : 10);
    if (p[4] === 3) mx += 90;
    var text = count(lk.messages, "gradient message") + " · " + bytes(lk.bytes);
    var tw = ctx.measureText(text).width;
    ctx.fillStyle = "rgba(255,255,255,.85)"; ctx.fillRect((mx - cam.x) * s - tw / 2 - 3, (my - cam.y) * s - 8, tw + 6, 16);
    ctx.fillStyle = "#c2255c"; ctx.fillText(text, (mx - cam.x) * s - tw / 2, (my - cam.y) * s);
  }
  ctx.textBaseline = "top";
}
function draw() {
  var t = performance.now(), s = cam.s, M = L.M, X = L.X, Y = L.Y, W = L.W, H = L.H, it;
  ctx.setTransform(DPR, 0, 0, DPR, 0, 0);
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, CW, CH);
  var x0 = cam.x, y0 = cam.y, x1 = cam.x + CW / s, y1 = cam.y + CH / s;
  // lanes
  ctx.font = "bold 13px system-ui, sans-serif"; ctx.textBaseline = "top";
  D.order.forEach(function (w) {
    if (!L.laneW[w]) return;
    var lx = (L.laneX[w] - x0) * s, lw = L.laneW[w] * s;
    ctx.fillStyle = w === D.initiator ? "#f3f0ff" : "#f8f9fa"; ctx.fillRect(lx, 0, lw, CH);
    ctx.strokeStyle = "#dee2e6"; ctx.strokeRect(lx + 0.5, -1, lw, CH + 2);
    ctx.fillStyle = "#495057";
    ctx.fillText(D.workers[w] + (w === D.initiator ? " · initiator" : ""), Math.max(lx + 4, Math.min(lx + lw - 120, 4)), 4);
  });
  var agg = itemStates(), hs = BH * s;
  if (hs < 2.5 && M > 2000) { drawPixels(agg); finishDraw(t); return; }
  // edges: whole when both ends are in view (or close); else a labelled stub at the end in
  // view, so hundreds of long edges to a shared weight or another worker do not fill the screen
  var E = L.E, ES = L.ES, ED = L.ED, ET = L.ET, type, e, stubs = [];
  ARROWS = s >= 0.4;
  var text = s >= 0.55;
  for (type = 0; type < 2; type++) {
    ctx.beginPath();
    for (e = 0; e < E; e++) {
      if (ET[e] !== type) continue;
      var a = ES[e], b = ED[e];
      var ax = X[a] + W[a] / 2, ay = Y[a] + H[a], bx = X[b] + W[b] / 2, by = Y[b];
      if ((ax < x0 && bx < x0) || (ax > x1 && bx > x1) || (ay < y0 && by < y0) || (ay > y1 && by > y1)) continue;
      var inA = ax >= x0 && ax <= x1 && ay >= y0 && ay <= y1, inB = bx >= x0 && bx <= x1 && by >= y0 && by <= y1;
      var long = L.summary ? false : type ? !(inA && inB) : L.hubIn[b] > HUB && !(inA && inB && M <= 2000);
      if (!long) { edgeOf(a, b); continue; }
      if (!text) continue;
      if (inA) stubs.push([a, b, type, 0]);
      if (inB && type) stubs.push([a, b, type, 1]);
    }
    ctx.setLineDash(type ? [6, 4] : []);
    ctx.strokeStyle = type ? "#c2255c" : "#868e96"; ctx.lineWidth = type ? 1.3 : 1;
    ctx.stroke();
  }
  ctx.setLineDash([]);
  drawStubs(stubs);
  // boxes, one path per fill colour
  var byFill = {};
  for (it = 0; it < M; it++) {
    if (X[it] + W[it] < x0 || X[it] > x1 || Y[it] + H[it] < y0 || Y[it] > y1) continue;
    var f = fillOf(it, agg);
    (byFill[f] || (byFill[f] = [])).push(it);
  }
  var drawText = s >= 0.55, outline = hs >= 6;
  Object.keys(byFill).forEach(function (f) {
    ctx.fillStyle = f; ctx.beginPath();
    byFill[f].forEach(function (k) { ctx.rect((X[k] - x0) * s, (Y[k] - y0) * s, W[k] * s, H[k] * s); });
    ctx.fill();
    if (!outline) return;
    byFill[f].forEach(function (k) {
      var item = L.items[k];
      ctx.strokeStyle = item.t ? "#495057" : (st[item.n] === 4 ? "#c92a2a" : st[item.n] === 5 ? "#7048e8" : KLINE[KIND[item.n]]);
      ctx.lineWidth = item.t ? 2 : 1;
      ctx.strokeRect((X[k] - x0) * s + 0.5, (Y[k] - y0) * s + 0.5, W[k] * s, H[k] * s);
    });
  });
  if (drawText) {
    var fs = Math.max(8, Math.min(13, 11 * s));
    ctx.font = fs + "px system-ui, sans-serif"; ctx.fillStyle = "#212529"; ctx.textBaseline = "top";
    Object.keys(byFill).forEach(function (f) {
      byFill[f].forEach(function (k) {
        var lines = boxLabel(k), px = (X[k] - x0) * s + 4, py = (Y[k] - y0) * s + 3, maxw = W[k] * s - 8;
        for (var l = 0; l < lines.length && (l + 1) * (fs + 2) <= H[k] * s; l++) fitText(lines[l], px, py + l * (fs + 2), maxw);
      });
    });
  }
  linkLabels();
  highlights();
  finishDraw(t);
}
var HUB = 16;
function itemName(it) {
  var item = L.items[it];
  return item.t === 2 ? D.workers[item.w] : item.t === 1 ? D.groups[item.g][0] : title(item.n);
}
// a short edge with a label where the other end is far away: "→ s2.w3", "msg 0:286 → stage0"
function drawStubs(stubs) {
  if (!stubs.length) return;
  var s = cam.s;
  ctx.font = "10px system-ui, sans-serif"; ctx.textBaseline = "middle";
  stubs.forEach(function (st2) {
    var a = st2[0], b = st2[1], msg = st2[2], atB = st2[3], x, y, label, color = msg ? "#c2255c" : "#868e96";
    var note = msg && NOTE[L.items[a].n] ? NOTE[L.items[a].n].split(" · ")[0] + " " : "";
    if (!atB) {
      x = (L.X[a] + L.W[a] / 2 - cam.x) * s; y = (L.Y[a] + L.H[a] - cam.y) * s;
      label = msg ? note + "→ " + D.workers[L.items[b].w] : "→ " + itemName(b);
      ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x, y + 12); ARROWS = true; arrowHead(x, y, x, y + 12);
    } else {
      x = (L.X[b] + L.W[b] / 2 - cam.x) * s; y = (L.Y[b] - cam.y) * s;
      label = "← " + D.workers[L.items[a].w] + (note ? " " + note.trim() : "");
      ctx.beginPath(); ctx.moveTo(x, y - 12); ctx.lineTo(x, y); ARROWS = true; arrowHead(x, y - 12, x, y);
      y -= 24;
    }
    ctx.setLineDash(msg ? [4, 3] : []); ctx.strokeStyle = color; ctx.lineWidth = 1.2; ctx.stroke(); ctx.setLineDash([]);
    ctx.fillStyle = color; ctx.fillText(label, x + 4, y + 8);
  });
  ctx.textBaseline = "top";
}
var ARROWS = false;
// where an edge between items a and b starts and ends (world coordinates) and how it bends:
// 0 straight down, 1 a curve back up, 2 sideways (the summary: two parallel lines each way)
function anchors(a, b) {
  if (L.summary) {
    var aLeft = L.X[a] < L.X[b], off = aLeft ? -12 : 12;
    if (L.X[a] === L.X[b]) return [L.X[a] + L.W[a], L.Y[a] + L.H[a] / 2, L.X[b] + L.W[b], L.Y[b] + L.H[b] / 2, 3];
    return [aLeft ? L.X[a] + L.W[a] : L.X[a], L.Y[a] + L.H[a] / 2 + off,
            aLeft ? L.X[b] : L.X[b] + L.W[b], L.Y[b] + L.H[b] / 2 + off, 2];
  }
  var ax = L.X[a] + L.W[a] / 2, ay = L.Y[a] + L.H[a], bx = L.X[b] + L.W[b] / 2, by = L.Y[b];
  return [ax, ay, bx, by, by < ay ? 1 : 0];
}
function edgeOf(a, b) {
  var p = anchors(a, b), s = cam.s;
  edgePath((p[0] - cam.x) * s, (p[1] - cam.y) * s, (p[2] - cam.x) * s, (p[3] - cam.y) * s, p[4], a < b);
}
function edgePath(ax, ay, bx, by, how, fwd) {
  var up = how === 1;
  if (how === 3) {   // two workers in the summary's column: a bulge to the right
    ctx.moveTo(ax, ay);
    ctx.bezierCurveTo(ax + 120, ay, bx + 120, by, bx, by);
    if (ARROWS) arrowHead(bx + 120, by, bx, by);
    return;
  }
  ctx.moveTo(ax, ay);
  var fx = ax, fy = ay;
  if (!up) ctx.lineTo(bx, by);
  else {
    var bend = (fwd ? 1 : -1) * Math.max(40, Math.abs(bx - ax) * 0.15);
    ctx.bezierCurveTo(ax + bend, ay + 60, bx + bend, by - 60, bx, by);
    fx = bx + bend; fy = by - 60;
  }
  if (ARROWS) arrowHead(fx, fy, bx, by);
}
function arrowHead(fx, fy, bx, by) {
  var dx = bx - fx, dy = by - fy, d = Math.sqrt(dx * dx + dy * dy) || 1, k = 7 / d;
  ctx.moveTo(bx - dx * k - dy * k * 0.5, by - dy * k + dx * k * 0.5);
  ctx.lineTo(bx, by);
  ctx.lineTo(bx - dx * k + dy * k * 0.5, by - dy * k - dx * k * 0.5);
}
function fitText(text, x, y, maxw) {
  if (maxw < 10) return;
  if (ctx.measureText(text).width > maxw) {
    var k = Math.max(1, Math.floor(text.length * maxw / ctx.measureText(text).width) - 1);
    text = text.slice(0, k) + "…";
  }
  ctx.fillText(text, x, y);
}
function drawPixels(agg) {
  var w = CW * DPR | 0, h = CH * DPR | 0, img = ctx.getImageData(0, 0, w, h), px = new Uint32Array(img.data.buffer);
  var s = cam.s * DPR, X = L.X, Y = L.Y, W = L.W;
  var cols = {};
  function rgba(hex) {
    var c = cols[hex];
    if (c === undefined) {
      var v = parseInt(hex.slice(1), 16);
      c = cols[hex] = (0xff000000 | ((v & 0xff) << 16) | (v & 0xff00) | ((v >> 16) & 0xff)) >>> 0;
    }
    return c;
  }
  var dark = rgba("#495057");
  for (var it = 0; it < L.M; it++) {
    var sx = ((X[it] - cam.x) * s) | 0, sy = ((Y[it] - cam.y) * s) | 0;
    if (sy < 0 || sy >= h) continue;
    var ex = Math.min(w, sx + Math.max(1, (W[it] * s) | 0));
    if (ex <= 0 || sx >= w) continue;
    var item = L.items[it], f = fillOf(it, agg), c = (f === "#ffffff" || f === "#f1f3f5") ? dark : rgba(f);
    if (!item.t && !st[item.n]) c = rgba(KLINE[KIND[item.n]]);
    var row = sy * w;
    for (var x = Math.max(0, sx); x < ex; x++) px[row + x] = c;
  }
  ctx.putImageData(img, 0, 0);
  highlights();
}
function ring(it, color, width) {
  if (it < 0) return;
  var s = cam.s, x = (L.X[it] - cam.x) * s, y = (L.Y[it] - cam.y) * s, w = Math.max(6, L.W[it] * s), h = Math.max(6, L.H[it] * s);
  ctx.strokeStyle = color; ctx.lineWidth = width;
  ctx.strokeRect(x - width / 2 - 1, y - width / 2 - 1, w + width + 2, h + width + 2);
}
function highlights() {
  ctx.setTransform(DPR, 0, 0, DPR, 0, 0);
  if (cur >= 0 && D.em[cur] >= 0) {
    var m = D.msgs[D.em[cur]], a = m[4] >= 0 ? L.itemOf[m[4]] : -1, b = m[3] >= 0 ? L.itemOf[m[3]] : -1;
    if (a >= 0 && b >= 0) {
      var s = cam.s;
      ctx.beginPath();
      edgeOf(a, b);
      ARROWS = true;
      ctx.setLineDash([8, 5]); ctx.strokeStyle = "#e03131"; ctx.lineWidth = 4; ctx.stroke(); ctx.setLineDash([]);
    }
  }
  if (D.critical.nodes.length) critical();
  hits.forEach(function (n) { ring(L.itemOf[n], "#1c7ed6", 3); });
  if (hitAt >= 0 && hits.length) ring(L.itemOf[hits[hitAt]], "#1c7ed6", 7);
  if (selected >= 0) ring(L.itemOf[selected], "#212529", 2);
  var c = cur >= 0 ? D.en[cur] : -1;
  if (c >= 0) ring(L.itemOf[c], "#e03131", 4);
}
function critical() {   // the real run's critical path, outlined in violet at every step
  var s = cam.s;
  D.critical.nodes.forEach(function (n) {
    var it = L.itemOf[n];
    if (it >= 0 && !L.items[it].t && L.X[it] + L.W[it] >= cam.x && L.X[it] <= cam.x + CW / s) ring(it, "#7048e8", 2);
  });
  ctx.beginPath();
  ARROWS = s >= 0.4;
  D.critical.messages.forEach(function (r) {
    var a = L.itemOf[r], b = PAIR[r] >= 0 ? L.itemOf[PAIR[r]] : -1;
    if (a >= 0 && b >= 0 && a !== b && (L.summary || (inView(a) && inView(b)))) edgeOf(a, b);
  });
  ctx.strokeStyle = "#7048e8"; ctx.lineWidth = 3; ctx.stroke();
}
document.body.dataset.critical = String(D.critical.nodes.length + D.critical.messages.length);
var painted = false;
function finishDraw(t) {
  document.body.dataset.drawMs = String(Math.round((performance.now() - t) * 10) / 10);
  if (!painted) {
    painted = true;
    requestAnimationFrame(function () { document.body.dataset.paintMs = String(Math.round(performance.now())); });
  }
}
