#!/usr/bin/env python3
"""Ask Earmuff for recording permission, from Python, with the standard library only.

    request-permission.py [--kind microphone|system-audio|app-audio] [--purpose TEXT]
                          [--watch N]

Speaks Earmuff's permission extension (docs/permission-api.md) on a PulseAudio native
protocol connection of its own: AUTH, SET_CLIENT_NAME, then EXTENSION requests to
"module-earmuff". Prints `state: STATE` and the identity Earmuff gave it; with
`--watch N`, `watching: STATE` once subscribed, then `changed: STATE` for the next N changes. Exits 0 when granted, 1 when not,
2 when unavailable (no Earmuff in front of the sound server), 64 for a bad command line.
"""
import argparse
import os
import socket
import struct
import sys

# Commands and tagstruct tags of the PulseAudio native protocol.
ERROR, REPLY, AUTH, SET_CLIENT_NAME, EXTENSION = 0, 2, 8, 9, 87
TAG_U32, TAG_STRING, TAG_NULL, TAG_BOOL_TRUE, TAG_BOOL_FALSE = b"L", b"t", b"N", b"1", b"0"
TAG_ARBITRARY, TAG_PROPLIST = b"x", b"P"
INVALID_INDEX = 0xFFFFFFFF
MODULE = "module-earmuff"
GET, REQUEST, SUBSCRIBE, EVENT = 1, 2, 3, 4
PROTOCOL_VERSION = 35
ERROR_NAMES = {1: "access denied", 3: "invalid argument", 5: "no such entity", 19: "not supported",
               21: "no such extension"}


class Unavailable(Exception):
    pass


def u32(v):
    return TAG_U32 + struct.pack(">I", v)


def string(s):
    return TAG_NULL if s is None else TAG_STRING + s.encode() + b"\0"


def boolean(b):
    return TAG_BOOL_TRUE if b else TAG_BOOL_FALSE


def proplist(props):
    out = TAG_PROPLIST
    for key, value in props.items():
        data = value.encode() + b"\0"
        out += string(key) + u32(len(data)) + TAG_ARBITRARY + struct.pack(">I", len(data)) + data
    return out + TAG_NULL


class Reader:
    """Reads tagstruct fields of one packet."""

    def __init__(self, data):
        self.data, self.at = data, 0

    def tag(self):
        t = self.data[self.at:self.at + 1]
        self.at += 1
        return t

    def u32(self):
        if self.tag() != TAG_U32:
            raise ValueError("expected a u32")
        (v,) = struct.unpack_from(">I", self.data, self.at)
        self.at += 4
        return v

    def string(self):
        t = self.tag()
        if t == TAG_NULL:
            return None
        if t != TAG_STRING:
            raise ValueError("expected a string")
        end = self.data.index(b"\0", self.at)
        s = self.data[self.at:end].decode()
        self.at = end + 1
        return s


def server_paths():
    """Where libpulse would look: PULSE_SERVER's unix sockets, else $XDG_RUNTIME_DIR/pulse/native."""
    servers = os.environ.get("PULSE_SERVER", "").split()
    if servers:
        paths = []
        for entry in servers:
            if entry.startswith("{"):
                entry = entry.partition("}")[2]
            if entry.startswith("unix:"):
                entry = entry[5:]
            if entry.startswith("/"):
                paths.append(entry)
        return paths
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    return [runtime + "/pulse/native"] if runtime.startswith("/") else []


class Connection:
    def __init__(self):
        self.sock = None
        failures = []
        for path in server_paths():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            try:
                s.connect(path)
                self.sock = s
                break
            except OSError as e:
                failures.append("%s: %s" % (path, e.strerror))
                s.close()
        if self.sock is None:
            raise Unavailable("no sound server answers at " + ("; ".join(failures) or "no address"))
        self.tag = 0
        self.buffer = b""
        self.events = []
        cookie = bytes(256)
        # The credentials travel with AUTH, as libpulse sends them.
        creds = struct.pack("iII", os.getpid(), os.getuid(), os.getgid())
        self.call(u32(PROTOCOL_VERSION) + TAG_ARBITRARY + struct.pack(">I", 256) + cookie, AUTH,
                  ancillary=[(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])
        name = os.path.basename(sys.argv[0])
        self.call(proplist({"application.name": name, "application.process.binary": "python3",
                            "application.process.id": str(os.getpid())}), SET_CLIENT_NAME)

    def send(self, command, body, ancillary=()):
        tag = self.tag
        self.tag += 1
        payload = u32(command) + u32(tag) + body
        frame = struct.pack(">IIIII", len(payload), INVALID_INDEX, 0, 0, 0) + payload
        self.sock.sendmsg([frame], list(ancillary))
        return tag

    def packet(self, timeout):
        """The next packet's payload (memblocks are skipped)."""
        self.sock.settimeout(timeout)
        while True:
            while len(self.buffer) >= 20:
                length, channel = struct.unpack_from(">II", self.buffer)
                if len(self.buffer) < 20 + length:
                    break
                payload, self.buffer = self.buffer[20:20 + length], self.buffer[20 + length:]
                if channel == INVALID_INDEX:
                    return payload
            data = self.sock.recv(65536)
            if not data:
                raise Unavailable("the sound server closed the connection")
            self.buffer += data

    def call(self, body, command=EXTENSION, timeout=10, ancillary=()):
        """Sends a request; returns a Reader over its REPLY's fields (events meanwhile are kept)."""
        tag = self.send(command, body, ancillary)
        while True:
            r = Reader(self.packet(timeout))
            cmd, got = r.u32(), r.u32()
            if cmd == EXTENSION:
                self.events.append(r)
            elif got == tag and cmd == REPLY:
                return r
            elif got == tag and cmd == ERROR:
                code = r.u32()
                raise Unavailable("the server answered %s: %s" % (
                    ERROR_NAMES.get(code, "error %d" % code),
                    "Earmuff is not in front of it" if code in (1, 5, 21) else "see docs/permission-api.md"))

    def earmuff(self, subcommand, *fields, timeout=10):
        return self.call(u32(INVALID_INDEX) + string(MODULE) + u32(subcommand) + b"".join(fields), timeout=timeout)

    def next_event(self, kind):
        """Blocks until an event about `kind` arrives; returns its state."""
        while True:
            if self.events:
                r = self.events.pop(0)
            else:
                r = Reader(self.packet(None))
                if r.u32() != EXTENSION:
                    continue
                r.u32()  # tag
            r.u32()  # module index
            if r.string() != MODULE or r.u32() != EVENT:
                continue
            event_kind, state = r.string(), r.string()
            if event_kind == kind:
                return state


def main():
    parser = argparse.ArgumentParser(description="Ask Earmuff for recording permission.")
    parser.add_argument("--kind", default="microphone", choices=["microphone", "system-audio", "app-audio"])
    parser.add_argument("--purpose")
    parser.add_argument("--watch", type=int, default=0, metavar="N")
    try:
        args = parser.parse_args()
    except SystemExit as e:
        sys.exit(0 if e.code == 0 else 64)
    try:
        c = Connection()
        # No timeout: the reply comes when the person answers (or the prompt times out).
        r = c.earmuff(REQUEST, string(args.kind), string(args.purpose), timeout=None)
        state, key, method, strength = r.string(), r.string(), r.string(), r.string()
    except (Unavailable, OSError, ValueError) as e:
        print("state: unavailable")
        print("why: %s" % e)
        return 2
    print("state: " + state)
    print("identity: %s (identified by %s, %s)" % (key, method, strength), flush=True)
    if args.watch > 0:
        try:
            c.earmuff(SUBSCRIBE, boolean(True))
            # Subscribed first, then read: no change falls between the two.
            print("watching: " + c.earmuff(GET, string(args.kind)).string(), flush=True)
            for _ in range(args.watch):
                print("changed: " + c.next_event(args.kind), flush=True)
        except (Unavailable, OSError) as e:
            print("changed: unavailable (%s)" % e, flush=True)
    return 0 if state == "granted" else 1


if __name__ == "__main__":
    sys.exit(main())
