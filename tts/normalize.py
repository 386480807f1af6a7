"""English text normalisation for speech (docs/specs/tts-ws.md T1–T5): pure functions.

Numbers, currency, percentages, ordinals, years, dates, clock times and a fixed list of
abbreviations are spelled into words; emoji and markdown emphasis are dropped and whitespace is
collapsed (T4). A segment with Devanagari letters gets only the T4 clean-up: the English rules
would read its numbers in the wrong language.
"""

from __future__ import annotations

import re
from collections.abc import Callable

ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
SCALES = (
    (10**12, "trillion"),
    (10**9, "billion"),
    (10**6, "million"),
    (1000, "thousand"),
)
MONTHS = (
    "January February March April May June July August September October November "
    "December"
).split()
IRREGULAR_ORDINALS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
# Currency: (singular, plural, minor singular, minor plural).
CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "USD": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "EUR": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "GBP": ("pound", "pounds", "penny", "pence"),
    "₹": ("rupee", "rupees", "paisa", "paise"),
    "RS": ("rupee", "rupees", "paisa", "paise"),
    "INR": ("rupee", "rupees", "paisa", "paise"),
}
MAX_SPELLED_DIGITS = 15  # longer digit runs (ids, card numbers) are read digit by digit

_DEVANAGARI = re.compile(r"[\u0900-\u097F]")
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U0001f1e6-\U0001f1ff"
    "\U00002b00-\U00002bff\ufe0f\u200d\U000e0020-\U000e007f]"
)
_MD_LINE_START = re.compile(r"(?m)^[ \t]*(?:#{1,6}|>+)[ \t]*")
_MD_EMPHASIS = re.compile(r"[*`]+|(?<!\w)_+|_+(?!\w)")
_SPACE = re.compile(r"\s+")

_NUM = r"\d{1,3}(?:,\d{3})+|\d+"  # 1,500 or 1500
_ABBREVIATIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bDr\."), "Doctor"),
    (re.compile(r"\bMrs\."), "Missus"),
    (re.compile(r"\bMr\."), "Mister"),
    (re.compile(r"\bSt\.(?=\s+[A-Z])"), "Saint"),
    (re.compile(r"\bSt\."), "Street"),
    (re.compile(r"\bJr\."), "Junior"),
    (re.compile(r"\bSr\."), "Senior"),
    (re.compile(r"\bvs\.", re.I), "versus"),
    (re.compile(r"\betc\.", re.I), "et cetera"),
    (re.compile(r"(?<!\w)e\.g\.", re.I), "for example"),
    (re.compile(r"(?<!\w)i\.e\.", re.I), "that is"),
    (re.compile(r"\bNo\.(?=\s*\d)", re.I), "number"),
)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_SLASH_DATE = re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b")
_TIME = re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)(?:\s?([AaPp])\.?[Mm]\.?\b)?(?!:?\d)")
_CURRENCY_BEFORE = re.compile(
    rf"(?<![\w])(?P<neg>-)?(?P<cur>[$€£₹]|\b(?:Rs|RS|rs)\.?)\s?(?P<num>{_NUM})"
    rf"(?:\.(?P<frac>\d+))?(?:\s(?P<scale>thousand|million|billion|trillion)\b)?"
)
_CURRENCY_AFTER = re.compile(
    rf"(?<![\w.,])(?P<num>{_NUM})(?:\.(?P<frac>\d+))?\s?(?P<cur>USD|INR|EUR|GBP)\b"
)
_PERCENT = re.compile(rf"(?<![\w.,])(?P<neg>-)?(?P<num>{_NUM})(?:\.(?P<frac>\d+))?\s?%")
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.I)
_YEAR = re.compile(r"(?<![\w.,\-])(1[1-9]\d\d|20\d\d)(?![\w,]|\.\d)")
_NUMBER = re.compile(
    rf"(?<![\w.,])(?P<neg>(?<![^\s(\[])-)?(?P<num>{_NUM})(?:\.(?P<frac>\d+))?(?![\w])"
)
_DOTTED = re.compile(r"(?<![\w.])\d+(?:\.\d+){2,}(?![\w]|\.\d)")  # 2.0.1, 10.0.0.1
_DIGITS = re.compile(r"\d+")


def cardinal(n: int) -> str:
    """Spell a whole number: 250 → two hundred fifty, -7 → minus seven."""
    if n < 0:
        return "minus " + cardinal(-n)
    if n < 20:
        return ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return TENS[tens] + (f"-{ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{ONES[hundreds]} hundred" + (f" {cardinal(rest)}" if rest else "")
    for size, name in SCALES:
        if n >= size:
            high, rest = divmod(n, size)
            return f"{cardinal(high)} {name}" + (f" {cardinal(rest)}" if rest else "")
    raise AssertionError("unreachable")


def ordinal(n: int) -> str:
    """Spell an ordinal: 3 → third, 21 → twenty-first, 100 → one hundredth."""
    words = cardinal(n)
    head, sep, last = words.rpartition("-" if "-" in words.split()[-1] else " ")
    if last in IRREGULAR_ORDINALS:
        last = IRREGULAR_ORDINALS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + sep + last


def year(n: int) -> str:
    """Read a year: 1999 → nineteen ninety-nine, 2005 → two thousand five."""
    if 2000 <= n <= 2009:
        return "two thousand" + (f" {ONES[n - 2000]}" if n > 2000 else "")
    high, low = divmod(n, 100)
    if low == 0:
        return f"{cardinal(high)} hundred"
    if low < 10:
        return f"{cardinal(high)} oh {ONES[low]}"
    return f"{cardinal(high)} {cardinal(low)}"


def digits(text: str) -> str:
    """Read digits one by one: 14 → one four."""
    return " ".join(ONES[int(d)] for d in text)


def number(whole: str, frac: str | None = None, negative: bool = False) -> str:
    """Spell ``whole[.frac]`` with grouping commas allowed in ``whole``."""
    plain = whole.replace(",", "")
    words = digits(plain) if len(plain) > MAX_SPELLED_DIGITS else cardinal(int(plain))
    if frac:
        words += " point " + digits(frac)
    return ("minus " if negative else "") + words


def _money(match: re.Match[str]) -> str:
    key = match["cur"].upper().rstrip(".")
    major, majors, minor, minors = CURRENCIES[key]
    whole, frac, scale = match["num"], match["frac"], match.groupdict().get("scale")
    negative = "minus " if match.groupdict().get("neg") else ""
    if scale:
        return f"{negative}{number(whole, frac)} {scale} {majors}"
    amount = int(whole.replace(",", ""))
    if frac is not None and len(frac) != 2:
        return f"{negative}{number(whole, frac)} {majors}"
    cents = int(frac) if frac else 0
    parts = []
    if amount or not cents:
        parts.append(f"{number(whole)} {major if amount == 1 else majors}")
    if cents:
        parts.append(f"{cardinal(cents)} {minor if cents == 1 else minors}")
    return negative + " and ".join(parts)


def _date(year_: str, month: str, day: str) -> str | None:
    m, d = int(month), int(day)
    if not (1 <= m <= 12 and 1 <= d <= 31):
        return None
    y = int(year_)
    spoken_year = year(y) if 1100 <= y <= 2099 else cardinal(y)
    return f"{MONTHS[m - 1]} {ordinal(d)}, {spoken_year}"


def _iso_date(match: re.Match[str]) -> str:
    return _date(match[1], match[2], match[3]) or match[0]


def _slash_date(match: re.Match[str]) -> str:
    return _date(match[3], match[1], match[2]) or match[0]


def _time(match: re.Match[str]) -> str:
    hour, minute = int(match[1]), int(match[2])
    if minute == 0 and not match[3]:
        words = f"{cardinal(hour)} " + ("o'clock" if 1 <= hour <= 12 else "hundred")
    elif minute == 0:
        words = cardinal(hour)
    elif minute < 10:
        words = f"{cardinal(hour)} oh {ONES[minute]}"
    else:
        words = f"{cardinal(hour)} {cardinal(minute)}"
    return words + (f" {match[3].lower()} m" if match[3] else "")


def _percent(match: re.Match[str]) -> str:
    return number(match["num"], match["frac"], bool(match["neg"])) + " percent"


def _number(match: re.Match[str]) -> str:
    return number(match["num"], match["frac"], bool(match["neg"]))


def _keep_final_period(replacement: str) -> Callable[[re.Match[str]], str]:
    """An abbreviation's period that also ends the text stays as the sentence end."""

    def replace(match: re.Match[str]) -> str:
        at_end = not match.string[match.end() :].strip()
        return replacement + ("." if at_end else "")

    return replace


def clean_markup(text: str) -> str:
    """T4: drop emoji and markdown emphasis markers, collapse whitespace."""
    text = _EMOJI.sub("", text)
    text = _MD_LINE_START.sub("", text)
    text = _MD_EMPHASIS.sub("", text)
    return _SPACE.sub(" ", text).strip()


def spell_out(text: str) -> str:
    """T2: spell numbers, currency, dates, times and abbreviations as English words."""
    for pattern, word in _ABBREVIATIONS:
        text = pattern.sub(_keep_final_period(word), text)
    text = _ISO_DATE.sub(_iso_date, text)
    text = _SLASH_DATE.sub(_slash_date, text)
    text = _TIME.sub(_time, text)
    text = _CURRENCY_BEFORE.sub(_money, text)
    text = _CURRENCY_AFTER.sub(_money, text)
    text = _PERCENT.sub(_percent, text)
    text = _ORDINAL.sub(lambda m: ordinal(int(m[1])), text)
    text = _YEAR.sub(lambda m: year(int(m[1])), text)
    text = _DOTTED.sub(lambda m: " dot ".join(map(number, m[0].split("."))), text)
    text = _NUMBER.sub(_number, text)
    return _DIGITS.sub(lambda m: digits(m[0]), text)


def normalize_text(text: str) -> str:
    """Normalise one segment for the engine (T1–T4)."""
    cleaned = clean_markup(text)
    if _DEVANAGARI.search(cleaned):
        return cleaned
    return _SPACE.sub(" ", spell_out(cleaned)).strip()


def has_speakable(text: str) -> bool:
    """R7: some letter or digit (Unicode L* or N*) is present."""
    return any(ch.isalnum() for ch in text)
