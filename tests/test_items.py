"""The item pipeline (processing/items.py) on its own: the order of the results, a progress step
per item, cancel between items (the items not started never run), an item's failure in one line
kept as its own, dry runs noting the items that would fail, and the two spellings of an item
reference. (Cloud cover and zonal statistics run it against the real test bed in their tests.)"""

from __future__ import annotations

import threading
import time

import pytest

from stac_gdal_mcp.errors import AssetUnreadable, OperationCancelled
from stac_gdal_mcp.processing.items import each, failure, one_item, plan_each, reference
from stac_gdal_mcp.processing.jobs import Job


def test_results_in_the_units_order_with_a_step_per_unit():
    steps = []
    job = Job(lambda done, total, message: steps.append((done, total, message)), min_interval_s=0)

    def measure(unit):
        time.sleep(0.01 * (5 - unit))  # the last units finish first
        return unit * 10

    results = each(job, list(range(5)), measure, workers=3, start="five units", describe=str)
    assert results == [0, 10, 20, 30, 40]
    assert steps[0] == (0, 5, "five units")
    assert [done for done, _, _ in steps[1:]] == [1, 2, 3, 4, 5]
    assert sorted(int(message) for _, _, message in steps[1:]) == results


def test_no_progress_when_the_caller_reports():
    steps = []
    job = Job(lambda *step: steps.append(step), min_interval_s=0)
    assert each(job, [1, 2], lambda u: u + 1, workers=2, start=None, describe=str) == [2, 3]
    assert steps == []


def test_a_cancel_stops_between_items_and_drops_those_not_started():
    job = Job(min_interval_s=0)
    started = []
    lock = threading.Lock()

    def measure(unit):
        with lock:
            started.append(unit)
        if unit == 0:
            job.cancel()
        return unit

    with pytest.raises(OperationCancelled):
        each(job, list(range(50)), measure, workers=1, start="many", describe=str)
    assert started == [0]  # one at a time: the cancel came before the next was started


def test_an_items_failure_is_its_own_in_one_line():
    with one_item("test", "item-1") as outcome:
        raise AssetUnreadable("reading the mask failed: HTTP 404")
    assert outcome.error == "reading the mask failed: HTTP 404"
    with one_item("test", "item-2") as outcome:
        raise ValueError("bad block")
    assert outcome.error == "ValueError: bad block"
    with one_item("test", "item-3") as outcome:
        pass
    assert outcome.error is None
    assert failure(KeyError("x")) == "KeyError: 'x'"


def test_a_stopped_job_is_not_an_items_failure():
    job = Job()
    job.cancel()
    with pytest.raises(OperationCancelled), one_item("test", "item-1", job):
        raise RuntimeError("the read broke off when the job stopped")


def test_a_dry_run_notes_the_items_that_would_fail():
    def plan(unit):
        item_id = reference(unit)["item_id"]
        if item_id == "b":
            raise AssetUnreadable("no such file")
        return item_id, 1

    notes = []
    units = [
        {"id": "a", "collection": "c"},
        {"id": "b", "collection": "c"},
        {"item_id": "c", "collection_id": "c"},
    ]
    assert plan_each(Job(), units, plan, notes, 2) == [("a", 1), ("c", 1)]
    assert notes == ["item 'b' would fail: no such file"]


def test_a_reference_in_either_spelling():
    assert reference({"collection_id": "s2", "item_id": "x"}) == {"collection_id": "s2", "item_id": "x"}
    assert reference({"collection": "s2", "id": "x", "assets": {}}) == {"collection_id": "s2", "item_id": "x"}
    assert reference({"id": "x"}) == {"collection_id": None, "item_id": "x"}
