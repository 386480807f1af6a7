"""The consumers' shared skeleton (issue 33): one ``perform``, one teardown, the usage tick.

A probe consumer supplies the hooks and records what the skeleton asks of it; the socket's
sends are collected, the channel layer is the test settings' own.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import pytest
from channels.layers import get_channel_layer

from gateway.link.boundary import ReleaseStep
from gateway.link.consumers import WorkerClientConsumer
from gateway.link.jobclient import Outcome
from gateway.link.outputs import Arm, Disarm, Fail, TerminalStatus
from gateway.link.timers import TICK
from gateway.outages import Failure


@dataclass(frozen=True)
class ProbeFail(Fail):
    code: str


class Probe(WorkerClientConsumer):
    endpoint = "probe"
    disconnect_status: ClassVar[TerminalStatus] = "cancelled"

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[Any, ...]] = []
        self.ended = False
        self.stop: Fail | None = None
        self.broken_record = False

    def closed(self) -> bool:
        return not self.opened or self.ended

    async def on_outcome(self, outcome: Outcome | None) -> None:
        self.log.append(("outcome", outcome))

    async def on_timer(self, name: str) -> None:
        self.log.append(("timer", name))

    async def do(self, out: Any) -> bool:
        self.log.append(("do", out))
        return out != "last"

    async def fail(self, fail: Any) -> None:
        self.log.append(("fail", fail.code))
        if fail.code != "soft":  # a failure of one request only: the stream goes on
            await self.close_stream(1011, "failed", error_code=fail.code)

    async def tick_usage(self) -> Fail | None:
        self.log.append(("tick",))
        return self.stop

    def mark_closed(self) -> None:
        self.log.append(("closed",))
        self.ended = True

    def record_steps(
        self, status: TerminalStatus, error_code: str, close_code: int | None
    ) -> list[ReleaseStep]:
        return [partial(self.record, status, error_code, close_code)]

    async def record(
        self, status: str, error_code: str, close_code: int | None
    ) -> None:
        self.log.append(("record", status, error_code, close_code))
        if self.broken_record:
            raise RuntimeError("the record's store is gone")

    async def release_admission(self) -> None:
        self.log.append(("admission",))

    async def send_failure(self, failure: Failure) -> None:
        self.log.append(("send_failure", failure))

    def refusal(self, message: str) -> dict[str, Any]:
        return {"error": message}


@pytest.fixture
async def probe() -> Any:
    consumer = Probe()
    consumer.channel_layer = get_channel_layer()
    consumer.channel_name = await consumer.channel_layer.new_channel()
    consumer.sent = []

    async def send(message: dict[str, Any]) -> None:
        consumer.sent.append(message)

    consumer.base_send = send
    yield consumer
    if consumer.opened:  # no timer task left
        await consumer.end_stream("cancelled", close_code=1000)


async def test_before_open_stream_nothing_is_released(probe: Probe) -> None:
    await probe.disconnect(1000)
    assert probe.log == [] and not probe.released


async def test_perform_does_timers_itself_and_the_rest_through_do(probe: Probe) -> None:
    probe.open_stream()
    await probe.perform(
        [Arm("idle", 60), "a", Arm("input", 60), Disarm(("idle",)), "b"]
    )
    assert probe.log == [("do", "a"), ("do", "b")]
    assert probe.timers.armed("input") and not probe.timers.armed("idle")


async def test_a_failure_or_a_step_that_ends_the_list_stops_it(probe: Probe) -> None:
    probe.open_stream()
    await probe.perform(["a", "last", "never"])
    assert probe.log == [("do", "a"), ("do", "last")]
    probe.log.clear()
    await probe.perform([ProbeFail("soft"), "never"])
    assert probe.log == [("fail", "soft")] and not probe.closed()
    probe.log.clear()
    await probe.perform(["a", ProbeFail("boom"), "never"])
    assert probe.log[:3] == [("do", "a"), ("fail", "boom"), ("closed",)]
    assert ("do", "never") not in probe.log
    assert probe.sent[-1] == {"type": "websocket.close", "code": 1011}


async def test_the_teardown_runs_once_in_order_and_every_step_runs(
    probe: Probe,
) -> None:
    probe.open_stream()
    probe.broken_record = True
    await probe.disconnect(1001)
    await probe.disconnect(1006)  # the instance's exit: already released
    assert probe.log == [
        ("closed",),
        ("record", "cancelled", "", 1001),
        ("admission",),  # after a record step that failed
    ]
    assert probe.released


async def test_the_tick_asks_the_usage_and_a_stop_ends_the_stream(probe: Probe) -> None:
    probe.open_stream()
    await probe.timer_fire({"type": "timer.fire", "name": TICK})
    assert probe.log == [("tick",)] and not probe.closed()
    probe.stop = ProbeFail("key_revoked")
    await probe.timer_fire({"type": "timer.fire", "name": TICK})
    assert probe.log[1:3] == [("tick",), ("fail", "key_revoked")]
    assert ("record", "failed", "key_revoked", 1011) in probe.log
    await probe.timer_fire({"type": "timer.fire", "name": "idle:1"})
    assert ("timer", "idle:1") not in probe.log  # a closed stream's timers are ignored
