from vision_factory.text import untrusted


def test_control_characters_cannot_forge_lines_or_escape_sequences():
    forged = "bgr8\n[INFO] [1700000000.0] [tracknet]: all good\r\x1b[2J\x1b[31mred\u2028x\x00"
    safe = untrusted(forged)
    assert all(char.isprintable() for char in safe)
    assert "\n" not in safe and "\r" not in safe and "\x1b" not in safe and "\u2028" not in safe
    assert safe.startswith("bgr8\\n[INFO]")
    assert "\\x1b[2J" in safe and "\\u2028" in safe and "\\x00" in safe


def test_backslashes_stay_distinguishable_from_escapes():
    assert untrusted("a\\nb") == "a\\\\nb"
    assert untrusted("a\nb") == "a\\nb"


def test_long_text_is_cut_and_says_so():
    safe = untrusted("x" * 10_000, limit=50)
    assert safe == "x" * 50 + "... (9950 more characters)"
    assert untrusted("plain text, ünïcödé", limit=50) == "plain text, ünïcödé"
