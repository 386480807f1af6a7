"""The worker side of TTS: the job (segments → engine → audio pipeline → chunks) and the
engines. Runs only in a worker process; the gateway side of tts never imports it."""
