"""Splitting a long answer into pieces Telegram accepts, at the most natural boundary.

Telegram refuses a message over 4096 characters, counted in UTF-16 code units
(an emoji outside the Basic Multilingual Plane counts twice). A piece ends at
the last paragraph break that fits; failing that, the last line break, then the
last sentence end, then the last space; only a text with no space at all is cut
mid-word. Whitespace at the cuts is dropped, never text.
"""

import re

TELEGRAM_TEXT_LIMIT = 4096

_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_LINE = re.compile(r"\n")
_SENTENCE = re.compile(r"[.!?…]+[\"'»”)\]]*(?=\s)")
_SPACE = re.compile(r"\s")

# How far past the fitting end a separator may start being matched (a paragraph
# break that begins right at the limit still counts).
_LOOKAHEAD = 8


def utf16_units(char: str) -> int:
    """How many UTF-16 code units ``char`` takes (2 outside the Basic Multilingual Plane)."""
    return 2 if ord(char) > 0xFFFF else 1


def utf16_length(text: str) -> int:
    """The length Telegram measures: UTF-16 code units."""
    # Counted by the codec in C; a lone surrogate passes as one unit, as utf16_units says.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def split_spans(text: str, limit: int = TELEGRAM_TEXT_LIMIT) -> list[tuple[int, int]]:
    """``(start, end)`` index pairs of the pieces of ``text``, each at most ``limit`` long.

    Pieces are in order, do not overlap, neither start nor end with whitespace,
    and everything between them is whitespace. A blank text has no pieces.
    """
    if limit < 2:
        raise ValueError("limit must be at least 2 UTF-16 code units")
    spans: list[tuple[int, int]] = []
    length = len(text)
    pos = _skip_space(text, 0)
    while pos < length:
        end = _fitting_end(text, pos, limit)
        cut = length if end >= length else _best_cut(text, pos, end)
        spans.append((pos, _trim_end(text, pos, cut)))
        pos = _skip_space(text, cut)
    return spans


def split_text(text: str, limit: int = TELEGRAM_TEXT_LIMIT) -> list[str]:
    """The pieces of ``text`` (see :func:`split_spans`)."""
    return [text[start:end] for start, end in split_spans(text, limit)]


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _fitting_end(text: str, pos: int, limit: int) -> int:
    """The largest ``end`` such that ``text[pos:end]`` is at most ``limit`` units long."""
    if len(text) - pos <= limit // 2 or utf16_length(text[pos:]) <= limit:
        # The rest fits (nearly every answer): no walk over its characters.
        return len(text)
    units = 0
    end = pos
    while end < len(text):
        units += utf16_units(text[end])
        if units > limit:
            break
        end += 1
    return end


def _best_cut(text: str, pos: int, end: int) -> int:
    """Where the piece starting at ``pos`` (fitting up to ``end``) should stop."""
    window_end = min(len(text), end + _LOOKAHEAD)
    for pattern, at_end in (
        (_PARAGRAPH, False),
        (_LINE, False),
        (_SENTENCE, True),
        (_SPACE, False),
    ):
        best = None
        for match in pattern.finditer(text, pos, window_end):
            cut = match.end() if at_end else match.start()
            if pos < cut <= end and not text[pos:cut].isspace():
                best = cut
        if best is not None:
            return best
    return end
