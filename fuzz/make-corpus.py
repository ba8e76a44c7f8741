#!/usr/bin/env python3
"""Writes the seed corpus of the PulseWire fuzz target from the golden captures.

Reads every `static let name = "hex"` / triple-quoted hex literal of
Tests/PulseWireTests/Golden.swift (frames captured from PulseAudio 16.1) and
writes seeds in the input layout of fuzz/PulseWireFuzz.swift:

    byte 0 chunking, byte 1 version selector, byte 2 op count k, k op bytes, body

Each capture gives a seed at its own protocol version whose ops read every
value of the packet with the matching typed read, a seed fed one byte at a
time, and (for v35 captures) a seed at version 36. Usage: make-corpus.py [OUT_DIR]
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "Tests", "PulseWireTests", "Golden.swift")

# Op numbers of readOne() in PulseWireFuzz.swift.
OPS = {
    ord("L"): 0, ord("B"): 1, ord("R"): 2, ord("r"): 3, ord("U"): 4, ord("V"): 5,
    ord("1"): 6, ord("0"): 6, ord("T"): 7, ord("a"): 8, ord("t"): 9, ord("N"): 9,
    ord("x"): 12, ord("m"): 13, ord("v"): 14, ord("P"): 15, ord("f"): 16,
}
FIXED = {ord("L"): 4, ord("B"): 1, ord("R"): 8, ord("r"): 8, ord("U"): 8, ord("V"): 4,
         ord("1"): 0, ord("0"): 0, ord("T"): 8, ord("a"): 6, ord("N"): 0}


def literals(text):
    """(name, bytes) of every hex literal, in file order."""
    pattern = re.compile(r'static let (\w+) = (?:"""(.*?)"""|"([0-9a-fA-F]*)")', re.S)
    for match in pattern.finditer(text):
        raw = match.group(2) if match.group(2) is not None else match.group(3)
        digits = re.sub(r"[^0-9a-fA-F]", "", raw)
        yield match.group(1), bytes.fromhex(digits)


def skip(payload, pos):
    """End of the tagged value at pos (the same walk as TagStructReader.skipValue)."""
    tag = payload[pos]
    if tag in FIXED:
        return pos + 1 + FIXED[tag]
    if tag == ord("t"):
        return payload.index(0, pos + 1) + 1
    if tag == ord("x"):
        return pos + 5 + int.from_bytes(payload[pos + 1:pos + 5], "big")
    if tag == ord("m"):
        return pos + 2 + payload[pos + 1]
    if tag == ord("v"):
        return pos + 2 + 4 * payload[pos + 1]
    if tag == ord("P"):
        pos += 1
        while payload[pos] != ord("N"):
            for _ in range(3):  # key, length, value
                pos = skip(payload, pos)
        return pos + 1
    if tag == ord("f"):
        return skip(payload, skip(payload, pos + 1))
    raise ValueError("unknown tag %r at %d" % (chr(tag), pos))


def read_ops(payload):
    """One typed-read op per top-level value of a packet payload."""
    ops, pos = [], 0
    while pos < len(payload) and len(ops) < 63:
        ops.append(OPS[payload[pos]])
        pos = skip(payload, pos)
    return ops


def version_selector(name):
    match = re.search(r"V(\d+)(?:Reply)?$", name)
    version = int(match.group(1)) if match else 35
    return version - 8


def seed(chunking, selector, ops, body):
    return bytes([chunking, selector, len(ops)]) + bytes(ops) + body


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fuzz", "corpus")
    os.makedirs(out, exist_ok=True)
    with open(GOLDEN) as f:
        captures = list(literals(f.read()))
    written = 0
    for name, stream in captures:
        selector = version_selector(name)
        is_packet = len(stream) > 20 and stream[4:8] == b"\xff\xff\xff\xff"
        ops = read_ops(stream[20:]) if is_packet and len(stream) - 20 == int.from_bytes(stream[0:4], "big") else []
        seeds = {
            name: seed(0x02, selector, ops, stream),
            name + "-bytewise": seed(0x00, selector, [], stream),
        }
        if selector == 27:
            seeds[name + "-v36"] = seed(0x03, 28, ops, stream)
        if name in ("peakServerStream", "createRecordDefault"):
            seeds[name + "-repeated"] = seed(0x3B, selector, [], stream)
        for seed_name, data in seeds.items():
            with open(os.path.join(out, seed_name), "wb") as f:
                f.write(data)
            written += 1
    # The payload alone (no descriptor) of every packet, so the decoders see it as the body too.
    for name, stream in captures:
        if len(stream) > 20 and stream[4:8] == b"\xff\xff\xff\xff":
            with open(os.path.join(out, name + "-payload"), "wb") as f:
                f.write(seed(0x01, version_selector(name), [], stream[20:]))
            written += 1
    # Earmuff's own permission extension (docs/permission-api.md): no server sends it, so its
    # requests, replies and events are built here.
    for name, payload in permission_packets():
        frame = len(payload).to_bytes(4, "big") + b"\xff\xff\xff\xff" + bytes(12) + payload
        for seed_name, data in ((name, seed(0x02, 27, read_ops(payload), frame)),
                                (name + "-payload", seed(0x01, 27, [], payload))):
            with open(os.path.join(out, seed_name), "wb") as f:
                f.write(data)
            written += 1
    print("%d seeds from %d captures in %s" % (written, len(captures), out))


def permission_packets():
    """(name, payload) of module-earmuff requests, replies and an event."""
    def u32(v):
        return b"L" + v.to_bytes(4, "big")

    def string(v):
        return b"N" if v is None else b"t" + v.encode() + b"\0"

    def request(tag, sub, *fields):
        return u32(87) + u32(tag) + u32(0xFFFFFFFF) + string("module-earmuff") + u32(sub) + b"".join(fields)

    status = b"".join(string(v) for v in ("granted", "flatpak:org.example.App", "flatpak", "strong"))
    return [
        ("permissionTest", request(2, 0)),
        ("permissionGet", request(3, 1, string("microphone"))),
        ("permissionRequest", request(4, 2, string("system-audio"), string("Voice memos"))),
        ("permissionRequestNoPurpose", request(5, 2, string("app-audio"), string(None))),
        ("permissionSubscribe", request(6, 3, b"1")),
        ("permissionStatusReply", u32(2) + u32(4) + status),
        ("permissionTestReply", u32(2) + u32(2) + u32(1)),
        ("permissionEvent", u32(87) + u32(0) + u32(0xFFFFFFFF) + string("module-earmuff") + u32(4)
         + string("microphone") + string("denied")),
    ]


if __name__ == "__main__":
    main()
