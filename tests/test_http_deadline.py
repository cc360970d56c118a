"""The deadlines of HTTP exchanges (catalogs/http_deadline.py) on real sockets: a read waiting
past its deadline is ended by the one watcher thread, an exchange that ended first is left alone,
and many exchanges start no thread of their own."""

from __future__ import annotations

import socket
import threading
import time

from stac_gdal_mcp.catalogs.http_deadline import deadline


def test_a_read_waiting_past_the_deadline_is_ended_then():
    here, there = socket.socketpair()
    with here, there:
        started = time.monotonic()
        with deadline(0.3) as watch:
            watch.watch(here)
            assert here.recv(10) == b""  # nothing was sent: the shutdown ends the wait
        took = time.monotonic() - started
    assert watch.expired and 0.25 <= took < 5


def test_deadlines_expire_in_their_own_order_whatever_the_order_they_were_set():
    pairs = [socket.socketpair() for _ in range(3)]
    ended: dict[int, float] = {}
    started = time.monotonic()

    def wait(n: int, seconds: float) -> None:
        with deadline(seconds) as watch:
            watch.watch(pairs[n][0])
            pairs[n][0].recv(10)
        ended[n] = time.monotonic() - started

    threads = [threading.Thread(target=wait, args=a) for a in ((0, 1.2), (1, 0.2), (2, 0.6))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for a, b in pairs:
        a.close(), b.close()
    assert ended[1] < ended[2] < ended[0] and ended[1] >= 0.15 and ended[0] >= 1.1


def test_an_exchange_that_ended_first_is_not_shut_down_nor_expired():
    here, there = socket.socketpair()
    with here, there:
        with deadline(0.1) as watch:
            watch.watch(here)
        time.sleep(0.3)  # past its deadline
        there.sendall(b"late")
        assert not watch.expired and here.recv(10) == b"late"  # the socket still works


def test_many_exchanges_start_no_thread_each(monkeypatch):
    with deadline(30):  # the watcher started, if no exchange started it before
        pass
    started = []
    start = threading.Thread.start

    def counted(thread):
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    for _ in range(200):
        with deadline(30):
            pass
    assert started == []
