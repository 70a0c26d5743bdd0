/* distviz HTML viewer: the graph on a canvas, the replay step by step.
 *
 * Reads the JSON in #distviz-data (see distviz/render/html_data.py) and the event sentences in
 * #distviz-texts. No network, no library: a layered layout computed here (lanes = workers, the
 * initiator first; rows = gradient flow), drawn on one <canvas> with culling and three levels of
 * detail (a pixel map when zoomed far out, boxes, boxes with text), so 100,000 nodes pan and
 * zoom smoothly. The replay state is kept in typed arrays and moved one step at a time (an undo
 * log goes back), so a step costs what it changes.
 *
 * After every update document.body.dataset holds: step, current (node id), currentIndex, text,
 * action, message, view, hits, selected, and for graphs of at most 2000 nodes pending and
 * initial (JSON {node id: count}); paintMs (time to the first drawn frame) once painted.
 */
(function () {
  "use strict";
  var T0 = performance.now();
  var D = JSON.parse(document.getElementById("distviz-data").textContent);
  var TEXTS = null;
  function textOf(k) {
    if (TEXTS === null) TEXTS = JSON.parse(document.getElementById("distviz-texts").textContent).split("\n");
    return TEXTS[k] || "";
  }
  var N = D.kind.length, NW = D.workers.length, NE = D.ea.length, LAST = NE - 1;
  var KIND = D.kind, WK = D.worker, OFF = D.off, NXT = D.next, GRP = D.group, NG = D.groups.length;
  var A = {}, i, j;
  D.actions.forEach(function (a, k) { A[a] = k; });
  var NOTE = {};
  for (i = 0; i < D.notes.length; i += 2) NOTE[D.notes[i]] = D.notes[i + 1];
  var PAIR = new Int32Array(N).fill(-1);
  for (i = 0; i < D.pairs.length; i += 2) { PAIR[D.pairs[i]] = D.pairs[i + 1]; PAIR[D.pairs[i + 1]] = D.pairs[i]; }
  var ROOTSET = new Uint8Array(N);
  D.roots.forEach(function (rs) { rs.forEach(function (r) { ROOTSET[r] = 1; }); });
  var CRIT = new Uint8Array(N), CRITMSG = new Uint8Array(N);   // the real run's critical path
  D.critical.nodes.forEach(function (n) { CRIT[n] = 1; });
  D.critical.messages.forEach(function (r) { CRITMSG[r] = 1; });
  var LANE = new Int32Array(NW);
  D.order.forEach(function (w, k) { LANE[w] = k; });

  function title(n) {
    return D.names[D.name[n]] + (D.seq[n] >= 0 ? " #" + D.seq[n] : "");
  }

  // -- the replay state -----------------------------------------------------------------------
  // st: 0 untouched, 1 waiting, 2 ready, 3 executed, 4 blocked send, 5 never runs
  var deps = new Int32Array(N), init = new Int32Array(N).fill(-1), st = new Uint8Array(N);
  var cur = -1, undo = [];
  function setN(u, n, d, s, ini) {
    u.push(n, deps[n], st[n], init[n]);
    deps[n] = d; st[n] = s; init[n] = ini;
  }
  function apply(k) {
    var u = [], a = D.ea[k], n = D.en[k], ch = D.ed[k], x, c;
    if (a === A.pass_start) {
      for (x = 0; x < N; x++) if (st[x] || deps[x] || init[x] >= 0) setN(u, x, 0, 0, -1);
    }
    if (ch) {
      var dd = ch[0], dec = ch[1], pu = ch[2];
      for (j = 0; j < dd.length; j += 2) { x = dd[j]; c = dd[j + 1]; setN(u, x, c, c > 0 ? 1 : st[x], c); }
      for (j = 0; j < dec.length; j += 2) {
        x = dec[j]; c = dec[j + 1];
        setN(u, x, c, c > 0 ? 1 : (st[x] === 1 ? 0 : st[x]), init[x]);
      }
      for (j = 0; j < pu.length; j++) { x = pu[j]; setN(u, x, deps[x], 2, init[x]); }
    }
    if (a === A.call_start && n >= 0) setN(u, n, deps[n], 2, init[n]);
    if ((a === A.execute || a === A.accumulate) && n >= 0) setN(u, n, 0, 3, init[n]);
    if (a === A.hang && D.hang) {
      D.hang.blocked.forEach(function (b) { setN(u, b, deps[b], 4, init[b]); });
      for (x = 0; x < N; x++) if (st[x] !== 3 && st[x] !== 4) setN(u, x, deps[x], 5, init[x]);
    }
    undo.push(u);
    cur = k;
  }
  function back() {
    var u = undo.pop();
    for (var q = u.length - 4; q >= 0; q -= 4) {
      var n = u[q]; deps[n] = u[q + 1]; st[n] = u[q + 2]; init[n] = u[q + 3];
    }
    cur--;
  }
  function moveTo(k) {
    k = Math.max(0, Math.min(LAST, k | 0));
    while (cur < k) apply(cur + 1);
    while (cur > k) back();
  }

  // -- views: scope and collapse ----------------------------------------------------------------
  var view = {scope: "all", worker: -1, call: -1, focus: -1, depth: 2};
  var cw = new Uint8Array(NW);              // collapsed workers
  var cg = new Set();                       // collapsed (group * NW + worker)
  var inScope = null;                       // Uint8Array or null (every node)
  var scopeNote = "";

  function groupKeys() {
    var keys = new Set();
    for (var n = 0; n < N; n++) keys.add(GRP[n] * NW + WK[n]);
    return keys;
  }
  function setDetail(d) {
    cg = d === "calls" ? groupKeys() : new Set();
    cw.fill(d === "summary" ? 1 : 0);
    if (d === "summary") setScope("all", -1);
    relayout(true);
  }
  function detailName() {
    var all = true, any = false;
    for (var w = 0; w < NW; w++) { if (cw[w]) any = true; else all = false; }
    if (all) return "summary";
    if (cg.size) return "calls";
    return any ? "mixed" : "full";
  }
  function neighbourhood(c, depth) {
    var preds = new Int32Array(N + 1), p, q;
    for (q = 0; q < NXT.length; q++) preds[NXT[q] + 1]++;
    for (q = 0; q < N; q++) preds[q + 1] += preds[q];
    var fill = preds.slice(), src = new Int32Array(NXT.length);
    for (p = 0; p < N; p++) for (q = OFF[p]; q < OFF[p + 1]; q++) src[fill[NXT[q]]++] = p;
    var dist = new Int32Array(N).fill(-1), order = [c];
    dist[c] = 0;
    for (var k = 0; k < order.length; k++) {
      var x = order[k];
      if (dist[x] >= depth) continue;
      var near = [];
      for (q = OFF[x]; q < OFF[x + 1]; q++) near.push(NXT[q]);
      for (q = preds[x]; q < preds[x + 1]; q++) near.push(src[q]);
      if (PAIR[x] >= 0) near.push(PAIR[x]);
      if (x !== c && (KIND[x] === 3 || near.length > 32)) continue;   // leaves and hubs: shown, not walked
      for (q = 0; q < near.length; q++) if (dist[near[q]] < 0) { dist[near[q]] = dist[x] + 1; order.push(near[q]); }
    }
    return order;
  }
  function setScope(kind, arg, depth) {
    view.scope = kind; view.worker = -1; view.call = -1; view.focus = -1;
    inScope = null; scopeNote = "";
    var n, count = 0;
    if (kind === "worker") {
      view.worker = arg; inScope = new Uint8Array(N);
      for (n = 0; n < N; n++) if (WK[n] === arg) { inScope[n] = 1; count++; }
      scopeNote = "worker " + D.workers[arg];
    } else if (kind === "call") {
      view.call = arg; inScope = new Uint8Array(N);
      var want = -1;
      for (n = 0; n < NG; n++) if (D.groups[n][2] === arg) want = n;
      for (n = 0; n < N; n++) if (GRP[n] === want && want >= 0) {
        inScope[n] = 1;
        for (j = OFF[n]; j < OFF[n + 1]; j++) if (KIND[NXT[j]] === 3 && WK[NXT[j]] === WK[n]) inScope[NXT[j]] = 1;
      }
      for (n = 0; n < N; n++) count += inScope[n];
      scopeNote = want >= 0 ? D.groups[want][1] : "RPC call " + arg + " (no nodes)";
    } else if (kind === "focus") {
      view.focus = arg; view.depth = depth; inScope = new Uint8Array(N);
      var near = neighbourhood(arg, depth);
      near.forEach(function (x) { inScope[x] = 1; });
      count = near.length;
      scopeNote = "the nodes within " + depth + " edge" + (depth === 1 ? "" : "s") + " of " + D.ids[arg];
    }
    if (inScope) { scopeNote += " (" + count.toLocaleString("en") + " of " + N.toLocaleString("en") + " nodes)"; cw.fill(0); }
  }

  // -- layout: items, layers, lanes -----------------------------------------------------------------
  var BW = 180, BH = 46, GX = 24, GY = 24, LANEGAP = 90, TOP = 60, WBOX = 420;
  var L = null;   // the current layout

  function relayout(fit) {
    var t = performance.now();
    var itemOf = new Int32Array(N).fill(-1), items = [], key2item = new Map(), n, w, it;
    for (n = 0; n < N; n++) {
      if (inScope && !inScope[n]) continue;
      w = WK[n];
      var key = cw[w] ? -2 - w : (cg.has(GRP[n] * NW + w) ? GRP[n] * NW + w : -1);
      if (key === -1) { itemOf[n] = items.length; items.push({t: 0, n: n, w: w, m: 1}); continue; }
      it = key2item.get(key);
      if (it === undefined) {
        it = items.length; key2item.set(key, it);
        items.push({t: key < -1 ? 2 : 1, n: n, w: w, m: 0, g: GRP[n]});
      }
      items[it].m++;
      itemOf[n] = it;
    }
    var M = items.length;
    // edges between items: local (gradient flow) and messages (recv -> send)
    var es = [], ed = [], et = [], seen = new Set();
    function edge(a, b, type) {
      if (a < 0 || b < 0 || a === b) return;
      // a collapsed worker next to expanded ones: its thousands of edges would hide the rest
      if ((items[a].t === 2) !== (items[b].t === 2)) return;
      if (items[a].t || items[b].t) { var k2 = (a * M + b) * 2 + type; if (seen.has(k2)) return; seen.add(k2); }
      es.push(a); ed.push(b); et.push(type);
    }
    for (n = 0; n < N; n++) {
      var a = itemOf[n];
      if (a < 0) continue;
      var prev = -2;
      for (j = OFF[n]; j < OFF[n + 1]; j++) { var b = itemOf[NXT[j]]; if (b !== prev) edge(a, b, 0); prev = b; }
      if (KIND[n] === 2 && PAIR[n] >= 0) edge(a, itemOf[PAIR[n]], 1);
    }
    var E = es.length, ES = Int32Array.from(es), ED = Int32Array.from(ed), ET = Uint8Array.from(et);
    var indegLocal = new Int32Array(M);   // a hub (a weight every micro-batch uses) gets stubs
    for (j = 0; j < E; j++) if (!ET[j]) indegLocal[ED[j]]++;
    // layers: longest path from the sources (Kahn); a cycle (made by collapsing) is broken at
    // its first item in index order; collapsed workers sit in the first row of their lane
    var indeg = new Int32Array(M), layer = new Int32Array(M), outOff = new Int32Array(M + 1), outs = new Int32Array(E);
    for (j = 0; j < E; j++) if (items[ES[j]].t !== 2 && items[ED[j]].t !== 2) { outOff[ES[j] + 1]++; indeg[ED[j]]++; }
    for (j = 0; j < M; j++) outOff[j + 1] += outOff[j];
    var fill = outOff.slice(0, M);
    for (j = 0; j < E; j++) if (items[ES[j]].t !== 2 && items[ED[j]].t !== 2) outs[fill[ES[j]]++] = ED[j];
    var queue = new Int32Array(M), qh = 0, qt = 0, done = new Uint8Array(M), scan = 0;
    for (j = 0; j < M; j++) if (indeg[j] === 0) { queue[qt++] = j; done[j] = 1; }
    while (qt < M) {
      while (qh < qt) {
        var x = queue[qh++], lx = layer[x] + 1;
        for (var q = outOff[x]; q < outOff[x + 1]; q++) {
          var y = outs[q];
          if (done[y]) continue;
          if (layer[y] < lx) layer[y] = lx;
          if (--indeg[y] === 0) { queue[qt++] = y; done[y] = 1; }
        }
      }
      while (scan < M && done[scan]) scan++;
      if (scan < M) { queue[qt++] = scan; done[scan] = 1; }
    }
    var allWorkers = true;
    for (j = 0; j < NW; j++) if (!cw[j]) allWorkers = false;
    // a collapsed worker sits in its lane's first row; in the summary the initiator sits above
    // the others, so the messages each way between it and them do not cross
    for (j = 0; j < M; j++) if (items[j].t === 2) layer[j] = allWorkers && items[j].w !== D.initiator ? 3 : 0;
    // order inside each (lane, layer): by the mean slot of the predecessors placed so far
    var nLayers = 0;
    for (j = 0; j < M; j++) if (layer[j] + 1 > nLayers) nLayers = layer[j] + 1;
    var slot = new Float64Array(M).fill(-1), rank = new Float64Array(M), cnt = new Int32Array(M);
    var byLayer = [];
    for (j = 0; j < nLayers; j++) byLayer.push([]);
    for (j = 0; j < M; j++) byLayer[layer[j]].push(j);
    var predSum = new Float64Array(M);
    var laneSlots = new Int32Array(NW);
    for (var Ly = 0; Ly < nLayers; Ly++) {
      var row = byLayer[Ly];
      for (q = 0; q < row.length; q++) { var r = row[q]; rank[r] = cnt[r] ? predSum[r] / cnt[r] : 1e9 + r; }
      row.sort(function (p1, p2) { return LANE[items[p1].w] - LANE[items[p2].w] || rank[p1] - rank[p2] || p1 - p2; });
      var lastLane = -1, s = 0;
      for (q = 0; q < row.length; q++) {
        r = row[q];
        var lane = LANE[items[r].w];
        if (lane !== lastLane) { s = 0; lastLane = lane; }
        slot[r] = s++;
        if (s > laneSlots[items[r].w]) laneSlots[items[r].w] = s;
        for (var o = outOff[r]; o < outOff[r + 1]; o++) { predSum[outs[o]] += slot[r]; cnt[outs[o]]++; }
      }
    }
    // coordinates: lanes as wide as their widest row
    var X = new Float32Array(M), Y = new Float32Array(M), W = new Float32Array(M), H = new Float32Array(M);
    var laneX = new Float64Array(NW), laneW = new Float64Array(NW), xx = 0, inner = new Float64Array(NW);
    for (j = 0; j < M; j++) {
      it = items[j];
      W[j] = it.t === 2 ? WBOX : it.t === 1 ? BW + 40 : BW;
      H[j] = it.t === 2 ? 3 * BH : it.t === 1 ? BH + 18 : BH;
      X[j] = slot[j] * (BW + 40 + GX);
      if (X[j] + W[j] > inner[it.w]) inner[it.w] = X[j] + W[j];
    }
    D.order.forEach(function (w2) {
      laneX[w2] = xx;
      laneW[w2] = inner[w2] ? inner[w2] + 2 * GX : 0;
      xx += laneW[w2] + (inner[w2] ? LANEGAP : 0);
    });
    for (j = 0; j < M; j++) {
      X[j] += laneX[items[j].w] + GX;
      Y[j] = TOP + layer[j] * (BH + 18 + GY);
    }
    if (allWorkers) {   // the summary: the initiator on the left, the others in a column
      var others = 0, pitch = 3 * BH + 50;
      for (j = 0; j < M; j++) if (items[j].w !== D.initiator) others++;
      var k2 = 0;
      D.order.forEach(function (w2) {
        for (var q2 = 0; q2 < M; q2++) {
          if (items[q2].w !== w2) continue;
          if (w2 === D.initiator) { X[q2] = 20; Y[q2] = TOP + Math.max(0, others - 1) * pitch / 2; }
          else { X[q2] = 20 + WBOX + 300; Y[q2] = TOP + k2++ * pitch; }
        }
      });
      laneW.fill(0);
      xx = 40 + 2 * WBOX + 300 + (others > 1 ? 130 : 0);
      nLayers = Math.max(1, others);
    }
    L = {items: items, itemOf: itemOf, M: M, E: E, ES: ES, ED: ED, ET: ET, X: X, Y: Y, W: W, H: H,
         laneX: laneX, laneW: laneW, width: Math.max(xx, 1), hubIn: indegLocal,
         height: allWorkers ? TOP + nLayers * (3 * BH + 50) : TOP + nLayers * (BH + 18 + GY) + BH, summary: allWorkers,
         ms: performance.now() - t};
    if (fit) fitView();
    draw();
    panel();
  }

  // -- camera and drawing ----------------------------------------------------------------------------
  var cv = document.getElementById("canvas"), ctx = cv.getContext("2d");
  var cam = {x: 0, y: 0, s: 1}, follow = true, hits = [], hitAt = -1, selected = -1;
  var CW = 0, CH = 0, DPR = 1;
  function resize() {
    var r = cv.parentNode.getBoundingClientRect();
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
    var waiting = 0, done = 0;
    for (var n = 0; n < N; n++) if (WK[n] === w) { if (st[n] === 3) done++; else if (deps[n] > 0) waiting++; }
    lines.push(cur >= 0 ? count(waiting, "node") + " waiting, " + done.toLocaleString("en") + " executed" : "");
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

  // -- the panels: step text, pending per worker, node details, hang, agreement ----------------------
  var $ = function (id) { return document.getElementById(id); };
  function li(ul, text, cls) {
    var e = document.createElement("li"); e.textContent = text;
    if (cls) e.className = cls;
    ul.appendChild(e); return e;
  }
  function pendingLine(n) {
    var extra = NOTE[n] && NOTE[n].indexOf("msg ") === 0 ? " (" + NOTE[n].split(" · ")[0] + ")" : "";
    return title(n) + extra + ": " + deps[n] + " of " + init[n] + " deps left";
  }
  function panel() {
    var box = $("workers"); box.textContent = "";
    var waiting = [], ready = [], executed = new Int32Array(NW);
    for (var w = 0; w < NW; w++) { waiting.push([]); ready.push([]); }
    for (var n = 0; n < N; n++) {
      var s2 = st[n];
      if (s2 === 3) executed[WK[n]]++;
      else if (deps[n] > 0 && s2 !== 5) waiting[WK[n]].push(n);
      else if (s2 === 2) ready[WK[n]].push(n);
    }
    D.order.forEach(function (w2) {
      var h = document.createElement("h4");
      h.textContent = D.workers[w2] + (w2 === D.initiator ? " · initiator" : "");
      var tog = document.createElement("button");
      tog.textContent = cw[w2] ? "expand" : "collapse"; tog.className = "small";
      tog.onclick = function () { cw[w2] = cw[w2] ? 0 : 1; relayout(false); };
      h.appendChild(tog);
      box.appendChild(h);
      var ul = document.createElement("ul");
      waiting[w2].slice(0, 12).forEach(function (x) { li(ul, pendingLine(x)).title = D.ids[x]; });
      ready[w2].slice(0, 12).forEach(function (x) { li(ul, title(x) + ": ready").title = D.ids[x]; });
      if (waiting[w2].length > 12 || ready[w2].length > 12)
        li(ul, "(" + waiting[w2].length + " waiting, " + ready[w2].length + " ready in all)");
      if (!waiting[w2].length && !ready[w2].length) li(ul, "nothing pending");
      li(ul, executed[w2].toLocaleString("en") + " executed");
      box.appendChild(ul);
    });
    var hb = $("hang"); hb.textContent = "";
    if (D.hang && cur >= 0 && D.ea.slice(0, cur + 1).indexOf(A.hang) >= 0) {
      var p = document.createElement("p"); p.textContent = "The replay hangs: " + D.hang.summary; hb.appendChild(p);
      var ul2 = document.createElement("ul");
      D.hang.blockedText.forEach(function (b) { li(ul2, "blocked send: " + b); });
      D.hang.neverText.forEach(function (b) { li(ul2, "never runs: " + b); });
      D.hang.fixes.forEach(function (f) { li(ul2, "fix: " + f); });
      hb.appendChild(ul2);
    }
    details();
    $("viewnote").textContent = viewText();
    document.body.dataset.view = detailName() + ":" + view.scope;
    var d = detailName();
    viewSel.value = inScope ? (view.worker >= 0 ? "w" + view.worker : view.call >= 0 ? "call" : viewSel.value) : (d === "mixed" ? "full" : d);
  }
  function viewText() {
    var d = detailName();
    var words = {summary: "the worker summary", calls: "one box per RPC call", full: "every node", mixed: "some workers collapsed"}[d];
    return "view: " + (scopeNote || "the whole graph (" + N.toLocaleString("en") + " nodes)") + ", " + words +
      " · " + L.M.toLocaleString("en") + " boxes";
  }
  function details() {
    var el = $("details"); el.textContent = "";
    if (selected < 0) return;
    var n = selected, ul = document.createElement("ul");
    li(ul, D.ids[n]);
    li(ul, ["op", "SendRpcBackward", "RecvRpcBackward", "leaf (AccumulateGrad)"][KIND[n]] + " on " + D.workers[WK[n]]);
    if (NOTE[n]) li(ul, NOTE[n]);
    li(ul, init[n] >= 0 ? "deps " + init[n] + ", " + deps[n] + " left" : (D.deps0[n] >= 0 ? "deps " + D.deps0[n] : "not reached"));
    li(ul, ["untouched", "waiting", "ready", "executed", "blocked send", "never runs"][st[n]]);
    li(ul, D.groups[GRP[n]][1]);
    el.appendChild(ul);
    [["focus here", function () { setScope("focus", n, 2); relayout(true); }],
     ["its worker only", function () { setScope("worker", WK[n]); relayout(true); }],
     ["collapse its RPC call", function () { cg.add(GRP[n] * NW + WK[n]); relayout(false); }]].forEach(function (b) {
      var btn = document.createElement("button"); btn.textContent = b[0]; btn.className = "small"; btn.onclick = b[1]; el.appendChild(btn);
    });
  }

  // -- stepping ------------------------------------------------------------------------------------------
  var slider = $("slider");
  slider.max = String(Math.max(LAST, 0));
  function show(k) {
    var t = performance.now();
    if (NE) moveTo(k);
    var n = cur >= 0 ? D.en[cur] : -1;
    if (follow && n >= 0 && L.itemOf[n] >= 0 && !visible(L.itemOf[n])) {
      if (cam.s < 0.5) cam.s = 1;
      centerOn(L.itemOf[n]);
    }
    draw();
    panel();
    var text = cur >= 0 ? textOf(cur) : "(no events)";
    $("text").textContent = cur >= 0 ? "step " + cur + "/" + LAST + ": " + text : text;
    slider.value = String(Math.max(cur, 0));
    var b = document.body.dataset;
    b.step = String(cur); b.current = n >= 0 ? D.ids[n] : ""; b.currentIndex = String(n);
    b.text = text; b.action = cur >= 0 ? D.actions[D.ea[cur]] : "";
    b.message = cur >= 0 && D.em[cur] >= 0 ? D.msgs[D.em[cur]][0] : "";
    if (N <= 2000) {
      var pend = {}, ini = {};
      for (var x = 0; x < N; x++) { if (deps[x] > 0) pend[D.ids[x]] = deps[x]; if (init[x] >= 0) ini[D.ids[x]] = init[x]; }
      b.pending = JSON.stringify(pend); b.initial = JSON.stringify(ini);
    }
    var want = "#step=" + cur;
    if (location.hash !== want && !/^#(keys|search)=/.test(location.hash)) {
      try { history.replaceState(null, "", want); } catch (err) { /* file: URLs in some browsers */ }
    }
    b.stepMs = String(Math.round((performance.now() - t) * 10) / 10);
  }

  // -- search ----------------------------------------------------------------------------------------------
  function search(q) {
    q = q.trim().toLowerCase(); hits = []; hitAt = -1;
    if (q) {
      var vars = {};
      D.notes.forEach(function (v, k) { if (k % 2) vars[D.notes[k - 1]] = v.toLowerCase(); });
      for (var n = 0; n < N && hits.length < 5000; n++) {
        var name = D.names[D.name[n]].toLowerCase();
        if (D.ids[n].toLowerCase().indexOf(q) >= 0 || name === q || name.indexOf(q) >= 0 ||
            (vars[n] && (vars[n].indexOf("= " + q) >= 0 || vars[n].indexOf("root: " + q) >= 0))) hits.push(n);
      }
      // exact variable names first: the leaf or root a user names
      hits.sort(function (a, b) { return exact(b, q) - exact(a, q) || a - b; });
    }
    document.body.dataset.hits = String(hits.length);
    $("hits").textContent = q ? (hits.length >= 5000 ? "5000+" : hits.length) + " found" : "";
    if (hits.length) nextHit();
    else { draw(); }
  }
  function exact(n, q) {
    return (KIND[n] === 3 && D.names[D.name[n]].toLowerCase() === q) || (NOTE[n] || "").toLowerCase().split(" · ").indexOf("root: " + q) >= 0 ? 1 : 0;
  }
  function nextHit() {
    if (!hits.length) return;
    hitAt = (hitAt + 1) % hits.length;
    var n = hits[hitAt];
    if (L.itemOf[n] < 0) { setScope("all", -1); }
    if (cw[WK[n]] || cg.has(GRP[n] * NW + WK[n]) || inScope) {
      cw[WK[n]] = 0; cg.delete(GRP[n] * NW + WK[n]);
      relayout(false);
    }
    selected = n;
    if (cam.s < 0.8) cam.s = 1;
    centerOn(L.itemOf[n]);
    draw(); panel();
    document.body.dataset.selected = D.ids[n];
    var it = L.itemOf[n];
    document.body.dataset.hitBox = [Math.round((L.X[it] - cam.x) * cam.s), Math.round((L.Y[it] - cam.y) * cam.s),
      Math.round(L.W[it] * cam.s), Math.round(L.H[it] * cam.s)].join(",");
  }

  // -- input -------------------------------------------------------------------------------------------------
  function zoomAt(f, mx, my) {
    var wx = cam.x + mx / cam.s, wy = cam.y + my / cam.s;
    cam.s = Math.max(1e-4, Math.min(4, cam.s * f));
    cam.x = wx - mx / cam.s; cam.y = wy - my / cam.s;
    draw();
  }
  function key(k) {
    if (k === "n" || k === "ArrowRight" || k === " ") show(cur + 1);
    else if (k === "p" || k === "ArrowLeft") show(cur - 1);
    else if (k === "Home" || k === "g") show(0);
    else if (k === "End" || k === "G") show(LAST);
    else if (k === "s") setDetail("summary");
    else if (k === "c") setDetail("calls");
    else if (k === "f") { setScope("all", -1); setDetail("full"); }
    else if (k === "0") { fitView(); draw(); }
    else if (k === "+" || k === "=") zoomAt(1.25, CW / 2, CH / 2);
    else if (k === "-") zoomAt(0.8, CW / 2, CH / 2);
    else if (k === ".") { centerOn(focusItem()); draw(); }
    else if (k === "/") $("search").focus();
    else if (k === "?") $("help").classList.toggle("open");
    else if (k === "l") $("legend").classList.toggle("open");
    else if (k === "Escape") { $("help").classList.remove("open"); selected = -1; hits = []; draw(); panel(); }
    else return false;
    return true;
  }
  document.addEventListener("keydown", function (e) {
    var tag = e.target && e.target.tagName;
    if ((tag === "INPUT" && e.target.type !== "range") || tag === "SELECT") {
      if (e.key === "Escape") e.target.blur();
      return;
    }
    if (key(e.key)) e.preventDefault();
  });
  var drag = null;
  cv.addEventListener("mousedown", function (e) { drag = {x: e.clientX, y: e.clientY, cx: cam.x, cy: cam.y, moved: false}; });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    cam.x = drag.cx - dx / cam.s; cam.y = drag.cy - dy / cam.s; draw();
  });
  window.addEventListener("mouseup", function (e) {
    if (drag && !drag.moved) click(e);
    drag = null;
  });
  cv.addEventListener("wheel", function (e) {
    e.preventDefault();
    var r = cv.getBoundingClientRect();
    zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, {passive: false});
  function itemAt(mx, my) {
    var wx = cam.x + mx / cam.s, wy = cam.y + my / cam.s;
    for (var it = 0; it < L.M; it++) if (wx >= L.X[it] && wx <= L.X[it] + L.W[it] && wy >= L.Y[it] && wy <= L.Y[it] + L.H[it]) return it;
    return -1;
  }
  function click(e) {
    var r = cv.getBoundingClientRect(), it = itemAt(e.clientX - r.left, e.clientY - r.top);
    if (it < 0) { selected = -1; panel(); draw(); return; }
    var item = L.items[it];
    if (item.t === 2) { cw[item.w] = 0; relayout(false); return; }
    if (item.t === 1) { cg.delete(item.g * NW + item.w); relayout(false); return; }
    selected = item.n; panel(); draw();
  }
  $("first").onclick = function () { show(0); };
  $("prev").onclick = function () { show(cur - 1); };
  $("next").onclick = function () { show(cur + 1); };
  $("last").onclick = function () { show(LAST); };
  $("fit").onclick = function () { fitView(); draw(); };
  $("helpbtn").onclick = function () { $("help").classList.toggle("open"); };
  $("legendbtn").onclick = function () { $("legend").classList.toggle("open"); };
  slider.oninput = function () { show(parseInt(slider.value, 10)); };
  $("search").addEventListener("keydown", function (e) {
    if (e.key === "Enter") { if (hits.length && this.dataset.q === this.value) nextHit(); else { this.dataset.q = this.value; search(this.value); } }
  });
  var viewSel = $("viewsel");
  D.workers.forEach(function (w, k) { var o = document.createElement("option"); o.value = "w" + k; o.textContent = "worker " + w; viewSel.appendChild(o); });
  viewSel.onchange = function () {
    var v = viewSel.value;
    if (v[0] === "w") { setScope("worker", parseInt(v.slice(1), 10)); relayout(true); }
    else if (v === "call") { var c = parseInt(prompt("RPC call number (0 to " + (D.groups.length - 1) + ")", "0") || "0", 10); setScope("call", c); relayout(true); }
    else { if (v !== "summary") setScope("all", -1); setDetail(v); }
    viewSel.blur();
  };
  window.addEventListener("resize", function () { resize(); draw(); });

  // -- start ---------------------------------------------------------------------------------------------------
  resize();
  var S = D.start || {};
  if (S.worker !== null && S.worker !== undefined) setScope("worker", D.workers.indexOf(S.worker));
  else if (S.rpcCall !== null && S.rpcCall !== undefined) setScope("call", S.rpcCall);
  else if (S.focus !== null && S.focus !== undefined) setScope("focus", S.focus, S.depth);
  var detail = S.detail || (N <= 3000 ? "full" : "summary");
  if (detail === "folded") detail = "full";
  if (detail === "calls") cg = groupKeys();
  if (detail === "summary") cw.fill(1);
  viewSel.value = inScope ? (view.worker >= 0 ? "w" + view.worker : "call") : detail;
  if (NE) moveTo(0);
  relayout(true);
  if (!S.detail && N > 3000) $("text").title = "";
  function fromHash() {
    var h = location.hash, m = /^#step=(-?\d+)$/.exec(h);
    if (m) { show(parseInt(m[1], 10)); return; }
    m = /^#search=(.*)$/.exec(h);
    if (m) { show(0); $("search").value = decodeURIComponent(m[1]); search($("search").value); return; }
    m = /^#keys=([A-Za-z0-9 ]*)$/.exec(h);
    show(0);
    if (m) m[1].split("").forEach(function (c) { document.dispatchEvent(new KeyboardEvent("keydown", {key: c, bubbles: true})); });
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
  document.body.dataset.loadMs = String(Math.round(performance.now() - T0));
  window.distviz = {show: show, search: search, nextHit: nextHit, key: key, setDetail: setDetail, setScope: setScope,
                    relayout: relayout, layout: function () { return L; }, camera: cam, state: function () { return {deps: deps, st: st, init: init, cur: cur}; }};
})();
