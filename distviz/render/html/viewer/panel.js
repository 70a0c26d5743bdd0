// @ts-check
// -- the panels: step text, pending per worker, node details, hang, agreement ----------------------
var $ = function (id) { return document.getElementById(id); };
function li(ul, text, cls) {
  var e = document.createElement("li"); e.textContent = text;
  if (cls) e.className = cls;
  ul.appendChild(e); return e;
}
function pendingLine(n) {
  var extra = NOTE[n] && NOTE[n].indexOf("msg ") === 0 ? " (" + NOTE[n].split(" · ")[0] + ")" : "";
  return label(n) + extra + ": " + deps[n] + " of " + init[n] + " deps left";
}
var HANG_AT = D.ea.indexOf(A.hang);   // the step the replay hangs at (-1: none)
function panel() {
  var box = $("workers"); box.textContent = "";
  var states = workerStates();
  D.order.forEach(function (/** @type {number} */ w2) {
    var ws = states[w2];
    var h = document.createElement("h4");
    h.textContent = D.workers[w2] + (w2 === D.initiator ? " · initiator" : "");
    var tog = document.createElement("button");
    tog.textContent = cw[w2] ? "expand" : "collapse"; tog.className = "small";
    tog.onclick = function () { cw[w2] = cw[w2] ? 0 : 1; relayout(false); };
    h.appendChild(tog);
    box.appendChild(h);
    var ul = document.createElement("ul");
    ws.first.forEach(function (x) { li(ul, pendingLine(x), "pending").title = D.ids[x]; });
    ws.ready.slice(0, 12).forEach(function (x) { li(ul, label(x) + ": ready", "ready").title = D.ids[x]; });
    if (ws.pending.length > 12 || ws.ready.length > 12)
      li(ul, "(" + ws.pending.length + " pending, " + ws.ready.length + " ready in all)");
    if (!ws.pending.length && !ws.ready.length) li(ul, "nothing pending");
    li(ul, ws.executed.toLocaleString("en") + " executed", "executed");
    box.appendChild(ul);
  });
  var hb = $("hang"); hb.textContent = "";
  if (D.hang && HANG_AT >= 0 && cur >= HANG_AT) {
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
  /** @type {[string, function(): void][]} */
  var buttons = [["focus here", function () { setScope("focus", n, 2); relayout(true); }],
    ["its worker only", function () { setScope("worker", WK[n]); relayout(true); }],
    ["collapse its RPC call", function () { cg.add(GRP[n] * NW + WK[n]); relayout(false); }]];
  buttons.forEach(function (b) {
    var btn = document.createElement("button"); btn.textContent = b[0]; btn.className = "small"; btn.onclick = b[1]; el.appendChild(btn);
  });
}
