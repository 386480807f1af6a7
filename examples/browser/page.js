// The page of the browser example: a client secret from its backend (server.py), then the
// gateway's TTS socket with it, played as it streams.
import { speak, player } from "./veena-tts.js";

const $ = (id) => document.getElementById(id);
let current = null;

/** A TTS client secret and the gateway's WebSocket URL, from this page's backend. */
async function session() {
  const response = await fetch("/session", { method: "POST" });
  if (!response.ok) throw new Error(`no client secret (HTTP ${response.status})`);
  return response.json();
}

$("play").addEventListener("click", async () => {
  const context = new AudioContext({ sampleRate: 24000 }); // in the click: audio may start
  $("play").disabled = true;
  try {
    const { secret, url } = await session();
    current = speak({
      url,
      key: secret,
      text: $("text").value,
      sampleRate: context.sampleRate,
      onHeader: (h) => ($("status").textContent = `playing (${h.speaker}, ${h.sample_rate} Hz)`),
      onAudio: player(context),
    });
    $("stop").disabled = false;
    const m = await current.done;
    $("status").textContent = `done: ${m.audio_duration_seconds} s of audio, TTFB ${m.ttfb_ms} ms, RTF ${m.rtf}`;
    $("status").dataset.metrics = JSON.stringify(m);
  } catch (error) {
    $("status").textContent = error.message;
  } finally {
    $("play").disabled = false;
    $("stop").disabled = true;
  }
});
$("stop").addEventListener("click", () => current?.cancel());
