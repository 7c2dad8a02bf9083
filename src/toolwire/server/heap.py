"""What the gateway does to its process once the app is built (``toolwire serve``, and the
gateway benchmark, which measures what serve runs)."""

from __future__ import annotations

import gc

__all__ = ["THRESHOLDS", "freeze_heap"]

#: The collector's thresholds in a gateway's process (Python's own: 700, 10, 10).
THRESHOLDS = (20_000, 5, 100)


def freeze_heap() -> None:
    """The objects made so far (the imports, the app, its models' Python side) leave the
    garbage collector's generations (:func:`gc.freeze`), so that a full collection later
    scans only what the requests in flight hold, not the whole process: measured under load,
    the slowest collections took 39 and 23 ms before (every reply in flight waiting), 3 ms
    after. (What is frozen is still freed when its last reference goes.)

    And the collector runs less often (:data:`THRESHOLDS`): a large request (16,000 tools,
    2.7 MB) is read in a worker thread, whose allocations start collections that hold the
    interpreter's lock, and so the event loop, while they scan that request's objects:
    with Python's default thresholds the loop waited up to 33 ms at a time, 11 ms with these.
    The middle generation is collected after five young collections, not fifty: a costly
    request's objects that live through young collections gather there, and fifty of them
    (up to a million objects) took one collection half a second, the loop waiting on it."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
