"""B: a stranger whose certificate's common name is odd. Writes key/cert to DIR. usage: b5_certname.py DIR CASE
CASE: zwj (one 👨 + 2,000 ZWJ-joined 👩: one grapheme), zwjmany (64 family emoji of 7 code points each),
      rtl (RLO + Arabic/Hebrew + LRM/RLM + isolates), emoji64 (64 x 👍🏽), emoji300 (300 x 👍🏽), flags (100 flags),
      tags (40 subdivision flags, 7 code points each), zalgo64 (64 letters with 40 marks each), invisible (only
      zero-width and bidi format characters), zwjcut (64 chars each 👨 + 14 x ZWJ👩 = 29 cp: cut at 16 ends in a ZWJ),
      zalgo ("Z" + 3,000 U+0301, the case of 2026-11-25-c), hangul (64 conjoining-jamo syllables L+V+T x 8), spoof ("friend" with a zero-width space: looks like a peer)"""
import os, sys
from cryptography.hazmat.primitives.asymmetric import ec
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-11-25-c"))
from t1_certname import write_identity
d, case = sys.argv[1], sys.argv[2]
M, W = "\U0001F468", "\U0001F469"; Z = "\u200d"
cn = {"zwj": M + (Z + W) * 2000,
      "zwjmany": ("\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466") * 64,
      "rtl": "\u202e\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd\u200f abc\u200e\u2067isolate\u2069\u202c end",
      "emoji64": "\U0001F44D\U0001F3FD" * 64, "emoji300": "\U0001F44D\U0001F3FD" * 300,
      "flags": "\U0001F1EB\U0001F1F7" * 100,
      "tags": "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F" * 40,
      "zalgo64": "".join(chr(0x61 + i % 26) + "\u0301\u0316" * 20 for i in range(64)),
      "invisible": "\u200b\u200c\u200d\u2060\ufeff\u202e\u2066\u061c",
      "zwjcut": (M + (Z + W) * 14) * 64,
      "hangul": ("\u1100\u1161\u11a8" * 8) * 64,
      "spoof": "fri\u200bend", "zalgo": "Z" + "\u0301" * 3000}[case]
write_identity(d, cn, ec.generate_private_key(ec.SECP256R1()))
print(f"{case}: {len(cn)} code points, {len(cn.encode())} bytes")
