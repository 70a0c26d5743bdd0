"""Views of a trace that fit the question: which nodes (the whole graph, one worker, one RPC
call, a neighbourhood) and how much detail (the worker summary, one box per RPC call, chains
folded, every node). Pure: the DOT pictures and the HTML viewer both read these values.

* ``ViewSpec``, ``Scope``, ``DETAILS``, ``WorkerSummary`` (``model.py``): the values.
* ``select_scope(graph, spec) -> Scope``, ``resolve_node`` (``scope.py``).
* ``call_groups(trace) -> CallGroups``, ``rpc_call_title`` (``groups.py``): each node's RPC call.
* ``worker_summary(graph) -> WorkerSummary`` (``summary.py``).
"""

from __future__ import annotations

from distviz.views.groups import CallGroups, NodeGroup, call_groups, rpc_call_title
from distviz.views.model import DETAILS, Link, Scope, ViewSpec, WorkerStats, WorkerSummary
from distviz.views.scope import neighbourhood, resolve_node, select_scope
from distviz.views.summary import ordered_workers, worker_summary

__all__ = [
    "DETAILS", "CallGroups", "NodeGroup", "Link", "Scope", "ViewSpec", "WorkerStats",
    "WorkerSummary", "call_groups", "neighbourhood", "ordered_workers", "resolve_node",
    "rpc_call_title", "select_scope", "worker_summary",
]
