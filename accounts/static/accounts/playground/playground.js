// The playground page: wires the text-to-speech and speech-to-text panels to the public
// sockets. The page never holds an API key: for each socket it mints a short-lived client
// secret for the signed-in member (a CSRF-protected POST) and offers it to that socket as
// the browser subprotocol. The voices come with the page.
import { wavBytes } from "./audio.js";
import { Microphone, RealtimeSession } from "./asr.js";
import { Player, speak } from "./tts.js";

const config = JSON.parse(document.getElementById("playground-config").textContent);
const $ = (id) => document.getElementById(id);
const wsBase = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}`;
const csrfToken = document.querySelector("#csrf [name=csrfmiddlewaretoken]").value;

/** Client secrets for this member and account, one per use ("tts", "realtime"), minted
 * again shortly before they expire. */
const secrets = {
  minted: {},
  async get(use) {
    const now = Date.now() / 1000;
    const held = this.minted[use];
    if (held && held.expiresAt - now > Math.min(60, held.ttl / 2)) return held.value;
    const response = await fetch(config.secretUrl, {
      method: "POST",
      headers: { "X-CSRFToken": csrfToken },
      body: new URLSearchParams({ use }),
      credentials: "same-origin",
    });
    const json = (response.headers.get("content-type") || "").includes("application/json");
    if (!response.ok || !json) {
      throw new Error(
        response.ok || response.status === 403
          ? "You are signed out or no longer a member of this account: reload the page."
          : `The playground could not get a client secret (HTTP ${response.status}).`,
      );
    }
    const body = await response.json();
    this.minted[use] = { value: body.value, ttl: body.ttl, expiresAt: now + body.ttl };
    return body.value;
  },
};

function say(element, text, isError = false) {
  element.textContent = text;
  element.classList.toggle("error", isError);
}

function errorText(error) {
  if (error && error.name === "NotAllowedError") return "Microphone access was refused.";
  if (error && error.name === "NotFoundError") return "No microphone was found.";
  const code = error && error.code ? ` (${error.code})` : "";
  return `${(error && error.message) || "Something went wrong."}${code}`;
}

// Voices, formats and rates, as GET /v1/tts/speakers lists them.

function loadVoices() {
  const info = config.voices;
  const voices = $("tts-voice");
  voices.replaceChildren(
    ...info.speakers.map((s) => {
      const label = `${s.name || s.id}${s.languages?.length ? ` (${s.languages.join(", ")})` : ""}`;
      return new Option(label, s.id, s.default, s.default);
    }),
  );
  voices.disabled = false;
  const rates = $("tts-rate");
  const preferred = info.sample_rates.includes(24000) ? 24000 : info.native_sample_rate;
  rates.replaceChildren(...info.sample_rates.map((r) => new Option(`${r} Hz`, r, r === preferred, r === preferred)));
  for (const option of $("tts-format").options) option.disabled = !info.formats.includes(option.value);
  ttsButtons();
  say($("pg-status"), info.ready ? "" : "The speech engine is still starting; playback may fail for a moment.");
}

// Characters left this month (the account's TTS quota), beside the text.

const quota = { tts: config.ttsCharacters }; // {used, limit, left}, or null: no monthly limit
const count = (n) => n.toLocaleString("en");
const characters = () => [...$("tts-text").value].length; // code points, as the server counts

function showCharacters() {
  const n = characters();
  const chars = $("tts-chars");
  const noun = n === 1 ? "character" : "characters";
  if (!quota.tts) return say(chars, `${count(n)} ${noun} (no monthly limit)`);
  const { left, limit } = quota.tts;
  if (n > left) return say(chars, `${count(n)} ${noun}; only ${count(left)} left this month`, true);
  say(chars, `${count(n)} ${noun} · ${count(left)} of ${count(limit)} left this month`);
}

async function refreshQuota() {
  try {
    const response = await fetch(config.quotaUrl, { credentials: "same-origin" });
    if (response.ok) quota.tts = (await response.json()).tts_characters;
  } catch {
    // keep the last figures; the next request tries again
  }
  showCharacters();
}

function quotaText(n) {
  if (!quota.tts) return "The account's quota is used up for now.";
  const { left, limit } = quota.tts;
  return `Not enough characters left this month: this text has ${count(n)}, and ${count(left)} of ${count(limit)} are left.`;
}

$("tts-text").addEventListener("input", showCharacters);
showCharacters();

// Text to speech.

const tts = { speaking: null, downloadUrl: null };
const player = new Player($("tts-player"), { onIdle: () => ttsButtons() });

function ttsButtons() {
  $("tts-play").disabled = Boolean(tts.speaking) || $("tts-voice").disabled;
  $("tts-stop").disabled = !(tts.speaking || player.playing);
}

// Playback position, a few times a second (not a live region: it changes constantly).
setInterval(() => {
  const { played, received } = player.position;
  const bar = $("tts-progress");
  bar.max = Math.max(received, 0.001);
  bar.value = played;
  $("tts-position").textContent = received ? `${played.toFixed(1)} / ${received.toFixed(1)} s` : "";
}, 200);

function showMetrics(metrics) {
  const box = $("tts-metrics");
  const shown = {
    ttfb_ms: `${metrics.ttfb_ms} ms`,
    rtf: String(metrics.rtf),
    audio_duration_seconds: `${metrics.audio_duration_seconds} s`,
    total_time_seconds: `${metrics.total_time_seconds} s`,
  };
  for (const dd of box.querySelectorAll("dd[data-metric]")) {
    dd.textContent = shown[dd.dataset.metric];
    dd.dataset.value = String(metrics[dd.dataset.metric]);
  }
  Object.assign(box.dataset, {
    totalBytes: String(metrics.total_bytes),
    format: metrics.format || "",
    cancelled: String(metrics.cancelled),
  });
}

function offerDownload(chunks, rate, requestId) {
  const link = $("tts-download");
  if (tts.downloadUrl) URL.revokeObjectURL(tts.downloadUrl);
  tts.downloadUrl = URL.createObjectURL(new Blob([wavBytes(chunks, rate)], { type: "audio/wav" }));
  link.href = tts.downloadUrl;
  link.download = `veena-${requestId}.wav`;
  link.hidden = !chunks.length;
}

$("tts-format").addEventListener("change", () => {
  const mulaw = $("tts-format").value === "mulaw";
  const rates = $("tts-rate");
  if (mulaw) {
    if (![...rates.options].some((o) => o.value === "8000")) rates.add(new Option("8000 Hz", 8000));
    rates.value = "8000";
  }
  rates.disabled = mulaw;
});

$("tts-play").addEventListener("click", async () => {
  const text = $("tts-text").value;
  const state = $("tts-state");
  if (!text.trim()) return say(state, "Type some text first.", true);
  const format = $("tts-format").value;
  const rate = Number($("tts-rate").value);
  const chunks = [];
  $("tts-download").hidden = true;
  $("tts-metrics").removeAttribute("data-total-bytes");
  say(state, "Connecting…");
  try {
    await player.start(rate); // first, while the click still counts as a user gesture
    tts.speaking = speak({
      url: wsBase + config.ttsPath,
      token: await secrets.get("tts"),
      request: { text, speaker: $("tts-voice").value, format, sample_rate: rate },
      onHeader: (header) => say(state, `Streaming ${header.speaker} at ${header.sample_rate} Hz…`),
      onAudio: (samples) => {
        chunks.push(samples);
        player.push(samples);
      },
    });
    ttsButtons();
    const metrics = await tts.speaking.done;
    showMetrics(metrics);
    offerDownload(chunks, rate, metrics.request_id);
    say(state, metrics.cancelled ? "Stopped." : `Received ${metrics.audio_duration_seconds} s of audio.`);
  } catch (error) {
    player.stop();
    const overQuota = error && error.code === "QUOTA_EXCEEDED";
    if (overQuota) await refreshQuota(); // what is left now, not when the page loaded
    say(state, overQuota ? `${quotaText([...text].length)} (QUOTA_EXCEEDED)` : errorText(error), true);
  } finally {
    tts.speaking = null;
    ttsButtons();
    refreshQuota();
  }
});

$("tts-stop").addEventListener("click", () => {
  tts.speaking?.cancel();
  player.stop();
});

// Speech to text.

const transcript = $("asr-transcript");
const asr = { session: null, mic: null, pending: new Set(), committing: false, stopping: false, error: "" };

function line(itemId) {
  let li = transcript.querySelector(`li[data-item-id="${CSS.escape(itemId)}"]`);
  if (!li) {
    li = document.createElement("li");
    li.dataset.itemId = itemId;
    li.dataset.state = "partial";
    li.dataset.text = "";
    transcript.append(li);
  }
  return li;
}

function finalLine(itemId, text, state) {
  const li = line(itemId);
  if (state === "final" && !text.trim()) return li.remove(); // a turn without speech
  li.dataset.state = state;
  li.textContent = state === "failed" ? "[transcription failed]" : text;
  transcript.dataset.completed = String(transcript.querySelectorAll("li[data-state=final]").length);
}

function onAsrEvent(event) {
  const state = $("asr-state");
  switch (event.type) {
    case "input_audio_buffer.speech_started":
      return say(state, "Hearing speech…");
    case "input_audio_buffer.speech_stopped":
      return say(state, "Transcribing…");
    case "input_audio_buffer.committed":
      asr.committing = false;
      asr.pending.add(event.item_id);
      return line(event.item_id);
    case "conversation.item.input_audio_transcription.delta": {
      const li = line(event.item_id);
      li.dataset.text += event.delta;
      li.textContent = li.dataset.text;
      return;
    }
    case "conversation.item.input_audio_transcription.completed":
      asr.pending.delete(event.item_id);
      finalLine(event.item_id, event.transcript, "final");
      return asr.stopping || say(state, "Listening…");
    case "conversation.item.input_audio_transcription.failed":
      asr.pending.delete(event.item_id);
      return finalLine(event.item_id, "", "failed");
    case "error":
      if (event.error.code === "input_audio_buffer_commit_empty") {
        asr.committing = false;
        if (asr.stopping) return;
      }
      asr.error = `${event.error.message} (${event.error.code})`;
      return say(state, asr.error, true);
  }
}

function asrButtons(running) {
  $("asr-start").disabled = running;
  $("asr-commit").disabled = !running;
  $("asr-stop").disabled = !running;
}

async function asrTeardown() {
  const { mic, session } = asr;
  Object.assign(asr, { mic: null, session: null });
  await mic?.stop();
  session?.close();
  $("asr-level").value = 0;
  asrButtons(false);
}

function onAsrClose(code) {
  if (!asr.stopping && asr.session) {
    say($("asr-state"), asr.error || `The connection closed (code ${code}).`, code !== 1000);
    asrTeardown();
  }
}

$("asr-start").addEventListener("click", async () => {
  const state = $("asr-state");
  Object.assign(asr, { stopping: false, error: "", pending: new Set(), committing: false });
  asrButtons(true);
  say(state, "Connecting…");
  try {
    asr.session = new RealtimeSession({
      url: `${wsBase}${config.realtimePath}?intent=transcription`,
      token: await secrets.get("realtime"),
      rate: config.captureRate,
      vad: $("asr-vad").checked,
      onEvent: onAsrEvent,
      onClose: onAsrClose,
    });
    await asr.session.ready;
    const session = asr.session;
    asr.mic = new Microphone({
      workletUrl: config.workletUrl,
      rate: config.captureRate,
      onChunk: (pcm, peak) => {
        session.append(pcm);
        $("asr-level").value = peak;
        state.dataset.sentMs = String(Math.floor((session.sentSamples * 1000) / config.captureRate));
      },
    });
    await asr.mic.start();
    say(state, $("asr-vad").checked ? "Listening… pause to end a turn." : "Listening… press End turn.");
  } catch (error) {
    say(state, asr.error || errorText(error), true);
    await asrTeardown();
  }
});

$("asr-commit").addEventListener("click", () => {
  asr.committing = true;
  asr.session?.commit();
});

$("asr-vad").addEventListener("change", () => asr.session?.setVad($("asr-vad").checked));

function settled(deadlineMs) {
  return new Promise((resolve) => {
    const started = Date.now();
    const check = () =>
      (!asr.committing && asr.pending.size === 0) || Date.now() - started > deadlineMs
        ? resolve()
        : setTimeout(check, 50);
    check();
  });
}

$("asr-stop").addEventListener("click", async () => {
  asr.stopping = true;
  asrButtons(false);
  $("asr-start").disabled = true;
  say($("asr-state"), "Finishing the last turn…");
  await asr.mic?.stop();
  asr.mic = null;
  if (asr.session?.open) {
    asr.committing = true;
    asr.session.commit(); // the rest of the turn; an empty buffer gets an error we skip
    await settled(15000);
  }
  await asrTeardown();
  say($("asr-state"), asr.error || "Microphone off.", Boolean(asr.error));
});

try {
  loadVoices();
} catch (error) {
  say($("pg-status"), errorText(error), true);
}
