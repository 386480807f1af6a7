"""The Orpheus/Veena checkpoint family as both processes read it, pure code: the SNAC token
layout, the prompt recipes (voices, languages, aliases) and the vLLM TTS engine's settings."""
