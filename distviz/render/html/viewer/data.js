// @ts-check
/* distviz HTML viewer: the graph on a canvas, the replay step by step.
 *
 * Reads the JSON in #distviz-data (see distviz/render/html/data.py) and the event sentences in
 * #distviz-texts. No network, no library: a layered layout computed here (lanes = workers, the
 * initiator first; rows = gradient flow), drawn on one <canvas> with culling and three levels of
 * detail (a pixel map when zoomed far out, boxes, boxes with text), so 100,000 nodes pan and
 * zoom smoothly. The replay state is kept in typed arrays and moved one step at a time (an undo
 * log goes back), so a step costs what it changes.
 *
 * After every update document.body.dataset holds: step, current (node id), currentIndex, text,
 * action, message, view, hits, selected, and for graphs of at most 2000 nodes pending and
 * initial (JSON {node id: count}); paintMs (time to the first drawn frame) once painted.
 *
 * The script is split into modules that distviz/render/html/page.py concatenates, in the order of
 * VIEWER_MODULES, inside one function (so nothing leaks into the page's globals): data.js (the
 * page's data), state.js (the replay state), views.js (scope and collapse), layout.js, draw.js,
 * panel.js (the side panel), main.js (stepping, search, input, start). Each is a plain script
 * checked by `tsc --checkJs` (tsconfig.json) as if they shared one scope, which they do.
 */

// -- the page's data ----------------------------------------------------------------------------
/**
 * The page's data (distviz/render/html/data.py viewer_data): per node kind, worker, name (into
 * names), seq, group, deps0 and ids; next edges as a compressed row (off, next); message pairs;
 * label notes; per event ea (into actions), ew, en, ep, em (into msgs) and ed (the count changes
 * by step); the hang, the worker summary, the critical path and the view to start on.
 * @typedef {{title: string, workers: string[], order: number[], initiator: number,
 *   names: string[], name: number[], seq: number[], off: number[], next: number[],
 *   pairs: number[], kind: number[], worker: number[], ids: string[], notes: (number|string)[],
 *   group: number[], groups: [string, string, number][], deps0: number[], roots: number[][],
 *   rootVars: string[][], actions: string[], ea: number[], ew: number[], en: number[],
 *   ep: number[], em: number[], msgs: [string, number, number, number, number][],
 *   ed: Object<string, number[][]>, outcome: string, mode: string, summaryText: string,
 *   hang: ?{summary: string, chain: string[], fixes: string[], blocked: number[],
 *     blockedText: string[], neverText: string[]},
 *   error: ?Object, agreement: ?Object, summary: {workers: any[], links: any[]},
 *   critical: {nodes: number[], messages: number[]}, start: any}} ViewerData
 */
var T0 = performance.now();
/** @type {ViewerData} */
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

/** A node's first label line, as the terminal names it: ``MulBackward0 #1~1`` (the ``~k`` of
 * its id tells two nodes of one worker with one name and number apart).
 * @param {number} n */
function title(n) {
  if (D.seq[n] < 0) return D.names[D.name[n]];
  var twin = /#\d+(~\d+)$/.exec(D.ids[n]);
  return D.names[D.name[n]] + " #" + D.seq[n] + (twin ? twin[1] : "");
}
