"""Run ``python -m MODULE ARGS`` as a fork of a zygote (see ``tests/zygote.py``).

Usage: ``python -S zygote_launch.py SOCKET MODULE [ARGS...]``. Standard library
only, so it starts in a few milliseconds. The fork gets this process's
standard streams, environment and working directory; this process then
waits and ends as the fork ended: the same exit code, or killed by the same
signal.
"""

import json
import os
import signal
import socket
import sys


def main() -> None:
    path, module, *args = sys.argv[1:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    request = json.dumps(
        {"module": module, "args": args, "env": dict(os.environ), "cwd": os.getcwd()}
    ).encode()
    socket.send_fds(conn, [len(request).to_bytes(4, "big")], [0, 1, 2])
    conn.sendall(request)
    # The fork holds the streams now: the caller sees their end when it ends.
    for fd in (0, 1, 2):
        os.close(fd)
    reader = conn.makefile("rb")
    reader.readline()  # the fork's pid
    line = reader.readline()
    outcome = json.loads(line) if line else {"signal": signal.SIGKILL}
    if "signal" in outcome:
        number = int(outcome["signal"])
        if number not in (signal.SIGKILL, signal.SIGSTOP):  # no handler to reset
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(int(outcome.get("code", 1)))


if __name__ == "__main__":
    main()
