// AudioWorklet processor: the microphone as mono PCM16 at the target rate (24 kHz for the
// Realtime protocol), resampled here from the AudioContext's own rate (`sampleRate`), and
// posted to the page in chunks of `chunkSamples` with their peak level.
import { Resampler, toPcm16 } from "./resampler.js";

class Pcm16Capture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const { targetRate, chunkSamples } = options.processorOptions;
    this.resampler = new Resampler(sampleRate, targetRate);
    this.chunk = new Int16Array(chunkSamples);
    this.filled = 0;
    this.peak = 0;
    this.port.onmessage = (event) => {
      if (event.data === "flush") {
        this.emit(this.resampler.flush());
        this.post(true);
      }
    };
  }

  process(inputs) {
    const channels = inputs[0];
    if (channels && channels.length) {
      let mono = channels[0];
      if (channels.length > 1) {
        mono = new Float32Array(mono.length);
        for (const channel of channels) {
          for (let i = 0; i < mono.length; i++) mono[i] += channel[i] / channels.length;
        }
      }
      this.emit(this.resampler.process(mono));
    }
    return true;
  }

  emit(samples) {
    const pcm = toPcm16(samples);
    for (let i = 0; i < pcm.length; i++) {
      this.peak = Math.max(this.peak, Math.abs(pcm[i]) / 32768);
      this.chunk[this.filled++] = pcm[i];
      if (this.filled === this.chunk.length) this.post(false);
    }
  }

  post(last) {
    const pcm = this.chunk.slice(0, this.filled);
    this.port.postMessage({ pcm: pcm.buffer, peak: this.peak, last }, [pcm.buffer]);
    this.filled = 0;
    this.peak = 0;
  }
}

registerProcessor("pcm16-capture", Pcm16Capture);
