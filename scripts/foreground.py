"""Run a command as the terminal's foreground job, so that Ctrl-C reaches it and not make.

`make demo` serves until the user presses Ctrl-C. The terminal sends SIGINT to its foreground
process group, which make shares with the server; make then reports the interrupt as its own
failure ("make: *** [Makefile: demo] Interrupt", exit 2) even when the server shut down cleanly.
Run through this, the server gets a process group of its own that the terminal treats as the
foreground: Ctrl-C stops the server alone, it exits 0, and make with it. Without a terminal
(CI, tests) the command simply runs.

    python3 scripts/foreground.py COMMAND [ARG...]
"""

import os
import signal
import sys


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: foreground.py COMMAND [ARG...]")
    try:
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError:  # no controlling terminal: nothing to hand over
        tty = None
    if tty is not None and os.tcgetpgrp(tty) == os.getpgrp():
        os.setpgid(0, 0)
        # A process outside the foreground group that takes the terminal gets SIGTTOU: ignore it
        # (ignored signals stay ignored across exec; the server never writes to a stopped tty).
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        os.tcsetpgrp(tty, os.getpgrp())
        os.close(tty)
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
