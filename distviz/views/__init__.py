"""Views of a trace that fit the question: which nodes (the whole graph, one worker, one RPC call, a neighbourhood) and how much detail.

Pure; the DOT pictures and the HTML viewer read the same values, so they show the same graph.
"""

from __future__ import annotations

from distviz.views.groups import CallGroups, NodeGroup, call_groups, rpc_call_title
from distviz.views.scope import neighbourhood, resolve_node, select_scope
from distviz.views.view import DETAILS, Link, Scope, ViewSpec, WorkerStats, WorkerSummary
from distviz.views.worker_summary import ordered_workers, worker_summary

__all__ = [
    "DETAILS", "CallGroups", "NodeGroup", "Link", "Scope", "ViewSpec", "WorkerStats",
    "WorkerSummary", "call_groups", "neighbourhood", "ordered_workers", "resolve_node",
    "rpc_call_title", "select_scope", "worker_summary",
]
