"""The worker side of realtime ASR: the session job, its decode cadence and slots, confirmed-word
streaming, the engines and the checkpoint converter. Runs only in a worker process; the
gateway side of asr never imports it."""
