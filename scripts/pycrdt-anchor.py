#!/usr/bin/env python3
"""The outside anchor of `plait bench`: pycrdt (Yjs's Rust port, yrs) applying the equivalent update in memory.

Builds a Y.Doc that holds what one of plait's two catch-up workloads holds, encodes the whole document as one
update, then times applying that update to a fresh, empty Doc (in memory: nothing is written to disk, nothing
is hashed, nothing crosses a socket). Prints one JSON object.

The equivalent document (one Y operation per plait change, so "operations per second" compares with plait's
changes per second):
  - the lists: one Y.Array per list ("list-<n>") and its title in the root map "titles" (one set per list);
  - growing: `--items` item.create, each a Y.Map {"text": ...} appended to a random list's array: the update
    holds every item, as plait's store does after the catch-up;
  - edits: items are created until `--live` exist, then every operation edits one of them: a text edit or a
    complete/reopen is a set on its Y.Map, a move is a set of its "pos" key (Y.Array has no move), a list rename
    a set in "titles"; the mix follows plait's bench workload (67 % text, 12 % complete, 10 % move, 11 % rename).
    Yjs keeps only the newest value of a map key (overwritten values are garbage-collected to a few bytes), so
    this update is far smaller than the history plait transfers: that is the design difference the anchor shows.
"""

import argparse
import json
import random
import sys
import time

from pycrdt import Array, Doc, Map


def build(workload: str, lists: int, items: int, live: int, changes: int, seed: int) -> tuple[Doc, int]:
    """The document and the number of operations it was built with."""
    rng = random.Random(seed)
    doc = Doc()
    titles = doc.get("titles", type=Map)
    arrays = [doc.get(f"list-{n}", type=Array) for n in range(lists)]
    operations = 0
    with doc.transaction():
        for n in range(lists):
            titles[f"list-{n}"] = f"List {n + 1}"
            operations += 1
    created: list[Map] = []
    total = lists + items if workload == "growing" else changes
    # Transactions of 1,000 operations only to build faster; the encoded update does not depend on them.
    while operations < total:
        with doc.transaction():
            for _ in range(min(1_000, total - operations)):
                if workload == "growing" or len(created) < live and rng.random() < 0.35 or len(created) < 50:
                    item = Map({"text": f"item {rng.randrange(1_000_000)}"})
                    arrays[rng.randrange(lists)].append(item)
                    created.append(item)  # integrated by the append: later sets edit the stored map
                else:
                    roll = rng.randrange(100)
                    item = created[rng.randrange(len(created))]
                    if roll < 67:
                        item["text"] = f"edited {rng.randrange(1_000_000)}"
                    elif roll < 79:
                        item["done"] = not item.get("done", False)
                    elif roll < 89:
                        item["pos"] = rng.random()
                    else:
                        titles[f"list-{rng.randrange(lists)}"] = f"List {rng.randrange(1000)}"
                operations += 1
    return doc, operations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=["growing", "edits"], required=True)
    parser.add_argument("--lists", type=int, default=100)
    parser.add_argument("--items", type=int, default=100_000, help="growing: items created")
    parser.add_argument("--live", type=int, default=10_000, help="edits: items created before edits begin")
    parser.add_argument("--changes", type=int, default=100_000, help="edits: operations in all")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    start = time.perf_counter()
    doc, operations = build(args.workload, args.lists, args.items, args.live, args.changes, args.seed)
    build_seconds = time.perf_counter() - start
    update = doc.get_update()
    seconds = []
    for _ in range(max(1, args.runs)):
        fresh = Doc()
        start = time.perf_counter()
        fresh.apply_update(update)
        seconds.append(time.perf_counter() - start)
        # Check that the update was applied whole, so a failed apply is never timed as a fast one.
        if fresh.get_state() != doc.get_state():
            print("pycrdt-anchor: the applied update does not reproduce the document", file=sys.stderr)
            return 1
    import pycrdt

    print(json.dumps({
        "workload": args.workload,
        "pycrdt_version": getattr(pycrdt, "__version__", "unknown"),
        "operations": operations,
        "update_bytes": len(update),
        "build_seconds": build_seconds,
        "apply_seconds": seconds,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
