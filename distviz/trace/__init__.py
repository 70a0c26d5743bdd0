"""The trace: one distributed autograd graph as PyTorch built it, plus what the real run did, as versioned JSON.

The pivot between the torch side (runner, recorder) and the pure side (replay, renderers):
loaded without torch, never unpickled, written atomically. ``docs/trace-format.md`` documents
every field.
"""

from __future__ import annotations

from distviz.files import STDOUT as STDOUT  # re-exported: callers import them from here
from distviz.files import write_atomic as write_atomic
from distviz.trace.loading import load as load
from distviz.trace.loading import loads as loads
from distviz.trace.loading import not_a_trace as not_a_trace
from distviz.trace.loading import parse_json as parse_json
from distviz.trace.loading import read_trace_text as read_trace_text
from distviz.trace.node import KINDS as KINDS
from distviz.trace.node import Node as Node
from distviz.trace.node import NodeKind as NodeKind
from distviz.trace.trace import ACCUMULATE_GRAD_SEQ as ACCUMULATE_GRAD_SEQ
from distviz.trace.trace import SCHEMA_VERSION as SCHEMA_VERSION
from distviz.trace.trace import BackwardPass as BackwardPass
from distviz.trace.trace import RpcCall as RpcCall
from distviz.trace.trace import Trace as Trace
from distviz.trace.trace import TraceViews as TraceViews
from distviz.trace.trace import has_seq as has_seq
from distviz.trace.trace import lend_views as lend_views
from distviz.trace.trace import lent_views as lent_views
from distviz.trace.trace import message_label as message_label
from distviz.trace.trace import parse_trace as parse_trace
from distviz.trace.trace import seq_text as seq_text
from distviz.trace.trace import short_name as short_name
from distviz.trace.trace import twin_suffix as twin_suffix
