// @ts-check
// -- stepping ------------------------------------------------------------------------------------------
var slider = /** @type {HTMLInputElement} */ ($("slider"));
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
    D.notes.forEach(function (v, k) { if (k % 2) vars[D.notes[k - 1]] = String(v).toLowerCase(); });
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
  var el = /** @type {HTMLInputElement | null} */ (e.target), tag = el && el.tagName;
  if ((tag === "INPUT" && el.type !== "range") || tag === "SELECT") {
    if (e.key === "Escape") el.blur();
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
var searchBox = /** @type {HTMLInputElement} */ ($("search"));
searchBox.addEventListener("keydown", function (e) {
  var q = searchBox.value;
  if (e.key === "Enter") { if (hits.length && searchBox.dataset.q === q) nextHit(); else { searchBox.dataset.q = q; search(q); } }
});
var viewSel = /** @type {HTMLSelectElement} */ ($("viewsel"));
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
// a replay that hangs or fails opens on its last step, where the outcome is drawn and explained
var OPEN_AT = D.outcome === "hang" || D.outcome === "error" ? LAST : 0;
/** The page's address: #step=N (negative from the end: #step=-1 is the last step), #search=Q,
 * #keys=K (key presses from the first step, for tests); else the step the page opens on. */
function fromHash() {
  var h = location.hash, m = /^#step=(-?\d+)$/.exec(h);
  if (m) { var k = parseInt(m[1], 10); show(k < 0 ? LAST + 1 + k : k); return; }
  m = /^#search=(.*)$/.exec(h);
  if (m) { show(OPEN_AT); searchBox.value = decodeURIComponent(m[1]); search(searchBox.value); return; }
  m = /^#keys=([A-Za-z0-9 ]*)$/.exec(h);
  show(m ? 0 : OPEN_AT);
  if (m) m[1].split("").forEach(function (c) { document.dispatchEvent(new KeyboardEvent("keydown", {key: c, bubbles: true})); });
}
window.addEventListener("hashchange", fromHash);
fromHash();
document.body.dataset.loadMs = String(Math.round(performance.now() - T0));
/** @type {any} */ (window).distviz = {show: show, title: title, search: search, nextHit: nextHit, key: key, setDetail: setDetail, setScope: setScope,
                  relayout: relayout, layout: function () { return L; }, camera: cam, state: function () { return {deps: deps, st: st, init: init, cur: cur}; }};
