"""StdPriorityQueue reproduces libstdc++'s std::priority_queue order (internals §3.1, §3.6)."""

from __future__ import annotations

import random

from distviz.replay.heap import StdPriorityQueue

ACC = 2**64 - 1


# The transcription printed in internals §3.6, kept verbatim as the oracle.
def _push_heap(c, hole, top, v, less):  # type: ignore[no-untyped-def]
    parent = (hole - 1) // 2
    while hole > top and less(c[parent], v):
        c[hole] = c[parent]
        hole = parent
        parent = (hole - 1) // 2
    c[hole] = v


def _adjust_heap(c, hole, n, v, less):  # type: ignore[no-untyped-def]
    top = second = hole
    while second < (n - 1) // 2:
        second = 2 * (second + 1)
        if less(c[second], c[second - 1]):
            second -= 1
        c[hole] = c[second]
        hole = second
    if (n & 1) == 0 and second == (n - 2) // 2:
        second = 2 * (second + 1)
        c[hole] = c[second - 1]
        hole = second - 1
    _push_heap(c, hole, top, v, less)


def _oracle(keys: list[int]) -> list[int]:
    def less(a: tuple[int, int], b: tuple[int, int]) -> bool:
        return a[0] < b[0]

    c: list[tuple[int, int]] = []
    for i, k in enumerate(keys):
        c.append((k, i))
        _push_heap(c, len(c) - 1, 0, (k, i), less)
    out = []
    while c:
        v = c[-1]
        c[-1] = c[0]
        _adjust_heap(c, 0, len(c) - 1, v, less)
        out.append(c.pop()[1])
    return out


def _pops(keys: list[int]) -> list[int]:
    q: StdPriorityQueue[int] = StdPriorityQueue()
    for i, k in enumerate(keys):
        q.push(i, k)
    return [q.pop() for _ in keys]


def test_six_tied_accumulate_grads_pop_as_libstdcxx() -> None:
    assert _pops([ACC] * 6) == [0, 2, 5, 4, 1, 3]


def test_ten_tied_accumulate_grads_pop_as_libstdcxx() -> None:
    assert _pops([ACC] * 10) == [0, 2, 6, 9, 8, 5, 7, 4, 1, 3]


def test_largest_sequence_nr_first_accumulate_grad_before_all() -> None:
    q: StdPriorityQueue[str] = StdPriorityQueue()
    q.push("mul#3", 3)
    q.push("acc", ACC)
    q.push("add#7", 7)
    q.push("recv#0", 0)
    assert [q.pop() for _ in range(4)] == ["acc", "add#7", "mul#3", "recv#0"]


def test_pop_order_does_not_mutate() -> None:
    q: StdPriorityQueue[int] = StdPriorityQueue()
    for i in range(6):
        q.push(i, ACC)
    assert q.pop_order() == [0, 2, 5, 4, 1, 3]
    assert q.pop_order(3) == [0, 2, 5]
    assert len(q) == 6
    assert [q.pop() for _ in range(6)] == [0, 2, 5, 4, 1, 3]


def test_matches_the_reference_transcription_on_random_keys() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 300)
        keys = [rng.randrange(rng.choice([2, 4, 50, 10**9])) for _ in range(n)]
        assert _pops(keys) == _oracle(keys)


def test_pop_order_prefix_of_big_queues_with_ties_and_after_pops() -> None:
    rng = random.Random(3)
    for kmax in (3, 10**9):
        q: StdPriorityQueue[int] = StdPriorityQueue()
        for i in range(1500):
            q.push(i, rng.randrange(kmax))
        for _ in range(25):
            full = q.copy().pop_order()
            assert q.pop_order(20) == full[:20]
            assert q.pop() == full[0]
        q.push(-1, kmax)
        assert q.pop_order(20) == q.copy().pop_order()[:20]


def test_empty_queue_raises() -> None:
    q: StdPriorityQueue[int] = StdPriorityQueue()
    assert q.pop_order() == []
    try:
        q.pop()
    except IndexError:
        pass
    else:  # pragma: no cover
        raise AssertionError("pop on an empty queue must raise IndexError")
