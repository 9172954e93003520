"""Names a user gives in a file (a cluster, an FPGA, a layer, a modality): printable text on
one line, short enough for a table or a file name, so every report and error that shows
one stays one line."""

from typing import Annotated

from pydantic import AfterValidator, StringConstraints


def _one_printable_line(name: str) -> str:
    if not name.isprintable():
        raise ValueError("must be printable text on one line (no tab, newline or other "
                         "control character)")
    return name


Name = Annotated[str, StringConstraints(min_length=1, max_length=200),
                 AfterValidator(_one_printable_line)]
