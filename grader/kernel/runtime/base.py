"""What every part of the runtime shares: the functions it takes when loaded, and the limits of what it records.

A part of the grader's runtime (see :mod:`grader.kernel.runtime`): in the kernel the parts are one module."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for mypy only: in the kernel the parts are one module, which imports nothing of the grader
    pass

# The functions the runtime relies on, taken when it is loaded (before any notebook cell runs):
# a notebook that replaces time.perf_counter, time.sleep or json.dumps changes its own timings,
# not the instrumentation's clock, pacing or answers.
_perf_counter = time.perf_counter
_sleep = time.sleep
_dumps = json.dumps
_write = os.write
_read = os.read
_getpid = os.getpid
_thread_time = time.thread_time

MAX_ITEMS = 200  # items of a list, dict or DataFrame described before truncating
MAX_STRING = 20_000  # characters of a string kept
MAX_DEPTH = 6
MAX_EVENTS = 5_000  # instrumentation events kept per scope
MAX_SLEEPS = 64  # a thread's latest sleeps (time.sleep outside generate) kept with their times
MAX_IDS = 2_048  # token IDs kept per generate call
MAX_ROWS = 64  # rows of a generate call's batch whose ids are kept (each up to MAX_IDS)
MAX_ROW_IDS = 4 * MAX_IDS  # ids kept over all the rows of one generate call
MAX_CHOICES = 8_192  # greedy choices kept per generate call (one per forward pass; see instrument.note_choice)
MAX_CAPTURE = 20_000  # characters of stdout/stderr kept per call
MAX_ARGUMENT = 4_096  # characters of a string argument of a watched function kept (longer ones: only their length)
