"""A Python model of libstdc++'s std::sort (introsort), used only to *construct* test inputs.

torch's CPU sort(stable=False) runs std::sort on (value, index) pairs with a comparator that looks at
values only, so the order it leaves equal values in is whatever the introsort's steps give. The
interesting, rarely reached step is the heapsort fallback taken when the recursion depth limit
(2 * floor(log2(n))) is exhausted. Random inputs essentially never get there; `adversary()` builds
inputs that do (McIlroy's "killer adversary", with the elements still unconstrained when the depth
limit hits given only a few distinct values, so the heapsort works on many equal keys).

Nothing here is an oracle: the tests compare Kwker with torch itself. This model only makes inputs,
and reports (for a self-check of the generator) whether the heapsort fallback was reached.
"""

from __future__ import annotations

import random

THRESHOLD = 16  # libstdc++'s _S_threshold


class _Sorter:
    """std::sort over a Python list `a` with strict-weak-order `less(x, y)` on elements."""

    def __init__(self, a, less, on_heapsort=None):
        self.a = a
        self.less = less
        self.on_heapsort = on_heapsort
        self.heapsort_ranges = []

    # -- introsort loop ----------------------------------------------------------------------------
    def sort(self):
        n = len(self.a)
        if n:
            self._introsort_loop(0, n, 2 * (n.bit_length() - 1))
            self._final_insertion_sort(0, n)
        return self.a

    def _introsort_loop(self, first, last, depth_limit):
        while last - first > THRESHOLD:
            if depth_limit == 0:
                if self.on_heapsort is not None:
                    self.on_heapsort(first, last)
                self.heapsort_ranges.append((first, last))
                self._partial_sort(first, last)
                return
            depth_limit -= 1
            cut = self._unguarded_partition_pivot(first, last)
            self._introsort_loop(cut, last, depth_limit)
            last = cut

    def _unguarded_partition_pivot(self, first, last):
        mid = first + (last - first) // 2
        self._move_median_to_first(first, first + 1, mid, last - 1)
        return self._unguarded_partition(first + 1, last, first)

    def _swap(self, i, j):
        a = self.a
        a[i], a[j] = a[j], a[i]

    def _move_median_to_first(self, result, x, y, z):
        a, less = self.a, self.less
        if less(a[x], a[y]):
            if less(a[y], a[z]):
                self._swap(result, y)
            elif less(a[x], a[z]):
                self._swap(result, z)
            else:
                self._swap(result, x)
        elif less(a[x], a[z]):
            self._swap(result, x)
        elif less(a[y], a[z]):
            self._swap(result, z)
        else:
            self._swap(result, y)

    def _unguarded_partition(self, first, last, pivot):
        a, less = self.a, self.less
        while True:
            while less(a[first], a[pivot]):
                first += 1
            last -= 1
            while less(a[pivot], a[last]):
                last -= 1
            if not first < last:
                return first
            self._swap(first, last)
            first += 1

    # -- heapsort (std::__partial_sort(first, last, last)) ----------------------------------------
    def _partial_sort(self, first, last):
        self._make_heap(first, last)
        while last - first > 1:
            last -= 1
            self._pop_heap(first, last, last)

    def _make_heap(self, first, last):
        length = last - first
        if length < 2:
            return
        parent = (length - 2) // 2
        while True:
            self._adjust_heap(first, parent, length, self.a[first + parent])
            if parent == 0:
                return
            parent -= 1

    def _pop_heap(self, first, last, result):
        a = self.a
        value = a[result]
        a[result] = a[first]
        self._adjust_heap(first, 0, last - first, value)

    def _adjust_heap(self, first, hole, length, value):
        a, less = self.a, self.less
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if less(a[first + child], a[first + child - 1]):
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and less(a[first + parent], value):
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = value

    # -- final insertion sort ----------------------------------------------------------------------
    def _final_insertion_sort(self, first, last):
        if last - first > THRESHOLD:
            self._insertion_sort(first, first + THRESHOLD)
            for i in range(first + THRESHOLD, last):
                self._unguarded_linear_insert(i)
        else:
            self._insertion_sort(first, last)

    def _insertion_sort(self, first, last):
        a, less = self.a, self.less
        for i in range(first + 1, last):
            if less(a[i], a[first]):
                value = a[i]
                a[first + 1:i + 1] = a[first:i]
                a[first] = value
            else:
                self._unguarded_linear_insert(i)

    def _unguarded_linear_insert(self, last):
        a, less = self.a, self.less
        value = a[last]
        nxt = last - 1
        while less(value, a[nxt]):
            a[last] = a[nxt]
            last = nxt
            nxt -= 1
        a[last] = value


def argsort_unstable(keys, less=None):
    """The permutation std::sort leaves (value, index) pairs in, and the heapsort ranges it used."""
    if less is None:
        def less(x, y):
            return x[0] < y[0]
    s = _Sorter([(k, i) for i, k in enumerate(keys)], less)
    s.sort()
    return [i for _, i in s.a], s.heapsort_ranges


def adversary(n: int, tie_classes: int, seed: int = 0):
    """Integer ranks (0 <= rank < n) such that the introsort on them reaches its depth limit on a long
    range, where the not-yet-constrained elements all take one of `tie_classes` values above every
    constrained one. Returns (ranks, heapsort_range_length)."""
    rng = random.Random(seed)
    gas = n  # value of an unconstrained element, above every frozen one
    val = [gas] * n
    state = {"solid": 0, "candidate": None, "frozen": False}

    def freeze(x):
        val[x] = state["solid"]
        state["solid"] += 1

    def less(x, y):
        if not state["frozen"]:
            if val[x] == gas and val[y] == gas:
                freeze(x if x == state["candidate"] else y)
            if val[x] == gas:
                state["candidate"] = x
            elif val[y] == gas:
                state["candidate"] = y
        return val[x] < val[y]

    def on_heapsort(first, last):
        if state["frozen"]:
            return
        # From here on no comparison needs to be answered adversarially: the history so far only
        # ever compared unconstrained elements with frozen ones (each unconstrained-vs-unconstrained
        # comparison froze one of them), so any values above every frozen one are consistent with it.
        state["frozen"] = True
        base = state["solid"]
        for i in range(n):
            if val[i] == gas:
                val[i] = base + rng.randrange(tie_classes)

    s = _Sorter(list(range(n)), less, on_heapsort=on_heapsort)
    s.sort()
    if not state["frozen"]:
        raise AssertionError("adversary did not reach the depth limit")
    longest = max(last - first for first, last in s.heapsort_ranges)
    return val, longest
