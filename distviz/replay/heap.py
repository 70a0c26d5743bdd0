"""A max-priority queue that breaks ties exactly as libstdc++'s ``std::priority_queue`` does.

PyTorch's ``ReadyQueue`` is ``std::priority_queue<NodeTask, std::vector<NodeTask>,
CompareNodeTaskTime>``: the largest ``sequence_nr`` pops first (``AccumulateGrad`` has
``2**64 - 1`` and so pops before anything else), and among equal keys the order is whatever
libstdc++'s ``push_heap``/``pop_heap`` produce. That order is *not* FIFO: six tied items pushed as
0..5 pop as ``[0, 2, 5, 4, 1, 3]``. This module transcribes ``std::__push_heap`` and
``std::__adjust_heap`` (internals §3.6) line by line, so a replay predicts the real order.

Only keys are compared (``less(a, b) = key(a) < key(b)``); items are never compared.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["StdPriorityQueue"]


def _push_heap(c: list[tuple[int, T]], hole: int, top: int, v: tuple[int, T]) -> None:
    """``std::__push_heap``: move ``v`` up from ``hole`` while its parent's key is smaller."""
    key = v[0]
    parent = (hole - 1) // 2
    while hole > top and c[parent][0] < key:
        c[hole] = c[parent]
        hole = parent
        parent = (hole - 1) // 2
    c[hole] = v


def _adjust_heap(c: list[tuple[int, T]], hole: int, n: int, v: tuple[int, T]) -> None:
    """``std::__adjust_heap`` on ``c[0:n]``: sift the hole down to a leaf, then push ``v`` up."""
    top = hole
    second = hole
    while second < (n - 1) // 2:
        second = 2 * (second + 1)
        if c[second][0] < c[second - 1][0]:
            second -= 1
        c[hole] = c[second]
        hole = second
    if (n & 1) == 0 and second == (n - 2) // 2:
        second = 2 * (second + 1)
        c[hole] = c[second - 1]
        hole = second - 1
    _push_heap(c, hole, top, v)


class StdPriorityQueue(list[tuple[int, T]], Generic[T]):
    """``std::priority_queue`` with ``less = key(a) < key(b)``: largest key first, libstdc++ ties.

    ``push(item, key)`` and ``pop()`` are O(log n); ``pop_order()`` returns what successive pops
    would return without changing the queue. Raises ``IndexError`` on ``pop``/``top`` when empty.
    The queue is its heap array, a list of ``(key, item)``: ``len`` and truth are the list's (the
    replay asks them once per node), and ``q[0][1]`` is the top. Change it through ``push`` and
    ``pop``; code that appends to an empty queue itself (the replay's hot loop) adds one to
    ``pushes``, which keeps the pop-order cache honest.
    """

    __slots__ = ("pushes", "_cache", "_cache_len", "_cache_pushes")

    def __init__(self) -> None:
        super().__init__()
        self.pushes = 0
        # a prefix of the pop order as of (_cache_len items, _cache_pushes pushes); pops since
        # then only remove its head, so it stays valid until the next push
        self._cache: list[T] = []
        self._cache_len = -1
        self._cache_pushes = -1

    def __repr__(self) -> str:
        return f"StdPriorityQueue({self.pop_order()!r})"

    def push(self, item: T, key: int) -> None:
        """``c.push_back(x); std::push_heap(c.begin(), c.end(), less)``."""
        v = (key, item)
        self.append(v)
        n = len(self)
        if n > 1:
            _push_heap(self, n - 1, 0, v)
        self.pushes += 1

    def pop(self) -> T:  # type: ignore[override]
        """``std::pop_heap(c.begin(), c.end(), less); x = c.back(); c.pop_back()``.

        Raises ``IndexError`` when the queue is empty.
        """
        if not self:
            raise IndexError("pop from an empty StdPriorityQueue")
        top = self[0]
        v = list.pop(self)
        if self:
            # pop_heap moves the top to the back and re-heaps [0, n-1) with the old back value.
            _adjust_heap(self, 0, len(self), v)
        return top[1]

    def top(self) -> T:
        """Return the item ``pop()`` would return. Raises ``IndexError`` when empty."""
        if not self:
            raise IndexError("top of an empty StdPriorityQueue")
        return self[0][1]

    def items(self) -> list[T]:
        """Return the items in heap-array order (not pop order)."""
        return [v[1] for v in self]

    def copy(self) -> StdPriorityQueue[T]:
        """Return an independent copy with the same heap array (and so the same pop order)."""
        q: StdPriorityQueue[T] = StdPriorityQueue()
        q.extend(self)
        return q

    def pop_order(self, limit: int | None = None) -> list[T]:
        """Return the items in the order successive ``pop()`` calls would return them.

        ``limit`` caps the list to the first ``limit`` items. The queue is not changed. For a
        big queue the cost stays small: a prefix computed earlier is reused while only pops
        happened, the top entries are found best-first when their keys are distinct, and only
        ties fall back to simulating pops on a copy-on-write view (never a full copy).
        """
        c = self
        n = len(c)
        want = n if limit is None else min(limit, n)
        if want == 0:
            return []
        if self._cache_pushes == self.pushes and self._cache_len >= n:
            popped = self._cache_len - n
            if len(self._cache) - popped >= want:
                return self._cache[popped:popped + want]
        out: list[T] | None
        if want == n or n <= 64:
            out = _full_pop_order(c, want)
        else:
            out = _best_first(c, want)
            if out is None:
                out = _partial_pop_order(c, max(want, 64))
        self._cache, self._cache_len, self._cache_pushes = out, n, self.pushes
        return out[:want]


def _full_pop_order(base: list[tuple[int, T]], want: int) -> list[T]:
    """Pop ``want`` items from a copy of ``base``."""
    c = list(base)
    out: list[T] = []
    while c and len(out) < want:
        top = c[0]
        v = c.pop()
        if c:
            _adjust_heap(c, 0, len(c), v)
        out.append(top[1])
    return out


def _best_first(c: list[tuple[int, T]], want: int) -> list[T] | None:
    """The ``want`` largest items in key order when their keys (and the next one) are all
    distinct, so no tie rule is involved; ``None`` when a tie makes libstdc++'s order matter."""
    n = len(c)
    cand: list[tuple[int, int]] = [(-c[0][0], 0)]
    out: list[T] = []
    last: int | None = None
    while cand and len(out) <= want:
        negkey, p = heappop(cand)
        if last is not None and -negkey == last:
            return None
        last = -negkey
        out.append(c[p][1])
        left = 2 * p + 1
        if left < n:
            heappush(cand, (-c[left][0], left))
            if left + 1 < n:
                heappush(cand, (-c[left + 1][0], left + 1))
    if cand and len(out) <= want:  # pragma: no cover - loop ends only on want + 1 items
        return None
    return out[:want]


def _partial_pop_order(base: list[tuple[int, T]], limit: int) -> list[T]:
    """The first ``limit`` pops of ``base`` without copying it: ``__adjust_heap`` and
    ``__push_heap`` on a copy-on-write overlay (touches O(limit log n) slots)."""
    ch: dict[int, tuple[int, T]] = {}
    get = ch.get
    n = len(base)
    out: list[T] = []
    while n > 0 and len(out) < limit:
        top = get(0) or base[0]
        v = get(n - 1) or base[n - 1]
        n -= 1
        if n:
            hole = 0
            second = 0
            while second < (n - 1) // 2:
                second = 2 * (second + 1)
                a = get(second) or base[second]
                b = get(second - 1) or base[second - 1]
                if a[0] < b[0]:
                    second -= 1
                    a = b
                ch[hole] = a
                hole = second
            if (n & 1) == 0 and second == (n - 2) // 2:
                second = 2 * (second + 1)
                ch[hole] = get(second - 1) or base[second - 1]
                hole = second - 1
            key = v[0]
            parent = (hole - 1) // 2
            while hole > 0:
                pv = get(parent) or base[parent]
                if not pv[0] < key:
                    break
                ch[hole] = pv
                hole = parent
                parent = (hole - 1) // 2
            ch[hole] = v
        out.append(top[1])
    return out
