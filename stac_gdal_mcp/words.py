"""Counts in words for the lines a person reads: "1 item", "2 items", "1 day"."""

IRREGULAR = {"was": "were", "has": "have", "is": "are"}


def counted(count: int, word: str, *, thousands: bool = False) -> str:
    """`count` and `word`, the word plural unless the count is 1: counted(1, "item") is "1 item",
    counted(3, "day") "3 days"; `thousands`: 1,000 separators."""
    number = f"{count:,}" if thousands else str(count)
    return f"{number} {plural(count, word)}"


def plural(count: int, word: str) -> str:
    """`word` as it goes with `count`: "item"/"items", "was"/"were"."""
    if count == 1:
        return word
    return IRREGULAR.get(word, word + "s")
