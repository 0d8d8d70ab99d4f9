#!/usr/bin/env python3
"""Fail if a core module built for wasm32-unknown-unknown imports anything.

The pure core must not reach for the clock, randomness or any host function (DESIGN §3): in a
browser build such a need shows up as an import (usually from module "env" or
"__wbindgen_placeholder__"). This reads the module's import section directly.
"""
import sys


def leb(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def imports(path):
    data = open(path, "rb").read()
    if data[:4] != b"\0asm":
        raise SystemExit(f"{path}: not a wasm module")
    pos = 8
    found = []
    while pos < len(data):
        section = data[pos]
        size, pos = leb(data, pos + 1)
        end = pos + size
        if section == 2:
            count, p = leb(data, pos)
            for _ in range(count):
                n, p = leb(data, p)
                module = data[p:p + n].decode()
                p += n
                n, p = leb(data, p)
                name = data[p:p + n].decode()
                p += n
                kind = data[p]
                p += 1
                if kind == 0:
                    _, p = leb(data, p)
                elif kind == 1:
                    p += 1
                    flags, p = leb(data, p)
                    _, p = leb(data, p)
                    if flags & 1:
                        _, p = leb(data, p)
                elif kind == 2:
                    flags, p = leb(data, p)
                    _, p = leb(data, p)
                    if flags & 1:
                        _, p = leb(data, p)
                elif kind == 3:
                    p += 2
                found.append(f"{module}.{name}")
        pos = end
    return found


def main():
    path = sys.argv[1]
    found = imports(path)
    exports_ok = b"bridge_core_selftest" in open(path, "rb").read()
    if not exports_ok:
        raise SystemExit(f"{path}: the selftest export is missing; the check would prove nothing")
    if found:
        print(f"{path}: the core imports host functions, so it is not pure:", file=sys.stderr)
        for name in found:
            print(f"  {name}", file=sys.stderr)
        raise SystemExit(1)
    print(f"{path}: no imports (pure)")


if __name__ == "__main__":
    main()
