"""What every app shares (STYLE §1–2): imported by tts, asr, openai_rest and accounts, importing
none of them nor veena_site (the wiring)."""
