"""The progress bar and the log lines on one terminal (a pseudo-terminal here): a line logged while a bar is shown
goes above the bar, never glued onto it, and a closed bar leaves nothing behind. The terminal was left with a bar
frozen at 53% and the epoch's line on the same row."""

from __future__ import annotations

import fcntl
import logging
import os
import pty
import re
import select
import struct
import sys
import termios

from utils.log import progress_bar, setup_logging


def screen(output: str) -> list:
    """The rows a terminal shows after ``output``: a carriage return goes back to the row's start, later characters
    overwrite earlier ones; escape sequences (a bar's cursor moves) are left out."""
    rows, row, column = [], [], 0
    for char in re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", output):
        if char == "\r":
            column = 0
        elif char == "\n":
            rows.append("".join(row).rstrip())
            row, column = [], 0
        else:
            row[column : column + 1] = [char]
            column += 1
    return [*rows, "".join(row).rstrip()]


def drained(leader: int) -> bytes:
    """All the terminal shows: the kernel hands a pty's writes to its reading side asynchronously, so one read may
    return only the first of them; read until nothing more comes for 0.2 s."""
    data = b""
    while select.select([leader], [], [], 0.2)[0]:
        data += os.read(leader, 1 << 16)
    return data


def test_a_line_logged_under_a_bar_goes_above_it_and_the_closed_bar_is_gone(monkeypatch):
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # 80 columns, as a terminal
    terminal = os.fdopen(follower, "w", buffering=1, encoding="utf-8")
    monkeypatch.setattr(sys, "stderr", terminal)
    try:
        setup_logging(None, 0)
        bar = progress_bar(15, "epoch 0", enabled=True)
        assert bar is not None  # stderr is a terminal
        bar.update(8)
        bar.refresh()  # the bar at 53%, as a second's redraw left it
        logging.getLogger("test").info("epoch 0 train: loss=0.5")
        bar.close()
        terminal.flush()
        shown = screen(drained(leader).decode())
    finally:
        setup_logging(None, 0)  # the console handler on the real stderr again
        terminal.close()
        os.close(leader)
    line = next(row for row in shown if "epoch 0 train: loss=0.5" in row)
    assert re.fullmatch(r"\d\d:\d\d:\d\d INFO epoch 0 train: loss=0\.5", line), shown  # not after the bar
    assert not any("%|" in row for row in shown), shown  # the bar cleared on close, not frozen
