"""The offline HTML viewer: its data checked against the trace and the replay, and the page
driven in a real headless Chromium (few tests: each one costs seconds)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from builders.graphs import HOSTILE, design_trace, hang_trace, judged, replay_of
from builders.render_html import _timed_page

from distviz.render.html.data import viewer_data
from distviz.render.html.page import json_for_script, to_html
from distviz.replay import initial_dependencies
from distviz.views import ViewSpec


def _data(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="distviz-data">(.*?)</script>', page, re.S)
    assert m
    out: dict[str, Any] = json.loads(m.group(1))
    return out


# -- text checks -------------------------------------------------------------------------

def test_json_for_script_cannot_close_the_element() -> None:
    text = json_for_script({"x": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"x": "</script><!-- & \u2028"}


def test_page_is_self_contained_and_escapes_names() -> None:
    tr = design_trace(HOSTILE)
    page = to_html(judged(tr, replay_of(tr)))
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(link|img|iframe)\b", page)
    assert not re.search(r"<script[^>]*\bsrc=", page)
    assert "<script>&" not in page and 'b<script>' not in page
    assert page.count("<script") == 3  # the data, the sentences, the viewer; nothing injected
    assert HOSTILE in _data(page)["names"]


def test_data_holds_the_graph_the_counts_and_the_words() -> None:
    tr = hang_trace()
    rep = replay_of(tr)
    d = viewer_data(judged(tr, rep))
    ids = d["ids"]
    assert ids == [n.id for n in tr.nodes]
    for i, n in enumerate(tr.nodes):   # the next edges, as a compressed row per node
        assert [ids[t] for t in d["next"][d["off"][i]:d["off"][i + 1]]] == \
            [e[0] for e in n.next if e is not None]
    pairs = {(ids[d["pairs"][k]], ids[d["pairs"][k + 1]]) for k in range(0, len(d["pairs"]), 2)}
    assert ("worker0/RecvRpcBackward#0", "worker1/SendRpcBackward#0") in pairs
    first = initial_dependencies(tr, 0)
    assert d["deps0"] == [first.get(nid, -1) for nid in ids]
    assert len(d["ea"]) == len(rep.events) and d["hang"]["blocked"]
    notes = dict(zip(d["notes"][::2], d["notes"][1::2], strict=True))
    assert notes[ids.index("worker0/RecvRpcBackward#0")].startswith("msg 1:0")
    assert d["order"][0] == d["initiator"] == 0
    assert d["summary"]["links"] and d["groups"]


def test_agreement_is_in_words() -> None:
    tr = design_trace()
    rep = replay_of(tr)
    page = to_html(judged(tr, rep))
    assert "replay and the real run" in page
    assert "fifo_order" not in page and "exact:" not in page
    assert "the gradients: not compared" in page


def test_unknown_worker_in_the_start_view_is_a_usage_error() -> None:
    from distviz.errors import UsageError
    tr = design_trace()
    with pytest.raises(UsageError, match="--worker wrokerX"):
        to_html(judged(tr, replay_of(tr)), spec=ViewSpec(worker="wrokerX"))


# -- headless Chromium ---------------------------------------------------------------------


def test_timing_in_the_side_panel_and_the_data() -> None:
    import html as html_mod
    page, _rep, timing, tr = _timed_page()
    data = _data(page)
    path = timing.passes[0].path
    ids = [n.id for n in tr.nodes]
    assert [ids[i] for i in data["critical"]["nodes"]] == path.nodes
    assert [tr.nodes[r].msg_id for r in data["critical"]["messages"]] == path.message_ids
    m = re.search(r'<div id="time">(.*?)</div>', page, re.S)
    assert m and all(html_mod.escape(line) in m.group(1) for line in timing.summary())
    plain = design_trace()
    assert _data(to_html(judged(plain, replay_of(plain))))["critical"] == {"nodes": [], "messages": []}
