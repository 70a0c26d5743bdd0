"""Where the program cut a parameter's way to the loss, and which missing gradient each cut
explains (pure, torch-free).

A traced process that records a context notes each *cut* it sees there
(``distviz.tracing.hooks.cut_watch``): a tensor on a parameter's path that leaves autograd, with the
program's line. A ``Cut`` says what the program did (``CutKind``), where (``site``, innermost
frame first), which parameters of its own worker the cut tensor came from (``leaves``, named
as distviz names leaves), and the RPCs whose results it came from (``behind``). A cut whose
tensor went on into the loss by another way (used again with grad enabled, a root of the
backward, an RPC's result) is no cut and is never logged.

``explain(missing, cuts)`` gives each parameter that got no gradient the cut that caused it:

1. a cut on its own worker whose tensor came from it (``leaves``), by ``KINDS`` order;
2. else an RPC to its worker made outside any context whose result was used in one
   (``outside_context``: its owner never used it in a context);
3. else ``never_used``: no operation of a recorded context on its owner used it (its module's
   ``forward`` never ran; the owner's own finding, given with the cuts);
4. else a cut on another worker of a result of an RPC to its worker (``behind``);
5. else a cut on another worker of a tensor that came from the arguments of an RPC that
   worker served (``upstream``: a pipeline stage that detaches its input's descendants);
6. else none: the parameter is named without a cause (``Explained.cut`` is ``None``), and
   nothing is said of it here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


def first_frame(site: str) -> str:
    """``train.py:113`` of ``train.py:113 in step <- main.py:9 in run``."""
    return site.split(" <- ", 1)[0].split(" in ", 1)[0]


class CutKind(StrEnum):
    """What the program did to a tensor on a parameter's path (the value is the log's word)."""

    NO_GRAD = "no_grad"                      # computed under torch.no_grad()
    SET_GRAD_ENABLED = "set_grad_enabled"    # under torch.set_grad_enabled(False)
    INFERENCE_MODE = "inference_mode"        # under torch.inference_mode()
    DETACH = "detach"                        # .detach() / .detach_()
    DATA = "data"                            # .data
    ITEM = "item"                            # .item()
    TOLIST = "tolist"                        # .tolist()
    NUMPY = "numpy"                          # .numpy()
    REQUIRES_GRAD_FALSE = "requires_grad_false"   # requires_grad_(False)
    PARAMETER_SENT = "parameter_sent"        # an nn.Parameter returned by an RPC's function
    PARAMETER_ARG = "parameter_arg"          # an nn.Parameter passed as an RPC's argument
    OUTSIDE_CONTEXT = "outside_context"      # an RPC made outside any context, used in one
    NEVER_USED = "never_used"                # no operation of a recorded context used it


#: The order in which a parameter's own cuts are preferred (rule 1 of ``explain``).
KINDS: tuple[CutKind, ...] = tuple(CutKind)

_BLOCKS = {CutKind.NO_GRAD: "torch.no_grad()",
           CutKind.SET_GRAD_ENABLED: "torch.set_grad_enabled(False)",
           CutKind.INFERENCE_MODE: "torch.inference_mode()"}
_VALUES = {CutKind.ITEM: ".item()", CutKind.TOLIST: ".tolist()", CutKind.NUMPY: ".numpy()"}


@dataclass(frozen=True, slots=True)
class RpcRef:
    """An RPC a cut tensor came from: ``rpc_sync(embed)`` to ``callee`` at ``site``."""

    api: str
    func: str
    callee: str
    site: str | None = None

    def text(self) -> str:
        where = f" at {self.site}" if self.site else ""
        return f"{self.api}({self.func}) to {self.callee}{where}"

    def to_json(self) -> dict[str, Any]:
        return {"api": self.api, "func": self.func, "callee": self.callee, "site": self.site}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> RpcRef:
        site = obj.get("site")
        return cls(api=str(obj.get("api", "")), func=str(obj.get("func", "")),
                   callee=str(obj.get("callee", "")), site=str(site) if site else None)


@dataclass(frozen=True, slots=True)
class Cut:
    """One cut a process saw: ``kind``, on ``worker``, at ``site`` (``file:line in fn <- ...``,
    innermost first; ``file``/``line`` its innermost frame), the parameters of ``worker`` the
    cut tensor came from (``leaves``), the RPCs it came from (``behind``), whether it came from
    the arguments of an RPC its worker served (``upstream``: parameters of other workers fed
    them), and ``served``: the RPC function running when it was made, on a callee."""

    kind: CutKind
    worker: str
    site: str
    file: str = ""
    line: int = 0
    leaves: tuple[str, ...] = ()
    behind: tuple[RpcRef, ...] = ()
    upstream: bool = False
    served: str | None = None
    #: the context it was made in (``None``: outside any); not part of what makes it the same
    #: cut (a training loop makes the same cut in each context)
    context_id: int | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "worker": self.worker, "site": self.site,
                "file": self.file, "line": self.line, "leaves": list(self.leaves),
                "behind": [r.to_json() for r in self.behind], "upstream": self.upstream,
                "served": self.served, "context_id": self.context_id}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Cut:
        """The cut of a JSON object; ``ValueError`` for a kind ``CutKind`` has not."""
        behind = obj.get("behind") or []
        served = obj.get("served")
        return cls(kind=CutKind(str(obj.get("kind"))), worker=str(obj.get("worker", "")),
                   site=str(obj.get("site", "")), file=str(obj.get("file", "")),
                   line=int(obj.get("line") or 0),
                   leaves=tuple(str(x) for x in obj.get("leaves") or ()),
                   behind=tuple(RpcRef.from_json(r) for r in behind if isinstance(r, dict)),
                   upstream=bool(obj.get("upstream")), served=str(served) if served else None,
                   context_id=(int(obj["context_id"]) if isinstance(obj.get("context_id"), int)
                               else None))

    def what(self) -> str:
        """What the program did, in words, with its line."""
        k = self.kind
        if k in _BLOCKS:
            return f"it was used under {_BLOCKS[k]}, entered at {self.site}"
        if k in (CutKind.DETACH, CutKind.DATA):
            word = ".detach()" if k == CutKind.DETACH else ".data"
            return f"the tensor computed from it was cut off with {word} at {self.site}"
        if k in _VALUES:
            return (f"the tensor computed from it was turned into Python values with "
                    f"{_VALUES[k]} at {self.site}, which carry no gradient")
        if k == CutKind.REQUIRES_GRAD_FALSE:
            return f"requires_grad_(False) was called on it at {self.site}"
        if k == CutKind.PARAMETER_SENT:
            return (f"an RPC's function returns the nn.Parameter itself at {self.site}: RPC "
                    "sends a Parameter as plain data, with no send attached, so the caller's "
                    "gradient for it stays on the caller")
        if k == CutKind.PARAMETER_ARG:
            return (f"it was passed to an RPC as an argument at {self.site}: RPC sends an "
                    "nn.Parameter as plain data, with no send attached; the callee gets a new "
                    "leaf, and the gradient stays there")
        if k == CutKind.OUTSIDE_CONTEXT:
            rpc = self.behind[0].text() if self.behind else f"the RPC at {self.site}"
            return (f"{rpc} was made outside any dist_autograd context, and its result was "
                    "used inside one: no send is attached, so no gradient goes back for it")
        return (f"no operation of a recorded context used it: the layer made at {self.site} "
                "was never called in forward")

    def fix(self) -> str:
        """The fix that fits this cut."""
        k, line = self.kind, first_frame(self.site)
        if k in _BLOCKS:
            return (f"remove the {_BLOCKS[k]} block at {line} around the computation "
                    "that must train (keep it for evaluation only)")
        if k == CutKind.DETACH:
            return f"do not detach at {line}: use (or return) the tensor itself"
        if k == CutKind.DATA:
            return f"use the tensor itself at {line}, not its .data"
        if k in _VALUES:
            return (f"keep the tensor, not {_VALUES[k]}, at {line}, and compute the loss "
                    "from it (call .item() only for logging)")
        if k == CutKind.REQUIRES_GRAD_FALSE:
            return (f"do not call requires_grad_(False) at {line} if it should train; "
                    "if it is frozen on purpose, leave it out of the optimizer")
        if k == CutKind.PARAMETER_SENT:
            return (f"return an output computed from the parameter at {line} (run the "
                    "forward on its owner), not the Parameter itself")
        if k == CutKind.PARAMETER_ARG:
            return (f"send a tensor computed from the parameter at {line} (`p * 1` is one), "
                    "or run that computation on the parameter's owner, not the Parameter "
                    "itself")
        if k == CutKind.OUTSIDE_CONTEXT:
            return (f"make the call at {line} inside `with dist_autograd.context()`, "
                    "where its result is used")
        return (f"call the layer in forward, or leave its parameters out of the optimizer "
                f"({line})")

    def where(self) -> str:
        """The RPC the cut sits behind: the RPC its tensor came from, or the function it ran
        in on a callee."""
        if self.kind != CutKind.OUTSIDE_CONTEXT and self.behind:
            return f" (behind {self.behind[0].text()})"
        if self.served:
            return f" (in {self.served}, run over RPC)"
        return ""


@dataclass(frozen=True, slots=True)
class Missing:
    """A parameter that got no gradient, as distviz named it (``ps.emb.weight``), and its
    worker."""

    name: str
    worker: str


@dataclass(frozen=True, slots=True)
class Explained:
    """Parameters of ``worker`` without a gradient (``names``) and the cut that caused it
    (``None``: no cut recorded explains them)."""

    names: tuple[str, ...]
    worker: str
    cut: Cut | None = None

    def text(self) -> str:
        """The sentence for a live line, the summary and ``index.json``'s notes."""
        who = ", ".join(self.names)
        if self.cut is None:
            return f"{who} got no gradient; no cut was recorded for {_them(self.names)}"
        c = self.cut
        return (f"{who} got no gradient: {c.what()}{c.where()}; fix: {c.fix()}")

    def to_json(self) -> dict[str, Any]:
        return {"names": list(self.names), "worker": self.worker,
                "cut": self.cut.to_json() if self.cut is not None else None,
                "text": self.text()}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Explained:
        cut = obj.get("cut")
        return cls(names=tuple(str(n) for n in obj.get("names") or ()),
                   worker=str(obj.get("worker", "")),
                   cut=Cut.from_json(cut) if isinstance(cut, dict) else None)


def _them(names: tuple[str, ...]) -> str:
    return "it" if len(names) == 1 else "them"


def _own(m: Missing, cuts: list[Cut]) -> Cut | None:
    mine = [c for c in cuts if c.worker == m.worker and m.name in c.leaves
            and c.kind != CutKind.NEVER_USED]
    return min(mine, key=lambda c: KINDS.index(c.kind)) if mine else None


def _outside(m: Missing, cuts: list[Cut]) -> Cut | None:
    return next((c for c in cuts if c.kind == CutKind.OUTSIDE_CONTEXT and c.worker != m.worker
                 and any(r.callee == m.worker for r in c.behind)), None)


def _never_used(m: Missing, cuts: list[Cut]) -> Cut | None:
    return next((c for c in cuts if c.kind == CutKind.NEVER_USED and c.worker == m.worker
                 and m.name in c.leaves), None)


def _behind(m: Missing, cuts: list[Cut]) -> Cut | None:
    for c in cuts:
        if c.worker != m.worker and any(r.callee == m.worker for r in c.behind):
            return c
    return None


def _upstream(m: Missing, cuts: list[Cut]) -> Cut | None:
    return next((c for c in cuts if c.worker != m.worker and c.upstream), None)


#: The rules of ``explain``, in order.
_RULES = (_own, _outside, _never_used, _behind, _upstream)


def explain(missing: list[Missing], cuts: list[Cut]) -> list[Explained]:
    """Each parameter of ``missing`` with the cut that caused its missing gradient (see the
    module docstring), grouped: one ``Explained`` per cut (in the order of ``missing``), then
    one per worker for those no cut explains."""
    groups: dict[tuple[str, Cut | None], list[str]] = {}
    for m in missing:
        cut = next((c for rule in _RULES if (c := rule(m, cuts)) is not None), None)
        names = groups.setdefault((m.worker, cut), [])
        if m.name not in names:
            names.append(m.name)
    found = [Explained(tuple(n), w, c) for (w, c), n in groups.items() if c is not None]
    bare = [Explained(tuple(n), w, None) for (w, c), n in groups.items() if c is None]
    return found + bare


@dataclass(slots=True)
class Kept:
    """A process's cuts, each once (by kind, worker, site and leaves), at most ``limit``."""

    limit: int
    cuts: list[Cut] = field(default_factory=list)
    dropped: int = 0

    def add(self, cut: Cut) -> bool:
        """Keep ``cut`` unless it is kept already or the limit is reached; whether it was new."""
        if cut in self.cuts:
            return False
        if len(self.cuts) >= self.limit:
            self.dropped += 1
            return False
        self.cuts.append(cut)
        return True


def cuts_json(explained: list[Explained], seen: list[Cut]) -> dict[str, Any]:
    """``index.json``'s ``cuts`` object: each parameter named without a gradient with its cut
    (``explained``), and every cut the processes logged (``seen``)."""
    return {"explained": [e.to_json() for e in explained], "seen": [c.to_json() for c in seen]}
