"""The console relay: a job's output and progress reach the driver as events, its result comes last, a
cancelled relay interrupts the job (which still cleans up), and off a terminal the bar prints sparse lines.
The end-to-end check (a real sweep's console without Ray's prefix) is in test_summary.py."""

import io
import logging
import os
import signal
import threading
import time

import pytest
import ray

from trinity.reporting import console
from trinity.reporting.progress import ProgressBar

PROGRESS = {
    "trainer": {"total_steps": 4, "train_step": 1},
    "explorer": {"explore_step": 1, "model_version": 0, "reward": 0.25},
}


def test_the_job_output_and_progress_are_events_and_the_result_comes_last():
    def job():
        print("hello from the job")
        logging.getLogger("trinity.test").warning("a warning")  # a handler made on this thread, as Hydra does
        console.progress_view("stage").update(PROGRESS)
        return 42

    handler_stream = {}

    def run():
        handler = logging.StreamHandler()  # binds sys.stderr as the job thread sees it
        handler_stream["stream"] = handler.stream
        logging.getLogger("trinity.test").addHandler(handler)
        try:
            return job()
        finally:
            logging.getLogger("trinity.test").removeHandler(handler)

    events = list(console.relayed(run))
    assert events[-1] == ("result", 42)
    assert ("out", "hello from the job") in events and ("err", "a warning") in events
    assert ("progress", ("stage", PROGRESS)) in events
    assert console.progress_view("stage").__class__ is ProgressBar  # outside a relay the bar is drawn here


def test_a_failing_job_raises_its_error_from_the_relay():
    def run():
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        list(console.relayed(run))


def test_closing_the_relay_interrupts_the_job_and_lets_it_clean_up():
    cleaned = threading.Event()

    def run():
        try:
            print("started")
            while True:
                time.sleep(0.05)
        finally:
            cleaned.set()

    events = console.relayed(run)
    assert next(events) == ("out", "started")
    events.close()  # what a cancelled generator task sees
    assert cleaned.is_set()


def test_off_a_terminal_the_bar_prints_a_line_at_most_every_interval_and_the_final_state():
    stream = io.StringIO()
    bar = ProgressBar("job", stream=stream, line_interval_s=3600)
    for step in range(1, 5):
        bar.update({"trainer": {"total_steps": 4, "train_step": step}})
    bar.close()
    assert stream.getvalue().splitlines() == ["job: step 1/4", "job: step 4/4"]


def _frozen_job():
    print(os.getpid())
    time.sleep(300)


def test_the_driver_names_a_job_whose_task_froze(ray_cluster):
    @ray.remote(num_cpus=0, max_retries=0)
    def job():
        yield from console.relayed(_frozen_job)

    generator = job.remote()
    kind, pid = ray.get(next(generator))
    assert kind == "out"
    os.kill(int(pid), signal.SIGSTOP)
    try:
        with pytest.raises(console.JobSilent, match="the_job sent nothing for 3 s"):
            console.drive([generator], ["the_job"], wait_s=0.5, silence_s=3)
    finally:
        os.kill(int(pid), signal.SIGCONT)
        ray.cancel(generator, force=True)
