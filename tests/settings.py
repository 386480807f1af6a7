"""Test settings: the real settings module with fast engines and a throwaway database."""

from veena_site.settings import *  # noqa: F403

TTS_ENGINE = "fake"
ASR_ENGINE = "fake"
API_KEY_PREFIX = "vk_test_"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
