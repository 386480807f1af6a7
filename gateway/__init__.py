"""What every app shares (STYLE §1–2): imported by tts, asr and accounts, importing none of them."""
