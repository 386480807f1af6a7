"""Gateway ↔ worker contracts shared by both kinds of job.

Messages are frozen dataclasses of msgpack primitives (STYLE 23–25). ``tts.*`` and ``asr.*`` types
go to a worker, ``gpu.*`` types come from one. A job's first message goes to the submission channel
of the worker that placement chose (``<shared name>.<id>``, ``gateway.link.placement``) or to the
shared channel of its kind; the worker's ``gpu.job.accepted`` names its own channel, and every later
message of the job goes there (the job is pinned to that worker process).

Liveness runs both ways: the worker sends ``gpu.job.heartbeat`` every second, and the gateway
sends ``*.job.keepalive`` every second to the pinned channel, the first one at once on
acceptance. A worker ends a job that is not confirmed within ``CONFIRM_S`` or whose gateway has
been silent for ``JOB_KEEPALIVE_TIMEOUT_S`` (``gateway.worker.jobs``), so no job outlives its gateway
and no cancel ever has to travel through a shared channel.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

Kind = Literal["tts", "asr"]
WORKER_CHANNELS: dict[Kind, str] = {"tts": "tts-worker", "asr": "asr-worker"}


@dataclass(frozen=True)
class Message:
    """Base of every channel-layer message: a ``type`` and the ``job_id`` it belongs to."""

    TYPE: ClassVar[str] = ""
    job_id: str

    def to_message(self) -> dict[str, Any]:
        """Return the dict sent through the channel layer."""
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {"type": self.TYPE, **body}

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> Self:
        """Build the dataclass from a received dict, ignoring unknown keys."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in message.items() if k in names})


@dataclass(frozen=True)
class JobAccepted(Message):
    """The worker took the job and holds a slot for it until the job ends."""

    TYPE = "gpu.job.accepted"
    worker_channel: str
    model_version: str
    sent_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class JobBusy(Message):
    """Every slot of the worker is taken; retry."""

    TYPE = "gpu.job.busy"


@dataclass(frozen=True)
class JobNotReady(Message):
    """The worker's engine is still loading (or failed to load)."""

    TYPE = "gpu.job.not_ready"


@dataclass(frozen=True)
class JobFailed(Message):
    """The job (or one item of it) failed in the worker; ``code`` is stable, never exception text."""

    TYPE = "gpu.job.failed"
    code: str
    stage: str = "job"
    item_seq: int | None = None


@dataclass(frozen=True)
class JobHeartbeat(Message):
    """Sent every second while the job is open so the gateway can detect a lost worker."""

    TYPE = "gpu.job.heartbeat"
    sent_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class TtsJobCancel(Message):
    """Stop a TTS job now and free its slot."""

    TYPE = "tts.job.cancel"


@dataclass(frozen=True)
class AsrJobCancel(Message):
    """Stop an ASR job now and free its slot."""

    TYPE = "asr.job.cancel"


CANCELS: dict[Kind, type[Message]] = {"tts": TtsJobCancel, "asr": AsrJobCancel}


@dataclass(frozen=True)
class TtsJobKeepalive(Message):
    """The gateway still wants this TTS job; the first one confirms the acceptance."""

    TYPE = "tts.job.keepalive"


@dataclass(frozen=True)
class AsrJobKeepalive(Message):
    """The gateway still wants this ASR job; the first one confirms the acceptance."""

    TYPE = "asr.job.keepalive"


KEEPALIVES: dict[Kind, type[Message]] = {
    "tts": TtsJobKeepalive,
    "asr": AsrJobKeepalive,
}
