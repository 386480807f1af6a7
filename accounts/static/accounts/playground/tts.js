// Text to speech over /v1/tts/ws, played while it streams.
import { decodeMulaw, pcm16 } from "./audio.js";

const LEAD_S = 0.12; // scheduling head start when playback (re)starts

/**
 * Send one request on a new socket. Calls onHeader(header) once, onAudio(Int16Array) per
 * audio frame (the WAV header frame skipped, μ-law decoded) and onProgress(event); `done`
 * resolves with the `complete` metrics. `cancel()` asks the server to stop and drops the
 * audio still on its way.
 */
export function speak({ url, token, request, onHeader, onAudio, onProgress }) {
  const socket = new WebSocket(url, ["veena-tts", `veena-api-key.${token}`]);
  socket.binaryType = "arraybuffer";
  let header = null;
  let skipHeaderFrame = false; // the first binary frame of a WAV stream is its header
  let cancelled = false; // frames already in flight after a cancel are dropped
  const done = new Promise((resolve, reject) => {
    let settled = false;
    const finish = (fn, value) => {
      if (!settled) {
        settled = true;
        fn(value);
      }
    };
    socket.onopen = () => socket.send(JSON.stringify(request));
    socket.onmessage = (message) => {
      if (message.data instanceof ArrayBuffer) {
        if (cancelled) return;
        if (skipHeaderFrame) {
          skipHeaderFrame = false;
          return;
        }
        const bytes = new Uint8Array(message.data);
        onAudio(header.format === "mulaw" ? decodeMulaw(bytes) : pcm16(message.data));
        return;
      }
      const event = JSON.parse(message.data);
      if (event.event === "header") {
        header = event;
        skipHeaderFrame = event.format === "wav";
        onHeader(event);
      } else if (event.event === "progress") {
        onProgress?.(event);
      } else if (event.event === "complete") {
        finish(resolve, event.metrics);
      } else if (event.event === "error") {
        const error = new Error(event.error.message);
        error.code = event.error.code;
        finish(reject, error);
      }
    };
    socket.onerror = () => finish(reject, new Error("The connection failed."));
    socket.onclose = (close) =>
      finish(reject, new Error(`The connection closed (code ${close.code}).`));
  });
  const close = () => socket.readyState <= WebSocket.OPEN && socket.close(1000);
  done.then(close, close);
  const cancel = () => {
    cancelled = true;
    if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ event: "cancel" }));
  };
  return { done, cancel };
}

/**
 * Plays Int16 chunks back to back on an AudioContext at the stream's own rate: each chunk
 * starts on the sample frame where the previous one ends, so playback is gapless while data
 * keeps up. The element's data-samples (scheduled), data-played-samples (finished playing)
 * and data-underruns count what the context received.
 */
export class Player {
  constructor(element, { onIdle } = {}) {
    this.element = element;
    this.onIdle = onIdle;
    this.context = null;
    this.sources = new Set();
    this.reset();
  }

  /** True while scheduled audio has not finished playing. */
  get playing() {
    return this.sources.size > 0;
  }

  /** Seconds played of the current stream, and seconds received. */
  get position() {
    if (!this.context) return { played: 0, received: 0 };
    const rate = this.context.sampleRate;
    const ahead = Math.max(0, this.nextFrame / rate - this.context.currentTime);
    const received = this.scheduled / rate;
    return { played: Math.max(0, received - ahead), received };
  }

  /** Prepare for a new stream at `sampleRate` (call from a user gesture). */
  async start(sampleRate) {
    this.stop();
    if (!this.context || this.context.sampleRate !== sampleRate) {
      if (this.context) await this.context.close();
      this.context = new AudioContext({ sampleRate });
    }
    await this.context.resume();
    this.reset();
  }

  reset() {
    this.nextFrame = 0;
    this.scheduled = 0;
    this.played = 0;
    this.underruns = 0;
    this.publish();
  }

  push(samples) {
    if (!samples.length) return;
    const context = this.context;
    const rate = context.sampleRate;
    const buffer = context.createBuffer(1, samples.length, rate);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < samples.length; i++) channel[i] = samples[i] / 32768;
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    const now = context.currentTime;
    if (this.nextFrame / rate < now) {
      if (this.scheduled > 0) this.underruns += 1; // the stream fell behind playback
      this.nextFrame = Math.ceil((now + LEAD_S) * rate);
    }
    source.start(this.nextFrame / rate);
    this.nextFrame += samples.length;
    this.scheduled += samples.length;
    this.sources.add(source);
    source.onended = () => {
      this.sources.delete(source);
      this.played += samples.length;
      this.publish();
      if (!this.sources.size) this.onIdle?.();
    };
    this.publish();
  }

  /** Silence everything scheduled. */
  stop() {
    const wasPlaying = this.playing;
    for (const source of this.sources) {
      source.onended = null;
      source.stop();
    }
    this.sources.clear();
    this.nextFrame = 0;
    this.publish();
    if (wasPlaying) this.onIdle?.();
  }

  publish() {
    const data = this.element.dataset;
    data.samples = String(this.scheduled);
    data.playedSamples = String(this.played);
    data.underruns = String(this.underruns);
    data.sampleRate = this.context ? String(this.context.sampleRate) : "";
  }
}
