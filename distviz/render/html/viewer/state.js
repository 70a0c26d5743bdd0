// @ts-check
// -- the replay state -----------------------------------------------------------------------
// st: 0 untouched, 1 waiting, 2 ready, 3 executed, 4 blocked send, 5 never runs
var deps = new Int32Array(N), init = new Int32Array(N).fill(-1), st = new Uint8Array(N);
var cur = -1, undo = [];   // the step shown; what each step changed, to go back
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
/**
 * Each worker's part of the replay state after the current step, read from the counts above
 * (the replay's own changes, distviz.replay.events.index_changes), as the terminal lists a
 * worker's ReplayState: pending (the nodes whose dependencies are not all met; first: the
 * first 12 of them as the terminal orders them, the highest sequence number first), ready
 * (queued) and the number of nodes it ran in this pass. The side panel and the worker
 * summary's boxes both read it.
 * @typedef {{pending: number[], first: number[], ready: number[], executed: number}} WorkerView
 * @returns {WorkerView[]}
 */
function workerStates() {
  if (workersAt === cur && workersNow) return workersNow;
  /** @type {WorkerView[]} */
  var out = [];
  for (var w = 0; w < NW; w++) out.push({pending: [], first: [], ready: [], executed: 0});
  for (var n = 0; n < N; n++) {
    var ws = out[WK[n]];
    if (st[n] === 3) ws.executed++;
    else if (deps[n] > 0) ws.pending.push(n);
    else if (st[n] === 2) ws.ready.push(n);
  }
  out.forEach(function (ws) { ws.first = firstPending(ws.pending, 12); });
  workersAt = cur; workersNow = out;
  return out;
}
/** The first k of the nodes ns in the terminal's order (sequence number, then id, both
 * descending; a leaf's sequence number is the highest there is), without sorting them all (a
 * big graph has thousands pending).
 * @param {number[]} ns @param {number} k @returns {number[]} */
function firstPending(ns, k) {
  /** @param {number} n */
  function seq(n) { return D.seq[n] < 0 ? Infinity : D.seq[n]; }
  /** @param {number} a @param {number} b */
  function before(a, b) { return seq(a) > seq(b) || (seq(a) === seq(b) && D.ids[a] > D.ids[b]); }
  /** @type {number[]} */
  var top = [];
  for (var q = 0; q < ns.length; q++) {
    var n = ns[q];
    if (top.length === k && !before(n, top[k - 1])) continue;
    var at = top.length < k ? top.length : k - 1;
    while (at > 0 && before(n, top[at - 1])) { top[at] = top[at - 1]; at--; }
    top[at] = n;
  }
  return top;
}
/** @type {WorkerView[] | null} */
var workersNow = null;
var workersAt = -2;
/** A node's id without its worker, as the terminal names it: MulBackward0#1~1, AccumulateGrad(x).
 * @param {number} n */
function label(n) {
  var id = D.ids[n];
  return id.slice(id.indexOf("/") + 1);
}
function moveTo(k) {
  k = Math.max(0, Math.min(LAST, k | 0));
  while (cur < k) apply(cur + 1);
  while (cur > k) back();
}
