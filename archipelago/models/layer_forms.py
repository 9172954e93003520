"""One computation, one layer, whichever way the code wrote it (both importers apply
these): a convolution whose kernel covers its whole unpadded input and gives one output
position (timm's VGG classifier, a 7x7 convolution over the 7x7 map) is a fully connected
layer on the flattened map, exactly: every output is the dot product of the whole map
(C x K x K values, in the order Flatten gives them) with one filter. As a Conv the cost
model would map it as a convolution (its rows of output pixels: one), costing more than
the Linear torchvision writes for the same multiply-accumulates."""

from typing import Any

from archipelago.models.dag_layers import FC, Conv


def conv_layer(fields: dict[str, Any], input_size: tuple[int, int]) -> tuple[type, dict]:
    """The layer type and fields of a convolution (its Conv `fields` but name and deps,
    reading a map of `input_size` rows and columns): an FC when it is a Linear on the
    flattened map (module docstring), else the Conv."""
    rows, cols = input_size
    kernel = (fields["kernel"], fields.get("kernel_cols") or fields["kernel"])
    unpadded = not fields.get("padding") and not any(fields.get("pads") or ())
    if fields.get("groups", 1) != 1 or (fields["out_rows"], fields["out_cols"]) != (1, 1) \
            or kernel != (rows, cols) or not unpadded:
        return Conv, fields
    return FC, {"out_features": fields["out_ch"], "in_features": fields["in_ch"] * rows * cols,
                "rows": 1, "relu": fields.get("relu", False)}
