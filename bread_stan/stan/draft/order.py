"""The order of the simulator's statements: each after every statement defining what it
uses (only the earlier ones, for a quantity computed rather than drawn), and after
earlier statements defining the same variable; ties keep program order."""

from __future__ import annotations

import heapq

from .support import refuse

__all__ = ["dependency_order"]


def dependency_order(units: list) -> list:
    """Units in an order where each comes after every unit defining what it uses
    (and after earlier units defining the same variable); ties keep program order."""
    definers: dict[str, list[int]] = {}
    for u in units:
        for name in u.defines:
            definers.setdefault(name, []).append(u.index)
    drawn = {name for u in units for name in u.tildes}
    after: dict[int, set[int]] = {u.index: set() for u in units}
    for u in units:
        for name in u.uses:
            found = [d for d in definers.get(name, []) if d != u.index]
            earlier = [d for d in found if d < u.index]
            # a computed quantity is read as the statements before the use left it
            after[u.index] |= set(earlier if earlier and name not in drawn else found)
        for name in u.defines:
            after[u.index] |= {d for d in definers[name] if d < u.index}
    blocked = {k: set(v) for k, v in after.items()}
    ready = [k for k, v in blocked.items() if not v]
    heapq.heapify(ready)
    done: list[int] = []
    while ready:
        k = heapq.heappop(ready)
        done.append(k)
        for j, waits in blocked.items():
            if k in waits:
                waits.discard(k)
                if not waits:
                    heapq.heappush(ready, j)
    by_index = {u.index: u for u in units}
    if len(done) < len(units):
        stuck = min(set(blocked) - set(done))
        raise refuse(by_index[stuck].stmt, "the statements depend on each other in a "
                                           "cycle; no order draws each after what it uses")
    return [by_index[k] for k in done]
