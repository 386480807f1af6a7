"""What every app shares (STYLE §1–2): imported by tts, asr, openai_rest and accounts, importing
none of them nor veena_site (the wiring). The modules here are used by both processes; the
gateway's side of a job is in ``link/``, the worker's in ``worker/``, the channel layers in
``layers/`` and the server's own concerns in ``server/`` (docs/architecture.md, Layout)."""
