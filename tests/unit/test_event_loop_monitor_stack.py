"""The stalled-loop stack is read with faulthandler, never by building another thread's frame
objects (broker.event_loop_monitor.thread_stack)."""

from __future__ import annotations

import threading

from broker.event_loop_monitor import thread_stack


def _spin_in_named_function(started: threading.Event, stop: threading.Event) -> None:
    started.set()
    while not stop.is_set():
        sum(range(100))


def test_the_stack_of_a_running_thread_names_its_function_innermost_first() -> None:
    started, stop = threading.Event(), threading.Event()
    worker = threading.Thread(target=_spin_in_named_function, args=(started, stop))
    worker.start()
    try:
        started.wait(5)
        assert worker.ident is not None
        stack = thread_stack(worker.ident)
    finally:
        stop.set()
        worker.join()
    lines = stack.splitlines()
    assert lines[0].startswith("Thread 0x") and int(lines[0].split()[1], 16) == worker.ident
    frames = [line for line in lines[1:] if line.lstrip().startswith("File ")]
    assert frames and "_spin_in_named_function" in "".join(frames[:2])
    assert "_bootstrap" in frames[-1]  # outermost last
    assert "test_the_stack_of_a_running_thread" not in stack  # only that thread's frames


def test_the_stack_is_bounded_and_empty_for_an_unknown_thread() -> None:
    assert thread_stack(threading.get_ident(), limit=1).count("File ") == 1
    assert thread_stack(1) == ""
