"""The usage journal: what a record's database row may not hold yet (docs/accounting.md).

A gateway writes two kinds of entry per record, outside the database:

* **live**: the record's latest counters, noted at each tick of its stream, so the reaper
  settles a record whose gateway died from what was last served, not from the last
  database checkpoint (seconds older);
* **final**: how the record ended, written before the finalizing transaction and removed
  once it committed, so a finalization that meets a database error is retried until it
  lands, by this process or, should it die, by the reaper of any other.

The journal lives in Redis when ``REDIS_URL`` is set (one hash per kind, shared by every
process) and on disk otherwise (``USAGE_JOURNAL_DIR``, one file per entry, written whole
and renamed into place), so it survives the process either way. A journal that cannot be
written is logged and skipped: the database write still goes ahead.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

import redis
from django.conf import settings

from accounts.services.usage import NewRecord, RecordEnd, UsageCounters
from gateway.layers.redis_layer import sync_options

logger = logging.getLogger(__name__)

Kind = Literal["live", "final"]
KINDS: tuple[Kind, ...] = ("live", "final")
SOCKET_TIMEOUT_S = 1.0


class JournalUnavailable(Exception):
    """The journal's store could not be read or written."""


@dataclass(frozen=True)
class JournalEntry:
    """One record's latest known usage; with ``end``, how it ended (a final entry)."""

    record: NewRecord
    counters: UsageCounters
    noted_at: datetime
    end: RecordEnd | None = None

    @property
    def kind(self) -> Kind:
        """``final`` once the record has ended, else ``live``."""
        return "final" if self.end is not None else "live"

    def to_json(self) -> str:
        """The entry as JSON text (ids and instants as strings)."""
        record = {
            **asdict(self.record),
            "id": str(self.record.id),
            "stream_id": str(self.record.stream_id),
            "api_key_id": str(self.record.api_key_id),
            "started_at": self.record.started_at.isoformat(),
        }
        return json.dumps(
            {
                "record": record,
                "counters": {
                    **asdict(self.counters),
                    "asr_latency_hist": list(self.counters.asr_latency_hist),
                },
                "noted_at": self.noted_at.isoformat(),
                "end": None if self.end is None else asdict(self.end),
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> JournalEntry:
        """The entry ``to_json`` wrote."""
        data = json.loads(text)
        record = dict(data["record"])
        for name in ("id", "stream_id", "api_key_id"):
            record[name] = uuid.UUID(record[name])
        record["started_at"] = datetime.fromisoformat(record["started_at"])
        end = data["end"]
        return cls(
            record=NewRecord(**record),
            counters=UsageCounters.from_fields(data["counters"]),
            noted_at=datetime.fromisoformat(data["noted_at"]),
            end=None if end is None else RecordEnd(**end),
        )


class Journal(Protocol):
    """Where entries are kept: every method may raise ``JournalUnavailable``."""

    def put(self, entry: JournalEntry) -> None:
        """Keep ``entry``, replacing the record's entry of the same kind."""

    def drop(self, record_id: uuid.UUID, *kinds: Kind) -> None:
        """Forget the record's entries of ``kinds`` (both when none is named)."""

    def entries(self, kind: Kind) -> list[JournalEntry]:
        """Every entry of ``kind``."""

    def get(self, record_id: uuid.UUID, kind: Kind) -> JournalEntry | None:
        """The record's entry of ``kind``, if any."""


class RedisJournal:
    """Entries in two Redis hashes, field = record id (shared by every process)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.keys = {kind: f"{prefix}usage:journal:{kind}" for kind in KINDS}

    def _call(self, method: str, *args: object) -> object:
        try:
            return getattr(self.client, method)(*args)
        except (redis.RedisError, OSError) as exc:
            raise JournalUnavailable(str(type(exc).__name__)) from exc

    def put(self, entry: JournalEntry) -> None:
        """HSET the entry."""
        self._call("hset", self.keys[entry.kind], str(entry.record.id), entry.to_json())

    def drop(self, record_id: uuid.UUID, *kinds: Kind) -> None:
        """HDEL the record's fields."""
        for kind in kinds or KINDS:
            self._call("hdel", self.keys[kind], str(record_id))

    def entries(self, kind: Kind) -> list[JournalEntry]:
        """HVALS of the kind's hash."""
        values = self._call("hvals", self.keys[kind])
        assert isinstance(values, list)
        return [JournalEntry.from_json(v) for v in values]

    def get(self, record_id: uuid.UUID, kind: Kind) -> JournalEntry | None:
        """HGET one entry."""
        value = self._call("hget", self.keys[kind], str(record_id))
        return None if value is None else JournalEntry.from_json(value)  # type: ignore[arg-type]


class FileJournal:
    """Entries as files ``<kind>/<record id>.json`` under one folder (embedded default)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, record_id: uuid.UUID, kind: Kind) -> Path:
        return self.directory / kind / f"{record_id}.json"

    def put(self, entry: JournalEntry) -> None:
        """Write a temporary file, then rename it over the entry (never half-written)."""
        path = self._path(entry.record.id, entry.kind)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as out:
                out.write(entry.to_json())
            os.replace(temporary, path)
        except OSError as exc:
            raise JournalUnavailable(type(exc).__name__) from exc

    def drop(self, record_id: uuid.UUID, *kinds: Kind) -> None:
        """Remove the record's files."""
        for kind in kinds or KINDS:
            self._path(record_id, kind).unlink(missing_ok=True)

    def entries(self, kind: Kind) -> list[JournalEntry]:
        """Every readable entry of ``kind`` (a file being renamed is skipped)."""
        found = []
        for path in sorted((self.directory / kind).glob("*.json")):
            try:
                found.append(JournalEntry.from_json(path.read_text()))
            except FileNotFoundError:
                continue
        return found

    def get(self, record_id: uuid.UUID, kind: Kind) -> JournalEntry | None:
        """The record's file, read."""
        try:
            return JournalEntry.from_json(self._path(record_id, kind).read_text())
        except FileNotFoundError:
            return None


@functools.cache
def _journal_for(redis_url: str, prefix: str, directory: str) -> Journal:
    if redis_url:
        client = redis.Redis.from_url(
            redis_url,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
            **sync_options(),  # health checks and retries (gateway.layers.redis_layer)
        )
        return RedisJournal(client, prefix)
    return FileJournal(Path(directory))


def get_journal() -> Journal:
    """The journal of the current settings: Redis with ``REDIS_URL``, else the disk."""
    return _journal_for(
        settings.REDIS_URL, settings.REDIS_KEY_PREFIX, str(settings.USAGE_JOURNAL_DIR)
    )
