// Speech to text: the microphone through an AudioWorklet, streamed over /v1/realtime.
import { base64 } from "./audio.js";

const CHUNK_MS = 100; // audio per input_audio_buffer.append
const FLUSH_WAIT_MS = 500;

/** The microphone as PCM16 chunks at `rate`, via the capture worklet. */
export class Microphone {
  constructor({ workletUrl, rate, onChunk }) {
    Object.assign(this, { workletUrl, rate, onChunk });
    this.context = null;
  }

  async start() {
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
    });
    this.context = new AudioContext();
    await this.context.audioWorklet.addModule(this.workletUrl);
    this.node = new AudioWorkletNode(this.context, "pcm16-capture", {
      processorOptions: { targetRate: this.rate, chunkSamples: (this.rate * CHUNK_MS) / 1000 },
    });
    this.node.port.onmessage = (event) => {
      const { pcm, peak, last } = event.data;
      if (pcm.byteLength) this.onChunk(new Int16Array(pcm), peak);
      if (last) this.flushed?.();
    };
    // A silent path to the output keeps the graph pulling the worklet.
    const mute = this.context.createGain();
    mute.gain.value = 0;
    this.context.createMediaStreamSource(this.stream).connect(this.node);
    this.node.connect(mute).connect(this.context.destination);
  }

  /** Stop capturing; what the worklet still holds is delivered first. */
  async stop() {
    if (!this.context) return;
    await new Promise((resolve) => {
      this.flushed = resolve;
      this.node.port.postMessage("flush");
      setTimeout(resolve, FLUSH_WAIT_MS);
    });
    for (const track of this.stream.getTracks()) track.stop();
    await this.context.close();
    this.context = null;
  }
}

/** The Realtime session object for a transcription session at `rate`. */
export function sessionConfig({ rate, vad }) {
  return {
    type: "transcription",
    audio: {
      input: {
        format: { type: "audio/pcm", rate },
        turn_detection: vad ? { type: "server_vad" } : null,
      },
    },
  };
}

/**
 * One /v1/realtime connection. `ready` resolves once the session is configured
 * (session.updated); every server event goes to onEvent(event); onClose(code) at the end.
 */
export class RealtimeSession {
  constructor({ url, token, rate, vad, onEvent, onClose }) {
    this.socket = new WebSocket(url, ["realtime", `openai-insecure-api-key.${token}`]);
    this.rate = rate;
    this.sentSamples = 0;
    this.ready = new Promise((resolve, reject) => {
      this.socket.onopen = () => this.send({ type: "session.update", session: sessionConfig({ rate, vad }) });
      this.socket.onmessage = (message) => {
        const event = JSON.parse(message.data);
        if (event.type === "session.updated") resolve();
        onEvent(event);
      };
      this.socket.onclose = (close) => {
        reject(new Error(`The connection closed (code ${close.code}).`));
        onClose(close.code);
      };
    });
  }

  get open() {
    return this.socket.readyState === WebSocket.OPEN;
  }

  send(event) {
    if (this.open) this.socket.send(JSON.stringify(event));
  }

  append(pcm) {
    this.sentSamples += pcm.length;
    this.send({ type: "input_audio_buffer.append", audio: base64(new Uint8Array(pcm.buffer)) });
  }

  commit() {
    this.send({ type: "input_audio_buffer.commit" });
  }

  setVad(vad) {
    this.send({ type: "session.update", session: sessionConfig({ rate: this.rate, vad }) });
  }

  close() {
    if (this.socket.readyState <= WebSocket.OPEN) this.socket.close(1000);
  }
}
