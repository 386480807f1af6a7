#!/bin/sh
# Text to a complete WAV file with one POST /v1/tts.
#   VEENA_URL=http://127.0.0.1:8000 VEENA_API_KEY=vk_live_... sh tts_curl.sh "Hello." hello.wav
# For an https server with a private CA, set CURL_CA_BUNDLE=ca.pem.
set -eu
text=${1:?usage: tts_curl.sh TEXT OUT.wav}
out=${2:?usage: tts_curl.sh TEXT OUT.wav}
# JSON string: escape backslashes and quotes, and turn line breaks into spaces.
escaped=$(printf '%s' "$text" | tr '\n\r\t' '   ' | sed 's/\\/\\\\/g; s/"/\\"/g')
status=$(curl --silent --show-error --output "$out" --write-out '%{http_code}' \
  -X POST "${VEENA_URL:-http://127.0.0.1:8000}/v1/tts" \
  -H "Authorization: Bearer ${VEENA_API_KEY:?set VEENA_API_KEY}" \
  -H "Content-Type: application/json" \
  --data "{\"text\": \"$escaped\", \"format\": \"wav\", \"sample_rate\": 24000}")
if [ "$status" != 200 ]; then
  echo "HTTP $status: $(cat "$out")" >&2  # {"error": {"code", "message", "request_id"}}
  rm -f "$out"
  exit 1
fi
echo "wrote $out"
