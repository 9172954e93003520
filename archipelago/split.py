"""How every plan kind cuts a dimension into per-device parts."""


def split_bounds(total: int, parts: int, part: int) -> tuple[int, int]:
    """Contiguous near-equal slices (the first `total % parts` slices one larger): the one
    rule every split in a plan follows."""
    base, extra = divmod(total, parts)
    start = part * base + min(part, extra)
    return start, start + base + (1 if part < extra else 0)
