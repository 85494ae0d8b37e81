#!/usr/bin/env python3
"""index_flip.py DB SEQ: flips the lowest bit of the rowid stored in the changes_by_timeline index entry of the
change numbered SEQ (on the timeline with the most changes): one bit of index damage, the table rows untouched.
Uses sqlite3's dbstat to find the index's pages (read-only), then edits the file. Prints what it changed."""
import sqlite3, sys
db, want = sys.argv[1], int(sys.argv[2])
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
pages = [r[0] for r in con.execute("select pageno from dbstat where name='changes_by_timeline' and pagetype='leaf'")]
psize = con.execute("pragma page_size").fetchone()[0]
tl = con.execute("select tl from changes group by tl order by count(*) desc limit 1").fetchone()[0]
con.close()
def varint(b, i):
    v = 0
    for k in range(9):
        c = b[i + k]
        if k == 8: return (v << 8) | c, i + 9
        v = (v << 7) | (c & 0x7f)
        if c < 0x80: return v, i + k + 1
def readint(b, i, t):
    n = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}.get(t, 0)
    if t == 8: return 0, i
    if t == 9: return 1, i
    return int.from_bytes(b[i:i + n], 'big', signed=True), i + n
data = bytearray(open(db, 'rb').read())
for p in pages:
    base = (p - 1) * psize
    page = data[base:base + psize]
    assert page[0] == 0x0a, page[0]
    n = int.from_bytes(page[3:5], 'big')
    for c in range(n):
        off = int.from_bytes(page[8 + 2 * c:10 + 2 * c], 'big')
        plen, i = varint(page, off)
        hstart = i; hlen, j = varint(page, i)
        types = []
        while j < hstart + hlen:
            t, j = varint(page, j); types.append(t)
        vals = []; pos = hstart + hlen; ends = []
        for t in types:
            v, pos2 = readint(page, pos, t); vals.append(v); ends.append(pos2); pos = pos2
        if len(vals) == 3 and vals[0] == tl and vals[1] == want:
            at = base + ends[2] - 1
            data[at] ^= 1
            open(db, 'r+b').write(data)
            print(f"index entry (tl={tl}, seq={want}) rowid {vals[2]} -> {vals[2] ^ 1} (page {p}, byte {at})")
            sys.exit(0)
print("entry not found"); sys.exit(1)
