"""What ``tests/test_zygote.py`` runs in a fork (``-m tests.zygote_probe HOW``)."""

import os
import signal
import sys

how = sys.argv[1]
if how == "echo":
    data = sys.stdin.read()
    print(os.getcwd(), os.environ.get("PROBE_VALUE"), sys.argv[2:], data)
    print("to stderr", file=sys.stderr)
elif how == "exit":
    sys.exit(int(sys.argv[2]))
elif how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
elif how == "pid":
    print(os.getpid(), flush=True)
    signal.pause()
elif how == "raise":
    raise RuntimeError("boom")
