"""The GPU worker consumer: decode a job message, start or route the job, return at once.

Run by ``python manage.py gpuworker`` (Channels' worker on ``tts-worker`` and ``asr-worker``), or
inside the gateway process in the embedded default. It never touches the database and never
imports ``accounts`` (STYLE 33).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from channels.consumer import AsyncConsumer
from channels.exceptions import StopConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch

from asr.messages import AsrAudio, AsrCommit, AsrDrop, AsrItemOpen, AsrOpen
from asr.worker.jobs import AsrJob
from gateway.contracts import JobAccepted, JobBusy, JobNotReady, Kind, Message
from gateway.dispatch import dispatch
from gateway.layers.listener import receive_through_outages
from gateway.worker.jobs import J, WorkerJob, reply_sender
from tts.messages import TtsAck, TtsClear, TtsEnd, TtsFlush, TtsSubmit, TtsText
from tts.worker.jobs import TtsJob
from veena_site.runtime import get_runtime

logger = logging.getLogger(__name__)


class GpuWorkerConsumer(AsyncConsumer):
    """Admits jobs into slots and forwards pinned messages to running jobs."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """``AsyncConsumer.__call__``, but the receive on this instance's own channel rides
        out a layer outage: the channel that running jobs are pinned to stays the same."""
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        # Every running job's acks, keepalives, cancels and audio come here: the "worker.*"
        # capacity (WORKER_OWN_CHANNEL_CAPACITY), not a reply channel's. On Redis the prefix
        # shares the process's one reader (gateway.layers.process_layer), so it cannot starve.
        self.channel_name = await self.channel_layer.new_channel("worker.")
        self.channel_receive = functools.partial(
            receive_through_outages, self.channel_layer, self.channel_name
        )
        self.base_send = send
        try:
            await await_many_dispatch([receive, self.channel_receive], self.dispatch)
        except StopConsumer:
            pass

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Run the handler without Channels' database hop (``gateway.dispatch``): the
        worker never touches the database, and the hop queued every message behind the
        gateway's queries."""
        await dispatch(self, message)

    async def tts_job_submit(self, message: dict[str, Any]) -> None:
        """Handle tts.job.submit: accept into a slot, or answer busy / not_ready."""
        job = TtsSubmit.from_message(message)
        await self._admit("tts", job.job_id, job.reply_channel, job.deadline, job)

    async def asr_job_open(self, message: dict[str, Any]) -> None:
        """Handle asr.job.open: accept a realtime session into a slot."""
        job = AsrOpen.from_message(message)
        await self._admit("asr", job.job_id, job.reply_channel, job.deadline, job)

    async def tts_job_ack(self, message: dict[str, Any]) -> None:
        """Handle tts.job.ack: flow control for a running TTS job."""
        ack = TtsAck.from_message(message)
        if job := self._pinned(ack, TtsJob):
            job.ack(ack)

    async def tts_job_text(self, message: dict[str, Any]) -> None:
        """Handle tts.job.text: more segments of an incremental request."""
        text = TtsText.from_message(message)
        if job := self._pinned(text, TtsJob):
            job.text(text)

    async def tts_job_flush(self, message: dict[str, Any]) -> None:
        """Handle tts.job.flush: report when the audio of the text so far is sent."""
        flush = TtsFlush.from_message(message)
        if job := self._pinned(flush, TtsJob):
            job.flush(flush)

    async def tts_job_end(self, message: dict[str, Any]) -> None:
        """Handle tts.job.end: no more text; finish the job."""
        end = TtsEnd.from_message(message)
        if job := self._pinned(end, TtsJob):
            job.end(end)

    async def tts_job_clear(self, message: dict[str, Any]) -> None:
        """Handle tts.job.clear: drop pending text and audio, start a new epoch."""
        clear = TtsClear.from_message(message)
        if job := self._pinned(clear, TtsJob):
            job.clear(clear)

    async def tts_job_keepalive(self, message: dict[str, Any]) -> None:
        """Handle tts.job.keepalive: the job's gateway is still there."""
        get_runtime().jobs.touch(message["job_id"])

    async def asr_job_keepalive(self, message: dict[str, Any]) -> None:
        """Handle asr.job.keepalive: the session's gateway is still there."""
        get_runtime().jobs.touch(message["job_id"])

    async def tts_job_cancel(self, message: dict[str, Any]) -> None:
        """Handle tts.job.cancel: stop the job and free its slot now."""
        get_runtime().jobs.cancel(message["job_id"])

    async def asr_job_cancel(self, message: dict[str, Any]) -> None:
        """Handle asr.job.cancel: end the session job and free its slot now."""
        get_runtime().jobs.cancel(message["job_id"])

    async def asr_job_item_open(self, message: dict[str, Any]) -> None:
        """Handle asr.job.item_open: start an item or update its options."""
        opened = AsrItemOpen.from_message(message)
        if job := self._pinned(opened, AsrJob):
            job.item_open(opened)

    async def asr_job_audio(self, message: dict[str, Any]) -> None:
        """Handle asr.job.audio: append PCM to the item buffer."""
        audio = AsrAudio.from_message(message)
        if job := self._pinned(audio, AsrJob):
            job.audio(audio)

    async def asr_job_commit(self, message: dict[str, Any]) -> None:
        """Handle asr.job.commit: decode the item."""
        commit = AsrCommit.from_message(message)
        if job := self._pinned(commit, AsrJob):
            job.commit(commit)

    async def asr_job_drop(self, message: dict[str, Any]) -> None:
        """Handle asr.job.drop: forget the item."""
        drop = AsrDrop.from_message(message)
        if job := self._pinned(drop, AsrJob):
            job.drop(drop)

    async def _admit(
        self, kind: Kind, job_id: str, reply_channel: str, deadline: float, job: Any
    ) -> None:
        runtime = get_runtime()
        runtime.start()
        if (late := time.time() - deadline) > 0:
            logger.info(
                "%s job %s dropped: past its deadline by %.3f s", kind, job_id, late
            )
            return
        send = reply_sender(self.channel_layer, reply_channel)
        engine = runtime.engine(kind)
        if engine is None:
            await send(JobNotReady(job_id=job_id))
            return
        # A draining worker (SIGTERM) has no slot for anyone: the client is told to retry
        # (overloaded, 1013), not that the model is missing.
        if not runtime.accepting or not runtime.jobs.has_room(kind):
            await send(JobBusy(job_id=job_id))
            return
        worker_job: WorkerJob = (
            TtsJob(job, engine, send) if kind == "tts" else AsrJob(job, engine, send)
        )
        accepted = JobAccepted(
            job_id=job_id,
            worker_channel=self.channel_name,
            model_version=engine.model_version,
        )
        runtime.jobs.start(worker_job, send, accepted)

    def _pinned(self, message: Message, kind: type[J]) -> J | None:
        """The running job a pinned message is for; None (dropped) when it has ended."""
        job = get_runtime().jobs.pinned(message.job_id, kind)
        if job is None:
            logger.debug("message %s for unknown job dropped", message.TYPE)
        return job
