"""The backend half of the browser example: it serves this folder and mints client secrets.

    VEENA_URL=http://127.0.0.1:8000 VEENA_API_KEY=vk_live_... python3 server.py [port]

Then open http://127.0.0.1:8080/. The page never sees the API key: for each Play it asks
this server (``POST /session``) for a short-lived TTS client secret, which the server mints
with the key (``POST /v1/tts/client_secrets``), and opens the gateway's socket with it.
In your own backend, mint only for users you have signed in. Standard library only; for an
https gateway with a private CA, set SSL_CERT_FILE=ca.pem.
"""

import json
import os
import sys
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

GATEWAY = os.environ.get("VEENA_URL", "http://127.0.0.1:8000").rstrip("/")
SECRET_SECONDS = 60  # enough to open the socket; a stream it opened runs on


def mint_secret() -> dict:
    """A TTS client secret from the gateway, pinned to 24 kHz PCM."""
    body = {
        "expires_after": {"anchor": "created_at", "seconds": SECRET_SECONDS},
        "session": {"format": "pcm", "sample_rate": 24000},
    }
    request = urllib.request.Request(
        GATEWAY + "/v1/tts/client_secrets",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": "Bearer " + os.environ["VEENA_API_KEY"],
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


class Handler(SimpleHTTPRequestHandler):
    """Files of this folder, and ``POST /session``: ``{"secret", "expires_at", "url"}``."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path != "/session":
            self.send_error(404)
            return
        try:
            minted = mint_secret()
        except (OSError, ValueError):  # the gateway refused or is down
            self.send_error(502, "The gateway gave no client secret.")
            return
        ws = "wss" + GATEWAY[5:] if GATEWAY.startswith("https") else "ws" + GATEWAY[4:]
        answer = {
            "secret": minted["value"],
            "expires_at": minted["expires_at"],
            "url": ws,
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    handler = partial(Handler, directory=str(Path(__file__).parent))
    print(f"serving http://127.0.0.1:{port}/ for {GATEWAY}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()
