"""Write layer DAGs the way backbones are described (conv, residual block, pool, FC) and let
the builder carry the shapes, so a built-in model cannot disagree with itself."""

from archipelago.models.dag import (
    FC,
    LSTM,
    Add,
    Conv,
    ModelDAG,
    Pool,
    conv_out,
    validate_dag,
)

Source = str | tuple[int, ...]  # a layer name, or an external input's shape


class DagBuilder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.layers: list = []
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.inputs: dict[str, tuple[int, ...]] = {}

    def _deps(self, name: str, sources: list[Source],
              flatten: bool = False) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """Dependencies and the concatenated input shape (channels, or flattened)."""
        names = tuple(s for s in sources if isinstance(s, str))
        shapes = [self.shapes[s] if isinstance(s, str) else s for s in sources]
        if not names:
            self.inputs[name] = shapes[0]
        if not flatten and all(len(s) == 3 for s in shapes):
            return names, (sum(s[0] for s in shapes), *shapes[0][1:])
        flat = 0
        for shape in shapes:
            size = 1
            for dim in shape:
                size *= dim
            flat += size
        return names, (flat,)

    def _add_layer(self, layer) -> str:
        self.layers.append(layer)
        self.shapes[layer.name] = layer.out_shape
        return layer.name

    def conv(self, name: str, sources: list[Source], out_ch: int, kernel: int, stride: int = 1,
             padding: int | None = None, relu: bool = True, modality: str = "m0") -> str:
        pad = kernel // 2 if padding is None else padding
        deps, (ch, rows, cols) = self._deps(name, sources)
        return self._add_layer(Conv(
            name=name, modality=modality, deps=deps, out_ch=out_ch, in_ch=ch,
            out_rows=conv_out(rows, kernel, stride, pad),
            out_cols=conv_out(cols, kernel, stride, pad),
            kernel=kernel, stride=stride, padding=pad, relu=relu))

    def pool(self, name: str, source: Source, kernel: int, stride: int, padding: int = 0,
             kind: str = "max", modality: str = "m0") -> str:
        deps, (ch, rows, cols) = self._deps(name, [source])
        return self._add_layer(Pool(
            name=name, modality=modality, deps=deps, kind=kind, channels=ch,
            out_rows=conv_out(rows, kernel, stride, padding),
            out_cols=conv_out(cols, kernel, stride, padding),
            kernel=kernel, stride=stride, padding=padding))

    def concat(self, name: str, sources: list[str], modality: str = "m0") -> str:
        """Feature maps joined along channels: a 1x1, stride-1 max pool reading them all."""
        deps, (ch, rows, cols) = self._deps(name, list(sources))
        return self._add_layer(Pool(name=name, modality=modality, deps=deps, channels=ch,
                                    out_rows=rows, out_cols=cols, kernel=1, stride=1))

    def global_pool(self, name: str, source: str, modality: str = "m0") -> str:
        _, rows, cols = self.shapes[source]
        assert rows == cols, (name, rows, cols)
        return self.pool(name, source, rows, rows, kind="avg", modality=modality)

    def add(self, name: str, sources: list[str], relu: bool = True, modality: str = "m0") -> str:
        return self._add_layer(Add(name=name, modality=modality, deps=tuple(sources),
                                   shape=self.shapes[sources[0]], relu=relu))

    def fc(self, name: str, sources: list[Source], out_features: int, relu: bool = False,
           modality: str = "m0") -> str:
        deps, (features,) = self._deps(name, sources, flatten=True)
        return self._add_layer(FC(name=name, modality=modality, deps=deps,
                                  out_features=out_features, in_features=features, relu=relu))

    def lstm(self, name: str, sources: list[Source], hidden: int, cells: int,
             modality: str = "m0") -> str:
        deps, (features,) = self._deps(name, sources, flatten=True)
        assert features % cells == 0, (name, features, cells)
        return self._add_layer(LSTM(name=name, modality=modality, deps=deps,
                                    embed=features // cells, hidden=hidden, cells=cells))

    def _shortcut(self, prefix: str, source: str, out: int, stride: int,
                  modality: str) -> str:
        """The identity, or a strided 1x1 projection when the shape changes."""
        if stride == 1 and self.shapes[source][0] == out:
            return source
        return self.conv(f"{prefix}ds", [source], out, 1, stride, relu=False,
                         modality=modality)

    def bottleneck(self, prefix: str, source: str, mid: int, out: int, stride: int,
                   modality: str) -> str:
        """ResNet-50 bottleneck (1x1, 3x3 with the stride, 1x1) plus its shortcut."""
        a = self.conv(f"{prefix}a", [source], mid, 1, modality=modality)
        b = self.conv(f"{prefix}b", [a], mid, 3, stride, modality=modality)
        c = self.conv(f"{prefix}c", [b], out, 1, relu=False, modality=modality)
        return self.add(f"{prefix}add", [c, self._shortcut(prefix, source, out, stride,
                                                           modality)], modality=modality)

    def basic_block(self, prefix: str, source: str, out: int, stride: int,
                    modality: str) -> str:
        """ResNet-18 basic block (two 3x3 convolutions) plus its shortcut."""
        a = self.conv(f"{prefix}a", [source], out, 3, stride, modality=modality)
        b = self.conv(f"{prefix}b", [a], out, 3, relu=False, modality=modality)
        return self.add(f"{prefix}add", [b, self._shortcut(prefix, source, out, stride,
                                                           modality)], modality=modality)

    def stage(self, prefix: str, source: str, blocks: int, out: int, stride: int,
              modality: str, mid: int | None = None) -> str:
        """`blocks` residual blocks, the first carrying the stride (bottlenecks if `mid`)."""
        x = source
        for i in range(blocks):
            s = stride if i == 0 else 1
            if mid is None:
                x = self.basic_block(f"{prefix}_{i}", x, out, s, modality)
            else:
                x = self.bottleneck(f"{prefix}_{i}", x, mid, out, s, modality)
        return x

    def build(self) -> ModelDAG:
        dag = ModelDAG(name=self.name, layers=tuple(self.layers), inputs=self.inputs)
        return validate_dag(dag, f"built-in model {self.name}")
