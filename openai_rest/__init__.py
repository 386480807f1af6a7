"""OpenAI-compatible speech REST: ``/v1/audio/speech``, ``/v1/audio/transcriptions``, ``/v1/models``.

The views run on the same admission, metering and worker jobs as the WebSocket endpoints; this
package holds only what is OpenAI's: request fields, names, containers and the error envelope.
"""
