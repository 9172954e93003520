"""The striped view of a board's HBM that both cores' memory layouts address: consecutive
beats of `channel_bytes` rotate over the `channels` pseudo-channels (DFX's DMA reads "all 32
HBM channels ... 512 bits at 200 MHz", seeds/001 §V-B; LORA's AXI read ports, one per
pseudo-channel, seeds/002 §IV-B-c, Eq. 6). A region aligned to a whole stripe is spread
evenly over every channel, each holding the same address range of it, so a stream of the
region draws on all channels at once."""

from dataclasses import dataclass


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def aligned(size: int, align: int) -> int:
    """`size` rounded up to a multiple of `align`."""
    return ceil_div(size, align) * align


@dataclass(frozen=True)
class Striping:
    channels: int
    channel_bytes: int  # one channel's beat

    @property
    def stripe(self) -> int:
        """Bytes of one beat over every channel: the alignment of every HBM region."""
        return self.channels * self.channel_bytes

    def channel_of(self, address: int) -> tuple[int, int]:
        """(channel, byte offset inside that channel) of a striped address."""
        beat, byte = divmod(address, self.channel_bytes)
        row, channel = divmod(beat, self.channels)
        return channel, row * self.channel_bytes + byte

    def striped(self, channel: int, offset: int) -> int:
        """Inverse of `channel_of`."""
        row, byte = divmod(offset, self.channel_bytes)
        return (row * self.channels + channel) * self.channel_bytes + byte

    def channel_range(self, base: int, size: int) -> tuple[int, int]:
        """[first, last) byte offsets inside every channel of a region of `size` bytes at a
        stripe-aligned striped `base` (each channel holds that range of it, the last
        stripe's unused beats included)."""
        if base % self.stripe:
            raise ValueError(f"base {base} is not aligned to the {self.stripe}-byte stripe")
        first = base // self.channels
        return first, first + ceil_div(size, self.stripe) * self.channel_bytes
