#!/usr/bin/env python3
"""Checks Tests/Vectors/conformance.json against PROTOCOL.md, independently of the Swift code.

Everything here is written from PROTOCOL.md alone (standard library only): it re-encodes every change,
payload, state, snapshot, baseline and frame from the fields in the vector file, recomputes hashes, the
hash chains, the replayed state, the Device ID with its check characters, the pairing code, the
discovery tag, change signatures (ECDSA P-256 verified here with plain curve arithmetic), the timeline IDs of
timeline.begin, a signed timeline with a Lamport witness, a Changes message with signatures, the verdicts of
a receiver's intake on small batches, the names of a forked timeline's changes and branches, and what a
list.delete of either version covers across those forks, and compares them
with the bytes the vector file holds. Exit status 0 when all agree; otherwise each mismatch is printed and the
status is 1.

Usage: scripts/check-vectors.py [path/to/conformance.json]
"""

import hashlib
import json
import os
import sys

FAILURES = []
CHECKS = [0]


def check(condition, what):
    CHECKS[0] += 1
    if not condition:
        FAILURES.append(what)


def h(data):
    return hashlib.sha256(data).digest()


# ---- §6: protobuf writing ---------------------------------------------------------------------------

def varint(value):
    value &= (1 << 64) - 1  # a negative int64 is written as its two's-complement pattern
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field, wire_type):
    return varint(field << 3 | wire_type)


def f_varint(field, value):
    return tag(field, 0) + varint(value)


def f_bool(field, value):
    return f_varint(field, 1 if value else 0)


def f_fixed64(field, value):
    return tag(field, 1) + (value & ((1 << 64) - 1)).to_bytes(8, "little")


def f_bytes(field, value):
    return tag(field, 2) + varint(len(value)) + value


def f_string(field, text):
    return f_bytes(field, text.encode("utf-8"))


# proto3 (messages, §6): zero values are not written unless the field is `optional` and set.
def p3_varint(field, value):
    return f_varint(field, value) if value else b""


def p3_bytes(field, value):
    return f_bytes(field, value) if value else b""


def p3_string(field, text):
    return p3_bytes(field, text.encode("utf-8"))


def p3_fixed64(field, value):
    return f_fixed64(field, value) if value else b""


def unhex(text):
    return bytes.fromhex(text)


def tl(text):
    return int(text, 16)


# ---- §7: identifiers and summaries ------------------------------------------------------------------

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def timeline_text(value):
    return "".join(CROCKFORD[(value >> (5 * (12 - i))) & 31] for i in range(13))


def summary_text(entries):
    ordered = sorted(entries, key=lambda e: tl(e["timeline"]))
    return ",".join(f"{timeline_text(tl(e['timeline']))}:{e['seq']}" for e in ordered)


def summary_field(field, entries):
    out = b""
    for e in sorted(entries, key=lambda e: tl(e["timeline"])):
        out += f_bytes(field, p3_fixed64(1, tl(e["timeline"])) + p3_varint(2, e["seq"]))
    return out


# ---- §9: payloads (canonical writer rules) ----------------------------------------------------------

def position(field, at):
    if "top" in at:
        inner = f_bool(1, True)
    elif "bottom" in at:
        inner = f_bool(2, True)
    else:
        inner = f_bytes(3, unhex(at["after"]))
    return f_bytes(field, inner)


def payload(kind, p):
    if kind == "list.create":
        out = f_bytes(1, unhex(p["id"])) + f_string(2, p["title"])
        if "color" in p:
            out += f_string(3, p["color"])
        return out + position(4, p["at"])
    if kind == "list.rename":
        return f_bytes(1, unhex(p["id"])) + f_string(2, p["title"])
    if kind == "list.recolor":
        out = f_bytes(1, unhex(p["id"]))
        return out + (f_string(2, p["color"]) if "color" in p else b"")
    if kind == "list.move":
        return f_bytes(1, unhex(p["id"])) + position(2, p["at"])
    if kind == "list.delete":
        out = f_bytes(1, unhex(p["id"]))
        for e in sorted(p["observed"], key=lambda e: tl(e["timeline"])):
            out += f_bytes(2, f_fixed64(1, tl(e["timeline"])) + f_varint(2, e["seq"]))
        return out
    if kind == "item.create":
        return (f_bytes(1, unhex(p["id"])) + f_bytes(2, unhex(p["list"])) + f_string(3, p["text"])
                + position(4, p["at"]))
    if kind == "item.edit":
        return f_bytes(1, unhex(p["id"])) + f_string(2, p["text"])
    if kind in ("item.complete", "item.reopen", "item.delete"):
        return f_bytes(1, unhex(p["id"]))
    if kind == "item.move":
        out = f_bytes(1, unhex(p["id"]))
        if "list" in p:
            out += f_bytes(2, unhex(p["list"]))
        return out + position(3, p["at"])
    raise ValueError(kind)


# ---- §8: changes ------------------------------------------------------------------------------------

def canonical_change(c, payload_bytes):
    return (
        f_fixed64(1, tl(c["timeline"]))
        + f_varint(2, c["seq"])
        + f_varint(3, c["lamport"])
        + f_bytes(4, unhex(c["previous_hash"]))
        + f_string(5, c["kind"])
        + f_varint(6, c["version"])
        + f_varint(7, c["wall_time"])
        + f_bytes(8, payload_bytes)
        + (witness_field(c["witness"]) if "witness" in c else b"")
    )


def witness_field(w):
    """§20.6: field 9, only when present; ChangeRef {fixed64 timeline = 1; uint64 seq = 2}, both always written."""
    return f_bytes(9, f_fixed64(1, tl(w["timeline"])) + f_varint(2, w["seq"]))


LAMPORT_MAX = 1 << 62
KINDS_V1 = {
    "list.create", "list.rename", "list.recolor", "list.move", "list.delete",
    "item.create", "item.edit", "item.complete", "item.reopen", "item.move", "item.delete",
}


def check_changes(vectors):
    heads = {}  # timeline -> (seq, lamport, hash)
    by_name = {}
    for c in vectors["changes"]:
        name = c["name"]
        if "payload_fields" in c:
            p = payload(c["kind"], c["payload_fields"])
            check(p.hex() == c["payload"], f"change {name}: payload encodes as {p.hex()}")
        elif c["kind"] == "timeline.end":
            check(c["payload"] == "", f"change {name}: timeline.end payload is not empty")
        canonical = canonical_change(c, unhex(c["payload"]))
        check(canonical.hex() == c["canonical"],
              f"change {name}: canonical bytes\n  mine   {canonical.hex()}\n  vector {c['canonical']}")
        digest = h(unhex(c["canonical"]))
        check(digest.hex() == c["sha256"], f"change {name}: SHA-256 {digest.hex()}")
        # The hash chain, Lamport and sequence rules of §8 and §15.
        t = tl(c["timeline"])
        seq, lamport, previous = heads.get(t, (0, 0, bytes(32)))
        check(c["seq"] == seq + 1, f"change {name}: seq {c['seq']} does not follow {seq}")
        check(unhex(c["previous_hash"]) == previous, f"change {name}: previous_hash breaks the chain")
        check(lamport < c["lamport"] <= LAMPORT_MAX, f"change {name}: Lamport {c['lamport']} after {lamport}")
        heads[t] = (c["seq"], c["lamport"], digest)
        by_name[name] = c
    # The worked example of PROTOCOL.md §8.1: A1 is 106 bytes and writes wall_time 0 as 38 00.
    a1 = unhex(by_name["A1"]["canonical"])
    check(len(a1) == 106 and b"\x38\x00\x42\x28" in a1, "change A1 is not the §8.1 worked example")
    for p in vectors["payloads"]:
        encoded = payload(p["kind"], p["fields"])
        check(encoded.hex() == p["hex"], f"payload {p['kind']} {p['fields']}: encodes as {encoded.hex()}")
    return by_name


# ---- §10: replay ------------------------------------------------------------------------------------

class State:
    def __init__(self):
        self.order = []  # list IDs, tombstones included
        self.lists = {}  # id -> dict(title, color, deleted, pending[], completed[])
        self.items = {}  # id -> dict(list, text, completed, deleted, placed)

    def place_list(self, lid, at):
        if "top" in at:
            index = 0
        elif "bottom" in at:
            index = len(self.order)
        else:
            x = at["after"]
            ok = x != lid and x in self.lists and not self.lists[x]["deleted"]
            index = self.order.index(x) + 1 if ok else 0
        self.order.insert(index, lid)

    def section(self, iid):
        item = self.items[iid]
        return self.lists[item["list"]]["completed" if item["completed"] else "pending"]

    def place_item(self, iid, at):
        sec = self.section(iid)
        if "top" in at:
            index = 0
        elif "bottom" in at:
            index = len(sec)
        else:
            x = at["after"]
            index = sec.index(x) + 1 if x != iid and x in sec else 0
        sec.insert(index, iid)

    def unlink_item(self, iid):
        self.section(iid).remove(iid)

    def ensure_live_list(self, lid):
        if lid in self.lists:
            self.lists[lid]["deleted"] = False
        else:
            self.lists[lid] = dict(title="Recovered", color=None, deleted=False, pending=[], completed=[])
            self.order.append(lid)

    def apply(self, c, p):
        kind = c["kind"]
        ref = (tl(c["timeline"]), c["seq"])
        live_list = lambda lid: lid in self.lists and not self.lists[lid]["deleted"]
        live_item = lambda iid: iid in self.items and not self.items[iid]["deleted"]
        if kind == "list.create":
            if p["id"] not in self.lists:
                self.lists[p["id"]] = dict(title=p["title"], color=p.get("color"), deleted=False,
                                           pending=[], completed=[])
                self.place_list(p["id"], p["at"])
        elif kind == "list.rename":
            if live_list(p["id"]):
                self.lists[p["id"]]["title"] = p["title"]
        elif kind == "list.recolor":
            if live_list(p["id"]):
                self.lists[p["id"]]["color"] = p.get("color")
        elif kind == "list.move":
            if live_list(p["id"]) and p["at"].get("after") != p["id"]:
                self.order.remove(p["id"])
                self.place_list(p["id"], p["at"])
        elif kind == "list.delete":
            if live_list(p["id"]):
                observed = {tl(e["timeline"]): e["seq"] for e in p["observed"]}
                survivors = 0
                lst = self.lists[p["id"]]
                for iid in lst["pending"] + lst["completed"]:
                    t, s = self.items[iid]["placed"]
                    if observed.get(t, 0) >= s:
                        self.unlink_item(iid)
                        self.items[iid]["deleted"] = True
                    else:
                        survivors += 1
                if survivors == 0:
                    lst["deleted"] = True
        elif kind == "item.create":
            if p["id"] not in self.items:
                self.ensure_live_list(p["list"])
                self.items[p["id"]] = dict(list=p["list"], text=p["text"], completed=False, deleted=False, placed=ref)
                self.place_item(p["id"], p["at"])
        elif kind == "item.edit":
            if live_item(p["id"]):
                self.items[p["id"]]["text"] = p["text"]
        elif kind == "item.complete":
            if live_item(p["id"]) and not self.items[p["id"]]["completed"]:
                self.unlink_item(p["id"])
                self.items[p["id"]]["completed"] = True
                self.place_item(p["id"], {"top": True})
        elif kind == "item.reopen":
            if live_item(p["id"]) and self.items[p["id"]]["completed"]:
                self.unlink_item(p["id"])
                self.items[p["id"]]["completed"] = False
                self.place_item(p["id"], {"bottom": True})
        elif kind == "item.move":
            item = self.items.get(p["id"])
            if item and not item["deleted"]:
                target = p.get("list", item["list"])
                if target in self.lists and p["at"].get("after") != p["id"]:
                    self.unlink_item(p["id"])
                    if target != item["list"]:
                        self.ensure_live_list(target)
                        item["list"] = target
                        item["placed"] = ref
                    self.place_item(p["id"], p["at"])
        elif kind == "item.delete":
            if live_item(p["id"]):
                self.unlink_item(p["id"])
                self.items[p["id"]]["deleted"] = True

    def canonical(self):
        def item(iid):
            i = self.items[iid]
            return (
                f_bytes(1, unhex(iid)) + f_bytes(2, unhex(i["list"])) + f_string(3, i["text"])
                + f_bool(4, i["completed"]) + f_bool(5, i["deleted"])
                + f_fixed64(6, i["placed"][0]) + f_varint(7, i["placed"][1])
            )

        out = f_varint(1, 1)
        for lid in self.order:
            lst = self.lists[lid]
            inner = f_bytes(1, unhex(lid)) + f_string(2, lst["title"])
            if lst["color"] is not None:
                inner += f_string(3, lst["color"])
            inner += f_bool(4, lst["deleted"])
            inner += b"".join(f_bytes(6, item(i)) for i in lst["pending"])
            inner += b"".join(f_bytes(7, item(i)) for i in lst["completed"])
            out += f_bytes(2, inner)
        for iid in sorted(i for i in self.items if self.items[i]["deleted"]):
            out += f_bytes(3, item(iid))
        return out


def replay(changes):
    state = State()
    skipped = 0
    for c in sorted(changes, key=lambda c: (c["lamport"], tl(c["timeline"]), c["seq"])):
        if c["kind"] == "timeline.end":
            continue
        if c["kind"] not in KINDS_V1 or c["version"] != 1:
            skipped += 1
            continue
        state.apply(c, c["payload_fields"])
    return state, skipped


def canonical_item_fields(i):
    return (
        f_bytes(1, unhex(i["id"])) + f_bytes(2, unhex(i["list"])) + f_string(3, i["text"])
        + f_bool(4, i["completed"]) + f_bool(5, i["deleted"])
        + f_fixed64(6, tl(i["placed_timeline"])) + f_varint(7, i["placed_seq"])
    )


def check_state(vectors, by_name):
    s = vectors["state"]
    # §11 from the described state.
    out = f_varint(1, 1)
    for lst in s["lists"]:
        inner = f_bytes(1, unhex(lst["id"])) + f_string(2, lst["title"])
        if "color" in lst:
            inner += f_string(3, lst["color"])
        inner += f_bool(4, lst["deleted"])
        inner += b"".join(f_bytes(6, canonical_item_fields(i)) for i in lst["pending"])
        inner += b"".join(f_bytes(7, canonical_item_fields(i)) for i in lst["completed"])
        out += f_bytes(2, inner)
    for i in sorted(s["deleted_items"], key=lambda i: unhex(i["id"])):
        out += f_bytes(3, canonical_item_fields(i))
    check(out.hex() == s["canonical"], f"state: canonical encoding\n  mine   {out.hex()}\n  vector {s['canonical']}")
    check(h(unhex(s["canonical"])).hex() == s["digest"], "state: digest")
    # §10: replaying the changes gives that state.
    state, skipped = replay([by_name[n] for n in s["replay_of"]])
    check(state.canonical().hex() == s["canonical"], f"state: replay gives\n  mine   {state.canonical().hex()}")
    check(skipped == s["uninterpretable"], f"state: {skipped} uninterpretable changes")
    check(State().canonical() == bytes([0x08, 0x01]), "state: the empty state does not encode as 08 01")


# ---- §12: baselines ---------------------------------------------------------------------------------

def order_key(field, k):
    return f_bytes(field, f_varint(1, k["lamport"]) + f_fixed64(2, tl(k["timeline"])) + f_varint(3, k["seq"]))


def check_baseline(vectors, by_name):
    b = vectors["baseline"]
    snap = b["snapshot_fields"]
    out = f_varint(1, snap["format"])
    for v in sorted(snap["lists"], key=lambda v: unhex(v["id"])):
        inner = f_bytes(1, unhex(v["id"])) + f_string(2, v["title"])
        if "color" in v:
            inner += f_string(3, v["color"])
        inner += f_bool(4, v["deleted"]) + order_key(5, v["stamp"]) + f_varint(6, v["rank"]) + f_varint(7, v["weight"])
        out += f_bytes(2, inner)
    for v in sorted(snap["items"], key=lambda v: unhex(v["id"])):
        inner = (
            f_bytes(1, unhex(v["id"])) + f_bytes(2, unhex(v["list"])) + f_string(3, v["text"])
            + f_bool(4, v["completed"]) + f_bool(5, v["deleted"])
            + f_fixed64(6, tl(v["placed_timeline"])) + f_varint(7, v["placed_seq"])
            + order_key(8, v["stamp"]) + f_varint(9, v["rank"]) + f_varint(10, v["weight"])
        )
        out += f_bytes(3, inner)
    check(out.hex() == b["snapshot"], f"baseline: snapshot\n  mine   {out.hex()}\n  vector {b['snapshot']}")
    folded = [by_name[n] for n in b["folds"]]
    weight = len(folded)
    check(all(v["weight"] == weight for v in snap["lists"] + snap["items"]), "baseline: weight is not the fold count")
    enc = f_varint(1, b["format"])
    for t in sorted(b["timelines"], key=lambda t: tl(t["timeline"])):
        enc += f_bytes(2, f_fixed64(1, tl(t["timeline"])) + f_varint(2, t["seq"]) + f_bytes(3, unhex(t["head_hash"]))
                       + f_varint(4, t["head_lamport"]) + f_bool(5, t["ended"]))
        last = max((c for c in folded if c["timeline"] == t["timeline"]), key=lambda c: c["seq"])
        check(last["seq"] == t["seq"] and last["sha256"] == t["head_hash"] and last["lamport"] == t["head_lamport"],
              f"baseline: timeline {t['timeline']} head is not its last folded change")
    enc += f_varint(3, b["max_lamport"]) + f_bytes(4, unhex(b["snapshot"]))
    check(b["max_lamport"] == max(c["lamport"] for c in folded), "baseline: max_lamport")
    check(enc.hex() == b["encoded"], f"baseline: encoding\n  mine   {enc.hex()}\n  vector {b['encoded']}")
    check(h(unhex(b["encoded"])).hex() == b["digest"], "baseline: digest")
    # The snapshot holds the state of the folded changes: restoring it (§12) and replaying the rest
    # (§10) must give the state vector. Restore by (rank, ID) into the order and the sections.
    state = State()
    for v in sorted(snap["lists"], key=lambda v: (v["rank"], unhex(v["id"]))):
        state.lists[v["id"]] = dict(title=v["title"], color=v.get("color"), deleted=v["deleted"],
                                    pending=[], completed=[])
        state.order.append(v["id"])
    for v in sorted(snap["items"], key=lambda v: (v["rank"], unhex(v["id"]))):
        state.items[v["id"]] = dict(list=v["list"], text=v["text"], completed=v["completed"], deleted=v["deleted"],
                                    placed=(tl(v["placed_timeline"]), v["placed_seq"]))
        if not v["deleted"]:
            state.section(v["id"]).append(v["id"])
    rest = [c for c in vectors["changes"] if c["name"] not in b["folds"]]
    for c in sorted(rest, key=lambda c: (c["lamport"], tl(c["timeline"]), c["seq"])):
        if c["kind"] in KINDS_V1 and c["version"] == 1:
            state.apply(c, c["payload_fields"])
    check(state.canonical().hex() == vectors["state"]["canonical"], "baseline: restore + replay is not the state")


# ---- §2: Device ID ----------------------------------------------------------------------------------

B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def base32(data):
    bits = int.from_bytes(data, "big")
    count = (len(data) * 8 + 4) // 5
    bits <<= count * 5 - len(data) * 8  # pad the last character with zero bits
    return "".join(B32[(bits >> (5 * (count - 1 - i))) & 31] for i in range(count))


def luhn_base32(chunk):
    factor, total = 1, 0
    for ch in chunk:
        addend = factor * B32.index(ch)
        factor = 1 if factor == 2 else 2
        total += addend // 32 + addend % 32
    return B32[(32 - total % 32) % 32]


def device_id_text(digest):
    data = base32(digest)
    chars = ""
    for i in range(4):
        chunk = data[i * 13:(i + 1) * 13]
        chars += chunk + luhn_base32(chunk)
    return "-".join(chars[i:i + 7] for i in range(0, 56, 7))


def check_device_id(vectors):
    d = vectors["device_id"]
    digest = h(unhex(d["certificate_der"]))
    check(digest.hex() == d["sha256"], "device ID: SHA-256 of the certificate")
    check(base32(digest) == d["base32"], "device ID: base32")
    check(device_id_text(digest) == d["text"], f"device ID: text {device_id_text(digest)}")
    # Syncthing's own vector (PROTOCOL.md §2).
    syncthing = unhex("7f7c8723ecca5b4d22061c4981b34c34d865ec376be1eb74330873c9a6f9b205")
    check(device_id_text(syncthing) == "P56IOI7-MZJNU2Y-IQGDREY-DM2MGTI-MGL3BXN-PQ6W5BM-TBBZ4TJ-XZWICQ2",
          "device ID: Syncthing's vector")


# ---- §5, §13, §16: frames ---------------------------------------------------------------------------

def message_payload(name, f, by_name):
    kind = name.split(" ")[0]
    if kind == "Hello":
        out = p3_varint(1, f["protocol_version"]) + p3_string(2, f["domain_name"]) + p3_varint(3, f["domain_version"])
        out += p3_string(4, f["device_id"]) + p3_string(5, f["name"]) + summary_field(6, f["summary"])
        for e in sorted(f["head_hashes"], key=lambda e: tl(e["timeline"])):
            entry = p3_fixed64(1, tl(e["timeline"])) + p3_varint(2, e["seq"]) + p3_bytes(3, unhex(e["hash"]))
            out += f_bytes(7, entry)
        out += summary_field(8, f["baseline_summary"]) + p3_bytes(9, unhex(f["baseline_digest"]))
        out += p3_bytes(10, unhex(f["state_digest"])) + p3_varint(11, f["unknown_count"])
        out += p3_varint(12, f["max_frame_size"])
        records = [unhex(r) for r in f.get("fork_records", [])]  # §22.9: ForkRecord bytes, sorted by branch
        branches = [int.from_bytes(r[1:9], "little") for r in records]  # field 1, fixed64, written first
        check(all(r[0] == 0x09 for r in records) and all(x < y for x, y in zip(branches, branches[1:])),
              f"frame {name}: fork records not sorted by branch, one per branch")
        out += b"".join(f_bytes(13, r) for r in records)
        nonce = unhex(f.get("instance_nonce", ""))  # §13.2: 16 bytes, or absent
        check(len(nonce) in (0, 16), f"frame {name}: an instance nonce of {len(nonce)} bytes")
        out += p3_bytes(14, nonce)
        return out + p3_varint(16, 1 if f.get("one_shot", False) else 0)  # §13.5: true only from a one-shot session
    if kind == "Want":
        out = summary_field(1, f["have"])
        return out + (f_varint(2, f["baseline_offset"]) if "baseline_offset" in f else b"")  # optional
    if kind == "BaselineChunk":
        return (p3_varint(1, f["total_size"]) + p3_varint(2, f["offset"]) + p3_bytes(3, unhex(f["data"]))
                + p3_varint(4, 1 if f["last"] else 0) + summary_field(5, f["baseline_summary"]))
    if kind == "Changes":
        return b"".join(f_bytes(1, unhex(by_name[n]["canonical"])) for n in f["changes"])
    if kind == "Done":
        return summary_field(1, f["summary"])
    if kind == "Notify":
        out = summary_field(1, f["summary"])
        if "state_digest" in f:  # the state report, §14.4
            out += p3_bytes(2, unhex(f["state_digest"])) + p3_bytes(3, unhex(f.get("baseline_digest", "")))
            out += p3_varint(4, f.get("unknown_count", 0))
        for nonce in f.get("copied_instances", []):  # §13.2: the receiver's home was copied
            check(len(unhex(nonce)) == 16, f"frame {name}: a copied instance of {len(unhex(nonce))} bytes")
            out += f_bytes(5, unhex(nonce))
        return out
    if kind in ("Ping", "Pong"):
        return p3_varint(1, f["nonce"])
    if kind == "Close":
        return p3_string(1, f["reason"])
    if kind == "PairCommit":
        return p3_bytes(1, unhex(f["commitment"]))
    if kind in ("PairNonce", "PairReveal"):
        return p3_bytes(1, unhex(f["nonce"]))
    if kind == "PairConfirm":
        return p3_varint(1, 1 if f["accepted"] else 0)
    raise ValueError(name)


TYPES = {"Hello": 1, "Want": 2, "BaselineChunk": 3, "Changes": 4, "Done": 5, "Notify": 6, "Ping": 7, "Pong": 8,
         "Close": 9, "PairCommit": 32, "PairNonce": 33, "PairReveal": 34, "PairConfirm": 35}


def check_frames(vectors, by_name):
    for fr in vectors["frames"]:
        body = message_payload(fr["name"], fr["fields"], by_name)
        t = TYPES[fr["name"].split(" ")[0]]
        check(t == fr["type"], f"frame {fr['name']}: type {fr['type']}")
        frame = (1 + len(body)).to_bytes(4, "big") + bytes([t]) + body
        check(frame.hex() == fr["bytes"], f"frame {fr['name']}\n  mine   {frame.hex()}\n  vector {fr['bytes']}")
    hello = next(fr for fr in vectors["frames"] if fr["name"] == "Hello")["fields"]
    check(hello["device_id"] == vectors["device_id"]["text"], "Hello: device_id is not the certificate's ID")
    check(hello["state_digest"] == vectors["state"]["digest"], "Hello: state_digest is not the state's")
    check(hello["baseline_digest"] == vectors["baseline"]["digest"], "Hello: baseline_digest is not the baseline's")


def check_pairing(vectors):
    p = vectors["pairing"]
    cert_r = unhex(vectors["device_id"]["certificate_der"])
    cert_i = unhex(p["initiator_certificate_der"])
    nr, ni = unhex(p["responder_nonce"]), unhex(p["initiator_nonce"])
    commitment = h(b"plait-pair-commit" + cert_r + cert_i + nr)
    check(commitment.hex() == p["commitment"], "pairing: commitment")
    code = int.from_bytes(h(b"plait-pair-code" + cert_i + cert_r + ni + nr)[:8], "big") % 10**6
    check(code == p["code"], f"pairing: code {code}")
    check(f"{code:06d}"[:3] + " " + f"{code:06d}"[3:] == p["code_text"], "pairing: code text")


def check_discovery(vectors):
    d = vectors["discovery"]
    tag = base32(h(d["device_id"].encode() + d["utc_day"].encode()))[:16]
    check(tag == d["tag"], f"discovery: tag {tag}")
    check(base32(h(d["summary_text"].encode()))[:8] == d["sum"], "discovery: sum")



# ---- §20: signatures (ECDSA P-256, low S) and timeline.begin -----------------------------------------

# P-256 (FIPS 186-4 D.1.2.3, SEC 2 secp256r1): y² = x³ − 3x + b over GF(p), base point G of prime order n.
P256_P = 2**256 - 2**224 + 2**192 + 2**96 - 1
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
P256_B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
P256_G = (0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
          0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5)
CHANGE_CONTEXT = b"plait-change-v1\x00"


def on_curve(point):
    x, y = point
    return 0 <= x < P256_P and 0 <= y < P256_P and (y * y - x ** 3 + 3 * x - P256_B) % P256_P == 0


def ec_add(a, b):
    """Affine point addition; None is the point at infinity."""
    if a is None:
        return b
    if b is None:
        return a
    (x1, y1), (x2, y2) = a, b
    if x1 == x2 and (y1 + y2) % P256_P == 0:
        return None
    if a == b:
        slope = (3 * x1 * x1 - 3) * pow(2 * y1, -1, P256_P) % P256_P
    else:
        slope = (y2 - y1) * pow(x2 - x1, -1, P256_P) % P256_P
    x3 = (slope * slope - x1 - x2) % P256_P
    return x3, (slope * (x1 - x3) - y1) % P256_P


def ec_mul(k, point):
    result = None
    while k:
        if k & 1:
            result = ec_add(result, point)
        point = ec_add(point, point)
        k >>= 1
    return result


def der_read(data, i):
    """One DER TLV at data[i:]: (tag, value, index after it); raises ValueError on bad input."""
    if i + 2 > len(data):
        raise ValueError("truncated")
    tag_byte, length, i = data[i], data[i + 1], i + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or i + count > len(data):
            raise ValueError("bad length")
        length, i = int.from_bytes(data[i:i + count], "big"), i + count
    if i + length > len(data):
        raise ValueError("truncated")
    return tag_byte, data[i:i + length], i + length


def der_children(value):
    out, i = [], 0
    while i < len(value):
        tag_byte, inner, i = der_read(value, i)
        out.append((tag_byte, inner))
    return out


OID_EC_PUBLIC_KEY = bytes.fromhex("2a8648ce3d0201")  # 1.2.840.10045.2.1
OID_PRIME256V1 = bytes.fromhex("2a8648ce3d030107")  # 1.2.840.10045.3.1.7


def p256_public_key(certificate):
    """§20.1: the P-256 point of an X.509 certificate (exactly one DER value), or None: not P-256, or not parsed."""
    try:
        tag_byte, cert, end = der_read(certificate, 0)
        if tag_byte != 0x30 or end != len(certificate):
            return None
        tbs = der_children(der_children(cert)[0][1])
        if tbs[0][0] == 0xA0:  # [0] EXPLICIT version
            tbs = tbs[1:]
        # serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo
        spki = der_children(tbs[5][1])
        algorithm = der_children(spki[0][1])
        if algorithm != [(0x06, OID_EC_PUBLIC_KEY), (0x06, OID_PRIME256V1)] or spki[1][0] != 0x03:
            return None
        bits = spki[1][1]
        if len(bits) != 66 or bits[0] != 0 or bits[1] != 0x04:  # no unused bits; an uncompressed point
            return None
        point = (int.from_bytes(bits[2:34], "big"), int.from_bytes(bits[34:66], "big"))
        return point if on_curve(point) else None
    except (ValueError, IndexError):
        return None


def ecdsa_valid(point, message, r, s):
    """Plain ECDSA P-256 / SHA-256 (FIPS 186-4 §6.4.2), without the low-S rule."""
    if not (1 <= r < P256_N and 1 <= s < P256_N):
        return False
    e = int.from_bytes(h(message), "big")
    w = pow(s, -1, P256_N)
    x = ec_add(ec_mul(e * w % P256_N, P256_G), ec_mul(r * w % P256_N, point))
    return x is not None and x[0] % P256_N == r


def change_signature_valid(certificate, change_hash, signature):
    """§20.4: what a verifier accepts — 64 bytes r‖s, 1 ≤ r, s < n, s ≤ ⌊n/2⌋, valid under the certificate's
    P-256 key over SHA-256(context ‖ hash)."""
    point = p256_public_key(certificate)
    if point is None or len(signature) != 64 or len(change_hash) != 32:
        return False
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    if s > P256_N // 2:
        return False
    return ecdsa_valid(point, CHANGE_CONTEXT + change_hash, r, s)


def check_signatures(vectors):
    v = vectors["signatures"]
    # The curve itself: G is on it and has order n.
    check(on_curve(P256_G) and ec_mul(P256_N, P256_G) is None, "P-256: G is not a point of order n")
    certificate, change_hash = unhex(v["certificate_der"]), unhex(v["change_hash"])
    point = p256_public_key(certificate)
    check(point is not None, "signatures: the certificate holds no P-256 key")
    if point is not None:
        check((b"\x04" + point[0].to_bytes(32, "big") + point[1].to_bytes(32, "big")).hex() == v["public_key"],
              "signatures: public_key is not the certificate's")
    message = CHANGE_CONTEXT + change_hash
    check(message.hex() == v["message"], "signatures: message is not context ‖ change hash")
    check(h(message).hex() == v["message_sha256"], "signatures: message_sha256")
    for signature in v["valid"]:
        check(change_signature_valid(certificate, change_hash, unhex(signature)), f"signature {signature} refused")
    for entry in v["refused"]:
        c = unhex(entry.get("certificate_der", v["certificate_der"]))
        m = unhex(entry.get("change_hash", v["change_hash"]))
        check(not change_signature_valid(c, m, unhex(entry["signature"])),
              f"signatures: accepted what must be refused: {entry['why']}")
        # Where the entry says what its signature is valid for, it is: the refusal is for the reason given.
        if "valid_over_message" in entry:
            key = p256_public_key(unhex(entry.get("valid_under_certificate_der", v["certificate_der"])))
            sig = unhex(entry["signature"])
            check(key is not None and ecdsa_valid(key, unhex(entry["valid_over_message"]),
                                                  int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big")),
                  f"signatures: {entry['why']}: not the valid ECDSA signature it claims to be")


def begin_payload(b):
    out = f_bytes(1, unhex(b["certificate_der"])) + f_bytes(2, unhex(b["nonce"]))
    if "supersedes" in b:
        sup = b["supersedes"]
        out += f_bytes(3, f_fixed64(1, tl(sup["timeline"])) + f_varint(2, sup["seq"]) + f_bytes(3, unhex(sup["hash"])))
    return out


def begin_is_accepted(data):
    """§20.5: a begin payload decodes when it has a certificate, a 16-byte nonce and, if it supersedes, a
    superseded head with seq ≥ 1 and a 32-byte hash; bytes fields length-delimited, integers varint or fixed64;
    unknown fields skipped."""
    try:
        fields = {number: (wire, value) for number, wire, value in decode_fields(data)}
        certificate, nonce = fields.get(1, (2, b"")), fields.get(2, (2, b""))
        if certificate[0] != 2 or not certificate[1] or nonce[0] != 2 or len(nonce[1]) != 16:
            return False
        if 3 in fields:
            if fields[3][0] != 2:
                return False
            sup = {number: (wire, value) for number, wire, value in decode_fields(fields[3][1])}
            timeline, seq, head = sup.get(1, (1, 0)), sup.get(2, (0, 0)), sup.get(3, (2, b""))
            if timeline[0] not in (0, 1) or seq[0] not in (0, 1) or seq[1] < 1:
                return False
            if head[0] != 2 or len(head[1]) != 32:
                return False
        return True
    except ValueError:
        return False


def check_timeline_begin(vectors):
    for b in vectors["timeline_begin"]["begins"]:
        name = b["name"]
        p = begin_payload(b)
        check(p.hex() == b["payload"], f"timeline.begin {name}: payload\n  mine   {p.hex()}\n  vector {b['payload']}")
        check(begin_is_accepted(unhex(b["payload"])), f"timeline.begin {name}: payload refused")
        digest = h(b"plait-timeline" + unhex(b["certificate_der"]) + unhex(b["nonce"]))
        timeline = int.from_bytes(digest[:8], "big")
        check(f"{timeline:016x}" == b["timeline"], f"timeline.begin {name}: timeline {timeline:016x}")
        check(timeline_text(timeline) == b["timeline_text"], f"timeline.begin {name}: text {timeline_text(timeline)}")
    for entry in vectors["timeline_begin"]["payloads_refused"]:
        check(not begin_is_accepted(unhex(entry["hex"])), f"timeline.begin payload accepted: {entry['why']}")


# ---- §20.6–§20.8: a signed timeline, signatures on the wire, witnesses, what a receiver takes --------

def check_change_entry(c, what):
    """Recomputes a change entry's payload (from payload_fields or begin_fields), canonical bytes and hash."""
    if "begin_fields" in c:
        p = begin_payload(c["begin_fields"])
        check(p.hex() == c["payload"], f"{what}: begin payload encodes as {p.hex()}")
    elif "payload_fields" in c:
        p = payload(c["kind"], c["payload_fields"])
        check(p.hex() == c["payload"], f"{what}: payload encodes as {p.hex()}")
    canonical = canonical_change(c, unhex(c["payload"]))
    check(canonical.hex() == c["canonical"],
          f"{what}: canonical bytes\n  mine   {canonical.hex()}\n  vector {c['canonical']}")
    digest = h(unhex(c["canonical"]))
    check(digest.hex() == c["sha256"], f"{what}: SHA-256 {digest.hex()}")
    decoded = read_change(unhex(c["canonical"]))
    check(decoded is not None and decoded.get("witness") == c.get("witness"), f"{what}: a reader refuses it")
    return digest


def begin_timeline(begin_fields):
    """§20.5: the timeline a begin opens."""
    digest = h(b"plait-timeline" + unhex(begin_fields["certificate_der"]) + unhex(begin_fields["nonce"]))
    return int.from_bytes(digest[:8], "big")


def check_signed_timeline(vectors, by_name):
    st = vectors["signed_timeline"]
    certificate = unhex(st["certificate_der"])
    check(p256_public_key(certificate) is not None, "signed timeline: the certificate holds no P-256 key")
    derived = begin_timeline(st)
    check(f"{derived:016x}" == st["timeline"] and timeline_text(derived) == st["timeline_text"],
          f"signed timeline: its certificate and nonce derive {derived:016x}")
    lamports = {(tl(c["timeline"]), c["seq"]): c["lamport"] for c in vectors["changes"]}
    named = {}
    seq, lamport, previous = 0, 0, bytes(32)
    for c in st["changes"]:
        name = f"signed timeline {c['name']}"
        digest = check_change_entry(c, name)
        check(c["timeline"] == st["timeline"], f"{name}: not on the signed timeline")
        check(c["seq"] == seq + 1 and unhex(c["previous_hash"]) == previous, f"{name}: breaks the hash chain")
        check(lamport < c["lamport"] <= LAMPORT_MAX, f"{name}: Lamport {c['lamport']} after {lamport}")
        if c["seq"] == 1:
            check(c["kind"] == "timeline.begin" and c["begin_fields"]["certificate_der"] == st["certificate_der"]
                  and c["begin_fields"]["nonce"] == st["nonce"], f"{name}: seq 1 is not the timeline's begin")
        # §20.6: a jump names a witness, the change with Lamport time exactly one below (here in changes).
        if c["lamport"] > lamport + 1:
            check("witness" in c, f"{name}: its Lamport time jumps without a witness")
        if "witness" in c:
            w = c["witness"]
            check(lamports.get((tl(w["timeline"]), w["seq"])) == c["lamport"] - 1,
                  f"{name}: its witness is not a change of the vectors at Lamport {c['lamport'] - 1}")
        if "signature" in c:
            check(change_signature_valid(certificate, digest, unhex(c["signature"])),
                  f"{name}: its signature does not verify under the timeline's certificate")
        seq, lamport, previous = c["seq"], c["lamport"], digest
        named[c["name"]] = c
    check("signature" in st["changes"][-1], "signed timeline: its head is not signed (§20.7)")
    check(any("witness" in c for c in st["changes"]), "signed timeline: no change names a witness")
    return named


def decode_changes_frame(frame):
    """§5, §20.7: the (canonical bytes, signature or None) pairs of a Changes frame, or None when it does not
    decode (a change refused by §8, a signature not 64 bytes, an index beyond the batch or signed twice)."""
    if len(frame) < 5 or int.from_bytes(frame[:4], "big") != len(frame) - 4 or frame[4] != 4:
        return None
    try:
        changes, signatures = [], {}
        for number, wire, value in decode_fields(frame[5:]):
            if number not in (1, 2):
                continue  # unknown fields are skipped (§6)
            if wire != 2:
                return None
            if number == 1:
                if not change_is_accepted(bytes(value)):
                    return None
                changes.append(bytes(value))
                continue
            index, signature = 0, b""
            for inner_number, inner_wire, inner_value in decode_fields(bytes(value)):
                if inner_number == 1 and inner_wire == 0:
                    index = inner_value
                elif inner_number == 2 and inner_wire == 2:
                    signature = bytes(inner_value)
            if len(signature) != 64 or index in signatures:
                return None
            signatures[index] = signature
    except ValueError:
        return None
    if any(index >= len(changes) for index in signatures):
        return None
    return [(change, signatures.get(i)) for i, change in enumerate(changes)]


def check_changes_message(vectors, signed):
    m = vectors["changes_message"]
    body = b"".join(f_bytes(1, unhex(signed[n]["canonical"])) for n in m["changes"])
    for e in m["signatures"]:
        body += f_bytes(2, p3_varint(1, e["index"]) + p3_bytes(2, unhex(e["signature"])))
    frame = (1 + len(body)).to_bytes(4, "big") + bytes([4]) + body
    check(frame.hex() == m["bytes"], f"changes message\n  mine   {frame.hex()}\n  vector {m['bytes']}")
    decoded = decode_changes_frame(unhex(m["bytes"]))
    expected = [(unhex(signed[n]["canonical"]), None) for n in m["changes"]]
    for e in m["signatures"]:
        expected[e["index"]] = (expected[e["index"]][0], unhex(e["signature"]))
        change = signed[m["changes"][e["index"]]]
        check(e["signature"] == change.get("signature") and change_signature_valid(
            unhex(vectors["signed_timeline"]["certificate_der"]), unhex(change["sha256"]), unhex(e["signature"])),
            "changes message: the signature is not the signed change's")
    check(decoded == expected, "changes message: does not decode to its changes and signature")
    for e in m["accepted"]:
        expected = [(unhex(signed[n]["canonical"]), unhex(signed[n]["signature"]) if i in e["signed"] else None)
                    for i, n in enumerate(e["changes"])]
        check(decode_changes_frame(unhex(e["bytes"])) == expected, f"changes message refused: {e['why']}")
    for e in m["refused"]:
        check(decode_changes_frame(unhex(e["bytes"])) is None, f"changes message accepted: {e['why']}")


def check_witness_encoding(vectors, signed):
    we = vectors["witness_encoding"]
    with_witness, without = signed[we["with"]], we["without"]
    if "witness" not in with_witness:
        check(False, f"witness encoding: {we['with']} names no witness")
        return
    digest = check_change_entry(without, "witness encoding: without")
    check("witness" not in without and {k: v for k, v in with_witness.items()
                                          if k not in ("witness", "canonical", "sha256", "signature", "name")}
          == {k: v for k, v in without.items() if k not in ("canonical", "sha256", "signature", "name")},
          "witness encoding: without is not the same change without its witness")
    field9 = witness_field(with_witness["witness"])
    check(field9.hex() == we["field_9"] and field9[:3] == bytes([0x4A, 0x0B, 0x09]),
          f"witness encoding: field 9 is {field9.hex()}")
    check(unhex(with_witness["canonical"]) == unhex(without["canonical"]) + unhex(we["field_9"]),
          "witness encoding: the witness is not appended after field 8")
    check(change_signature_valid(unhex(vectors["signed_timeline"]["certificate_der"]), digest,
                                 unhex(without["signature"])), "witness encoding: without's signature")
    for e in we["refused"]:
        check(not change_is_accepted(unhex(e["hex"])), f"change should be refused: {e['why']}")


INTAKE_KEYS = ("accepted", "held_back", "refused", "signatures_kept")


def small_intake(scenario, changes):
    """§14.2 and §20.8 for a batch far below the signing rule's 1,000 changes and 1 MiB, whose witnesses are held
    or taken in the batch (none held back): per timeline in seq order, the checks of §14.2 and of a begin; then
    witnesses; then the last signature of the run, the only one verified; what follows it is held back."""
    heads = {tl(x["timeline"]): x for x in scenario["held"]["heads"]}
    witnesses = {(tl(w["timeline"]), w["seq"]): w["lamport"] for w in scenario["held"]["witnesses"]}
    in_batch = {}  # a witness may be a change of the same batch (§20.8)
    runs = {}
    for entry in scenario["batch"]:
        c = changes[entry["change"]]
        fields = read_change(unhex(c["canonical"]))
        signature = unhex(entry["signature"]) if "signature" in entry else None
        digest = h(unhex(c["canonical"]))
        in_batch[(tl(fields["timeline"]), fields["seq"])] = fields["lamport"]
        runs.setdefault(tl(fields["timeline"]), []).append((entry["change"], fields, digest, signature))
    out = {key: [] for key in INTAKE_KEYS}
    for t in sorted(runs):
        held = heads.get(t)
        seq, lamport, previous = (held["seq"], held["lamport"], unhex(held["hash"])) if held else (0, 0, bytes(32))
        certificate = unhex(held["certificate_der"]) if held and "certificate_der" in held else None
        candidates, refusal = [], None

        def refuse(reason, at):
            return {"timeline": f"{t:016x}", "reason": reason, "seq": at}

        for name, c, digest, signature in sorted(runs[t], key=lambda r: r[1]["seq"]):
            if c["seq"] != seq + 1:
                refusal = refuse("gap", c["seq"])
            elif unhex(c["previous_hash"]) != previous:
                refusal = refuse("brokenChain", c["seq"])
            elif not lamport < c["lamport"] <= LAMPORT_MAX:
                refusal = refuse("lamportNotIncreasing", c["seq"])
            elif c["kind"] == "timeline.begin":
                p = unhex(c["payload"])
                fields = {number: value for number, _, value in decode_fields(p)} if begin_is_accepted(p) else {}
                if c["seq"] != 1 or not fields or begin_timeline(
                        {"certificate_der": bytes(fields[1]).hex(), "nonce": bytes(fields[2]).hex()}) != t:
                    refusal = refuse("badBegin", c["seq"])
                else:
                    certificate = bytes(fields[1])
            if refusal:
                break
            candidates.append((name, c, digest, signature, lamport))
            seq, lamport, previous = c["seq"], c["lamport"], digest
        if certificate is None:  # an unsigned timeline: protocol-1 history, taken as it is
            out["accepted"] += [x[0] for x in candidates]
        else:
            for i, (name, c, digest, signature, before) in enumerate(candidates):
                w = c.get("witness")
                if w is None and c["lamport"] > before + 1:
                    refusal = refusal or refuse("missingWitness", c["seq"])
                elif w is not None and c["lamport"] - 1 not in (witnesses.get((tl(w["timeline"]), w["seq"])),
                                                                in_batch.get((tl(w["timeline"]), w["seq"]))):
                    refusal = refusal or refuse("witnessNotHeld", c["seq"])
                else:
                    continue
                candidates = candidates[:i]
                break
            signed_at = [i for i, x in enumerate(candidates) if x[3] is not None]
            taken = 0
            if signed_at:
                name, c, digest, signature, _ = candidates[signed_at[-1]]
                if change_signature_valid(certificate, digest, signature):
                    taken = signed_at[-1] + 1
                    out["signatures_kept"].append(name)
                else:
                    refusal = refusal or refuse("badSignature", c["seq"])
                    candidates = []
            out["accepted"] += [x[0] for x in candidates[:taken]]
            out["held_back"] += [x[0] for x in candidates[taken:]]
        if refusal:
            out["refused"].append(refusal)
    return out


def check_intake_verdicts(vectors, signed):
    iv = vectors["intake_verdicts"]
    certificates = {"author": unhex(vectors["signed_timeline"]["certificate_der"]),
                    "forger": unhex(iv["forger_certificate_der"])}
    check(certificates["forger"] != certificates["author"] and p256_public_key(certificates["forger"]) is not None,
          "intake verdicts: the forger's certificate is not another P-256 key")
    changes = dict(signed)
    changes.update((c["name"], c) for c in vectors["changes"])
    without = vectors["witness_encoding"]["without"]
    changes[without["name"]] = without
    for c in iv["changes"]:
        what = f"intake verdicts: {c['name']}"
        digest = check_change_entry(c, what)
        # The fact each refusal rests on: the signature is valid under the key that made it…
        check(change_signature_valid(certificates[c["signed_by"]], digest, unhex(c["signature"])),
              f"{what}: its signature is not valid under the {c['signed_by']}'s certificate")
        if c["kind"] == "timeline.begin":
            derived = begin_timeline(c["begin_fields"])
            check(c["begin_fields"]["certificate_der"] == vectors["signed_timeline"]["certificate_der"],
                  f"{what}: does not carry the author's certificate")
            check((f"{derived:016x}" == c["timeline"]) == (c["signed_by"] == "forger"),
                  f"{what}: the derived timeline {derived:016x} is not what the vector says it is")
        elif c["signed_by"] == "forger":
            # …and a forged change continues the author's chain but is not signed by the author's key.
            head = signed[f"S{c['seq'] - 1}"]
            check(c["timeline"] == head["timeline"] and c["previous_hash"] == head["sha256"],
                  f"{what}: does not continue the author's timeline")
            check(not change_signature_valid(certificates["author"], digest, unhex(c["signature"])),
                  f"{what}: verifies under the author's key")
        changes[c["name"]] = c
    kinds = set()
    for scenario in iv["scenarios"]:
        got = small_intake(scenario, changes)
        for key in INTAKE_KEYS:
            check(got[key] == scenario[key], f"intake verdict {scenario['name']!r}: {key} {got[key]}")
        kinds |= {r["reason"] for r in scenario["refused"]}
    check({"badSignature", "badBegin", "missingWitness", "witnessNotHeld"} <= kinds,
          f"intake verdicts: only {sorted(kinds)} are refused")
    check(any(s["held_back"] for s in iv["scenarios"]), "intake verdicts: nothing is held back")


# ---- what must be refused (§2, §7, §8) ---------------------------------------------------------------

def parse_summary(text):
    """§7: the strict text form; None when refused."""
    if text == "":
        return {}
    out, previous = {}, None
    for entry in text.split(","):
        parts = entry.split(":")
        if len(parts) != 2 or len(parts[0]) != 13 or any(ch not in CROCKFORD for ch in parts[0]):
            return None
        if CROCKFORD.index(parts[0][0]) > 15:
            return None
        digits = parts[1]
        if not digits or not digits.isascii() or not digits.isdigit() or (len(digits) > 1 and digits[0] == "0"):
            return None
        seq = int(digits)
        timeline = 0
        for ch in parts[0]:
            timeline = timeline << 5 | CROCKFORD.index(ch)
        if not 1 <= seq <= (1 << 63) - 1 or (previous is not None and timeline <= previous):
            return None
        out[timeline], previous = seq, timeline
    return out


def parse_device_id(text):
    """§2: the digest, or None when refused."""
    chars = [ch.upper() for ch in text if ch not in "- \t\r\n"]
    if len(chars) != 56 or any(ch not in B32 for ch in chars):
        return None
    data = ""
    for i in range(4):
        chunk = "".join(chars[i * 14:i * 14 + 13])
        if luhn_base32(chunk) != chars[i * 14 + 13]:
            return None
        data += chunk
    bits = 0
    for ch in data:
        bits = bits << 5 | B32.index(ch)
    if bits & 0xF:  # the four padding bits of the last character
        return None
    return (bits >> 4).to_bytes(32, "big")


def decode_fields(data):
    """Protobuf fields as (number, wire type, value) triples; raises ValueError on bad input."""
    i, out = 0, []

    def read_varint():
        nonlocal i
        value, shift = 0, 0
        while True:
            if i >= len(data) or shift >= 64:
                raise ValueError("bad varint")
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    while i < len(data):
        key = read_varint()
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire == 0:
            out.append((number, wire, read_varint()))
        elif wire == 1:
            out.append((number, wire, int.from_bytes(data[i:i + 8], "little")))
            i += 8
        elif wire == 2:
            length = read_varint()
            out.append((number, wire, data[i:i + length]))
            i += length
        elif wire == 5:
            out.append((number, wire, int.from_bytes(data[i:i + 4], "little")))
            i += 4
        else:
            raise ValueError("unsupported wire type")
        if i > len(data):
            raise ValueError("truncated")
    return out


def read_change(data):
    """§8 and §20.6: the change's fields, or None when a reader must refuse the bytes: decode, then re-encode
    canonically; the bytes must come back unchanged (and a witness, when present, names a seq of at least 1)."""
    try:
        triples = decode_fields(data)
        fields = {number: value for number, _, value in triples}
        wires = {number: wire for number, wire, _ in triples}
        if not {1, 2, 3, 5} <= set(fields) or fields[2] < 1:
            return None
        c = dict(timeline=f"{fields[1]:016x}", seq=fields[2], lamport=fields[3],
                 previous_hash=bytes(fields.get(4, bytes(32))).hex(), kind=bytes(fields[5]).decode("utf-8"),
                 version=fields.get(6, 1), wall_time=fields.get(7, 0), payload=bytes(fields.get(8, b"")).hex())
        if 9 in fields:
            if wires[9] != 2:
                return None
            inner = {number: value for number, _, value in decode_fields(bytes(fields[9]))}
            if inner.get(2, 0) < 1:
                return None
            c["witness"] = dict(timeline=f"{inner.get(1, 0):016x}", seq=inner[2])
    except (ValueError, UnicodeDecodeError, TypeError):
        return None
    if canonical_change(c, unhex(c["payload"])) != data:
        return None
    return c


def change_is_accepted(data):
    return read_change(data) is not None


def check_refused(vectors):
    r = vectors["refused"]
    for text in r["summary_texts_accepted"]:
        check(parse_summary(text) is not None, f"summary {text!r} should parse")
    for text in r["summary_texts_refused"]:
        check(parse_summary(text) is None, f"summary {text!r} should be refused")
    digest = unhex(vectors["device_id"]["sha256"])
    for text in r["device_id_texts_accepted"]:
        check(parse_device_id(text) == digest, f"Device ID {text!r} should parse")
    for text in r["device_id_texts_refused"]:
        check(parse_device_id(text) is None, f"Device ID {text!r} should be refused")
    for c in vectors["changes"]:
        check(change_is_accepted(unhex(c["canonical"])), f"change {c['name']} should be accepted")
    for entry in r["changes_refused"]:
        check(not change_is_accepted(unhex(entry["hex"])), f"change should be refused: {entry['why']}")


# ---- §22: forks resolved by renaming -----------------------------------------------------------------

def fork_branch_name(parent, first_hash):
    """§22: T′ = first 8 bytes, big-endian, of SHA-256("plait-fork" ‖ P as 8 bytes big-endian ‖ hash)."""
    return int.from_bytes(h(b"plait-fork" + parent.to_bytes(8, "big") + first_hash)[:8], "big")


def name_fork(timeline, held):
    """§22's branch names for the held changes of `timeline` (each: seq, hash, prev as bytes, from its bytes).
    Returns ({hash: (name, seq under it)}, [(branch, parent, first change's hash, f)])."""
    names, branches = {}, []
    children = {}
    for c in held:
        children.setdefault(c["prev"], []).append(c)
    m = min(c["seq"] for c in held)
    # Each entry: a change, the name it goes under, and f (the author's number of that name's first change; 1 on T).
    stack = []

    def place(group, name, f, leaving):
        group = sorted(group, key=lambda c: c["hash"])
        for index, c in reversed(list(enumerate(group))):
            if index == 0:
                stack.append((c, name, f))
            else:
                branch = fork_branch_name(leaving, c["hash"])
                branches.append((branch, leaving, c["hash"], c["seq"]))
                stack.append((c, branch, c["seq"]))

    place([c for c in held if c["seq"] == m], timeline, 1, timeline)
    while stack:
        c, name, f = stack.pop()
        if c["hash"] in names:
            continue
        names[c["hash"]] = (name, c["seq"] - f + 1)
        place([k for k in children.get(c["hash"], []) if k["seq"] == c["seq"] + 1], name, f, name)
    return names, branches


def fork_entries(vectors, signed):
    """The `signed_timeline` changes and the `fork_naming` branch changes, by name."""
    entries = dict(signed)
    for c in vectors["fork_naming"]["changes"]:
        entries[c["name"]] = c
    return entries


def held_change(entry):
    """What §22's naming reads of a held change, from its canonical bytes: its number, hash and prev."""
    data = unhex(entry["canonical"])
    decoded = read_change(data)
    if decoded is None:
        return None
    return dict(seq=decoded["seq"], hash=h(data), prev=unhex(decoded["previous_hash"]), timeline=tl(decoded["timeline"]))


def check_fork_naming(vectors, signed):
    fn = vectors["fork_naming"]
    for b in fn["branch_ids"]:
        branch = fork_branch_name(tl(b["parent"]), unhex(b["first_hash"]))
        check(f"{branch:016x}" == b["id"] and timeline_text(branch) == b["text"],
              f"fork naming: branch of {b['parent']} at {b['first_hash'][:16]}… is {branch:016x}")
    for c in fn["changes"]:
        check_change_entry(c, f"fork naming {c['name']}")
    entries = fork_entries(vectors, signed)
    timeline = tl(fn["timeline"])
    for scenario in fn["scenarios"]:
        what = f"fork naming, {scenario['name']}"
        held, by_hash = [], {}
        for name in scenario["held"]:
            c = held_change(entries[name])
            check(c is not None and c["timeline"] == timeline, f"{what}: {name} is not a change of T")
            held.append(c)
            by_hash[c["hash"]] = name
        names, branches = name_fork(timeline, held)
        mine = sorted((by_hash[k], f"{v[0]:016x}", v[1]) for k, v in names.items())
        theirs = sorted((n["change"], n["timeline"], n["seq"]) for n in scenario["names"])
        check(mine == theirs, f"{what}: names\n  mine   {mine}\n  vector {theirs}")
        mine = sorted((f"{b:016x}", timeline_text(b), f"{p:016x}", by_hash[first], f) for b, p, first, f in branches)
        theirs = sorted((b["id"], b["text"], b["parent"], b["first"], b["f"]) for b in scenario["branches"])
        check(mine == theirs, f"{what}: branches\n  mine   {mine}\n  vector {theirs}")
        # The names depend only on the set held, never on the order.
        again, _ = name_fork(timeline, list(reversed(held)))
        check(again == names, f"{what}: the names depend on the order the changes are held in")



# ---- §22.8: fork records and naming with a baseline's anchors ------------------------------------------

def fork_record_bytes(r):
    """plait.proto ForkRecord: branch, root, parent as fixed64 1-3, base as varint 4, first and rival hash 5, 6."""
    return (f_fixed64(1, r["branch"]) + f_fixed64(2, r["root"]) + f_fixed64(3, r["parent"]) + f_varint(4, r["base"])
            + f_bytes(5, r["first_hash"]) + f_bytes(6, r["rival_hash"]))


def fork_record_consistent(r):
    """§22.8: a reader refuses a record whose branch is not ForkBranch.id(parent, first_hash), whose hashes are not
    32 bytes, whose rival_hash is not below first_hash, or whose base is 0."""
    return (len(r["first_hash"]) == 32 and len(r["rival_hash"]) == 32 and r["rival_hash"] < r["first_hash"]
            and r["base"] != 0 and fork_branch_name(r["parent"], r["first_hash"]) == r["branch"])


def name_fork_with(timeline, held, anchors, records):
    """§22 naming with §22.8's two additions. anchors: (name, author's number of its last folded change, its hash,
    base of the name); records: the consistent records of `timeline`. Returns {hash: (name, seq under it)}."""
    names = {}
    children = {}
    for c in held:
        children.setdefault(c["prev"], []).append(c)
    record_of = {r["first_hash"]: r for r in records if r["root"] == timeline}
    stack = []

    def place(group, name, base):
        group = sorted(group, key=lambda c: c["hash"])
        # The keeper: the smallest hash among the held changes no record names and the rivals of the records here.
        candidates = [c["hash"] for c in group if c["hash"] not in record_of]
        candidates += [record_of[c["hash"]]["rival_hash"] for c in group if c["hash"] in record_of]
        keeper = min(candidates)
        for c in reversed(group):
            if c["hash"] == keeper:
                stack.append((c, name, base))
            elif c["hash"] in record_of:
                r = record_of[c["hash"]]
                stack.append((c, r["branch"], r["base"]))
            else:
                stack.append((c, fork_branch_name(name, c["hash"]), c["seq"] - 1))

    hashes = {c["hash"] for c in held}
    anchor_hashes = {a[2] for a in anchors}
    for name, author_seq, hash_, base in sorted(anchors, key=lambda a: a[2], reverse=True):
        group = [c for c in children.get(hash_, []) if c["seq"] == author_seq + 1]
        if group:
            place(group, name, base)
    rest = [c for c in held if c["prev"] not in hashes and c["prev"] not in anchor_hashes]
    if rest:
        m = min(c["seq"] for c in rest)
        place([c for c in rest if c["seq"] == m], timeline, 0)
    while stack:
        c, name, base = stack.pop()
        if c["hash"] in names:
            continue
        names[c["hash"]] = (name, c["seq"] - base)
        place_next = [k for k in children.get(c["hash"], []) if k["seq"] == c["seq"] + 1]
        if place_next:
            place(place_next, name, base)
    return names


def check_fork_records(vectors, signed):
    fr = vectors["fork_records"]
    entries = fork_entries(vectors, signed)
    by_hash = {}
    for name, c in entries.items():
        by_hash[h(unhex(c["canonical"]))] = name

    def record(e):
        return dict(branch=tl(e["branch"]), root=tl(e["root"]), parent=tl(e["parent"]), base=e["base"],
                    first_hash=unhex(e["first_hash"]), rival_hash=unhex(e["rival_hash"]))

    records = []
    for e in fr["records"]:
        r = record(e)
        records.append(r)
        check(fork_record_consistent(r), f"fork record {e['branch']}: not consistent")
        check(fork_record_bytes(r).hex() == e["encoded"], f"fork record {e['branch']}: ForkRecord bytes differ")
        check(by_hash.get(r["first_hash"]) == e["first"], f"fork record {e['branch']}: first change is not {e['first']}")
    # §22.9: a Hello carries the records its sender holds, the same bytes.
    for frame in vectors["frames"]:
        for encoded in frame["fields"].get("fork_records", []):
            check(encoded in {e["encoded"] for e in fr["records"]},
                  f"frame {frame['name']}: a fork record that is not one of the fork_records group")
    for e in fr["refused"]:
        r = record(e)
        check(not fork_record_consistent(r), f"refused fork record ({e['why']}) reads as consistent")
        check(fork_record_bytes(r).hex() == e["encoded"], f"refused fork record ({e['why']}): bytes differ")
    timeline = tl(fr["timeline"])
    full = {n["change"]: (n["timeline"], n["seq"]) for n in vectors["fork_naming"]["scenarios"][0]["names"]}
    for scenario in fr["scenarios"]:
        what = f"fork records, {scenario['name']}"
        held = [held_change(entries[name]) for name in scenario["held"]]
        known = [r for r in records if f"{r['branch']:016x}" in scenario["records"]]
        bases = {r["branch"]: r["base"] for r in known}
        anchors = []
        for a in scenario["baseline"]:
            name = tl(a["timeline"])
            base = bases.get(name, 0)
            anchors.append((name, base + a["seq"], unhex(a["head_hash"]), base))
        names = name_fork_with(timeline, held, anchors, known)
        mine = sorted((by_hash[k], f"{v[0]:016x}", v[1]) for k, v in names.items())
        theirs = sorted((n["change"], n["timeline"], n["seq"]) for n in scenario["names"])
        check(mine == theirs, f"{what}: names\n  mine   {mine}\n  vector {theirs}")
        for change, t, seq in theirs:
            check(full.get(change) == (t, seq), f"{what}: {change} is not named as by the device holding everything")


# ---- §9, §22.6: list.delete version 2 and what a delete covers ---------------------------------------

def delete_v2_payload(list_id, observed):
    """§9: ListDelete at version 2, every observed entry with its head_hash (field 3), ascending timeline."""
    out = f_bytes(1, unhex(list_id))
    for e in sorted(observed, key=lambda e: tl(e["timeline"])):
        out += f_bytes(2, f_fixed64(1, tl(e["timeline"])) + f_varint(2, e["seq"]) + f_bytes(3, unhex(e["head_hash"])))
    return out


def delete_v2_decodes(data):
    """§9: a version-2 ListDelete decodes when every observed entry has a timeline and a 32-byte head_hash and no
    timeline has two entries."""
    try:
        seen = set()
        for number, wire, value in decode_fields(data):
            if number != 2:
                continue
            if wire != 2:
                return False
            fields = {n: v for n, _, v in decode_fields(value)}
            if 1 not in fields or not isinstance(fields.get(3), bytes) or len(fields[3]) != 32:
                return False
            if fields[1] in seen:
                return False
            seen.add(fields[1])
        return True
    except ValueError:
        return False


def delete_coverage(observed, version, names, branches):
    """§22.6: the union of what each observed entry covers, as {timeline: seq}. names: {hash: (timeline, seq)};
    branches: {branch: (parent, f)} with f the author's number of the branch's first change."""
    base = {b: f - 1 for b, (_, f) in branches.items()}
    covered = {}

    def cover(timeline, seq):
        if seq > 0:
            covered[timeline] = max(covered.get(timeline, 0), seq)

    for e in observed:
        timeline, n = tl(e["timeline"]), e["seq"]
        if version == 1:
            points = [f - base.get(timeline, 0) for b, (parent, f) in branches.items() if parent == timeline]
            cover(timeline, min([n] + [p - 1 for p in points]))
            continue
        head = names.get(unhex(e["head_hash"]))
        if head is None:
            continue  # that chain is not held yet: it covers nothing
        x, m = head
        if m + base.get(x, 0) != n:
            continue  # the held change with that hash stands at another author's number: not the one named
        cover(x, m)
        while x in branches:
            parent, f = branches[x]
            x, m = parent, base[x] - base.get(parent, 0)
            cover(x, m)
    return covered


def check_delete_coverage(vectors, signed):
    dc = vectors["delete_coverage"]
    entries = fork_entries(vectors, signed)
    fn = vectors["fork_naming"]
    timeline = tl(fn["timeline"])
    held = [held_change(entries[name]) for name in dc["held"]]
    names, branch_list = name_fork(timeline, held)
    branches = {b: (parent, f) for b, parent, _, f in branch_list}
    for case in dc["cases"]:
        what = f"delete coverage, {case['name']}"
        if case["version"] == 2:
            mine = delete_v2_payload(dc["list"], case["observed"])
            for e in case["observed"]:
                if e["head"] in entries:
                    check(unhex(e["head_hash"]) == h(unhex(entries[e["head"]]["canonical"])),
                          f"{what}: head_hash is not the hash of {e['head']}")
        else:
            mine = payload("list.delete", {"id": dc["list"], "observed": case["observed"]})
        check(mine.hex() == case["payload"], f"{what}: payload {mine.hex()}")
        covered = delete_coverage(case["observed"], case["version"], names, branches)
        mine = sorted((f"{t:016x}", s) for t, s in covered.items())
        theirs = sorted((e["timeline"], e["seq"]) for e in case["covers"])
        check(mine == theirs, f"{what}\n  mine   {mine}\n  vector {theirs}")
    check(delete_v2_decodes(unhex(dc["version_2_payload"])), "delete coverage: the version-2 payload should decode")
    for e in dc["version_2_refused"]:
        check(not delete_v2_decodes(unhex(e["hex"])), f"delete coverage: should not decode: {e['why']}")


def check_document(vectors, root):
    """The worked examples written out in PROTOCOL.md are the vectors' values."""
    with open(os.path.join(root, "PROTOCOL.md"), encoding="utf-8") as f:
        text = f.read()
    block = text[text.index("### 8.1"):]
    block = block[block.index("```") + 3:]
    block = block[:block.index("```")]
    written = bytearray()
    for line in block.strip().splitlines():
        for token in line.split():
            if token == "00…00":
                written += bytes(32)
            elif len(token) == 2 and all(ch in "0123456789abcdef" for ch in token):
                written.append(int(token, 16))
            else:
                break
    a1 = next(c for c in vectors["changes"] if c["name"] == "A1")
    check(written.hex() == a1["canonical"], f"PROTOCOL.md §8.1 writes out {written.hex()}, not A1")
    for value in (vectors["device_id"]["sha256"], vectors["device_id"]["base32"], vectors["device_id"]["text"],
                  vectors["summary"]["text"]):
        check(value in text, f"PROTOCOL.md does not show the vector value {value}")
    for t in vectors["timeline_ids"][:2]:
        check(f"`{t['text']}`" in text, f"PROTOCOL.md does not show timeline {t['text']}")
    # §20: the constants written out are the curve's, and the worked begin is the first vector.
    check(f"n     = {P256_N:064X}" in text and f"⌊n/2⌋ = {P256_N // 2:064X}" in text,
          "PROTOCOL.md §20.3 does not write out n and ⌊n/2⌋ of P-256")
    # §19 lists every group of the vector file, and §20.6 writes out how field 9 begins.
    section = text[text.index("## 19. Conformance vectors"):text.index("## 20.")]
    for group in vectors:
        check(group == "about" or f"`{group}`" in section, f"PROTOCOL.md §19 does not list the group {group}")
    check("`4a 0b 09`" in text and vectors["witness_encoding"]["field_9"].startswith("4a0b09"),
          "PROTOCOL.md §20.6 does not show how field 9 begins")
    begin = vectors["timeline_begin"]["begins"][0]
    check(f"`0x{begin['timeline']}`, text `{begin['timeline_text']}`" in text,
          "PROTOCOL.md §20.5 does not show the first begin's timeline")


# ---- §20.9: a folded begin's certificate and nonce in a baseline -----------------------------------------

def baseline_entry_problem(entry):
    """§20.9: why a reader refuses a BaselineTimeline's key fields (None when it takes them)."""
    fields = {number: value for number, _, value in decode_fields(entry)}
    certificate, nonce = fields.get(6), fields.get(8)
    if nonce is None:
        return None
    if certificate is None:
        return "a nonce without a certificate"
    if len(nonce) != 16:
        return "a nonce not of 16 bytes"
    if int.from_bytes(h(b"plait-timeline" + certificate + nonce)[:8], "big") != fields.get(1):
        return "certificate and nonce do not derive the entry's timeline"
    return None


def baseline_entries(data):
    return [value for number, _, value in decode_fields(data) if number == 2]


def check_baseline_keys(vectors, signed):
    g = vectors["baseline_keys"]
    st = vectors["signed_timeline"]
    folded = [signed[n] for n in g["folds"]]
    last = max(folded, key=lambda c: c["seq"])
    check(g["timeline"] == st["timeline"] and g["seq"] == last["seq"] == len(folded),
          "baseline keys: the baseline does not fold the signed timeline from its begin")
    check(g["certificate_der"] == st["certificate_der"] and g["nonce"] == st["nonce"],
          "baseline keys: the entry's certificate and nonce are not the begin's")
    # The entry written out from PROTOCOL.md §12 and §20.9: fields 1-5, then 6 (certificate) and 8 (nonce).
    entry = (f_fixed64(1, tl(g["timeline"])) + f_varint(2, g["seq"]) + f_bytes(3, unhex(last["sha256"]))
             + f_varint(4, last["lamport"]) + f_bool(5, False))
    with_key = entry + f_bytes(6, unhex(g["certificate_der"])) + f_bytes(8, unhex(g["nonce"]))
    encoded, older = unhex(g["encoded"]), unhex(g["without_nonce"])
    fields = decode_fields(encoded)
    snapshot = [v for n, _, v in fields if n == 4]
    check(len(snapshot) == 1, "baseline keys: not one snapshot")
    tail = f_varint(3, max(c["lamport"] for c in folded)) + f_bytes(4, snapshot[0] if snapshot else b"")
    check(encoded == f_varint(1, 1) + f_bytes(2, with_key) + tail,
          "baseline keys: the baseline is not its entry (with certificate and nonce) and snapshot")
    check(older == f_varint(1, 1) + f_bytes(2, entry + f_bytes(6, unhex(g["certificate_der"]))) + tail,
          "baseline keys: without_nonce is not the same baseline without field 8")
    check(h(encoded).hex() == g["digest"], "baseline keys: digest")
    check(all(baseline_entry_problem(e) is None for e in baseline_entries(encoded) + baseline_entries(older)),
          "baseline keys: a reader would refuse the good baselines")
    for r in g["refused"]:
        problems = [baseline_entry_problem(e) for e in baseline_entries(unhex(r["encoded"]))]
        check(any(problems), f"baseline keys: a reader would take the refused baseline ({r['why']})")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "Tests", "Vectors", "conformance.json")
    with open(path, encoding="utf-8") as f:
        vectors = json.load(f)
    for t in vectors["timeline_ids"]:
        check(timeline_text(tl(t["hex"])) == t["text"], f"timeline ID {t['hex']}: {timeline_text(tl(t['hex']))}")
    by_name = check_changes(vectors)
    check_state(vectors, by_name)
    check_baseline(vectors, by_name)
    s = vectors["summary"]
    check(summary_text(s["entries"]) == s["text"], f"summary text {summary_text(s['entries'])}")
    check_device_id(vectors)
    check_frames(vectors, by_name)
    check_pairing(vectors)
    check_discovery(vectors)
    check_document(vectors, root)
    check_refused(vectors)
    check_signatures(vectors)
    check_timeline_begin(vectors)
    signed = check_signed_timeline(vectors, by_name)
    check_changes_message(vectors, signed)
    check_witness_encoding(vectors, signed)
    check_intake_verdicts(vectors, signed)
    check_fork_naming(vectors, signed)
    check_delete_coverage(vectors, signed)
    check_fork_records(vectors, signed)
    check_baseline_keys(vectors, signed)
    for failure in FAILURES:
        print("MISMATCH:", failure)
    print(f"{CHECKS[0] - len(FAILURES)} of {CHECKS[0]} checks agree with PROTOCOL.md")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
