"""A TCP proxy that cuts its first connection after a number of bytes from the server."""

from __future__ import annotations

import asyncio
import threading


class DroppingProxy:
    """``127.0.0.1:port`` → ``127.0.0.1:target``; the first connection is reset (RST, no
    WebSocket close) once ``drop_after`` bytes have come back from the server."""

    def __init__(self, target: int, drop_after: int) -> None:
        self.target, self.drop_after = target, drop_after
        self.connections = 0
        self.dropped = False
        self.loop = asyncio.new_event_loop()
        self.port = 0
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        started.wait(10)

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0)
        )
        self.port = server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()
        server.close()

    async def _handle(
        self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        self.connections += 1
        cut = self.connections == 1
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target)

        async def pipe(
            src: asyncio.StreamReader, dst: asyncio.StreamWriter, count: bool
        ) -> None:
            seen = 0
            while data := await src.read(65536):
                dst.write(data)
                seen += len(data)
                if count and cut and seen >= self.drop_after:
                    self.dropped = True
                    client_w.transport.abort()
                    server_w.transport.abort()
                    return
                await dst.drain()
            dst.close()

        await asyncio.gather(
            pipe(client_r, server_w, False),
            pipe(server_r, client_w, True),
            return_exceptions=True,
        )

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
