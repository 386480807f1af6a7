// Runs examples/browser/veena-tts.js (the browser page's client) against a server, in Node with
// the WHATWG WebSocket (node --experimental-websocket), and prints what it received as JSON.
import { speak } from "../../examples/browser/veena-tts.js";

const [url, text] = process.argv.slice(2);
let samples = 0;
let header = null;
const { done } = speak({
  url,
  key: process.env.VEENA_API_KEY,
  text,
  onHeader: (h) => (header = h),
  onAudio: (frame) => (samples += frame.length),
});
const metrics = await done;
console.log(JSON.stringify({ header, samples, metrics }));
process.exit(0);
