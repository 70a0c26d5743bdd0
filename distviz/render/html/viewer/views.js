// @ts-check
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
