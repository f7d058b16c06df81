#!/usr/bin/env python3
"""Sets N values of SIZE bytes (each derived from its key) or reads them all back and
checks every byte: for the flash tier's restart measurement (scripts/bench-flash.sh).

    restart_check.py set   PORT N SIZE
    restart_check.py check PORT N SIZE   -> "served=.. missing=.. wrong=.."
"""
import hashlib
import socket
import sys


def value(i, size):
    seed = hashlib.sha256(b"%d" % i).digest()
    return (seed * (size // len(seed) + 1))[:size]


def main():
    mode, port, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")
    if mode == "set":
        batch = []
        for i in range(n):
            batch.append(b"set k%d 0 0 %d noreply\r\n%s\r\n" % (i, size, value(i, size)))
            if len(batch) == 64:
                s.sendall(b"".join(batch))
                batch = []
        s.sendall(b"".join(batch) + b"mn\r\n")
        assert f.readline() == b"MN\r\n"
        print(f"set={n}")
        return
    served = missing = wrong = 0
    for start in range(0, n, 100):
        keys = [b"k%d" % i for i in range(start, min(start + 100, n))]
        s.sendall(b"get " + b" ".join(keys) + b"\r\n")
        got = {}
        while True:
            line = f.readline()
            if line == b"END\r\n":
                break
            _, key, _, length = line.split()[:4]
            got[key] = f.read(int(length) + 2)[:-2]
        for i, k in zip(range(start, start + len(keys)), keys):
            if k not in got:
                missing += 1
            elif got[k] != value(i, size):
                wrong += 1
            else:
                served += 1
    print(f"served={served} missing={missing} wrong={wrong}")


if __name__ == "__main__":
    main()
