// Streaming text-to-speech over /v1/tts/ws with a WHATWG WebSocket (browsers; Node >= 22, or
// Node 20 with --experimental-websocket). A browser cannot set an Authorization header on a
// WebSocket, so the credential travels as the subprotocol "veena-api-key.<key>" beside
// "veena-tts", the one the server selects; it never echoes it back. In a page, `key` is a
// short-lived client secret your backend minted (POST /v1/tts/client_secrets, see server.py):
// page scripts can read whatever the page holds.

/**
 * Speak `text`. Calls onHeader(header) once, onAudio(Int16Array) for each audio frame, and
 * resolves `done` with the `complete` metrics; `cancel()` stops the request.
 */
export function speak({ url, key, text, voice, sampleRate = 24000, onHeader, onAudio }) {
  const socket = new WebSocket(`${url}/v1/tts/ws`, ["veena-tts", `veena-api-key.${key}`]);
  socket.binaryType = "arraybuffer";
  const done = new Promise((resolve, reject) => {
    socket.onopen = () => {
      const request = { text, format: "pcm", sample_rate: sampleRate };
      if (voice) request.speaker = voice;
      socket.send(JSON.stringify(request));
    };
    socket.onmessage = (message) => {
      if (message.data instanceof ArrayBuffer) {
        onAudio?.(new Int16Array(message.data));
        return;
      }
      const event = JSON.parse(message.data);
      if (event.event === "header") onHeader?.(event);
      else if (event.event === "complete") resolve(event.metrics);
      else if (event.event === "error") reject(new Error(`${event.error.code}: ${event.error.message}`));
    };
    socket.onclose = (close) => reject(new Error(`connection closed (${close.code})`));
    socket.onerror = () => reject(new Error("connection failed"));
  });
  return { done, cancel: () => socket.send(JSON.stringify({ event: "cancel" })) };
}

/** Play Int16 frames gaplessly on a Web Audio context, as they arrive. */
export function player(context) {
  let next = 0;
  return (samples) => {
    const buffer = context.createBuffer(1, samples.length, context.sampleRate);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < samples.length; i++) channel[i] = samples[i] / 32768;
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    next = Math.max(next, context.currentTime + 0.05);
    source.start(next);
    next += buffer.duration;
  };
}
