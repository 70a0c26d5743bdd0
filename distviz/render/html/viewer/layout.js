// @ts-check
// -- layout: items, layers, lanes -----------------------------------------------------------------
var BW = 180, BH = 46, GX = 24, GY = 24, LANEGAP = 90, TOP = 60, WBOX = 420;

/**
 * One box of the layout: t 0 a node (n), 1 an RPC call's nodes on worker w (group g), 2 a whole
 * worker; m the number of nodes it stands for.
 * @typedef {{t: number, n: number, w: number, m: number, g?: number}} Item
 */
/**
 * The current layout: the items and each node's item, the edges between items (ES -> ED, ET 0
 * gradient flow, 1 a message), the boxes (X, Y, W, H), the lanes, the size.
 * @typedef {{items: Item[], itemOf: Int32Array, M: number, E: number, ES: Int32Array,
 *   ED: Int32Array, ET: Uint8Array, X: Float32Array, Y: Float32Array, W: Float32Array,
 *   H: Float32Array, laneX: Float64Array, laneW: Float64Array, width: number, height: number,
 *   hubIn: Int32Array, summary: boolean, ms: number}} Layout
 */
/** @type {Layout} */
var L = null;   // the current layout

/** The boxes of the current view: a node, or a collapsed RPC call or worker standing for many.
 * @returns {{items: Item[], itemOf: Int32Array}} */
function layoutItems() {
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
  return {items: items, itemOf: itemOf};
}

/** The edges between items: local (gradient flow, type 0) and messages (recv -> send, type 1).
 * @param {Item[]} items @param {Int32Array} itemOf
 * @returns {{E: number, ES: Int32Array, ED: Int32Array, ET: Uint8Array}} */
function layoutEdges(items, itemOf) {
  var M = items.length, es = [], ed = [], et = [], seen = new Set(), n, j;
  /** @param {number} a @param {number} b @param {number} type */
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
  return {E: es.length, ES: Int32Array.from(es), ED: Int32Array.from(ed), ET: Uint8Array.from(et)};
}

/** Each item's row: the longest path from the sources (Kahn); a cycle (made by collapsing) is
 * broken at its first item in index order. Also each item's next items as a compressed row.
 * @param {Item[]} items @param {{E: number, ES: Int32Array, ED: Int32Array}} ed
 * @returns {{layer: Int32Array, outOff: Int32Array, outs: Int32Array}} */
function layoutLayers(items, ed) {
  var M = items.length, E = ed.E, ES = ed.ES, ED = ed.ED, j;
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
  return {layer: layer, outOff: outOff, outs: outs};
}

/** The order inside each (lane, layer): by the mean slot of the predecessors placed so far.
 * @param {Item[]} items @param {Int32Array} layer @param {number} nLayers
 * @param {Int32Array} outOff @param {Int32Array} outs @returns {Float64Array} each item's slot */
function layoutSlots(items, layer, nLayers, outOff, outs) {
  var M = items.length, j, q, r;
  var slot = new Float64Array(M).fill(-1), rank = new Float64Array(M), cnt = new Int32Array(M);
  /** @type {number[][]} */
  var byLayer = [];
  for (j = 0; j < nLayers; j++) byLayer.push([]);
  for (j = 0; j < M; j++) byLayer[layer[j]].push(j);
  var predSum = new Float64Array(M);
  for (var Ly = 0; Ly < nLayers; Ly++) {
    var row = byLayer[Ly];
    for (q = 0; q < row.length; q++) { r = row[q]; rank[r] = cnt[r] ? predSum[r] / cnt[r] : 1e9 + r; }
    row.sort(function (p1, p2) { return LANE[items[p1].w] - LANE[items[p2].w] || rank[p1] - rank[p2] || p1 - p2; });
    var lastLane = -1, s = 0;
    for (q = 0; q < row.length; q++) {
      r = row[q];
      var lane = LANE[items[r].w];
      if (lane !== lastLane) { s = 0; lastLane = lane; }
      slot[r] = s++;
      for (var o = outOff[r]; o < outOff[r + 1]; o++) { predSum[outs[o]] += slot[r]; cnt[outs[o]]++; }
    }
  }
  return slot;
}

/** The boxes in lanes as wide as their widest row.
 * @param {Item[]} items @param {Float64Array} slot @param {Int32Array} layer */
function layoutBoxes(items, slot, layer) {
  var M = items.length, j, it, xx = 0;
  var X = new Float32Array(M), Y = new Float32Array(M), W = new Float32Array(M), H = new Float32Array(M);
  var laneX = new Float64Array(NW), laneW = new Float64Array(NW), inner = new Float64Array(NW);
  for (j = 0; j < M; j++) {
    it = items[j];
    W[j] = it.t === 2 ? WBOX : it.t === 1 ? BW + 40 : BW;
    H[j] = it.t === 2 ? 3 * BH : it.t === 1 ? BH + 18 : BH;
    X[j] = slot[j] * (BW + 40 + GX);
    if (X[j] + W[j] > inner[it.w]) inner[it.w] = X[j] + W[j];
  }
  D.order.forEach(function (/** @type {number} */ w2) {
    laneX[w2] = xx;
    laneW[w2] = inner[w2] ? inner[w2] + 2 * GX : 0;
    xx += laneW[w2] + (inner[w2] ? LANEGAP : 0);
  });
  for (j = 0; j < M; j++) {
    X[j] += laneX[items[j].w] + GX;
    Y[j] = TOP + layer[j] * (BH + 18 + GY);
  }
  return {X: X, Y: Y, W: W, H: H, laneX: laneX, laneW: laneW, width: xx};
}

/** The worker summary: the initiator on the left, the others in a column.
 * @param {Item[]} items @param {Float32Array} X @param {Float32Array} Y
 * @returns {{width: number, rows: number}} */
function placeSummary(items, X, Y) {
  var M = items.length, others = 0, pitch = 3 * BH + 50, j, k2 = 0;
  for (j = 0; j < M; j++) if (items[j].w !== D.initiator) others++;
  D.order.forEach(function (/** @type {number} */ w2) {
    for (var q2 = 0; q2 < M; q2++) {
      if (items[q2].w !== w2) continue;
      if (w2 === D.initiator) { X[q2] = 20; Y[q2] = TOP + Math.max(0, others - 1) * pitch / 2; }
      else { X[q2] = 20 + WBOX + 300; Y[q2] = TOP + k2++ * pitch; }
    }
  });
  return {width: 40 + 2 * WBOX + 300 + (others > 1 ? 130 : 0), rows: Math.max(1, others)};
}

/** Lay the current view out again (L), then draw it and the side panel.
 * @param {boolean} fit whether to fit the camera to it */
function relayout(fit) {
  var t = performance.now(), j;
  var parts = layoutItems(), items = parts.items, itemOf = parts.itemOf, M = items.length;
  var ed = layoutEdges(items, itemOf), E = ed.E, ED = ed.ED, ET = ed.ET;
  var indegLocal = new Int32Array(M);   // a hub (a weight every micro-batch uses) gets stubs
  for (j = 0; j < E; j++) if (!ET[j]) indegLocal[ED[j]]++;
  var lay = layoutLayers(items, ed), layer = lay.layer;
  var allWorkers = true;
  for (j = 0; j < NW; j++) if (!cw[j]) allWorkers = false;
  // a collapsed worker sits in its lane's first row; in the summary the initiator sits above
  // the others, so the messages each way between it and them do not cross
  for (j = 0; j < M; j++) if (items[j].t === 2) layer[j] = allWorkers && items[j].w !== D.initiator ? 3 : 0;
  var nLayers = 0;
  for (j = 0; j < M; j++) if (layer[j] + 1 > nLayers) nLayers = layer[j] + 1;
  var slot = layoutSlots(items, layer, nLayers, lay.outOff, lay.outs);
  var box = layoutBoxes(items, slot, layer), width = box.width;
  if (allWorkers) {
    var sum = placeSummary(items, box.X, box.Y);
    box.laneW.fill(0);
    width = sum.width; nLayers = sum.rows;
  }
  L = {items: items, itemOf: itemOf, M: M, E: E, ES: ed.ES, ED: ED, ET: ET, X: box.X, Y: box.Y, W: box.W, H: box.H,
       laneX: box.laneX, laneW: box.laneW, width: Math.max(width, 1), hubIn: indegLocal,
       height: allWorkers ? TOP + nLayers * (3 * BH + 50) : TOP + nLayers * (BH + 18 + GY) + BH, summary: allWorkers,
       ms: performance.now() - t};
  if (fit) fitView();
  draw();
  panel();
}
